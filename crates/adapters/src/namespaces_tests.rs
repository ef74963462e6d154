//! Tests of the namespaces a server serves, and the namespaces of a memory
//! backend that other adapters' tests start from.

use std::sync::Arc;
use std::time::Duration;

use crate::gateway::GatewayConfig;
use crate::metrics::Metrics;
use crate::namespaces::{NamespacePolicy, Namespaces, ServicesConfig};
use lightning_store_backends::memory::MemoryCatalogue;
use lightning_store_core::engine::{Engine, EngineConfig, SessionPolicy};
use lightning_store_core::error::StoreError;
use lightning_store_core::namespace::{NamespaceName, NamespaceSettings};
use lightning_store_core::storage::{Catalogue, DEFAULT_EVENT_RETENTION};

/// The namespaces of a memory backend, each OTLP ingest admitting
/// `otlp_max_in_flight` exports at once.
pub(crate) async fn in_memory(otlp_max_in_flight: usize) -> Arc<Namespaces> {
    let catalogue = Arc::new(MemoryCatalogue::new(DEFAULT_EVENT_RETENTION));
    let default = catalogue.default_namespace().await.unwrap();
    let store = catalogue.open(&default).await.unwrap();
    let engine = Arc::new(Engine::new(store, EngineConfig::default()));
    let config = ServicesConfig {
        sessions: SessionPolicy {
            server_id: "test".into(),
            lease: Duration::from_secs(10),
            grace: Duration::from_secs(10),
        },
        otlp_max_in_flight,
        gateway: GatewayConfig::default(),
        metrics: Metrics::new(),
    };
    let policy = NamespacePolicy {
        create_on_first_use: false,
        max_namespaces: 3,
        stop_timeout: Duration::from_secs(5),
    };
    Arc::new(
        Namespaces::start(Some(catalogue), engine, config, policy)
            .await
            .unwrap(),
    )
}

fn name(text: &str) -> NamespaceName {
    NamespaceName::parse(text).unwrap()
}

#[tokio::test]
async fn namespaces_resolve_once_created_and_not_found_after_deletion() {
    let namespaces = in_memory(4).await;
    let unknown = namespaces.resolve(&name("run-a")).await;
    assert!(matches!(unknown, Err(StoreError::NotFound(m)) if m.contains("run-a")));
    namespaces
        .create(&name("run-a"), NamespaceSettings::default())
        .await
        .unwrap();
    let a = namespaces.resolve(&name("run-a")).await.unwrap();
    assert_eq!(a.namespace.name, name("run-a"));
    assert!(!Arc::ptr_eq(
        &a.engine,
        &namespaces.default_namespace().engine
    ));
    // The same services on every call.
    let again = namespaces.resolve(&name("run-a")).await.unwrap();
    assert!(Arc::ptr_eq(&a, &again));
    assert_eq!(namespaces.open_now().await.len(), 2);

    namespaces.delete(&name("run-a")).await.unwrap();
    assert!(matches!(
        namespaces.resolve(&name("run-a")).await,
        Err(StoreError::NotFound(_))
    ));
    assert_eq!(namespaces.open_now().await.len(), 1);
}

#[tokio::test]
async fn the_number_of_namespaces_is_capped() {
    let namespaces = in_memory(4).await;
    for text in ["run-a", "run-b"] {
        namespaces
            .create(&name(text), NamespaceSettings::default())
            .await
            .unwrap();
    }
    let refused = namespaces
        .create(&name("run-c"), NamespaceSettings::default())
        .await;
    assert!(
        matches!(&refused, Err(StoreError::FailedPrecondition(m)) if m.contains("at most 3")),
        "{refused:?}"
    );
}
