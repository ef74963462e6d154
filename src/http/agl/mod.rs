//! agent-lightning 0.x's store API (`LightningStoreServer` of
//! agentlightning 0.3.0, routes under `/v1/agl`), so that its
//! `LightningStoreClient`, runners and dashboard work unchanged.

use axum::Router;
use axum::routing::get;
use http::StatusCode;

use super::HttpContext;
use super::json::PyJson;

/// The path prefix of every route of this group.
pub const PREFIX: &str = "/v1/agl";

/// Returns the routes of agent-lightning's store API.
pub fn routes() -> Router<HttpContext> {
    Router::new().route(&format!("{PREFIX}/health"), get(health))
}

async fn health() -> PyJson<serde_json::Value> {
    PyJson(StatusCode::OK, serde_json::json!({"status": "ok"}))
}
