//! The conformance suite: the store's whole contract, exercised through the
//! real gRPC server on an ephemeral loopback port with the generated client
//! (and, in `cross_api`, the same hostile values through every API).
//! The same test modules are compiled once per backend, so every backend
//! passes exactly the same tests.
//!
//! By role of the storage port (`lightning_store_core::storage`), the
//! modules that test it below the engine (`port` opens the store) and
//! through the server:
//! * rule reads: `rule_reads`; `lifecycle`, `watchdog`, `sessions`,
//!   `concurrency`, `idempotency`;
//! * immediate writes: `immediate_writes` (the contract of each);
//!   `spans`, `retention`, `sessions`, `concurrency`;
//! * the write set: `write_set`; `batch_updates`, `lifecycle`,
//!   `resources_workers`, `exact_numbers`;
//! * queries: `queries`, `rollout_filters`, `spans`, `streams`;
//! * the read model: `read_model`; `overview`, `exact_numbers`;
//! * the training summary: `training`;
//! * agent-lightning 1.x's reads and writes: `tests/integration/agl1`;
//! * the catalogue of namespaces: `catalogue`.
//!
//! Each backend runs the suite twice: in the default namespace
//! (`conformance::sqlite::`) and in a namespace created and opened through
//! the backend's catalogue (`conformance::sqlite_ns::`, see `placement`),
//! so that a namespace's store is proven a complete store. The catalogue's
//! own tests (`catalogue`) run in the first copy alone.

pub(crate) mod placement;
pub(crate) mod support;

macro_rules! conformance_suite {
    ($($module:ident => $backend:expr, $namespace:expr, [$($extra:ident),*]);+ $(;)?) => {
        $(
            // The test files sit beside this one, shared by every backend:
            // loading them once per backend is the point.
            #[path = "."]
            #[allow(clippy::duplicate_mod)]
            mod $module {
                pub const BACKEND: crate::common::Backend = $backend;

                /// Where this copy of the suite keeps its store.
                pub struct Place;

                impl crate::conformance::placement::Placement for Place {
                    const NAMESPACE: Option<&'static str> = $namespace;
                }

                /// The server of this copy of the suite.
                pub type TestServer = crate::conformance::placement::Server<Place>;

                $(mod $extra;)*
                mod bad_input;
                mod batch_limits;
                mod batch_updates;
                mod concurrency;
                mod cross_api;
                mod exact_numbers;
                mod idempotency;
                mod immediate_writes;
                mod lifecycle;
                mod otlp;
                mod overview;
                mod port;
                mod queries;
                mod read_model;
                mod resources_workers;
                mod retention;
                mod robustness;
                mod rollout_filters;
                mod rule_reads;
                mod server;
                mod sessions;
                mod spans;
                mod upstream_parity;
                mod streams;
                mod training;
                mod watchdog;
                mod write_set;
            }
        )+
    };
}

conformance_suite! {
    memory => crate::common::Backend::Memory, None, [catalogue];
    sqlite => crate::common::Backend::Sqlite, None, [catalogue];
    postgres => crate::common::Backend::Postgres, None, [catalogue];
    memory_ns => crate::common::Backend::Memory, Some(crate::conformance::placement::CONFORMANCE_NAMESPACE), [];
    sqlite_ns => crate::common::Backend::Sqlite, Some(crate::conformance::placement::CONFORMANCE_NAMESPACE), [];
    postgres_ns => crate::common::Backend::Postgres, Some(crate::conformance::placement::CONFORMANCE_NAMESPACE), [];
}
