//! The conformance suite: the store's whole contract, exercised through the
//! real gRPC server on an ephemeral loopback port with the generated client
//! (and, in `cross_api`, the same hostile values through every API).
//! The same test modules are compiled once per backend, so every backend
//! passes exactly the same tests.

pub(crate) mod support;

macro_rules! conformance_suite {
    ($($module:ident => $backend:expr),+ $(,)?) => {
        $(
            // The test files sit beside this one, shared by every backend:
            // loading them once per backend is the point.
            #[path = "."]
            #[allow(clippy::duplicate_mod)]
            mod $module {
                pub const BACKEND: crate::common::Backend = $backend;

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
                mod resources_workers;
                mod retention;
                mod robustness;
                mod rollout_filters;
                mod server;
                mod sessions;
                mod spans;
                mod upstream_parity;
                mod streams;
                mod watchdog;
            }
        )+
    };
}

conformance_suite! {
    memory => crate::common::Backend::Memory,
    sqlite => crate::common::Backend::Sqlite,
    postgres => crate::common::Backend::Postgres,
}
