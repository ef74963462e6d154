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

mod answer;
mod events;
mod gateway;
pub mod render;
mod rollouts;
pub mod schema;

use http::StatusCode;

use super::routes::Routes;
use crate::auth::policy::{Need, Permission};
use crate::pyjson::PyJson;
use lightning_store_core::model::Json;

/// The route of the gateway (the last segment is the OpenAI path).
pub const PROXY_ROUTE: &str =
    "/proxy/rollout/{rollout_id}/attempt/{attempt_id}/mode/{mode}/openai/v1/{*upstream_path}";

/// The health route, open without the API key.
const HEALTH_ROUTE: &str = "/healthz";

/// Returns the routes of agent-lightning 1.x's server API with what each needs.
pub fn routes() -> Routes {
    use Permission::{Gateway, Read, Resources, Rollouts, Work};
    Routes::new()
        .get(HEALTH_ROUTE, Need::Nothing, health)
        .post("/api/rollouts", Rollouts, rollouts::create)
        .get("/api/rollouts", Read, rollouts::list)
        .get("/api/rollouts/terminal", Read, rollouts::terminal)
        .get("/api/rollouts/{rollout_id}", Read, rollouts::get)
        .patch("/api/rollouts/{rollout_id}", Rollouts, rollouts::patch)
        .delete("/api/rollouts/{rollout_id}", Rollouts, rollouts::delete)
        .post(
            "/api/rollouts/{rollout_id}/attempt/{attempt_id}/events",
            Work,
            events::post,
        )
        .get("/api/rollouts/{rollout_id}/events", Read, events::query)
        .post("/api/models", Resources, events::register_models)
        .delete("/api/models", Resources, events::delete_models)
        .post("/proxy/pause", Gateway, gateway::pause)
        .post("/proxy/resume", Gateway, gateway::resume)
        .get("/proxy/state", Read, gateway::state)
        .post(PROXY_ROUTE, Work, gateway::proxy)
}

async fn health() -> PyJson<Json> {
    PyJson(StatusCode::OK, serde_json::json!({"status": "ok"}))
}
