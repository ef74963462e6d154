//! The console's pages: the handlers of its routes. Each live page is a
//! [`View`] rendered by its module from one engine read; a request for it
//! answers the whole page, or its event stream when the browser asks for
//! one ([`live`]). What the pages share is in modules of its own: what a
//! live page's handler receives and how it answers ([`page`]), the layout
//! and error pages ([`layout`]), the viewer ([`viewer`]), the handlers'
//! state ([`state`]) and the namespace a request names ([`extract`]).

pub mod actions;
pub mod comparison;
pub mod conversation;
pub mod download;
pub mod export;
pub mod extract;
pub mod layout;
pub mod live;
pub mod models;
pub mod namespaces;
pub mod overview;
pub mod page;
pub mod resources;
pub mod rollout;
pub mod rollouts;
pub mod search;
pub mod session;
pub mod state;
pub mod training;
pub mod view;
pub mod viewer;
pub mod workers;

use axum::extract::Path;
use axum::response::Response;

use self::layout::{Nav, failed};
use self::page::LivePage;
use self::view::View;
use self::viewer::Viewer;
use crate::rendered::PageError;
use lightning_store_core::ids::RolloutId;

pub use self::actions::{cancel, confirm_cancel, confirm_pause, confirm_resume, pause, resume};
pub use self::download::download;
pub use self::export::export;
pub use self::namespaces::{confirm_delete, create_namespace, delete_namespace, namespaces};
pub use self::search::search;

/// The Overview.
pub async fn overview(page: LivePage) -> Response {
    page.show(View::Overview, Nav::Overview).await
}

/// The rollouts, filtered as the URL says.
pub async fn rollouts(page: LivePage) -> Response {
    match rollouts::RolloutsQuery::parse(page.query()) {
        Ok(query) => {
            page.show(View::Rollouts(Box::new(query)), Nav::Rollouts)
                .await
        }
        Err(message) => page.refuse(PageError::Invalid(message)),
    }
}

/// One rollout.
pub async fn rollout(Path(rollout_id): Path<String>, page: LivePage) -> Response {
    match RolloutId::parse("rollout_id", rollout_id) {
        Ok(rollout_id) => page.show(View::Rollout(rollout_id), Nav::Rollouts).await,
        Err(error) => page.refuse(error.into()),
    }
}

/// The workers.
pub async fn workers(page: LivePage) -> Response {
    let view = View::Workers(workers::WorkersQuery::parse(page.query()));
    page.show(view, Nav::Workers).await
}

/// The resources versions, and the difference between two.
pub async fn resources(page: LivePage) -> Response {
    match resources::ResourcesQuery::parse(page.query()) {
        Ok(query) => page.show(View::Resources(query), Nav::Resources).await,
        Err(error) => page.refuse(error.into()),
    }
}

/// Reward by policy version, and two versions compared.
pub async fn training(page: LivePage) -> Response {
    match comparison::CompareQuery::parse(page.query()) {
        Ok(query) => page.show(View::Training(query), Nav::Training).await,
        Err(message) => page.refuse(PageError::Invalid(message)),
    }
}

/// agent-lightning 1.x's model servers and the gateway.
pub async fn models(page: LivePage) -> Response {
    page.show(View::Models, Nav::Models).await
}

/// Any other path under the console's prefix.
pub async fn not_found(viewer: Viewer) -> Response {
    failed(
        &PageError::NotFound("The console has no such page.".to_owned()),
        &viewer,
    )
}
