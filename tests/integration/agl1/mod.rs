//! agent-lightning 1.x's server API on every backend: every route, status
//! code and error body, the one model (1.x rollouts seen through gRPC),
//! the LLM gateway against a fake model server, and bad input. The test
//! modules are compiled once per backend, as the conformance suite is.

pub(crate) mod support;

macro_rules! agl1_suite {
    ($($module:ident => $backend:expr),+ $(,)?) => {
        $(
            #[path = "."]
            #[allow(clippy::duplicate_mod)]
            mod $module {
                pub const BACKEND: crate::common::Backend = $backend;

                mod api;
                mod appends;
                mod bad_input;
                mod exact_numbers;
                mod fresh_reads;
                mod gateway;
                mod one_model;
                mod training_rows;
            }
        )+
    };
}

agl1_suite! {
    memory => crate::common::Backend::Memory,
    sqlite => crate::common::Backend::Sqlite,
    postgres => crate::common::Backend::Postgres,
}
