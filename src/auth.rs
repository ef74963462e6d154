//! The one access check of the port: with an API key configured
//! (`LIGHTNING_STORE_API_KEY`), every gRPC call and HTTP request but the
//! health checks must carry it, as `Authorization: Bearer <key>` or
//! `x-api-key: <key>` (gRPC metadata alike), as agent-lightning 1.x's
//! server asks. Refusals are gRPC's UNAUTHENTICATED or HTTP's 401 with
//! upstream's body. It is a tower layer over the router, so it sees the
//! matched route (unknown paths stay 404/UNIMPLEMENTED, as upstream's) and
//! labels refusals by route; roles and tokens can grow here.

use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::Body;
use axum::extract::{MatchedPath, Request};
use axum::response::{IntoResponse, Response};
use futures::future::{BoxFuture, Either};
use http::{HeaderMap, StatusCode};

use crate::api::calls::{MatchedRoute, is_grpc};
use crate::http::error::HttpError;

/// Paths open without the key: the health checks.
fn is_open(path: &str) -> bool {
    path == crate::http::agl1::HEALTH_ROUTE
        || path == "/v1/agl/health"
        || path.starts_with("/grpc.health.v1.Health/")
}

/// Returns whether the request carries `key`.
fn carries(headers: &HeaderMap, key: &str) -> bool {
    let bearer = headers
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    let api_key = headers.get("x-api-key").and_then(|v| v.to_str().ok());
    [bearer, api_key]
        .into_iter()
        .flatten()
        .any(|given| constant_time_eq(given.as_bytes(), key.as_bytes()))
}

/// Compares without leaking where the first difference is.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The layer: `None` lets everything through.
#[derive(Debug, Clone)]
pub struct ApiKeyLayer {
    key: Option<Arc<str>>,
}

impl ApiKeyLayer {
    /// Checks `key` when given.
    pub fn new(key: Option<String>) -> Self {
        Self {
            key: key.filter(|k| !k.is_empty()).map(Arc::from),
        }
    }
}

impl<S> tower::Layer<S> for ApiKeyLayer {
    type Service = ApiKey<S>;

    fn layer(&self, inner: S) -> Self::Service {
        ApiKey {
            inner,
            key: self.key.clone(),
        }
    }
}

/// The service of [`ApiKeyLayer`].
#[derive(Debug, Clone)]
pub struct ApiKey<S> {
    inner: S,
    key: Option<Arc<str>>,
}

impl<S> tower::Service<Request> for ApiKey<S>
where
    S: tower::Service<Request, Response = Response> + Send + 'static,
    S::Future: Send + 'static,
{
    type Response = Response;
    type Error = S::Error;
    type Future = Either<S::Future, BoxFuture<'static, Result<Response, S::Error>>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request) -> Self::Future {
        let allowed = match &self.key {
            None => true,
            Some(key) => is_open(request.uri().path()) || carries(request.headers(), key),
        };
        if allowed {
            return Either::Left(self.inner.call(request));
        }
        let mut response = if is_grpc(request.headers()) {
            tonic::Status::unauthenticated("invalid or missing API key").into_http::<Body>()
        } else {
            HttpError::Detail(
                StatusCode::UNAUTHORIZED,
                "Invalid or missing API key".to_owned(),
            )
            .into_response()
        };
        if let Some(route) = request.extensions().get::<MatchedPath>() {
            response
                .extensions_mut()
                .insert(MatchedRoute(route.clone()));
        }
        Either::Right(Box::pin(async move { Ok(response) }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_read_from_bearer_or_x_api_key() {
        let mut headers = HeaderMap::new();
        assert!(!carries(&headers, "k"));
        headers.insert("authorization", "Bearer k".parse().unwrap());
        assert!(carries(&headers, "k"));
        assert!(!carries(&headers, "kk"));
        let mut headers = HeaderMap::new();
        headers.insert("authorization", "bearer k".parse().unwrap());
        headers.insert("x-api-key", "k".parse().unwrap());
        assert!(carries(&headers, "k"), "x-api-key alone suffices");
        assert!(is_open("/healthz") && is_open("/grpc.health.v1.Health/Check"));
        assert!(
            !is_open("/api/rollouts")
                && !is_open("/lightningstore.v1.LightningStoreService/GetRollout")
        );
    }
}
