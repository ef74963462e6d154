//! agent-lightning 0.x's store API: every route `LightningStoreServer` of
//! agentlightning 0.3.0 serves under `/v1/agl`, with its paths, methods,
//! query parameters, JSON bodies, status codes and error bodies, so that
//! its `LightningStoreClient`, runners and dashboard work unchanged.
//!
//! Where upstream answers `null` or an empty page for an unknown id, so do
//! these routes (gRPC says NOT_FOUND); sequence ids are handed out for any
//! pair, as upstream does. Store errors that upstream turns into a 500
//! (which its client retries for ~8 s) are 4xx here when the client is at
//! fault ([`crate::http::error`]).

mod models;
pub(crate) mod requests;
mod resources;
mod rollouts;
pub(crate) mod span_json;
mod spans;
mod workers;

use axum::Router;
use axum::routing::{get, post};

use super::HttpContext;

/// The path prefix of every route of this group.
pub const PREFIX: &str = "/v1/agl";

/// Returns the routes of agent-lightning's store API. Where upstream's
/// router falls through from a static path to a parameter one for another
/// method (e.g. `GET /rollouts/search` is `get_rollout_by_id("search")`),
/// the static path carries that method too.
pub fn routes() -> Router<HttpContext> {
    let route = |path: &str| format!("{PREFIX}{path}");
    Router::new()
        .route(&route("/health"), get(workers::health))
        .route(&route("/statistics"), get(workers::statistics))
        .route(&route("/queues/rollouts/enqueue"), post(rollouts::enqueue))
        .route(&route("/queues/rollouts/dequeue"), post(rollouts::dequeue))
        .route(
            &route("/rollouts"),
            get(rollouts::query).post(rollouts::start_rollout),
        )
        .route(
            &route("/rollouts/search"),
            post(rollouts::search).get(rollouts::get_rollout_named_search),
        )
        .route(
            &route("/rollouts/{rollout_id}"),
            get(rollouts::get_rollout).post(rollouts::update_rollout),
        )
        .route(
            &route("/rollouts/{rollout_id}/attempts"),
            get(rollouts::query_attempts).post(rollouts::start_attempt),
        )
        .route(
            &route("/rollouts/{rollout_id}/attempts/search"),
            post(rollouts::search_attempts),
        )
        .route(
            &route("/rollouts/{rollout_id}/attempts/latest"),
            get(rollouts::latest_attempt).post(rollouts::update_latest_attempt),
        )
        .route(
            &route("/rollouts/{rollout_id}/attempts/{attempt_id}"),
            post(rollouts::update_attempt),
        )
        .route(&route("/waits/rollouts"), post(rollouts::wait))
        .route(&route("/spans"), get(spans::query).post(spans::add))
        .route(&route("/spans/search"), post(spans::search))
        .route(&route("/spans/next"), post(spans::next_sequence_id))
        .route(
            &route("/resources"),
            get(resources::query).post(resources::add),
        )
        .route(
            &route("/resources/latest"),
            get(resources::latest).post(resources::update_latest_named),
        )
        .route(
            &route("/resources/{resources_id}"),
            get(resources::get).post(resources::update),
        )
        .route(&route("/workers"), get(workers::query))
        .route(
            &route("/workers/search"),
            post(workers::search).get(workers::get_named_search),
        )
        .route(
            &route("/workers/{worker_id}"),
            get(workers::get).post(workers::update),
        )
}
