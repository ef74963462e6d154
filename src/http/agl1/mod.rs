//! agent-lightning 1.x's server API (`agentlightning.server` of
//! agentlightning 1.0.2), so that its trainer, controller and agents work
//! unchanged against this server: `GET /healthz`, the store API under
//! `/api` (rollouts, the terminal cursor, events, models), the LLM gateway
//! under `/proxy/rollout/...` and its pause and drain under `/proxy`.
//! Thin handlers ([`rollouts`], [`events`], [`gateway`]): read and validate
//! the request ([`schema`]), call the engine or the gateway, write the
//! answer as upstream's server writes it ([`render`]).
//!
//! Beyond upstream: the terminal cursor waits for completions (`wait`
//! seconds) or streams them as server-sent events (`Accept:
//! text/event-stream`), and an event POST with an `Idempotency-Key` header
//! is recorded once however often it is retried.

mod events;
mod gateway;
pub mod render;
mod rollouts;
pub mod schema;

use axum::Router;
use axum::body::Body;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use http::{HeaderMap, StatusCode, Uri};

use super::error::HttpResult;
use super::json::PyJson;
use super::validate::{Loc, Validator};
use super::{HttpContext, json_body, read_body};
use crate::core::model::Json;

/// The route of the gateway (the last segment is the OpenAI path).
pub const PROXY_ROUTE: &str =
    "/proxy/rollout/{rollout_id}/attempt/{attempt_id}/mode/{mode}/openai/v1/{*upstream_path}";

/// The health route, open without the API key.
pub const HEALTH_ROUTE: &str = "/healthz";

/// Returns the routes of agent-lightning 1.x's server API.
pub fn routes() -> Router<HttpContext> {
    Router::new()
        .route(HEALTH_ROUTE, get(health))
        .route("/api/rollouts", post(rollouts::create).get(rollouts::list))
        .route("/api/rollouts/terminal", get(rollouts::terminal))
        .route(
            "/api/rollouts/{rollout_id}",
            get(rollouts::get)
                .patch(rollouts::patch)
                .delete(rollouts::delete),
        )
        .route(
            "/api/rollouts/{rollout_id}/attempt/{attempt_id}/events",
            post(events::post),
        )
        .route("/api/rollouts/{rollout_id}/events", get(events::query))
        .route(
            "/api/models",
            post(events::register_models).delete(events::delete_models),
        )
        .route("/proxy/pause", post(gateway::pause))
        .route("/proxy/resume", post(gateway::resume))
        .route("/proxy/state", get(gateway::state))
        .route(PROXY_ROUTE, post(gateway::proxy))
}

async fn health() -> PyJson<Json> {
    PyJson(StatusCode::OK, serde_json::json!({"status": "ok"}))
}

/// Returns the query string's parameters in order (repeated names kept).
pub(super) fn query_pairs(uri: &Uri) -> Vec<(String, String)> {
    form_urlencoded::parse(uri.query().unwrap_or("").as_bytes())
        .into_owned()
        .collect()
}

/// Returns the last value of a query parameter, as FastAPI reads scalars.
pub(super) fn query_value<'a>(pairs: &'a [(String, String)], name: &str) -> Option<&'a str> {
    pairs
        .iter()
        .rev()
        .find(|(key, _)| key == name)
        .map(|(_, value)| value.as_str())
}

/// Reads an integer query parameter with a default.
pub(super) fn query_int(
    v: &mut Validator,
    pairs: &[(String, String)],
    name: &str,
    default: i64,
) -> Option<i64> {
    match query_value(pairs, name) {
        Some(text) => v.int(&Loc::query(name), &Json::String(text.to_owned())),
        None => Some(default),
    }
}

/// Reads a required JSON body: a missing one is pydantic's `missing`.
pub(super) fn required_body(v: &mut Validator, body: Option<Json>) -> Option<Json> {
    if body.is_none() {
        v.issue("missing", &Loc::body(), "Field required", &Json::Null, None);
    }
    body
}

pub(super) async fn json_request(
    context: &HttpContext,
    headers: &HeaderMap,
    body: Body,
) -> HttpResult<Option<Json>> {
    let bytes = read_body(body, context.max_body_bytes).await?;
    json_body(headers, &bytes)
}

pub(super) fn answer<T: serde::Serialize>(status: StatusCode, value: &T) -> Response {
    PyJson(status, value).into_response()
}

/// Answers with JSON already written.
pub(super) fn raw_answer(status: StatusCode, body: Vec<u8>) -> Response {
    let mut response = (status, body).into_response();
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    response
}
