//! The layout every page shares (its head, navigation, namespace
//! switcher, search box and sign-out form around a main region), and the
//! pages and panels that say what went wrong.

use askama::Template;
use axum::response::{IntoResponse, Response};
use http::StatusCode;

use super::viewer::Viewer;
use crate::assets;
use crate::rendered::PageError;
use crate::url::Links;

/// The page a link of the navigation names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Nav {
    Overview,
    Rollouts,
    Training,
    Workers,
    Resources,
    Models,
    /// The namespaces (deployment-wide), for a viewer who may manage them.
    Namespaces,
    /// A page outside the navigation.
    None,
}

const LINKS: [(Nav, &str, &str); 6] = [
    (Nav::Overview, "Overview", "/"),
    (Nav::Rollouts, "Rollouts", "/console/rollouts"),
    (Nav::Training, "Training", "/console/training"),
    (Nav::Workers, "Workers", "/console/workers"),
    (Nav::Resources, "Resources", "/console/resources"),
    (Nav::Models, "Models", "/console/models"),
];

/// The link to the Namespaces page, shown to a viewer who may manage them.
const NAMESPACES_LINK: (Nav, &str, &str) = (Nav::Namespaces, "Namespaces", "/console/namespaces");

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
    /// What precedes the namespace's console paths.
    base: &'a str,
    /// The navigation: (page, label, link).
    links: Vec<(Nav, &'static str, String)>,
    current: Nav,
    /// The namespace shown.
    namespace: &'a str,
    /// The namespaces the viewer may read: (name, link to its same page).
    switcher: Vec<(&'a str, String)>,
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
        let links = self
            .viewer
            .map(|viewer| viewer.links.clone())
            .unwrap_or_default();
        let same_page = LINKS
            .iter()
            .chain([&NAMESPACES_LINK])
            .find(|(nav, _, _)| *nav == self.nav)
            .map_or("/", |(_, _, path)| path);
        let switcher = self.viewer.map_or_else(Vec::new, |viewer| {
            viewer
                .readable
                .iter()
                .map(|name| (name.as_str(), Links::of(name).to(same_page)))
                .collect()
        });
        let page = LayoutPage {
            title: self.title,
            fixed: self.fixed,
            main: self.main,
            css: assets::url("console.css"),
            js: assets::url("console.js"),
            icon: assets::url("icon.svg"),
            navigation: self.viewer.is_some(),
            base: links.base(),
            links: LINKS
                .iter()
                .chain(
                    self.viewer
                        .filter(|viewer| viewer.actions.namespaces)
                        .map(|_| &NAMESPACES_LINK),
                )
                .map(|(nav, label, path)| (*nav, *label, links.to(path)))
                .collect(),
            current: self.nav,
            namespace: self.viewer.map_or("", |viewer| viewer.namespace.as_str()),
            switcher,
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
    /// What precedes the console paths of the namespace the page is in.
    base: &'a str,
    title: &'a str,
    message: &'a str,
}

/// Returns a page that says what went wrong, with `status`.
pub fn error_page(status: StatusCode, title: &str, message: &str) -> Response {
    let main = Message {
        base: "",
        title,
        message,
    }
    .render()
    .unwrap_or_else(|_| message.to_owned());
    Layout::plain(title, &main).answer(status)
}

/// Returns the main region that stands for a page of the namespace whose
/// console `links` are that failed to render.
pub fn error_panel(error: &PageError, links: &Links) -> String {
    let (title, message) = describe(error);
    Message {
        base: links.base(),
        title,
        message: &message,
    }
    .render()
    .unwrap_or(message)
}

pub fn describe(error: &PageError) -> (&'static str, String) {
    match error {
        PageError::NotFound(message) => ("Not found", message.clone()),
        PageError::Invalid(message) => ("Cannot show this page", message.clone()),
        PageError::Store(error) => (
            "The store did not answer",
            format!("{error}. The page updates again once the store answers."),
        ),
    }
}

pub fn status_of(error: &PageError) -> StatusCode {
    match error {
        PageError::NotFound(_) => StatusCode::NOT_FOUND,
        PageError::Invalid(_) => StatusCode::BAD_REQUEST,
        PageError::Store(_) => StatusCode::SERVICE_UNAVAILABLE,
    }
}

/// Answers a page that failed to render.
pub fn failed(error: &PageError, viewer: &Viewer) -> Response {
    let (title, _) = describe(error);
    Layout::page(title, &error_panel(error, &viewer.links), Nav::None, viewer)
        .answer(status_of(error))
}
