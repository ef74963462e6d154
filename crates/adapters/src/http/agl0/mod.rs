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

pub mod models;
pub(crate) mod requests;
mod resources;
mod rollouts;
pub mod span_json;
mod spans;
mod workers;

use super::routes::Routes;
use crate::auth::policy::{Need, Permission};

/// The path prefix of every route of this group.
pub const PREFIX: &str = "/v1/agl";

/// Returns the routes of agent-lightning's store API with what each
/// needs. Where upstream's router falls through from a static path to a
/// parameter one for another method (e.g. `GET /rollouts/search` is
/// `get_rollout_by_id("search")`), the static path carries that method too.
pub fn routes() -> Routes {
    use Permission::{Read, Resources, Rollouts, Work};
    let route = |path: &str| format!("{PREFIX}{path}");
    Routes::new()
        .get(&route("/health"), Need::Nothing, workers::health)
        .get(&route("/statistics"), Read, workers::statistics)
        .post(
            &route("/queues/rollouts/enqueue"),
            Rollouts,
            rollouts::enqueue,
        )
        .post(&route("/queues/rollouts/dequeue"), Work, rollouts::dequeue)
        .get(&route("/rollouts"), Read, rollouts::query)
        .post(&route("/rollouts"), Rollouts, rollouts::start_rollout)
        .post(&route("/rollouts/search"), Read, rollouts::search)
        .get(
            &route("/rollouts/search"),
            Read,
            rollouts::get_rollout_named_search,
        )
        .get(
            &route("/rollouts/{rollout_id}"),
            Read,
            rollouts::get_rollout,
        )
        .post(
            &route("/rollouts/{rollout_id}"),
            Rollouts,
            rollouts::update_rollout,
        )
        .get(
            &route("/rollouts/{rollout_id}/attempts"),
            Read,
            rollouts::query_attempts,
        )
        .post(
            &route("/rollouts/{rollout_id}/attempts"),
            Work,
            rollouts::start_attempt,
        )
        .post(
            &route("/rollouts/{rollout_id}/attempts/search"),
            Read,
            rollouts::search_attempts,
        )
        .get(
            &route("/rollouts/{rollout_id}/attempts/latest"),
            Read,
            rollouts::latest_attempt,
        )
        .post(
            &route("/rollouts/{rollout_id}/attempts/latest"),
            Work,
            rollouts::update_latest_attempt,
        )
        .post(
            &route("/rollouts/{rollout_id}/attempts/{attempt_id}"),
            Work,
            rollouts::update_attempt,
        )
        .post(&route("/waits/rollouts"), Read, rollouts::wait)
        .get(&route("/spans"), Read, spans::query)
        .post(&route("/spans"), Work, spans::add)
        .post(&route("/spans/search"), Read, spans::search)
        .post(&route("/spans/next"), Work, spans::next_sequence_id)
        .get(&route("/resources"), Read, resources::query)
        .post(&route("/resources"), Resources, resources::add)
        .get(&route("/resources/latest"), Read, resources::latest)
        .post(
            &route("/resources/latest"),
            Resources,
            resources::update_latest_named,
        )
        .get(&route("/resources/{resources_id}"), Read, resources::get)
        .post(
            &route("/resources/{resources_id}"),
            Resources,
            resources::update,
        )
        .get(&route("/workers"), Read, workers::query)
        .post(&route("/workers/search"), Read, workers::search)
        .get(&route("/workers/search"), Read, workers::get_named_search)
        .get(&route("/workers/{worker_id}"), Read, workers::get)
        .post(&route("/workers/{worker_id}"), Work, workers::update)
}
