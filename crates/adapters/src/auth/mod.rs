//! Access to the port: bearer tokens with roles, checked in one tower layer
//! for gRPC and HTTP alike against what each call needs ([`policy`]: the
//! RPC table, and the needs the HTTP routes declare where they are
//! registered). A token comes as
//! `Authorization: Bearer <token>` (gRPC metadata alike; OTLP exporters
//! send it through their headers option) or `x-api-key: <token>` (as
//! agent-lightning 1.x's clients send their key). Missing or unknown:
//! UNAUTHENTICATED / 401 with `WWW-Authenticate: Bearer`; known but its
//! roles lack the permission: PERMISSION_DENIED / 403. A refused call never
//! reaches a handler, so nothing is written. An allowed call carries the
//! [`Caller`] its token makes it in the request's extensions; the adapters
//! pass it into the engine, which checks a worker-bound token's binding in
//! every operation that acts for a worker, and the [`Grant`] of the token
//! for adapters that show what it allows. A route group may present the
//! token another way, as a [`PresentedToken`] that a layer of its own puts
//! in the request (the console's sign-in cookie); a refused HTTP request's
//! answer carries its [`Refusal`], so that such a group can answer it in
//! its own way. Without tokens configured every call passes (the server
//! then listens on loopback only unless told `--insecure`, see
//! [`crate::cli`]).

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

use self::policy::{Need, Permission, RouteNeed, RouteNeeds};
use self::tokens::TokenEntry;
pub use self::tokens::Tokens;
use crate::metrics::Metrics;
use crate::namespace_layer::NamedNamespace;
use crate::pyjson::PyJson;
use crate::transport::is_grpc;
use lightning_store_core::access::{Caller, RefusalSink};
use lightning_store_core::namespace::NamespaceName;

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
    /// A token limited to some namespaces used on another one (or, limited
    /// at all, managing namespaces).
    Namespace,
}

impl Refusal {
    /// Every reason, for the metric's label values.
    pub const ALL: [Refusal; 5] = [
        Refusal::Missing,
        Refusal::Invalid,
        Refusal::Forbidden,
        Refusal::Worker,
        Refusal::Namespace,
    ];

    /// The metric label of the reason.
    pub fn label(self) -> &'static str {
        match self {
            Refusal::Missing => "missing",
            Refusal::Invalid => "invalid",
            Refusal::Forbidden => "forbidden",
            Refusal::Worker => "worker",
            Refusal::Namespace => "namespace",
        }
    }
}

/// The token an allowed request carries, in the request's extensions
/// beside its [`Caller`]: its label and what its roles allow.
#[derive(Debug, Clone)]
pub struct Grant(Arc<TokenEntry>);

impl Grant {
    /// The token's label (never the token itself).
    pub fn name(&self) -> &str {
        &self.0.name
    }

    /// Returns whether the token grants `permission`.
    pub fn allows(&self, permission: Permission) -> bool {
        self.0.allows(permission)
    }

    /// The token's line of the tokens file (its role and namespaces).
    pub fn entry(&self) -> &TokenEntry {
        &self.0
    }
}

/// A token a route group's own layer found in a request that carries
/// none in its headers, put in the request's extensions before the access
/// layer runs (the console's sign-in cookie, which only its routes accept).
#[derive(Clone)]
pub struct PresentedToken(pub String);

impl std::fmt::Debug for PresentedToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PresentedToken(..)")
    }
}

/// Counts the requests refused for acting for another worker, in
/// `lightning_store_auth_failures_total{reason="worker"}`.
#[derive(Debug)]
struct WorkerRefusals(Counter);

impl RefusalSink for WorkerRefusals {
    fn worker_refused(&self) {
        self.0.inc();
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
    /// What the HTTP routes declared they need.
    routes: Arc<RouteNeeds>,
    failures: Arc<[Counter; 5]>,
    worker_refusals: Arc<dyn RefusalSink>,
}

/// What a request needs to pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Required {
    Nothing,
    /// A token that grants the permission.
    Permission(Permission),
    /// Any known token.
    AnyToken,
    /// A token that grants everything.
    Admin,
}

impl AuthLayer {
    /// Checks calls against `tokens`, gRPC calls by the RPC table and HTTP
    /// requests by what their `routes` declared, counting refusals in
    /// `metrics`.
    pub fn new(tokens: Option<Tokens>, routes: RouteNeeds, metrics: &Metrics) -> Self {
        let failures = Refusal::ALL.map(|reason| metrics.auth_failures(reason.label()));
        Self {
            tokens,
            routes: Arc::new(routes),
            worker_refusals: Arc::new(WorkerRefusals(failures[Refusal::Worker as usize].clone())),
            failures: Arc::new(failures),
        }
    }

    /// Returns what `request` needs: a gRPC call what the RPC table says
    /// (admins only for a method no service serves: the router answers
    /// it UNIMPLEMENTED), an HTTP request what its route declared.
    fn required(&self, request: &Request) -> Required {
        let by_need = |need| match need {
            Need::Nothing => Required::Nothing,
            Need::Permission(permission) => Required::Permission(permission),
        };
        if is_grpc(request.headers()) {
            return policy::grpc_need(request.uri().path()).map_or(Required::Admin, by_need);
        }
        let Some(route) = request.extensions().get::<MatchedPath>() else {
            return Required::Admin;
        };
        match self.routes.need(request.method(), route.as_str()) {
            RouteNeed::Declared(need) => by_need(need),
            RouteNeed::OtherMethod => Required::AnyToken,
            RouteNeed::Undeclared => {
                tracing::error!(
                    route = route.as_str(),
                    "route declares no permission; refused to all but admins"
                );
                Required::Admin
            }
        }
    }

    /// Decides on a request: `Ok` with the caller and grant to attach
    /// (`None` for an open call), or the refusal.
    fn decide(
        &self,
        tokens: &Tokens,
        request: &mut Request,
    ) -> Result<Option<(Caller, Grant)>, Refusal> {
        let required = self.required(request);
        if required == Required::Nothing {
            return Ok(None);
        }
        let token = presented(request.headers())
            .or_else(|| {
                let token = request.extensions().get::<PresentedToken>()?;
                Some(token.0.as_str())
            })
            .ok_or(Refusal::Missing)?;
        let entry = tokens.find(token).ok_or(Refusal::Invalid)?;
        let allowed = match required {
            Required::Permission(permission) => entry.allows(permission),
            Required::Admin => entry.allows_everything(),
            Required::Nothing | Required::AnyToken => true,
        };
        if !allowed {
            tracing::debug!(token = %entry.name, path = request.uri().path(), "token lacks the permission");
            return Err(Refusal::Forbidden);
        }
        scope_namespace(&entry, required, request)?;
        Ok(Some((entry.caller(&self.worker_refusals), Grant(entry))))
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
        let refusal = match self.layer.decide(tokens, &mut request) {
            Ok(granted) => {
                if let Some((caller, grant)) = granted {
                    request.extensions_mut().insert(caller);
                    request.extensions_mut().insert(grant);
                }
                return Either::Left(self.inner.call(request));
            }
            Err(refusal) => refusal,
        };
        self.layer.failures[refusal as usize].inc();
        let mut response = refusal_response(refusal, is_grpc(request.headers()));
        response.extensions_mut().insert(refusal);
        Either::Right(Box::pin(async move { Ok(response) }))
    }
}

/// Keeps a token limited to some namespaces within them: a call that names
/// none works in the token's namespace when it has one; a call naming
/// another is refused, and so is managing namespaces. A name outside the
/// rule is left to the call's handler to refuse.
fn scope_namespace(
    entry: &TokenEntry,
    required: Required,
    request: &mut Request,
) -> Result<(), Refusal> {
    if entry.reaches_every_namespace() {
        return Ok(());
    }
    if required == Required::Permission(Permission::Namespaces) {
        return Err(Refusal::Namespace);
    }
    let named = match request.extensions().get::<NamedNamespace>() {
        Some(NamedNamespace(Ok(name))) => name.clone(),
        Some(NamedNamespace(Err(_))) => return Ok(()),
        None => match entry.own_namespace() {
            Some(own) => {
                let own = own.clone();
                request
                    .extensions_mut()
                    .insert(NamedNamespace(Ok(own.clone())));
                own
            }
            None => NamespaceName::default_namespace(),
        },
    };
    if entry.may_use(&named) {
        Ok(())
    } else {
        tracing::debug!(token = %entry.name, namespace = %named, "token may not use the namespace");
        Err(Refusal::Namespace)
    }
}

/// FastAPI's error answer: `status` and `{"detail": "<message>"}`.
fn detail(status: StatusCode, message: &'static str) -> Response {
    PyJson(status, serde_json::json!({ "detail": message })).into_response()
}

/// The answer to a refused call: gRPC status or HTTP error, with
/// `WWW-Authenticate: Bearer` when the token is missing or unknown.
fn refusal_response(refusal: Refusal, grpc: bool) -> Response {
    let unauthenticated = matches!(refusal, Refusal::Missing | Refusal::Invalid);
    let mut response = match (grpc, unauthenticated) {
        (true, true) => tonic::Status::unauthenticated("invalid or missing token").into_http(),
        (true, false) if refusal == Refusal::Namespace => {
            tonic::Status::permission_denied("the token may not use this namespace")
                .into_http::<Body>()
        }
        (true, false) => {
            tonic::Status::permission_denied("the token's roles do not allow this call")
                .into_http::<Body>()
        }
        // agent-lightning 1.x's server answers a bad key with this body.
        (false, true) => detail(StatusCode::UNAUTHORIZED, "Invalid or missing API key"),
        (false, false) if refusal == Refusal::Namespace => detail(
            StatusCode::FORBIDDEN,
            "The token may not use this namespace",
        ),
        (false, false) => detail(
            StatusCode::FORBIDDEN,
            "The token's roles do not allow this request",
        ),
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
