//! The web console: pages where people watch and debug training, served
//! by the binary on the API's port (`/` and under [`PREFIX`]), calling the
//! same [`Engine`] as the gRPC and HTTP adapters. On by default; `serve
//! --console false` leaves it out.
//!
//! # Shape
//! * Server-rendered HTML from askama templates (`crates/console/src/templates`,
//!   compiled in, every value escaped), charts drawn as SVG by templates
//!   from scales computed in [`charts`], and one small script and style
//!   sheet of our own ([`assets`], embedded with `include_str!`). No
//!   front-end build, no CDN, nothing read from disk.
//! * Every page is a plain URL holding its filters (a GET form), so that it
//!   can be bookmarked, shared and reloaded, and the back button works.
//! * Live updates ([`pages::live`]): the page's script opens its own URL as an
//!   event stream; one hub per namespace follows its engine's event
//!   subscription, re-renders each open page at most a few times a second,
//!   once for every tab that shows it, and pushes the new HTML.
//! * Namespaces ([`pages::state`]): the routes serve every namespace, whose
//!   prefix `/ns/{name}/` the namespace layer stripped before routing; each
//!   handler takes the console of the namespace its request names, and
//!   every link a page renders stays under that prefix ([`url::Links`]). A
//!   switcher lists the namespaces the viewer's token may read.
//! * Access ([`pages::session`]): the API's tokens and roles, checked by the same
//!   layer ([`lightning_store_adapters::auth`]) against what each route declares where it is
//!   registered ([`routes`], with [`lightning_store_adapters::http::routes::Routes`] as every
//!   HTTP route). A browser signs in once with its token, which it then
//!   holds in an HttpOnly, SameSite=Strict cookie that only the console's
//!   routes accept (their own layer presents it to the access layer);
//!   scripts never see it, no URL carries it. Actions (cancel a rollout; pause and resume the gateway;
//!   create and delete namespaces)
//!   are confirmed on a page of their own, posted with a form, checked
//!   for a same-origin request and a form token, and call the engine as
//!   the API does.
//! * A strict Content-Security-Policy on every answer: scripts, styles and
//!   images from this origin only, no inline script or style.

pub mod assets;
mod charts;
mod context;
mod format;
mod pages;
mod rendered;
mod sampler;
mod url;

use std::sync::Arc;

use axum::Router;
use axum::extract::Request;
use axum::middleware::{Next, from_fn, from_fn_with_state};
use axum::response::Response;
use http::{HeaderValue, header};

use self::pages::session;
use lightning_store_adapters::auth::AuthLayer;
use lightning_store_adapters::auth::policy::{Need, Permission};
use lightning_store_adapters::http::routes::Routes;

pub use self::context::ConsoleConfig;
pub use self::pages::state::ConsoleContext;
pub use self::url::PREFIX;

/// The Content-Security-Policy of every console answer: nothing from
/// another origin, no inline script or style, no framing.
const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
     style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; \
     base-uri 'none'; frame-ancestors 'none'";

/// Returns the console's routes, each with what it needs: its style
/// sheet, script and sign-in are open, every page needs `read`, cancelling
/// a rollout `rollouts`, pausing or resuming the gateway `gateway`, and
/// the Namespaces page with its create and delete `namespaces` (their
/// confirmation pages too, so that a token that may not act is told so
/// before it confirms).
pub fn routes() -> Routes<ConsoleContext> {
    use Permission::{Export, Gateway, Namespaces, Read, Rollouts};
    const OPEN: Need = Need::Nothing;
    Routes::new()
        .get("/", Read, pages::overview)
        .get("/console/rollouts", Read, pages::rollouts)
        .get("/console/rollouts/{rollout_id}", Read, pages::rollout)
        .get(
            "/console/rollouts/{rollout_id}/download",
            Read,
            pages::download,
        )
        .get(
            "/console/rollouts/{rollout_id}/cancel",
            Rollouts,
            pages::confirm_cancel,
        )
        .post(
            "/console/rollouts/{rollout_id}/cancel",
            Rollouts,
            pages::cancel,
        )
        .get("/console/export", Export, pages::export)
        .get("/console/workers", Read, pages::workers)
        .get("/console/resources", Read, pages::resources)
        .get("/console/training", Read, pages::training)
        .get("/console/models", Read, pages::models)
        .get("/console/search", Read, pages::search)
        .get("/console/gateway/pause", Gateway, pages::confirm_pause)
        .post("/console/gateway/pause", Gateway, pages::pause)
        .get("/console/gateway/resume", Gateway, pages::confirm_resume)
        .post("/console/gateway/resume", Gateway, pages::resume)
        .get("/console/namespaces", Namespaces, pages::namespaces)
        .post("/console/namespaces", Namespaces, pages::create_namespace)
        .get(
            "/console/namespaces/{name}/delete",
            Namespaces,
            pages::confirm_delete,
        )
        .post(
            "/console/namespaces/{name}/delete",
            Namespaces,
            pages::delete_namespace,
        )
        .get("/console/login", OPEN, session::login_page)
        .post("/console/login", OPEN, session::login)
        .post("/console/logout", OPEN, session::logout)
        .get("/console/assets/{name}", OPEN, assets::serve)
        .get("/console/{*rest}", Read, pages::not_found)
}

/// Returns the router that serves the console's `routes`: each request
/// checked by `auth` (the port's access layer, told of these routes'
/// declarations), the sign-in cookie presented to it on these routes
/// only, its refusals answered with console pages, the matched route
/// recorded for the call layer, and every answer carrying the console's
/// security headers. The console answers no other origin (no CORS).
pub fn router(routes: Routes<ConsoleContext>, context: ConsoleContext, auth: AuthLayer) -> Router {
    let needs = Arc::new(routes.needs().clone());
    routes
        .into_router()
        .route_layer(auth)
        .route_layer(from_fn(session::present_cookie))
        .route_layer(from_fn_with_state(needs, session::answer_refusals))
        .route_layer(from_fn(lightning_store_adapters::http::record_route))
        .layer(from_fn(security_headers))
        .with_state(context)
}

/// Adds the console's security headers to every answer; pages (all but
/// the assets, which say how to cache them) are never stored by caches.
async fn security_headers(request: Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers
        .entry(header::CACHE_CONTROL)
        .or_insert(HeaderValue::from_static("no-store"));
    response
}
