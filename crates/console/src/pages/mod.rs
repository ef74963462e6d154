//! The console's pages: the handlers of its routes. Each live page is a
//! [`View`] rendered by its module from one engine read; a request for it
//! answers the whole page, or its event stream when the browser asks for
//! one ([`live`]). What the pages share is in modules of its own: the
//! layout and error pages ([`layout`]), the viewer ([`viewer`]), the
//! handlers' state ([`state`]) and the namespace a request names
//! ([`extract`]).

pub mod actions;
pub mod conversation;
pub mod download;
pub mod export;
pub mod extract;
pub mod layout;
pub mod live;
pub mod models;
pub mod namespaces;
pub mod overview;
pub mod resources;
pub mod rollout;
pub mod rollouts;
pub mod search;
pub mod session;
pub mod state;
pub mod view;
pub mod viewer;
pub mod workers;

use axum::extract::{Path, State};
use axum::response::Response;
use http::{HeaderMap, StatusCode, Uri};

use self::layout::{Layout, Nav, failed};
use self::state::{ConsoleContext, NamespaceConsole};
use self::view::{View, ViewKey};
use self::viewer::Viewer;
use crate::context::ConsoleConfig;
use crate::rendered::PageError;
use lightning_store_core::ids::RolloutId;

pub use self::actions::{cancel, confirm_cancel, confirm_pause, confirm_resume, pause, resume};
pub use self::download::download;
pub use self::export::export;
pub use self::namespaces::{confirm_delete, create_namespace, delete_namespace, namespaces};
pub use self::search::search;

/// Answers a live page: its event stream when the browser asks for one,
/// else the whole page, marked with the event position it reflects.
async fn show(
    console: &NamespaceConsole,
    config: &ConsoleConfig,
    view: View,
    nav: Nav,
    viewer: &Viewer,
    headers: &HeaderMap,
    uri: &Uri,
) -> Response {
    if live::wants_stream(headers) {
        let key = ViewKey {
            view,
            actions: viewer.actions,
        };
        return live::stream(&console.hub, config, key, live::position(headers, uri));
    }
    // Read before the page: a change committed meanwhile reaches it live.
    let seq = match console.sources.engine.events_after(0, 0).await {
        Ok(page) => page.latest,
        Err(error) => return failed(&PageError::from(error), viewer),
    };
    match view.render(&console.sources, viewer.actions).await {
        Ok(rendered) => Layout::page(&rendered.title, &rendered.html, nav, viewer)
            .fixed(&rendered.fixed)
            .live(seq)
            .answer(StatusCode::OK),
        Err(error) => failed(&error, viewer),
    }
}

/// The Overview.
pub async fn overview(
    State(context): State<ConsoleContext>,
    console: NamespaceConsole,
    viewer: Viewer,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    show(
        &console,
        context.config(),
        View::Overview,
        Nav::Overview,
        &viewer,
        &headers,
        &uri,
    )
    .await
}

/// The rollouts, filtered as the URL says.
pub async fn rollouts(
    State(context): State<ConsoleContext>,
    console: NamespaceConsole,
    viewer: Viewer,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    match rollouts::RolloutsQuery::parse(uri.query().unwrap_or("")) {
        Ok(query) => {
            let view = View::Rollouts(query);
            show(
                &console,
                context.config(),
                view,
                Nav::Rollouts,
                &viewer,
                &headers,
                &uri,
            )
            .await
        }
        Err(message) => failed(&PageError::Invalid(message), &viewer),
    }
}

/// One rollout.
pub async fn rollout(
    State(context): State<ConsoleContext>,
    console: NamespaceConsole,
    Path(rollout_id): Path<String>,
    viewer: Viewer,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    let view = match RolloutId::parse("rollout_id", rollout_id) {
        Ok(rollout_id) => View::Rollout(rollout_id),
        Err(error) => return failed(&error.into(), &viewer),
    };
    show(
        &console,
        context.config(),
        view,
        Nav::Rollouts,
        &viewer,
        &headers,
        &uri,
    )
    .await
}

/// The workers.
pub async fn workers(
    State(context): State<ConsoleContext>,
    console: NamespaceConsole,
    viewer: Viewer,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    let view = View::Workers(workers::WorkersQuery::parse(uri.query().unwrap_or("")));
    show(
        &console,
        context.config(),
        view,
        Nav::Workers,
        &viewer,
        &headers,
        &uri,
    )
    .await
}

/// The resources versions, and the difference between two.
pub async fn resources(
    State(context): State<ConsoleContext>,
    console: NamespaceConsole,
    viewer: Viewer,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    let view = match resources::ResourcesQuery::parse(uri.query().unwrap_or("")) {
        Ok(query) => View::Resources(query),
        Err(error) => return failed(&error.into(), &viewer),
    };
    show(
        &console,
        context.config(),
        view,
        Nav::Resources,
        &viewer,
        &headers,
        &uri,
    )
    .await
}

/// agent-lightning 1.x's model servers and the gateway.
pub async fn models(
    State(context): State<ConsoleContext>,
    console: NamespaceConsole,
    viewer: Viewer,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    show(
        &console,
        context.config(),
        View::Models,
        Nav::Models,
        &viewer,
        &headers,
        &uri,
    )
    .await
}

/// Any other path under the console's prefix.
pub async fn not_found(viewer: Viewer) -> Response {
    failed(
        &PageError::NotFound("The console has no such page.".to_owned()),
        &viewer,
    )
}
