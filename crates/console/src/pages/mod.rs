//! The console's pages: the handlers, the layout every page shares, and the
//! error pages. Each live page is a [`View`] rendered by its module; a
//! request for it answers the whole page, or its event stream when the
//! browser asks for one ([`live`]).

pub mod actions;
pub mod conversation;
pub mod download;
pub mod live;
pub mod models;
pub mod overview;
pub mod resources;
pub mod rollout;
pub mod rollouts;
pub mod search;
pub mod session;
pub mod view;
pub mod workers;

use askama::Template;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use http::{HeaderMap, StatusCode, Uri};

use self::session::Viewer;
use self::view::{View, ViewKey};
use super::rendered::PageError;
use super::{ConsoleContext, assets};
use lightning_store_core::ids::RolloutId;

pub use self::actions::{cancel, confirm_cancel, confirm_pause, confirm_resume, pause, resume};
pub use self::download::download;
pub use self::search::search;

/// The page a link of the navigation names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Nav {
    Overview,
    Rollouts,
    Workers,
    Resources,
    Models,
    /// A page outside the navigation.
    None,
}

const LINKS: [(Nav, &str, &str); 5] = [
    (Nav::Overview, "Overview", "/"),
    (Nav::Rollouts, "Rollouts", "/console/rollouts"),
    (Nav::Workers, "Workers", "/console/workers"),
    (Nav::Resources, "Resources", "/console/resources"),
    (Nav::Models, "Models", "/console/models"),
];

#[derive(Template)]
#[template(path = "layout.html")]
struct LayoutPage<'a> {
    title: &'a str,
    fixed: &'a str,
    main: &'a str,
    css: String,
    js: String,
    icon: String,
    navigation: bool,
    links: &'a [(Nav, &'static str, &'static str)],
    current: Nav,
    search: &'a str,
    token_name: Option<&'a str>,
    form_token: Option<&'a str>,
    live: Option<u64>,
}

/// A whole page: the layout around a main region.
pub struct Layout<'a> {
    title: &'a str,
    fixed: &'a str,
    main: &'a str,
    nav: Nav,
    viewer: Option<&'a Viewer>,
    live: Option<u64>,
    search: &'a str,
}

impl<'a> Layout<'a> {
    /// A page without navigation (sign-in, errors).
    pub fn plain(title: &'a str, main: &'a str) -> Self {
        Self {
            title,
            fixed: "",
            main,
            nav: Nav::None,
            viewer: None,
            live: None,
            search: "",
        }
    }

    /// A page of the console for `viewer`.
    pub fn page(title: &'a str, main: &'a str, nav: Nav, viewer: &'a Viewer) -> Self {
        Self {
            viewer: Some(viewer),
            nav,
            ..Self::plain(title, main)
        }
    }

    /// Marks the page live, rendered at event position `seq`.
    pub fn live(self, seq: u64) -> Self {
        Self {
            live: Some(seq),
            ..self
        }
    }

    /// Puts the page's fixed part (heading, filters) above the main region.
    pub fn fixed(self, fixed: &'a str) -> Self {
        Self { fixed, ..self }
    }

    /// Fills the search box.
    pub fn searched(self, search: &'a str) -> Self {
        Self { search, ..self }
    }

    /// Answers with the page.
    pub fn answer(self, status: StatusCode) -> Response {
        let page = LayoutPage {
            title: self.title,
            fixed: self.fixed,
            main: self.main,
            css: assets::url("console.css"),
            js: assets::url("console.js"),
            icon: assets::url("icon.svg"),
            navigation: self.viewer.is_some(),
            links: &LINKS,
            current: self.nav,
            search: self.search,
            token_name: self.viewer.and_then(|v| v.token_name.as_deref()),
            form_token: self.viewer.and_then(|v| v.form_token.as_deref()),
            live: self.live,
        };
        match page.render() {
            Ok(html) => (
                status,
                [(http::header::CONTENT_TYPE, "text/html; charset=utf-8")],
                html,
            )
                .into_response(),
            Err(error) => {
                tracing::error!(%error, "console: a page did not render");
                StatusCode::INTERNAL_SERVER_ERROR.into_response()
            }
        }
    }
}

#[derive(Template)]
#[template(path = "message.html")]
struct Message<'a> {
    title: &'a str,
    message: &'a str,
}

/// Returns a page that says what went wrong, with `status`.
pub fn error_page(status: StatusCode, title: &str, message: &str) -> Response {
    let main = Message { title, message }
        .render()
        .unwrap_or_else(|_| message.to_owned());
    Layout::plain(title, &main).answer(status)
}

/// Returns the main region that stands for a page that failed to render.
pub fn error_panel(error: &PageError) -> String {
    let (title, message) = describe(error);
    Message {
        title,
        message: &message,
    }
    .render()
    .unwrap_or(message)
}

fn describe(error: &PageError) -> (&'static str, String) {
    match error {
        PageError::NotFound(message) => ("Not found", message.clone()),
        PageError::Invalid(message) => ("Cannot show this page", message.clone()),
        PageError::Store(error) => (
            "The store did not answer",
            format!("{error}. The page updates again once the store answers."),
        ),
    }
}

fn status_of(error: &PageError) -> StatusCode {
    match error {
        PageError::NotFound(_) => StatusCode::NOT_FOUND,
        PageError::Invalid(_) => StatusCode::BAD_REQUEST,
        PageError::Store(_) => StatusCode::SERVICE_UNAVAILABLE,
    }
}

/// Answers a live page: its event stream when the browser asks for one,
/// else the whole page, marked with the event position it reflects.
async fn show(
    context: &ConsoleContext,
    view: View,
    nav: Nav,
    viewer: &Viewer,
    headers: &HeaderMap,
    uri: &Uri,
) -> Response {
    if live::wants_stream(headers) {
        let key = ViewKey {
            view,
            actions: viewer.actions,
        };
        return live::stream(context, key, live::position(headers, uri));
    }
    // Read before the page: a change committed meanwhile reaches it live.
    let seq = match context.sources().engine.events_after(0, 0).await {
        Ok(page) => page.latest,
        Err(error) => return failed(&PageError::from(error), viewer),
    };
    match view.render(context.sources(), viewer.actions).await {
        Ok(rendered) => Layout::page(&rendered.title, &rendered.html, nav, viewer)
            .fixed(&rendered.fixed)
            .live(seq)
            .answer(StatusCode::OK),
        Err(error) => failed(&error, viewer),
    }
}

/// Answers a page that failed to render.
fn failed(error: &PageError, viewer: &Viewer) -> Response {
    let (title, _) = describe(error);
    Layout::page(title, &error_panel(error), Nav::None, viewer).answer(status_of(error))
}

/// The Overview.
pub async fn overview(
    State(context): State<ConsoleContext>,
    viewer: Viewer,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    show(
        &context,
        View::Overview,
        Nav::Overview,
        &viewer,
        &headers,
        &uri,
    )
    .await
}

/// The rollouts, filtered as the URL says.
pub async fn rollouts(
    State(context): State<ConsoleContext>,
    viewer: Viewer,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    match rollouts::RolloutsQuery::parse(uri.query().unwrap_or("")) {
        Ok(query) => {
            let view = View::Rollouts(query);
            show(&context, view, Nav::Rollouts, &viewer, &headers, &uri).await
        }
        Err(message) => failed(&PageError::Invalid(message), &viewer),
    }
}

/// One rollout.
pub async fn rollout(
    State(context): State<ConsoleContext>,
    Path(rollout_id): Path<String>,
    viewer: Viewer,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    let view = match RolloutId::parse("rollout_id", rollout_id) {
        Ok(rollout_id) => View::Rollout(rollout_id),
        Err(error) => return failed(&error.into(), &viewer),
    };
    show(&context, view, Nav::Rollouts, &viewer, &headers, &uri).await
}

/// The workers.
pub async fn workers(
    State(context): State<ConsoleContext>,
    viewer: Viewer,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    let view = View::Workers(workers::WorkersQuery::parse(uri.query().unwrap_or("")));
    show(&context, view, Nav::Workers, &viewer, &headers, &uri).await
}

/// The resources versions, and the difference between two.
pub async fn resources(
    State(context): State<ConsoleContext>,
    viewer: Viewer,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    let view = match resources::ResourcesQuery::parse(uri.query().unwrap_or("")) {
        Ok(query) => View::Resources(query),
        Err(error) => return failed(&error.into(), &viewer),
    };
    show(&context, view, Nav::Resources, &viewer, &headers, &uri).await
}

/// agent-lightning 1.x's model servers and the gateway.
pub async fn models(
    State(context): State<ConsoleContext>,
    viewer: Viewer,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    show(&context, View::Models, Nav::Models, &viewer, &headers, &uri).await
}

/// Any other path under the console's prefix.
pub async fn not_found(viewer: Viewer) -> Response {
    failed(
        &PageError::NotFound("The console has no such page.".to_owned()),
        &viewer,
    )
}

/// Returns the console's link to a rollout.
pub fn rollout_url(rollout_id: &str) -> String {
    format!("/console/rollouts/{}", path_segment(rollout_id))
}

/// Percent-encodes an id for a path segment (ids may hold any printable
/// character, `/` and `?` included).
pub fn path_segment(id: &str) -> String {
    const SEGMENT: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
        .remove(b'-')
        .remove(b'_')
        .remove(b'.')
        .remove(b'~');
    percent_encoding::utf8_percent_encode(id, SEGMENT).to_string()
}

/// Returns a query string's value for a URL (`&` and the like encoded).
pub fn query_value(value: &str) -> String {
    form_urlencoded::byte_serialize(value.as_bytes()).collect()
}

/// Returns a query string's pairs in order.
pub fn query_pairs(query: &str) -> Vec<(String, String)> {
    form_urlencoded::parse(query.as_bytes())
        .into_owned()
        .collect()
}

/// Returns the last value of a query parameter, blank values as none.
pub fn query_get<'a>(pairs: &'a [(String, String)], name: &str) -> Option<&'a str> {
    pairs
        .iter()
        .rev()
        .find(|(key, value)| key == name && !value.trim().is_empty())
        .map(|(_, value)| value.trim())
}
