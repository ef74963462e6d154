//! The namespaces of the in-memory backend: one [`MemoryStore`] each, the
//! catalogue a map of them. A deleted namespace's data goes with the last
//! holder of its store, so there is never anything left to purge.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;

use super::store::MemoryStore;
use lightning_store_core::clock::{Clock, SystemClock};
use lightning_store_core::error::{StoreError, StoreResult};
use lightning_store_core::model::Timestamp;
use lightning_store_core::namespace::{Namespace, NamespaceName, NamespaceSettings};
use lightning_store_core::storage::{Catalogue, Store};

/// The namespaces of the in-memory backend.
pub struct MemoryCatalogue {
    event_retention: usize,
    state: parking_lot::Mutex<Namespaces>,
}

/// The namespaces that exist, by name, with their stores.
struct Namespaces {
    /// The id of the next namespace created.
    next_id: i64,
    by_name: BTreeMap<NamespaceName, (Namespace, Arc<MemoryStore>)>,
}

impl MemoryCatalogue {
    /// Returns a catalogue of the default namespace alone, each store
    /// retaining the last `event_retention` events.
    pub fn new(event_retention: usize) -> Self {
        let default = Namespace {
            id: 0,
            name: NamespaceName::default_namespace(),
            created: SystemClock.now(),
            settings: NamespaceSettings::default(),
        };
        let store = Arc::new(MemoryStore::with_event_retention(event_retention));
        Self {
            event_retention,
            state: parking_lot::Mutex::new(Namespaces {
                next_id: 1,
                by_name: BTreeMap::from([(default.name.clone(), (default, store))]),
            }),
        }
    }

    /// Returns the store of `namespace` while it exists.
    fn store(&self, namespace: &Namespace) -> StoreResult<Arc<MemoryStore>> {
        match self.state.lock().by_name.get(&namespace.name) {
            Some((record, store)) if record.id == namespace.id => Ok(store.clone()),
            _ => Err(Namespace::not_found(&namespace.name)),
        }
    }
}

#[async_trait]
impl Catalogue for MemoryCatalogue {
    async fn list(&self) -> StoreResult<Vec<Namespace>> {
        let state = self.state.lock();
        let mut namespaces: Vec<Namespace> = state
            .by_name
            .values()
            .map(|(record, _)| record.clone())
            .collect();
        namespaces.sort_by_key(|n| (!n.name.is_default(), n.name.clone()));
        Ok(namespaces)
    }

    async fn find(&self, name: &NamespaceName) -> StoreResult<Option<Namespace>> {
        Ok(self
            .state
            .lock()
            .by_name
            .get(name)
            .map(|(record, _)| record.clone()))
    }

    async fn create(
        &self,
        name: &NamespaceName,
        settings: NamespaceSettings,
        now: Timestamp,
    ) -> StoreResult<Namespace> {
        let mut state = self.state.lock();
        if state.by_name.contains_key(name) {
            return Err(Namespace::already_exists(name));
        }
        let record = Namespace {
            id: state.next_id,
            name: name.clone(),
            created: now,
            settings,
        };
        state.next_id += 1;
        let store = Arc::new(MemoryStore::with_event_retention(self.event_retention));
        state.by_name.insert(name.clone(), (record.clone(), store));
        Ok(record)
    }

    async fn open(&self, namespace: &Namespace) -> StoreResult<Arc<dyn Store>> {
        Ok(self.store(namespace)?)
    }

    async fn stored_bytes(&self, namespace: &Namespace) -> StoreResult<u64> {
        Ok(self.store(namespace)?.span_bytes().await)
    }

    async fn delete(&self, name: &NamespaceName) -> StoreResult<Namespace> {
        if name.is_default() {
            return Err(StoreError::FailedPrecondition(
                "the default namespace cannot be deleted".into(),
            ));
        }
        let mut state = self.state.lock();
        match state.by_name.remove(name) {
            Some((record, _)) => Ok(record),
            None => Err(Namespace::not_found(name)),
        }
    }

    async fn purge(&self, _namespace: &Namespace) -> StoreResult<()> {
        // The data went with the store, once its last holder let it go.
        Ok(())
    }

    async fn deleted(&self) -> StoreResult<Vec<Namespace>> {
        Ok(Vec::new())
    }
}
