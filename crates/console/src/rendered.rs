//! What rendering a page gives: its regions, or why it failed.

use lightning_store_core::error::StoreError;

/// The main region of a page, rendered.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Rendered {
    pub title: String,
    /// What stays as the page loaded (its heading, its filter form, which
    /// the viewer may be editing); empty for most pages.
    pub fixed: String,
    /// What updates live.
    pub html: String,
    /// The page shows a rollout that waits: it goes stale whenever the
    /// queue, the workers or the gateway change.
    pub waiting: bool,
}

/// Why a page could not be rendered.
#[derive(Debug, Clone, PartialEq)]
pub enum PageError {
    /// What the URL names does not exist.
    NotFound(String),
    /// The URL is malformed (a filter that does not parse).
    Invalid(String),
    /// The store failed.
    Store(StoreError),
}

impl From<StoreError> for PageError {
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::NotFound(message) => PageError::NotFound(message),
            StoreError::InvalidArgument(message) => PageError::Invalid(message),
            other => PageError::Store(other),
        }
    }
}

/// Returns a template failure as a page error (a bug: templates are
/// checked at compile time, only a value's `Display` can fail).
pub fn render_error(error: askama::Error) -> PageError {
    PageError::Store(StoreError::Internal(format!(
        "a page did not render: {error}"
    )))
}
