//! The catalogue of namespaces
//! ([`Catalogue`](lightning_store::core::storage::Catalogue)) against its
//! contract: the default namespace is the backend's data of before, each
//! namespace's store is a world of its own, names are unique and ids never
//! reused, a deletion is seen at once and its purge can be run again.

use std::sync::Arc;

use futures::StreamExt as _;

use lightning_store::core::error::StoreError;
use lightning_store::core::events::{Change, Event};
use lightning_store::core::model::{RolloutStatus, Timestamp};
use lightning_store::core::namespace::{NamespaceName, NamespaceSettings, Quotas};
use lightning_store::core::retention::RetentionPolicy;
use lightning_store::core::storage::{Catalogue, Store, WriteSet};

use super::BACKEND;
use super::port::{rollout, span};
use crate::common::{Backend, Needs, TestOptions, postgres_database};

fn name(text: &str) -> NamespaceName {
    NamespaceName::parse(text).unwrap()
}

/// Opens the catalogue of `options`' backend, or `None` when it is not here.
async fn open(options: &TestOptions) -> Option<(Arc<dyn Catalogue>, Option<tempfile::TempDir>)> {
    if !BACKEND.available() {
        return None;
    }
    Some(BACKEND.open_catalogue(options).await)
}

/// Opens the store of the namespace `text`.
async fn store_of(catalogue: &dyn Catalogue, text: &str) -> Arc<dyn Store> {
    let namespace = catalogue.find(&name(text)).await.unwrap().unwrap();
    catalogue.open(&namespace).await.unwrap()
}

/// Commits queued rollouts `ids` to `store`.
async fn enqueue(store: &dyn Store, ids: &[&str]) {
    let mut writes = WriteSet::default();
    for (at, id) in ids.iter().enumerate() {
        writes.put_rollout(&rollout(id, RolloutStatus::Queuing, 1_000), None);
        writes.enqueue(id, Timestamp(at as i64 + 1));
        writes.events.push(Event {
            seq: 0,
            time: Timestamp(1_000),
            change: Change::RolloutCreated {
                rollout_id: (*id).to_owned(),
                status: RolloutStatus::Queuing,
            },
        });
    }
    let tx = store.begin().await.unwrap();
    tx.commit(&mut writes).await.unwrap();
}

/// Returns the queued count, the latest event number and the ids claimed
/// (rolled back) of `store`.
async fn world(store: &dyn Store) -> (u64, u64, Vec<String>) {
    let mut tx = store.begin().await.unwrap();
    let queued = tx.counts().await.unwrap().queued;
    let latest = tx.events_after(0, 1).await.unwrap().latest;
    let claimed = tx.claim_queued(10).await.unwrap();
    tx.rollback().await;
    let claimed = claimed.into_iter().map(|c| c.rollout.rollout_id).collect();
    (queued, latest, claimed)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn namespaces_are_created_once_and_listed_default_first_then_by_name() {
    let Some((catalogue, _dir)) = open(&TestOptions::default()).await else {
        return;
    };
    let listed = catalogue.list().await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].name.as_str(), "default");
    assert_eq!(listed[0].id, 0);

    let settings = NamespaceSettings {
        quotas: Quotas {
            max_queued_rollouts: Some(10),
            max_spans: None,
            max_span_bytes: Some(1 << 20),
        },
        retention: Some(RetentionPolicy {
            max_age: Some(std::time::Duration::from_secs(3600)),
            max_bytes: None,
        }),
    };
    let b = catalogue
        .create(&name("run-b"), NamespaceSettings::default(), Timestamp(7))
        .await
        .unwrap();
    let a = catalogue
        .create(&name("run-a"), settings, Timestamp(8))
        .await
        .unwrap();
    assert_ne!(a.id, b.id);
    assert!(a.id > 0 && b.id > 0);
    assert_eq!(a.settings, settings);
    assert_eq!(a.created, Timestamp(8));

    let names: Vec<String> = catalogue
        .list()
        .await
        .unwrap()
        .iter()
        .map(|n| n.name.to_string())
        .collect();
    assert_eq!(names, ["default", "run-a", "run-b"]);
    assert_eq!(catalogue.find(&name("run-a")).await.unwrap(), Some(a));
    assert_eq!(catalogue.find(&name("run-c")).await.unwrap(), None);

    let again = catalogue
        .create(&name("run-b"), NamespaceSettings::default(), Timestamp(9))
        .await;
    assert!(
        matches!(&again, Err(StoreError::AlreadyExists(m)) if m.contains("run-b")),
        "{again:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_namespace_has_its_own_queue_events_and_sequence_ids() {
    let Some((catalogue, _dir)) = open(&TestOptions::default()).await else {
        return;
    };
    for text in ["run-a", "run-b"] {
        catalogue
            .create(&name(text), NamespaceSettings::default(), Timestamp(1))
            .await
            .unwrap();
    }
    let default = store_of(catalogue.as_ref(), "default").await;
    let a = store_of(catalogue.as_ref(), "run-a").await;
    let b = store_of(catalogue.as_ref(), "run-b").await;
    enqueue(a.as_ref(), &["ro-1", "ro-2"]).await;
    enqueue(b.as_ref(), &["ro-1"]).await;

    let (queued, latest, claimed) = world(a.as_ref()).await;
    assert_eq!((queued, claimed), (2, vec!["ro-1".into(), "ro-2".into()]));
    // Event numbers count each namespace's own events from 1.
    assert_eq!(latest, 2);
    let (queued, latest, claimed) = world(b.as_ref()).await;
    assert_eq!((queued, latest, claimed), (1, 1, vec!["ro-1".into()]));
    assert_eq!(world(default.as_ref()).await, (0, 0, Vec::new()));

    // Sequence ids and spans are per namespace too, for the same rollout id.
    let mut tx = a.begin().await.unwrap();
    assert_eq!(tx.allocate_sequence_ids("ro-1", 2).await.unwrap(), 1);
    tx.insert_spans(&[span("ro-1", "sp-a", 1)]).await.unwrap();
    tx.commit(&mut WriteSet::default()).await.unwrap();
    let mut tx = b.begin().await.unwrap();
    assert_eq!(tx.allocate_sequence_ids("ro-1", 1).await.unwrap(), 1);
    tx.commit(&mut WriteSet::default()).await.unwrap();
    let mut tx = b.begin_read().await.unwrap();
    let spans = super::port::span_ids(tx.as_mut(), "ro-1").await;
    tx.commit(&mut WriteSet::default()).await.unwrap();
    assert!(spans.is_empty(), "{spans:?}");

    // The bytes a namespace takes grow with what it holds.
    let namespace = catalogue.find(&name("run-a")).await.unwrap().unwrap();
    assert!(catalogue.stored_bytes(&namespace).await.unwrap() > 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_namespace_is_gone_at_once_and_its_name_starts_afresh() {
    let Some((catalogue, _dir)) = open(&TestOptions::default()).await else {
        return;
    };
    let first = catalogue
        .create(&name("run-a"), NamespaceSettings::default(), Timestamp(1))
        .await
        .unwrap();
    let store = catalogue.open(&first).await.unwrap();
    enqueue(store.as_ref(), &["ro-1"]).await;
    store.close().await;
    drop(store);

    let deleted = catalogue.delete(&name("run-a")).await.unwrap();
    assert_eq!(deleted, first);
    assert_eq!(catalogue.find(&name("run-a")).await.unwrap(), None);
    assert_eq!(catalogue.list().await.unwrap().len(), 1);
    assert!(matches!(
        catalogue.delete(&name("run-a")).await,
        Err(StoreError::NotFound(m)) if m.contains("run-a")
    ));
    assert!(matches!(
        catalogue.delete(&name("default")).await,
        Err(StoreError::FailedPrecondition(_))
    ));
    catalogue.purge(&deleted).await.unwrap();
    // Purging again finds nothing left.
    catalogue.purge(&deleted).await.unwrap();
    assert!(catalogue.deleted().await.unwrap().is_empty());

    let second = catalogue
        .create(&name("run-a"), NamespaceSettings::default(), Timestamp(2))
        .await
        .unwrap();
    assert!(second.id > first.id, "ids are never reused");
    let store = catalogue.open(&second).await.unwrap();
    assert_eq!(world(store.as_ref()).await, (0, 0, Vec::new()));
}

/// Options that name one database, to open it again.
async fn durable_options() -> (TestOptions, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let postgres_url = match BACKEND {
        Backend::Postgres if BACKEND.available() => Some(postgres_database().await),
        _ => None,
    };
    let options = TestOptions {
        database: Some(dir.path().join("store.db")),
        postgres_url,
        ..TestOptions::default()
    };
    (options, dir)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_namespace_holds_what_the_store_held_before() {
    if BACKEND == Backend::Memory || !BACKEND.available() {
        return;
    }
    let (options, _dir) = durable_options().await;
    let (store, _) = BACKEND.open(&options).await;
    enqueue(store.as_ref(), &["ro-before"]).await;
    store.close().await;
    drop(store);

    let (catalogue, _) = BACKEND.open_catalogue(&options).await;
    let default = store_of(catalogue.as_ref(), "default").await;
    assert_eq!(world(default.as_ref()).await.2, ["ro-before"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn namespaces_and_their_data_outlive_a_restart_and_a_purge_resumes() {
    if BACKEND == Backend::Memory {
        return;
    }
    let (options, _dir) = durable_options().await;
    let Some((catalogue, _)) = open(&options).await else {
        return;
    };
    for text in ["run-a", "run-b"] {
        catalogue
            .create(&name(text), NamespaceSettings::default(), Timestamp(1))
            .await
            .unwrap();
    }
    enqueue(
        store_of(catalogue.as_ref(), "default").await.as_ref(),
        &["ro-d"],
    )
    .await;
    enqueue(
        store_of(catalogue.as_ref(), "run-a").await.as_ref(),
        &["ro-a"],
    )
    .await;
    let b = catalogue.delete(&name("run-b")).await.unwrap();
    // A crash before the purge: the next start finds it to finish.
    drop(catalogue);

    let (catalogue, _again) = BACKEND.open_catalogue(&options).await;
    let names: Vec<String> = catalogue
        .list()
        .await
        .unwrap()
        .iter()
        .map(|n| n.name.to_string())
        .collect();
    assert_eq!(names, ["default", "run-a"]);
    let default = store_of(catalogue.as_ref(), "default").await;
    assert_eq!(world(default.as_ref()).await.2, ["ro-d"]);
    let a = store_of(catalogue.as_ref(), "run-a").await;
    assert_eq!(world(a.as_ref()).await.2, ["ro-a"]);
    assert_eq!(catalogue.deleted().await.unwrap(), std::slice::from_ref(&b));
    catalogue.purge(&b).await.unwrap();
    assert!(catalogue.deleted().await.unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_keeps_each_namespace_in_a_file_beside_the_database_until_its_purge() {
    if BACKEND != Backend::Sqlite {
        return;
    }
    let (options, dir) = durable_options().await;
    let (catalogue, _) = BACKEND.open_catalogue(&options).await;
    let a = catalogue
        .create(&name("run-a"), NamespaceSettings::default(), Timestamp(1))
        .await
        .unwrap();
    enqueue(catalogue.open(&a).await.unwrap().as_ref(), &["ro-a"]).await;
    let namespaces = dir.path().join("store.db.namespaces");
    let file = namespaces.join(format!("{}.db", a.id));
    assert!(file.is_file(), "{}", file.display());

    catalogue.delete(&name("run-a")).await.unwrap();
    assert!(file.is_file(), "the data stays until the purge");
    catalogue.purge(&a).await.unwrap();
    let left: Vec<String> = std::fs::read_dir(&namespaces)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(left, ["catalogue.db"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn servers_sharing_a_database_see_each_others_namespaces_at_once() {
    // Only a PostgreSQL database is shared by several servers.
    if BACKEND != Backend::Postgres || !BACKEND.available() {
        return;
    }
    let (options, _dir) = durable_options().await;
    let (one, _) = BACKEND.open_catalogue(&options).await;
    let (two, _) = BACKEND.open_catalogue(&options).await;
    let created = one
        .create(&name("run-a"), NamespaceSettings::default(), Timestamp(1))
        .await
        .unwrap();
    assert_eq!(
        two.find(&name("run-a")).await.unwrap().as_ref(),
        Some(&created)
    );
    let again = two
        .create(&name("run-a"), NamespaceSettings::default(), Timestamp(2))
        .await;
    assert!(
        matches!(&again, Err(StoreError::AlreadyExists(_))),
        "{again:?}"
    );

    // What one server writes, the other reads: the same namespace.
    enqueue(store_of(one.as_ref(), "run-a").await.as_ref(), &["ro-1"]).await;
    let on_two = store_of(two.as_ref(), "run-a").await;
    assert_eq!(world(on_two.as_ref()).await, (1, 1, vec!["ro-1".into()]));
    // Its commits on one server wake the other's followers of it.
    let mut hints = on_two.commit_hints().await.unwrap().unwrap();
    enqueue(store_of(one.as_ref(), "run-a").await.as_ref(), &["ro-2"]).await;
    let hint = tokio::time::timeout(std::time::Duration::from_secs(30), hints.next()).await;
    assert_eq!(hint, Ok(Some(())));
    drop(hints);

    // Deleted on one server, gone on the other at once.
    assert_eq!(two.delete(&name("run-a")).await.unwrap(), created);
    assert_eq!(one.find(&name("run-a")).await.unwrap(), None);
    assert!(matches!(
        one.open(&created).await,
        Err(StoreError::NotFound(m)) if m.contains("run-a")
    ));
    assert_eq!(one.deleted().await.unwrap(), std::slice::from_ref(&created));

    // Purged on one server: the other's store of it answers not found.
    one.purge(&created).await.unwrap();
    assert!(two.deleted().await.unwrap().is_empty());
    assert_eq!(two.list().await.unwrap().len(), 1);
    let mut tx = on_two.begin().await.unwrap();
    let counts = tx.counts().await;
    assert!(
        matches!(&counts, Err(StoreError::NotFound(_))),
        "{counts:?}"
    );
    drop(tx);
    on_two.close().await;
}
