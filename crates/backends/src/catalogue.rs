//! The catalogues of namespaces ([`lightning_store_core::storage::Catalogue`]),
//! one per backend: which namespaces exist and the store of each.

pub mod memory;
