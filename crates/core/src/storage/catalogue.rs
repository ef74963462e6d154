//! The catalogue of namespaces ([`crate::namespace`]): which exist, with
//! their settings, and the store that holds each one's data.
//!
//! # Contract
//! * A namespace's store is a [`Store`] of its own: nothing written through
//!   it is read through another's (queues, sequence ids, event numbers,
//!   sessions and name locks are all per namespace), and the conformance
//!   suite holds for each.
//! * The default namespace ([`crate::namespace::DEFAULT_NAMESPACE`], id 0)
//!   always exists and holds what the backend held before namespaces: an
//!   upgrade moves nothing. It cannot be deleted.
//! * Names are unique among the namespaces that exist; ids are never
//!   reused, so a store opened for a deleted namespace never reads or
//!   writes the data of a new one of the same name.
//! * [`Catalogue::delete`] takes effect at once on every server sharing the
//!   backend: [`Catalogue::find`] no longer returns it. Its data goes with
//!   [`Catalogue::purge`], which never holds up the other namespaces' calls
//!   and may be run again after a crash ([`Catalogue::deleted`] lists what
//!   is left to purge).

use std::sync::Arc;

use async_trait::async_trait;

use super::Store;
use crate::error::StoreResult;
use crate::model::Timestamp;
use crate::namespace::{Namespace, NamespaceName, NamespaceSettings};

/// The namespaces of one backend.
#[async_trait]
pub trait Catalogue: Send + Sync + 'static {
    /// Returns the namespaces that exist, the default one first, then by
    /// name.
    async fn list(&self) -> StoreResult<Vec<Namespace>>;

    /// Returns the namespace named `name`, if it exists.
    async fn find(&self, name: &NamespaceName) -> StoreResult<Option<Namespace>>;

    /// Creates the namespace `name`, empty, with `settings`; an existing
    /// name is refused ([`Namespace::already_exists`]).
    async fn create(
        &self,
        name: &NamespaceName,
        settings: NamespaceSettings,
        now: Timestamp,
    ) -> StoreResult<Namespace>;

    /// Returns the store of `namespace` (the default namespace's is the
    /// store the backend was opened as). The caller keeps it while it
    /// serves the namespace and closes it ([`Store::close`]) when done.
    async fn open(&self, namespace: &Namespace) -> StoreResult<Arc<dyn Store>>;

    /// Returns the bytes `namespace`'s data takes in the backend (tables
    /// and indexes, or files), as the backend measures them.
    async fn stored_bytes(&self, namespace: &Namespace) -> StoreResult<u64>;

    /// Deletes the namespace `name` from the catalogue and returns what it
    /// was; its data stays until [`Catalogue::purge`]. The default
    /// namespace is refused (failed precondition), an unknown name is not
    /// found ([`Namespace::not_found`]).
    async fn delete(&self, name: &NamespaceName) -> StoreResult<Namespace>;

    /// Removes the data of a deleted namespace; running it again after it
    /// ended (or broke off) finishes what is left.
    async fn purge(&self, namespace: &Namespace) -> StoreResult<()>;

    /// Returns the deleted namespaces whose data is not purged yet.
    async fn deleted(&self) -> StoreResult<Vec<Namespace>>;
}
