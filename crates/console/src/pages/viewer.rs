//! Who views a page: what they may do besides reading ([`Actions`]) and
//! how they are signed in ([`Viewer`], taken from the grant the access
//! layer left on the request); the sign-in cookie and the form token
//! derived from it.

use axum::extract::FromRequestParts;
use http::request::Parts;
use http::{HeaderMap, header};
use sha2::{Digest, Sha256};

use lightning_store_adapters::auth::Grant;
use lightning_store_adapters::auth::policy::Permission;

/// The cookie that holds a signed-in browser's token (hex-encoded).
pub const COOKIE: &str = "lightning_store_token";

/// What the viewer may do besides reading.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Actions {
    /// Cancel rollouts (the `rollouts` permission).
    pub cancel: bool,
    /// Pause and resume the gateway (the `gateway` permission).
    pub gateway: bool,
}

/// The viewer of a page: what they may do, and how they are signed in.
#[derive(Debug, Clone, Default)]
pub struct Viewer {
    pub actions: Actions,
    /// The label of the token (never the token), when tokens are configured.
    pub token_name: Option<String>,
    /// The form token of a browser signed in by cookie.
    pub form_token: Option<String>,
}

impl<S: Send + Sync> FromRequestParts<S> for Viewer {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        let Some(grant) = parts.extensions.get::<Grant>() else {
            // No grant on a guarded route: the port has no tokens.
            return Ok(Viewer {
                actions: Actions {
                    cancel: true,
                    gateway: true,
                },
                ..Viewer::default()
            });
        };
        Ok(Viewer {
            actions: Actions {
                cancel: grant.allows(Permission::Rollouts),
                gateway: grant.allows(Permission::Gateway),
            },
            token_name: Some(grant.name().to_owned()),
            form_token: cookie_token(&parts.headers).map(|token| form_token(&token)),
        })
    }
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
