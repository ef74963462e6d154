//! The web console in a real browser (Debian's Chromium over WebDriver,
//! see `common::browser`), against a real server on every backend: each
//! page shows what the store holds, pages change live as gRPC calls change
//! the store, a waterfall shows spans under their parents, a 1.x
//! conversation renders from a real gateway call, a reader token cannot
//! act, hostile input renders as text, each namespace has a console of
//! its own, an admin creates and deletes namespaces on their page, and
//! the Training page shows reward by policy version.
//! The test modules are compiled once per backend, as the conformance
//! suite is.

pub(crate) mod support;

macro_rules! console_suite {
    ($($module:ident => $backend:expr),+ $(,)?) => {
        $(
            #[path = "."]
            #[allow(clippy::duplicate_mod)]
            mod $module {
                pub const BACKEND: crate::common::Backend = $backend;

                mod agl1;
                mod live;
                mod namespace_admin;
                mod namespaces;
                mod pages;
                mod security;
                mod training;
            }
        )+
    };
}

console_suite! {
    memory => crate::common::Backend::Memory,
    sqlite => crate::common::Backend::Sqlite,
    postgres => crate::common::Backend::Postgres,
}
