//! The registration of HTTP routes: each route states the permission it
//! needs where it is registered, one line per method and path,
//!
//! ```ignore
//! Routes::new()
//!     .get("/v1/agl/rollouts", Permission::Read, rollouts::query)
//!     .post("/v1/agl/rollouts", Permission::Rollouts, rollouts::start_rollout)
//!     .get("/v1/agl/health", Need::Nothing, workers::health)
//! ```
//!
//! and the access layer checks each request against the declarations
//! ([`RouteNeeds`]). [`Routes`] is the only way a route joins the port (a
//! test fails on a route registered around it), so a route cannot be
//! served without a declared permission. The API's groups share
//! [`HttpState`]; a group with a state of its own (the console) declares
//! its routes the same way, and the server hands the access layer the
//! declarations of both.

use axum::Router;
use axum::handler::Handler;
use axum::routing::{MethodFilter, on};
use http::Method;

use super::context::HttpState;
use crate::auth::policy::{Need, RouteNeeds};

/// HTTP routes with what each needs, their handlers sharing a state `S`.
pub struct Routes<S = HttpState> {
    router: Router<S>,
    needs: RouteNeeds,
}

impl<S: Clone + Send + Sync + 'static> Default for Routes<S> {
    fn default() -> Self {
        Self {
            router: Router::new(),
            needs: RouteNeeds::default(),
        }
    }
}

impl<S: Clone + Send + Sync + 'static> Routes<S> {
    /// Returns no routes.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `GET path`, needing `need`.
    pub fn get<H, T>(self, path: &str, need: impl Into<Need>, handler: H) -> Self
    where
        H: Handler<T, S>,
        T: 'static,
    {
        self.on(Method::GET, path, need.into(), handler)
    }

    /// Adds `POST path`, needing `need`.
    pub fn post<H, T>(self, path: &str, need: impl Into<Need>, handler: H) -> Self
    where
        H: Handler<T, S>,
        T: 'static,
    {
        self.on(Method::POST, path, need.into(), handler)
    }

    /// Adds `PATCH path`, needing `need`.
    pub fn patch<H, T>(self, path: &str, need: impl Into<Need>, handler: H) -> Self
    where
        H: Handler<T, S>,
        T: 'static,
    {
        self.on(Method::PATCH, path, need.into(), handler)
    }

    /// Adds `DELETE path`, needing `need`.
    pub fn delete<H, T>(self, path: &str, need: impl Into<Need>, handler: H) -> Self
    where
        H: Handler<T, S>,
        T: 'static,
    {
        self.on(Method::DELETE, path, need.into(), handler)
    }

    fn on<H, T>(mut self, method: Method, path: &str, need: Need, handler: H) -> Self
    where
        H: Handler<T, S>,
        T: 'static,
    {
        let filter = MethodFilter::try_from(method.clone()).expect("a method axum routes");
        self.needs.declare(method, path, need);
        self.router = self.router.route(path, on(filter, handler));
        self
    }

    /// Adds the routes of `other`.
    pub fn merge(mut self, other: Routes<S>) -> Self {
        self.needs.extend(other.needs);
        self.router = self.router.merge(other.router);
        self
    }

    /// Returns what the routes declared they need.
    pub fn needs(&self) -> &RouteNeeds {
        &self.needs
    }

    /// Returns the routes' router.
    pub fn into_router(self) -> Router<S> {
        self.router
    }
}
