//! Access to the port: bearer tokens with roles, checked in one tower layer
//! for gRPC and HTTP alike against one table ([`policy`]). A token comes as
//! `Authorization: Bearer <token>` (gRPC metadata alike; OTLP exporters
//! send it through their headers option) or `x-api-key: <token>` (as
//! agent-lightning 1.x's clients send their key). Missing or unknown:
//! UNAUTHENTICATED / 401 with `WWW-Authenticate: Bearer`; known but its
//! roles lack the permission: PERMISSION_DENIED / 403. A refused call never
//! reaches a handler, so nothing is written. An allowed call carries its
//! [`Grant`] in the request's extensions, where the adapters check worker
//! bindings ([`check_worker`]) once the worker id is known. Without tokens
//! configured every call passes (the server then listens on loopback only
//! unless told `--insecure`, see [`crate::cli`]).

pub mod policy;
pub mod tokens;

use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::Body;
use axum::extract::{MatchedPath, Request};
use axum::response::{IntoResponse, Response};
use futures::future::{BoxFuture, Either};
use http::{HeaderMap, HeaderValue, StatusCode};
use prometheus_client::metrics::counter::Counter;

use self::policy::Need;
use self::tokens::TokenEntry;
pub use self::tokens::Tokens;
use crate::call_log::{MatchedRoute, is_grpc};
use crate::http::error::HttpError;
use crate::metrics::Metrics;

/// Why a call was refused: the `reason` label of
/// `lightning_store_auth_failures_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// No token in the request.
    Missing,
    /// A token no entry matches.
    Invalid,
    /// A known token whose roles lack the permission.
    Forbidden,
    /// A worker-bound token acting for another worker id.
    Worker,
}

impl Refusal {
    /// Every reason, for the metric's label values.
    pub const ALL: [Refusal; 4] = [
        Refusal::Missing,
        Refusal::Invalid,
        Refusal::Forbidden,
        Refusal::Worker,
    ];

    /// The metric label of the reason.
    pub fn label(self) -> &'static str {
        match self {
            Refusal::Missing => "missing",
            Refusal::Invalid => "invalid",
            Refusal::Forbidden => "forbidden",
            Refusal::Worker => "worker",
        }
    }
}

/// The token an allowed call carries, in the request's extensions.
#[derive(Debug, Clone)]
pub struct Grant {
    entry: Arc<TokenEntry>,
    worker_refusals: Counter,
}

impl Grant {
    /// The token's label (never the token itself).
    pub fn name(&self) -> &str {
        &self.entry.name
    }

    /// Returns whether the token grants `permission`.
    pub fn allows(&self, permission: policy::Permission) -> bool {
        self.entry.allows(permission)
    }
}

/// A worker-bound token used for another worker id (PERMISSION_DENIED, 403).
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub struct WorkerRefused(String);

impl From<WorkerRefused> for tonic::Status {
    fn from(refused: WorkerRefused) -> Self {
        tonic::Status::permission_denied(refused.0)
    }
}

impl From<WorkerRefused> for HttpError {
    fn from(refused: WorkerRefused) -> Self {
        HttpError::Detail(StatusCode::FORBIDDEN, refused.0)
    }
}

/// Checks that the caller, by the [`Grant`] of its request, may act for
/// `worker_id` (`None`: the request names no worker, which any token may
/// do). Calls without a grant (no tokens configured) always may.
pub fn check_worker(grant: Option<&Grant>, worker_id: Option<&str>) -> Result<(), WorkerRefused> {
    let (Some(grant), Some(worker_id)) = (grant, worker_id) else {
        return Ok(());
    };
    if grant.entry.may_act_for(worker_id) {
        return Ok(());
    }
    grant.worker_refusals.inc();
    tracing::debug!(
        token = grant.name(),
        worker_id,
        "token refused for another worker"
    );
    Err(WorkerRefused(format!(
        "token {:?} may not act for worker {worker_id:?}",
        grant.name()
    )))
}

/// As [`check_worker`], for calls that take work: a worker-bound token
/// must name one of its workers.
pub fn check_worker_named(
    grant: Option<&Grant>,
    worker_id: Option<&str>,
) -> Result<(), WorkerRefused> {
    match (grant, worker_id) {
        (Some(grant), None) if grant.entry.is_bound() => {
            grant.worker_refusals.inc();
            Err(WorkerRefused(format!(
                "token {:?} is bound to workers: name one (worker_id)",
                grant.name()
            )))
        }
        _ => check_worker(grant, worker_id),
    }
}

/// Returns the token a request carries.
fn presented(headers: &HeaderMap) -> Option<&str> {
    let bearer = headers
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            let scheme = v.get(..7)?;
            scheme.eq_ignore_ascii_case("bearer ").then(|| &v[7..])
        });
    let api_key = || headers.get("x-api-key").and_then(|v| v.to_str().ok());
    bearer.or_else(api_key).map(str::trim)
}

/// The layer over the gRPC and HTTP routers; without tokens it lets
/// everything through.
#[derive(Debug, Clone)]
pub struct AuthLayer {
    tokens: Option<Tokens>,
    failures: Arc<[Counter; 4]>,
}

impl AuthLayer {
    /// Checks calls against `tokens`, counting refusals in `metrics`.
    pub fn new(tokens: Option<Tokens>, metrics: &Metrics) -> Self {
        Self {
            tokens,
            failures: Arc::new(Refusal::ALL.map(|reason| metrics.auth_failures(reason.label()))),
        }
    }

    /// Decides on a request: `Ok` with the grant to attach (`None` for an
    /// open call), or the refusal.
    fn decide(&self, tokens: &Tokens, request: &Request) -> Result<Option<Grant>, Refusal> {
        let grpc = is_grpc(request.headers());
        let route = request.extensions().get::<MatchedPath>();
        let need = if grpc {
            policy::grpc_need(request.uri().path())
        } else {
            route.and_then(|route| policy::http_need(request.method(), route.as_str()))
        };
        if need == Some(Need::Nothing) {
            return Ok(None);
        }
        // A browser signed in to the console holds its token in a cookie,
        // which only the console's routes accept (the API's never do, so
        // that no other page can make a browser call the API with it).
        let console = !grpc && route.is_some_and(|r| crate::console::is_console_route(r.as_str()));
        let cookie = console
            .then(|| crate::console::session::cookie_token(request.headers()))
            .flatten();
        let token = presented(request.headers())
            .or(cookie.as_deref())
            .ok_or(Refusal::Missing)?;
        let entry = tokens.find(token).ok_or(Refusal::Invalid)?;
        // A call missing from the table is for admins only.
        let allowed = match need {
            Some(Need::Permission(permission)) => entry.allows(permission),
            _ => entry.allows_everything(),
        };
        if !allowed {
            tracing::debug!(token = %entry.name, path = request.uri().path(), "token lacks the permission");
            return Err(Refusal::Forbidden);
        }
        Ok(Some(Grant {
            entry,
            worker_refusals: self.failures[Refusal::Worker as usize].clone(),
        }))
    }
}

impl<S> tower::Layer<S> for AuthLayer {
    type Service = Auth<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Auth {
            inner,
            layer: self.clone(),
        }
    }
}

/// The service of [`AuthLayer`].
#[derive(Debug, Clone)]
pub struct Auth<S> {
    inner: S,
    layer: AuthLayer,
}

impl<S> tower::Service<Request> for Auth<S>
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

    fn call(&mut self, mut request: Request) -> Self::Future {
        let Some(tokens) = &self.layer.tokens else {
            return Either::Left(self.inner.call(request));
        };
        let refusal = match self.layer.decide(tokens, &request) {
            Ok(grant) => {
                if let Some(grant) = grant {
                    request.extensions_mut().insert(grant);
                }
                return Either::Left(self.inner.call(request));
            }
            Err(refusal) => refusal,
        };
        self.layer.failures[refusal as usize].inc();
        let route = request.extensions().get::<MatchedPath>();
        let mut response = match route {
            Some(route)
                if !is_grpc(request.headers())
                    && crate::console::is_console_route(route.as_str()) =>
            {
                crate::console::session::refusal(
                    refusal,
                    request.method(),
                    Some(route.as_str()),
                    request.uri(),
                )
            }
            _ => refusal_response(refusal, is_grpc(request.headers())),
        };
        if let Some(route) = request.extensions().get::<MatchedPath>() {
            response
                .extensions_mut()
                .insert(MatchedRoute(route.clone()));
        }
        Either::Right(Box::pin(async move { Ok(response) }))
    }
}

/// The answer to a refused call: gRPC status or HTTP error, with
/// `WWW-Authenticate: Bearer` when the token is missing or unknown.
fn refusal_response(refusal: Refusal, grpc: bool) -> Response {
    let unauthenticated = matches!(refusal, Refusal::Missing | Refusal::Invalid);
    let mut response = match (grpc, unauthenticated) {
        (true, true) => tonic::Status::unauthenticated("invalid or missing token").into_http(),
        (true, false) => {
            tonic::Status::permission_denied("the token's roles do not allow this call")
                .into_http::<Body>()
        }
        // agent-lightning 1.x's server answers a bad key with this body.
        (false, true) => HttpError::Detail(
            StatusCode::UNAUTHORIZED,
            "Invalid or missing API key".to_owned(),
        )
        .into_response(),
        (false, false) => HttpError::Detail(
            StatusCode::FORBIDDEN,
            "The token's roles do not allow this request".to_owned(),
        )
        .into_response(),
    };
    if unauthenticated {
        let challenge = match refusal {
            Refusal::Invalid => r#"Bearer error="invalid_token""#,
            _ => "Bearer",
        };
        response.headers_mut().insert(
            http::header::WWW_AUTHENTICATE,
            HeaderValue::from_static(challenge),
        );
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_read_from_bearer_or_x_api_key() {
        let mut headers = HeaderMap::new();
        assert_eq!(presented(&headers), None);
        headers.insert("authorization", "Bearer k".parse().unwrap());
        assert_eq!(presented(&headers), Some("k"));
        let mut headers = HeaderMap::new();
        headers.insert("authorization", "bearer k".parse().unwrap());
        assert_eq!(
            presented(&headers),
            Some("k"),
            "the scheme is case-insensitive"
        );
        let mut headers = HeaderMap::new();
        headers.insert("authorization", "Basic k".parse().unwrap());
        assert_eq!(presented(&headers), None);
        headers.insert("x-api-key", "k".parse().unwrap());
        assert_eq!(presented(&headers), Some("k"), "x-api-key alone suffices");
    }
}
