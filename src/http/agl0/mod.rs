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

pub(crate) mod models;
pub(crate) mod requests;
mod resources;
mod rollouts;
pub(crate) mod span_json;
mod spans;
mod workers;

use axum::Router;
use axum::body::Body;
use axum::routing::{get, post};
use http::HeaderMap;

use super::error::{HttpError, HttpResult};
use super::validate::{Issue, Loc, Object, Validator};
use super::{HttpContext, json_body, read_body};
use crate::core::model::Json;

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

/// Reads a request's JSON body within the size limit; `None` when empty.
async fn body_json(
    context: &HttpContext,
    headers: &HeaderMap,
    body: Body,
) -> HttpResult<Option<Json>> {
    let bytes = read_body(body, context.max_body_bytes).await?;
    json_body(headers, &bytes)
}

/// Reads a body that must be present: FastAPI's 422 `missing` otherwise.
async fn required_body_json(
    context: &HttpContext,
    headers: &HeaderMap,
    body: Body,
) -> HttpResult<Json> {
    body_json(context, headers, body).await?.ok_or_else(|| {
        HttpError::Invalid(vec![Issue {
            kind: "missing",
            loc: Loc::body(),
            msg: "Field required".to_owned(),
            input: Json::Null,
            ctx: None,
        }])
    })
}

/// Reads the body of a `POST …/search`: a JSON object (pydantic's 422
/// otherwise), the query model's source.
async fn search_body(context: &HttpContext, headers: &HeaderMap, body: Body) -> HttpResult<Object> {
    match required_body_json(context, headers, body).await? {
        Json::Object(object) => Ok(object),
        other => {
            let mut v = Validator::new();
            v.model(&Loc::body(), &other);
            Err(v.into_error())
        }
    }
}

/// Parses a query string into its pairs, in order.
fn query_pairs(query: Option<&str>) -> Vec<(String, String)> {
    form_urlencoded::parse(query.unwrap_or_default().as_bytes())
        .into_owned()
        .collect()
}
