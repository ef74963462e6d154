//! The HTTP adapters, served on the gRPC port (HTTP/1.1 and h2c beside
//! gRPC): thin handlers that validate and convert a request, call the same
//! [`Engine`] methods as the gRPC adapter, and convert the result back.
//! JSON types stop here.
//!
//! Route groups ([`agl0`]: agent-lightning 0.x's store API under `/v1/agl`;
//! [`agl1`]: agent-lightning 1.x's server API under `/api` and `/proxy`;
//! [`otlp`]: OTLP/HTTP `POST /v1/traces`) each return their router, and
//! [`routes`] merges them in one place. The toolkit both agent-lightning
//! lines share: extractors for bodies, query strings and the
//! `Idempotency-Key` header ([`extract`]), pydantic's validation rules and
//! 422 reports ([`validate`]), FastAPI's error bodies ([`error`]), JSON
//! answers written as agent-lightning's server writes them
//! ([`crate::pyjson`]), and JSON 404/405 answers for unknown routes and
//! methods.

pub mod agl0;
pub mod agl1;
pub mod context;
pub mod error;
pub mod extract;
pub mod otlp;
pub mod routes;
pub mod validate;

use axum::Router;
use axum::body::Body;
use axum::extract::{MatchedPath, Request};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http::StatusCode;

pub use self::context::{HttpContext, HttpState};
use self::error::HttpError;
use self::routes::Routes;
use crate::auth::AuthLayer;
use crate::call_log::MatchedRoute;
use crate::transport::is_grpc;

/// Returns every HTTP route group, each route with what it needs (the one
/// place groups are assembled: a new group is one `merge` here).
pub fn routes() -> Routes {
    Routes::new()
        .merge(agl0::routes())
        .merge(otlp::routes())
        .merge(agl1::routes())
}

/// Returns the router that serves `routes`: each request checked by `auth`
/// against what its route declared, its matched route recorded for the
/// call layer (refusals included), JSON 405 answers for known paths.
pub fn router(routes: Routes, state: HttpState, auth: AuthLayer) -> Router {
    routes
        .into_router()
        .route_layer(auth)
        .route_layer(axum::middleware::from_fn(record_route))
        .method_not_allowed_fallback(method_not_allowed)
        .with_state(state)
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
