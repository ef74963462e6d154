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
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use http::StatusCode;

use super::HttpContext;
use crate::core::model::Json;
use crate::pyjson::PyJson;

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

/// Answers with JSON already written (the renderers of [`render`]).
pub(super) fn raw_answer(status: StatusCode, body: Vec<u8>) -> Response {
    let mut response = (status, body).into_response();
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    response
}
