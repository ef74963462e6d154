//! Who a gRPC call acts for.

use lightning_store_core::access::Caller;

/// Returns the caller a call acts for, as the access layer decided it
/// ([`crate::auth`]); anyone when the port has no tokens.
pub(crate) fn caller_of(extensions: &http::Extensions) -> Caller {
    extensions.get::<Caller>().cloned().unwrap_or_default()
}
