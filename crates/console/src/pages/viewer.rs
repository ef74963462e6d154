//! Who views a page: what they may do besides reading ([`Actions`]), how
//! they are signed in ([`Viewer`], taken from the grant the access layer
//! left on the request by [`super::extract`]), which namespace they look
//! at and which ones their token may read; the sign-in cookie and the form
//! token derived from it.

use http::{HeaderMap, header};
use sha2::{Digest, Sha256};

use crate::url::Links;
use lightning_store_core::namespace::NamespaceName;

/// The cookie that holds a signed-in browser's token (hex-encoded).
pub const COOKIE: &str = "lightning_store_token";

/// What the viewer may do besides reading.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Actions {
    /// Cancel rollouts (the `rollouts` permission).
    pub cancel: bool,
    /// Pause and resume the gateway (the `gateway` permission).
    pub gateway: bool,
    /// Create and delete namespaces (the `namespaces` permission, with a
    /// token of every namespace).
    pub namespaces: bool,
}

/// The viewer of a page: what they may do, how they are signed in, the
/// namespace they look at and those they may switch to.
#[derive(Debug, Clone)]
pub struct Viewer {
    pub actions: Actions,
    /// The label of the token (never the token), when tokens are configured.
    pub token_name: Option<String>,
    /// The form token of a browser signed in by cookie.
    pub form_token: Option<String>,
    /// The namespace the request names (the default one for a name outside
    /// the rule).
    pub namespace: NamespaceName,
    /// Where that namespace's pages live.
    pub links: Links,
    /// The namespaces the viewer's token may read, the default one first,
    /// then by name (empty when they cannot be listed).
    pub readable: Vec<NamespaceName>,
}

/// Returns the token of the console's cookie, if the request has one.
pub fn cookie_token(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE)
        .and_then(|(_, value)| hex::decode(value).ok())
        .and_then(|bytes| String::from_utf8(bytes).ok())
}

/// Returns the form token of a signed-in browser: a digest of its token,
/// which only the holder of the token can compute.
pub fn form_token(token: &str) -> String {
    let mut digest = Sha256::new();
    digest.update(b"lightning-store console form\0");
    digest.update(token.as_bytes());
    hex::encode(&digest.finalize()[..16])
}
