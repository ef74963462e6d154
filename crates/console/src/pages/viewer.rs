//! Who views a page: what they may do besides reading ([`Actions`]), how
//! they are signed in ([`Viewer`], taken from the grant the access layer
//! left on the request), which namespace they look at and which ones
//! their token may read; the sign-in cookie and the form token derived
//! from it.

use axum::extract::FromRequestParts;
use http::request::Parts;
use http::{HeaderMap, header};
use sha2::{Digest, Sha256};

use super::state::ConsoleContext;
use crate::url::Links;
use lightning_store_adapters::auth::policy::Permission;
use lightning_store_adapters::auth::{Grant, PresentedToken};
use lightning_store_adapters::namespace_layer::NamedNamespace;
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

impl FromRequestParts<ConsoleContext> for Viewer {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(
        parts: &mut Parts,
        context: &ConsoleContext,
    ) -> Result<Self, Self::Rejection> {
        let namespace = NamedNamespace::of(&parts.extensions)
            .unwrap_or_else(|_| NamespaceName::default_namespace());
        let links = Links::of(&namespace);
        let readable = readable_namespaces(parts, context).await;
        let Some(grant) = parts.extensions.get::<Grant>() else {
            // No grant on a guarded route: the port has no tokens.
            return Ok(Viewer {
                actions: Actions {
                    cancel: true,
                    gateway: true,
                },
                token_name: None,
                form_token: None,
                namespace,
                links,
                readable,
            });
        };
        Ok(Viewer {
            actions: Actions {
                cancel: grant.allows(Permission::Rollouts),
                gateway: grant.allows(Permission::Gateway),
            },
            token_name: Some(grant.name().to_owned()),
            form_token: cookie_token(&parts.headers).map(|token| form_token(&token)),
            namespace,
            links,
            readable,
        })
    }
}

/// Returns the namespaces the token of a request may read: every one on a
/// port without tokens or for a token of every namespace, else those its
/// line names.
async fn readable_namespaces(parts: &Parts, context: &ConsoleContext) -> Vec<NamespaceName> {
    let namespaces = match context.namespaces().list().await {
        Ok(namespaces) => namespaces,
        Err(error) => {
            tracing::debug!(%error, "console: cannot list the namespaces");
            return Vec::new();
        }
    };
    let names = namespaces.into_iter().map(|namespace| namespace.name);
    let Some(tokens) = &context.config().tokens else {
        return names.collect();
    };
    match presented_token(parts).and_then(|token| tokens.find(&token)) {
        Some(entry) => names.filter(|name| entry.may_use(name)).collect(),
        None => Vec::new(),
    }
}

/// Returns the token a request carries, where the access layer takes it
/// from: `Authorization: Bearer`, `x-api-key`, or the sign-in cookie.
fn presented_token(parts: &Parts) -> Option<String> {
    let header = |name: header::HeaderName| {
        parts
            .headers
            .get(name)
            .and_then(|value| value.to_str().ok())
    };
    let bearer = header(header::AUTHORIZATION).and_then(|value| {
        let scheme = value.get(..7)?;
        scheme
            .eq_ignore_ascii_case("bearer ")
            .then(|| value[7..].trim())
    });
    bearer
        .or_else(|| header(header::HeaderName::from_static("x-api-key")).map(str::trim))
        .map(str::to_owned)
        .or_else(|| {
            let presented = parts.extensions.get::<PresentedToken>()?;
            Some(presented.0.clone())
        })
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
