//! The HTTP adapters, served on the gRPC port (HTTP/1.1 and h2c beside
//! gRPC): thin handlers that validate and convert a request, call the same
//! [`Engine`] methods as the gRPC adapter, and convert the result back.
//! JSON types stop here.
//!
//! Route groups ([`agl`]: agent-lightning 0.x's store API under `/v1/agl`;
//! [`agl1`]: agent-lightning 1.x's server API under `/api` and `/proxy`;
//! [`otlp`]: OTLP/HTTP `POST /v1/traces`) each return their router, and
//! [`routes`] merges them in one place. Shared pieces: request bodies read
//! within the configured limit (413 beyond), JSON answers written as
//! agent-lightning's server writes them ([`json`]), FastAPI's error bodies
//! ([`error`]), pydantic's validation rules and 422 reports ([`validate`]),
//! and JSON 404/405 answers for unknown routes and methods.

pub mod agl0;
pub mod agl1;
pub mod error;
pub mod json;
pub mod otlp;
pub mod validate;

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::{MatchedPath, Request};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use http::StatusCode;

use self::error::HttpError;
use self::validate::{Issue, Loc};
use crate::call_log::{MatchedRoute, is_grpc};
use crate::core::engine::Engine;
use crate::core::model::Json;
use crate::gateway::Gateway;
use crate::metrics::Metrics;
use crate::otlp::TraceIngest;

/// What every HTTP handler shares.
#[derive(Clone)]
pub struct HttpContext {
    /// The engine the gRPC adapter uses too.
    pub engine: Arc<Engine>,
    /// The OTLP trace receiver shared with OTLP/gRPC.
    pub trace_ingest: TraceIngest,
    /// Largest accepted request body in bytes (after decompression too);
    /// larger ones get a 413.
    pub max_body_bytes: usize,
    /// agent-lightning 1.x's LLM gateway.
    pub gateway: Arc<Gateway>,
    /// The server's metrics.
    pub metrics: Metrics,
}

/// The request header that names a request for safe retries: an event
/// POST of the 1.x API, an enqueue of the 0.x API.
pub const IDEMPOTENCY_KEY: &str = "idempotency-key";

/// Returns the request's `Idempotency-Key`, if it has one (400 unless it is
/// visible ASCII).
pub fn idempotency_key(headers: &http::HeaderMap) -> Result<Option<&str>, HttpError> {
    headers
        .get(IDEMPOTENCY_KEY)
        .map(|value| {
            value
                .to_str()
                .map_err(|_| HttpError::bad_request("Idempotency-Key must be visible ASCII"))
        })
        .transpose()
}

impl HttpContext {
    /// Refuses a batch `value` (when it is a list) over the batch limit
    /// before any of its items is read; a value that is not a list is the
    /// validator's to refuse.
    pub fn check_batch(&self, field: &str, value: Option<&Json>) -> Result<(), HttpError> {
        if let Some(Json::Array(items)) = value {
            self.engine.limits().batch(field, items)?;
        }
        Ok(())
    }

    /// Refuses an id list `value` (when it is a list) over the id-list limit
    /// before any of its ids is read, as [`HttpContext::check_batch`] does
    /// for batches.
    pub fn check_ids(&self, field: &str, value: Option<&Json>) -> Result<(), HttpError> {
        if let Some(Json::Array(ids)) = value {
            self.engine.limits().ids(field, ids)?;
        }
        Ok(())
    }
}

/// Returns every HTTP route group merged into one router (the one place
/// groups are assembled), with JSON 405 answers for known paths and the
/// matched route recorded for the call layer.
pub fn routes(context: HttpContext) -> Router {
    Router::new()
        .merge(agl0::routes())
        .merge(otlp::routes())
        .merge(agl1::routes())
        .route_layer(axum::middleware::from_fn(record_route))
        .method_not_allowed_fallback(method_not_allowed)
        .with_state(context)
}

/// Returns the CORS layer of the HTTP routes for `origins` (`*`: any; the
/// request's origin is echoed, credentials allowed, as upstream's
/// `--cors-origin` does); `None` when no origin is allowed.
pub fn cors(origins: &[String]) -> Result<Option<tower_http::cors::CorsLayer>, String> {
    use tower_http::cors::{AllowHeaders, AllowMethods, AllowOrigin, CorsLayer};
    if origins.is_empty() {
        return Ok(None);
    }
    let allow_origin = if origins.iter().any(|o| o.trim() == "*") {
        AllowOrigin::mirror_request()
    } else {
        let list = origins
            .iter()
            .map(|o| {
                http::HeaderValue::from_str(o.trim())
                    .map_err(|_| format!("invalid CORS origin {o:?}"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        AllowOrigin::list(list)
    };
    Ok(Some(
        CorsLayer::new()
            .allow_origin(allow_origin)
            .allow_methods(AllowMethods::mirror_request())
            .allow_headers(AllowHeaders::mirror_request())
            .allow_credentials(true),
    ))
}

/// Answers a request that matched no route: a gRPC call gets gRPC's
/// UNIMPLEMENTED, anything else FastAPI's 404 `{"detail":"Not Found"}`.
pub async fn not_found(request: Request) -> Response {
    if is_grpc(request.headers()) {
        return tonic::Status::unimplemented("").into_http::<Body>();
    }
    HttpError::Detail(StatusCode::NOT_FOUND, "Not Found".to_owned()).into_response()
}

async fn method_not_allowed() -> HttpError {
    HttpError::Detail(
        StatusCode::METHOD_NOT_ALLOWED,
        "Method Not Allowed".to_owned(),
    )
}

/// Records the matched route template in the response, for the call layer.
pub async fn record_route(request: Request, next: Next) -> Response {
    let route = request.extensions().get::<MatchedPath>().cloned();
    let mut response = next.run(request).await;
    if let Some(route) = route {
        response.extensions_mut().insert(MatchedRoute(route));
    }
    response
}

/// Reads a whole request body, refusing one over `limit` bytes with a 413.
pub async fn read_body(body: Body, limit: usize) -> Result<Bytes, HttpError> {
    axum::body::to_bytes(body, limit).await.map_err(|error| {
        let too_large = std::error::Error::source(&error)
            .is_some_and(|source| source.is::<http_body_util::LengthLimitError>());
        if too_large {
            HttpError::too_large(limit)
        } else {
            HttpError::bad_request(format!("cannot read the request body: {error}"))
        }
    })
}

/// Parses a JSON request body as FastAPI does before validating it: a body
/// without a JSON content type is taken as text, and broken JSON is a 422
/// `json_invalid` at the failing position. An empty body is `None`.
pub fn json_body(headers: &http::HeaderMap, body: &[u8]) -> Result<Option<Json>, HttpError> {
    if body.is_empty() {
        return Ok(None);
    }
    let is_json = headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .map(|v| v.trim().to_ascii_lowercase())
        .is_some_and(|v| v == "application/json" || v.ends_with("+json"));
    if !is_json {
        return Ok(Some(Json::String(
            String::from_utf8_lossy(body).into_owned(),
        )));
    }
    serde_json::from_slice(body).map(Some).map_err(|error| {
        let position = char_offset(body, error.line(), error.column());
        HttpError::Invalid(vec![Issue {
            kind: "json_invalid",
            loc: Loc::body().index(position),
            msg: "JSON decode error".to_owned(),
            input: Json::Object(Default::default()),
            ctx: Some(serde_json::json!({ "error": python_json_error(&error) })),
        }])
    })
}

/// Names a JSON syntax error as Python's `json` module does, the reason
/// FastAPI reports.
fn python_json_error(error: &serde_json::Error) -> String {
    let message = error.to_string();
    let reason = [
        (
            "key must be a string",
            "Expecting property name enclosed in double quotes",
        ),
        ("expected `:`", "Expecting ':' delimiter"),
        ("expected `,` or `}`", "Expecting ',' delimiter"),
        ("expected `,` or `]`", "Expecting ',' delimiter"),
        ("trailing characters", "Extra data"),
        (
            "trailing comma",
            "Illegal trailing comma before end of object",
        ),
        ("control character", "Invalid control character at"),
        ("invalid escape", "Invalid \\escape"),
        (
            "EOF while parsing a string",
            "Unterminated string starting at",
        ),
    ]
    .iter()
    .find(|(serde, _)| message.starts_with(serde))
    .map_or("Expecting value", |(_, python)| python);
    reason.to_owned()
}

/// Converts serde_json's 1-based line and column into a character offset.
fn char_offset(body: &[u8], line: usize, column: usize) -> usize {
    let text = String::from_utf8_lossy(body);
    let before: usize = text
        .split('\n')
        .take(line.saturating_sub(1))
        .map(|l| l.chars().count() + 1)
        .sum();
    before + column.saturating_sub(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn bodies_over_the_limit_are_413() {
        let ok = read_body(Body::from(vec![0u8; 10]), 10).await.unwrap();
        assert_eq!(ok.len(), 10);
        let error = read_body(Body::from(vec![0u8; 11]), 10).await.unwrap_err();
        assert_eq!(error.status(), StatusCode::PAYLOAD_TOO_LARGE);
    }

    #[test]
    fn broken_json_is_reported_at_its_position() {
        let mut headers = http::HeaderMap::new();
        headers.insert(
            http::header::CONTENT_TYPE,
            "application/json".parse().unwrap(),
        );
        let HttpError::Invalid(issues) = json_body(&headers, b"{bad").unwrap_err() else {
            panic!("expected a 422");
        };
        assert_eq!(issues[0].kind, "json_invalid");
        assert_eq!(
            issues[0].ctx,
            Some(serde_json::json!({"error": "Expecting property name enclosed in double quotes"}))
        );
        assert_eq!(
            serde_json::to_value(&issues[0].loc).unwrap(),
            serde_json::json!(["body", 1])
        );
        assert_eq!(json_body(&headers, b"").unwrap(), None);
        assert_eq!(
            json_body(&http::HeaderMap::new(), b"{}").unwrap(),
            Some(Json::String("{}".into()))
        );
    }
}
