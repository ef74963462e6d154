//! Who looks at the console and what they may do, by the API's tokens and
//! roles.
//!
//! A browser cannot put a header on a link, a form or an event stream, so
//! the console signs a browser in once: its login form posts the token,
//! which the server checks and sets as an HttpOnly, SameSite=Strict
//! cookie for the session (scripts cannot read it, other sites cannot make
//! the browser send it). On the console's routes only, [`present_cookie`]
//! hands that cookie's token to [`lightning_store_adapters::auth`], which takes it as it takes
//! `Authorization: Bearer` (which scripted clients of the console may send
//! instead) and checks it against what the route declared, as for every
//! call: a page needs `read`, cancelling `rollouts`, pausing `gateway`. The token is never in a URL, a page or a
//! log line. Every form post must come from the console itself: its
//! `Sec-Fetch-Site` (or `Origin`) says same-origin, and a form signed in by
//! cookie carries a form token derived from the cookie, which another site
//! cannot compute.

use std::borrow::Cow;
use std::sync::Arc;

use askama::Template;
use axum::extract::{MatchedPath, Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use subtle::ConstantTimeEq;

use super::layout::{Layout, error_page};
use super::state::ConsoleContext;
use super::viewer::{COOKIE, cookie_token, form_token};
use crate::url::{Links, query_get, query_pairs};
use lightning_store_adapters::auth::policy::{Need, Permission, Role, RouteNeed, RouteNeeds};
use lightning_store_adapters::auth::{PresentedToken, Refusal};
use lightning_store_adapters::http::extract::read_body;
use lightning_store_adapters::namespace_layer::NamedNamespace;

/// The form field that carries the form token.
pub const FORM_TOKEN: &str = "form_token";

/// Largest login or action form accepted.
const MAX_FORM_BYTES: usize = 16 * 1024;

/// Presents the token of the console's cookie to the access layer, which
/// takes it when the request carries none in its headers. Only the
/// console's routes have this layer: the API never takes the cookie, so
/// that no other page can make a browser call the API with it.
pub async fn present_cookie(mut request: Request, next: Next) -> Response {
    if let Some(token) = cookie_token(request.headers()) {
        request.extensions_mut().insert(PresentedToken(token));
    }
    next.run(request).await
}

/// Answers a request the access layer refused with a console page
/// ([`refusal`]), by what its route declared in `needs`.
pub async fn answer_refusals(
    State(needs): State<Arc<RouteNeeds>>,
    request: Request,
    next: Next,
) -> Response {
    let method = request.method().clone();
    let uri = request.uri().clone();
    let links = match NamedNamespace::of(request.extensions()) {
        Ok(namespace) => Links::of(&namespace),
        Err(_) => Links::default(),
    };
    let route = request.extensions().get::<MatchedPath>().cloned();
    let response = next.run(request).await;
    let Some(&refused) = response.extensions().get::<Refusal>() else {
        return response;
    };
    let permission = route.and_then(|route| match needs.need(&method, route.as_str()) {
        RouteNeed::Declared(Need::Permission(permission)) => Some(permission),
        _ => None,
    });
    refusal(refused, &method, permission, &links, &uri)
}

/// A form posted to the console.
pub struct Form {
    pairs: Vec<(String, String)>,
}

impl Form {
    /// Reads a posted form, refusing it (403) unless it comes from the
    /// console itself: `Sec-Fetch-Site: same-origin` (or, from a browser
    /// without it, an `Origin` of this host), and, when the browser signed
    /// in by cookie, the form token. Clients without a browser's headers
    /// (scripts sending their bearer token) pass.
    pub async fn read(request: Request) -> Result<Self, Response> {
        Self::read_checked(request, true).await
    }

    /// Reads a posted form as [`Form::read`], but without the form token:
    /// for the sign-in form, which a browser holding a revoked token's
    /// cookie must still be able to post.
    async fn read_unsigned(request: Request) -> Result<Self, Response> {
        Self::read_checked(request, false).await
    }

    async fn read_checked(request: Request, signed: bool) -> Result<Self, Response> {
        let (parts, body) = request.into_parts();
        if !same_origin(&parts.headers) {
            return Err(refused("this form did not come from the console"));
        }
        let bytes = read_body(body, MAX_FORM_BYTES)
            .await
            .map_err(IntoResponse::into_response)?;
        let form = Form {
            pairs: form_urlencoded::parse(&bytes).into_owned().collect(),
        };
        if !signed || bearer_presented(&parts.headers) {
            return Ok(form);
        }
        if let Some(token) = cookie_token(&parts.headers) {
            let expected = form_token(&token);
            let given = form.get(FORM_TOKEN).unwrap_or("");
            if !bool::from(expected.as_bytes().ct_eq(given.as_bytes())) {
                return Err(refused("this form is out of date: reload the page"));
            }
        }
        Ok(form)
    }

    /// Returns a field's value.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.pairs
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    }
}

fn refused(reason: &str) -> Response {
    error_page(StatusCode::FORBIDDEN, "Not allowed", reason)
}

/// Returns whether a request comes from a page of this origin (or from a
/// client that is not a browser: neither header).
fn same_origin(headers: &HeaderMap) -> bool {
    if let Some(site) = headers.get("sec-fetch-site") {
        return site == "same-origin" || site == "none";
    }
    match (headers.get(header::ORIGIN), headers.get(header::HOST)) {
        (Some(origin), Some(host)) => {
            let origin = origin.to_str().unwrap_or("");
            let host = host.to_str().unwrap_or("");
            origin
                .split_once("://")
                .is_some_and(|(_, authority)| authority == host)
        }
        (Some(_), None) => false,
        (None, _) => true,
    }
}

fn bearer_presented(headers: &HeaderMap) -> bool {
    headers.contains_key(header::AUTHORIZATION) || headers.contains_key("x-api-key")
}

/// Returns a path of this console to go to after signing in (`/` unless
/// `next` is a local path).
fn local_path(next: Option<&str>) -> &str {
    match next {
        Some(path) if path.starts_with('/') && !path.starts_with("//") && !path.contains('\\') => {
            path
        }
        _ => "/",
    }
}

#[derive(Template)]
#[template(path = "login.html")]
struct LoginPage<'a> {
    next: &'a str,
    message: Option<&'a str>,
}

/// The sign-in page: a form for the token (to the Overview when the port
/// has no tokens).
pub async fn login_page(State(context): State<ConsoleContext>, uri: http::Uri) -> Response {
    let pairs = query_pairs(uri.query().unwrap_or(""));
    let next = local_path(query_get(&pairs, "next"));
    if context.config().tokens.is_none() {
        return see_other(next);
    }
    let message = query_get(&pairs, "expired")
        .is_some()
        .then_some("The server no longer accepts the token this browser held: sign in again.");
    login_answer(StatusCode::OK, next, message)
}

fn login_answer(status: StatusCode, next: &str, message: Option<&str>) -> Response {
    let main = LoginPage { next, message }
        .render()
        .unwrap_or_else(|error| error.to_string());
    Layout::plain("Sign in", &main).answer(status)
}

/// Checks a posted token and, when the server accepts it and it may read,
/// sets it as the session's cookie and goes on to the page asked for.
pub async fn login(State(context): State<ConsoleContext>, request: Request) -> Response {
    let form = match Form::read_unsigned(request).await {
        Ok(form) => form,
        Err(response) => return response,
    };
    let next = local_path(form.get("next")).to_owned();
    let Some(tokens) = &context.config().tokens else {
        return see_other(&next);
    };
    let token = form.get("token").unwrap_or("").trim();
    let Some(entry) = tokens.find(token) else {
        tracing::info!("console sign-in refused: unknown token");
        return login_answer(
            StatusCode::UNAUTHORIZED,
            &next,
            Some("The server does not know this token."),
        );
    };
    if !entry.allows(Permission::Read) {
        tracing::info!(token = %entry.name, "console sign-in refused: the token may not read");
        return login_answer(
            StatusCode::FORBIDDEN,
            &next,
            Some(
                "This token may not read the store: sign in with a token of the read, runner, algorithm or admin role.",
            ),
        );
    }
    tracing::info!(token = %entry.name, "console sign-in");
    let mut response = see_other(&next);
    let cookie = format!(
        "{COOKIE}={}; Path=/; HttpOnly; SameSite=Strict{}",
        hex::encode(token),
        if context.config().tls { "; Secure" } else { "" }
    );
    if let Ok(value) = HeaderValue::from_str(&cookie) {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    response
}

/// Forgets the browser's token and shows the sign-in page.
pub async fn logout(request: Request) -> Response {
    if let Err(response) = Form::read(request).await {
        return response;
    }
    let mut response = see_other("/console/login");
    response.headers_mut().insert(
        header::SET_COOKIE,
        HeaderValue::from_static(
            "lightning_store_token=; Path=/; Max-Age=0; HttpOnly; SameSite=Strict",
        ),
    );
    response
}

/// Answers "see the page at `path`" (303).
pub fn see_other(path: &str) -> Response {
    let mut response = StatusCode::SEE_OTHER.into_response();
    if let Ok(location) = HeaderValue::from_str(path) {
        response.headers_mut().insert(header::LOCATION, location);
    }
    response
}

/// Returns the page that answers a refused console request: a page asked
/// for without a (valid) token goes to the sign-in page, then back to the
/// page (`request_uri`, under the `links` of the namespace it named);
/// anything else is told why in the console's words: the namespace the
/// token may not use, or the roles that grant the `permission` the route
/// needs (`None`: admins only).
fn refusal(
    refusal: Refusal,
    method: &Method,
    permission: Option<Permission>,
    links: &Links,
    request_uri: &http::Uri,
) -> Response {
    let unauthenticated = matches!(refusal, Refusal::Missing | Refusal::Invalid);
    if unauthenticated {
        if method == Method::GET {
            let next = links.to(request_uri.path_and_query().map_or("/", |p| p.as_str()));
            let mut target = format!(
                "/console/login?next={}",
                form_urlencoded::byte_serialize(next.as_bytes()).collect::<String>()
            );
            if refusal == Refusal::Invalid {
                target.push_str("&expired=1");
            }
            return see_other(&target);
        }
        return error_page(
            StatusCode::UNAUTHORIZED,
            "Sign in",
            "This browser is not signed in to the console (or its token was revoked): reload the page to sign in.",
        );
    }
    if refusal == Refusal::Namespace {
        let reason = if permission == Some(Permission::Namespaces) {
            "The token this browser signed in with is limited to some namespaces: managing namespaces takes an admin token of every namespace."
        } else {
            "The token this browser signed in with may not use this namespace."
        };
        return error_page(StatusCode::FORBIDDEN, "Not allowed", reason);
    }
    let (what, who): (&str, Cow<'_, str>) = match permission {
        Some(permission) => (describe(permission), roles_granting(permission).into()),
        None => ("this", "an admin token".into()),
    };
    error_page(
        StatusCode::FORBIDDEN,
        "Not allowed",
        &format!("The token this browser signed in with does not allow {what}; {who} does."),
    )
}

/// Says what a permission lets one do, in the console's words.
fn describe(permission: Permission) -> &'static str {
    match permission {
        Permission::Read => "reading rollouts, spans, workers and resources",
        Permission::Rollouts => "cancelling rollouts",
        Permission::Gateway => "pausing and resuming the LLM gateway",
        Permission::Resources => "publishing resources",
        Permission::Work => "running rollouts",
        Permission::Ingest => "exporting traces",
        Permission::Namespaces => "managing namespaces",
        Permission::Export => "exporting rollouts",
    }
}

/// Names the roles that grant a permission: `a token of the algorithm or
/// admin role`.
fn roles_granting(permission: Permission) -> String {
    let names: Vec<String> = Role::granting(permission)
        .iter()
        .map(Role::to_string)
        .collect();
    let listed = match names.split_last() {
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => "no".to_owned(),
    };
    format!("a token of the {listed} role")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cookie_round_trips_any_token() {
        let token = "tok;en =,\"x\"é";
        let mut headers = HeaderMap::new();
        headers.insert(
            header::COOKIE,
            HeaderValue::from_str(&format!("other=1; {COOKIE}={}", hex::encode(token))).unwrap(),
        );
        assert_eq!(cookie_token(&headers).as_deref(), Some(token));
        assert_ne!(form_token(token), form_token("other"));
        assert_eq!(form_token(token).len(), 32);
    }

    #[test]
    fn only_this_origin_may_post() {
        let headers = |pairs: &[(&'static str, &'static str)]| {
            let mut headers = HeaderMap::new();
            for (name, value) in pairs {
                headers.insert(*name, HeaderValue::from_static(value));
            }
            headers
        };
        assert!(same_origin(&headers(&[("sec-fetch-site", "same-origin")])));
        assert!(!same_origin(&headers(&[("sec-fetch-site", "cross-site")])));
        assert!(!same_origin(&headers(&[("sec-fetch-site", "same-site")])));
        assert!(same_origin(&headers(&[
            ("origin", "http://127.0.0.1:4747"),
            ("host", "127.0.0.1:4747")
        ])));
        assert!(!same_origin(&headers(&[
            ("origin", "http://evil.example"),
            ("host", "127.0.0.1:4747")
        ])));
        assert!(same_origin(&headers(&[])), "not a browser");
        assert_eq!(local_path(Some("//evil.example")), "/");
        assert_eq!(
            local_path(Some("/console/rollouts?x=1")),
            "/console/rollouts?x=1"
        );
        assert_eq!(
            roles_granting(Permission::Gateway),
            "a token of the admin or algorithm role"
        );
    }
}
