//! What the console's handlers take from a request: its [`Viewer`] (what
//! the token allows, the namespace named, the namespaces the token may
//! read) and the console of the namespace it names, for which a namespace
//! that does not exist answers a 404 page naming it, a name outside the
//! rule a 400 page.

use axum::extract::FromRequestParts;
use axum::response::Response;
use http::request::Parts;

use super::layout::failed;
use super::state::{ConsoleContext, NamespaceConsole};
use super::viewer::{Actions, Viewer, cookie_token, form_token};
use crate::url::Links;
use lightning_store_adapters::auth::Grant;
use lightning_store_adapters::auth::policy::Permission;
use lightning_store_adapters::auth::tokens::TokenEntry;
use lightning_store_adapters::namespace_layer::NamedNamespace;
use lightning_store_core::namespace::NamespaceName;

impl FromRequestParts<ConsoleContext> for NamespaceConsole {
    type Rejection = Response;

    async fn from_request_parts(
        parts: &mut Parts,
        context: &ConsoleContext,
    ) -> Result<Self, Self::Rejection> {
        match context.console_of(&parts.extensions).await {
            Ok(console) => Ok(console),
            Err(error) => {
                let Ok(mut viewer) = Viewer::from_request_parts(parts, context).await;
                // The page names a namespace that is not there: its links
                // lead to the default one's console.
                viewer.links = Links::default();
                viewer.namespace = NamespaceName::default_namespace();
                Err(failed(&error.into(), &viewer))
            }
        }
    }
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
        // The access layer left the token's grant on the request: the
        // token is not read again here.
        let grant = parts.extensions.get::<Grant>();
        let readable = readable_namespaces(grant.map(Grant::entry), context).await;
        let Some(grant) = grant else {
            // No grant: every action on a port without tokens, none on an
            // open route of a port with them.
            let open = context.config().tokens.is_none();
            return Ok(Viewer {
                actions: Actions {
                    cancel: open,
                    gateway: open,
                    namespaces: open,
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
                namespaces: grant.allows(Permission::Namespaces)
                    && grant.entry().reaches_every_namespace(),
            },
            token_name: Some(grant.name().to_owned()),
            form_token: cookie_token(&parts.headers).map(|token| form_token(&token)),
            namespace,
            links,
            readable,
        })
    }
}

/// Returns the namespaces the token of a request (its `entry` in the
/// tokens file) may read: every one on a port without tokens or for a
/// token of every namespace, else those its line names.
async fn readable_namespaces(
    entry: Option<&TokenEntry>,
    context: &ConsoleContext,
) -> Vec<NamespaceName> {
    let namespaces = match context.namespaces().list().await {
        Ok(namespaces) => namespaces,
        Err(error) => {
            tracing::debug!(%error, "console: cannot list the namespaces");
            return Vec::new();
        }
    };
    let names = namespaces.into_iter().map(|namespace| namespace.name);
    if context.config().tokens.is_none() {
        return names.collect();
    }
    match entry {
        Some(entry) => names.filter(|name| entry.may_use(name)).collect(),
        None => Vec::new(),
    }
}
