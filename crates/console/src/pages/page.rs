//! What every live page's handler receives ([`LivePage`]: the namespace's
//! console, the viewer, the request's headers and URL) and how it answers:
//! its event stream when the browser asks for one, else the whole page.

use axum::extract::FromRequestParts;
use axum::response::Response;
use http::request::Parts;
use http::{HeaderMap, StatusCode, Uri};

use super::layout::{Layout, Nav, failed};
use super::live;
use super::state::{ConsoleContext, NamespaceConsole};
use super::view::{View, ViewKey};
use super::viewer::Viewer;
use crate::rendered::PageError;

/// A request for a live page, extracted once for every page's handler.
pub struct LivePage {
    context: ConsoleContext,
    console: NamespaceConsole,
    viewer: Viewer,
    headers: HeaderMap,
    uri: Uri,
}

impl FromRequestParts<ConsoleContext> for LivePage {
    type Rejection = Response;

    async fn from_request_parts(
        parts: &mut Parts,
        context: &ConsoleContext,
    ) -> Result<Self, Self::Rejection> {
        let console = NamespaceConsole::from_request_parts(parts, context).await?;
        let Ok(viewer) = Viewer::from_request_parts(parts, context).await;
        Ok(Self {
            context: context.clone(),
            console,
            viewer,
            headers: parts.headers.clone(),
            uri: parts.uri.clone(),
        })
    }
}

impl LivePage {
    /// The request's query string.
    pub fn query(&self) -> &str {
        self.uri.query().unwrap_or("")
    }

    /// Answers `view`, under `nav` in the navigation: its event stream when
    /// the browser asks for one, else the whole page, marked with the event
    /// position it reflects.
    pub async fn show(self, view: View, nav: Nav) -> Response {
        let Self {
            context,
            console,
            viewer,
            headers,
            uri,
        } = self;
        if live::wants_stream(&headers) {
            let key = ViewKey {
                view,
                actions: viewer.actions,
            };
            let position = live::position(&headers, &uri);
            return live::stream(&console.hub, context.config(), key, position);
        }
        // Read before the page: a change committed meanwhile reaches it live.
        let seq = match console.sources.engine.events_after(0, 0).await {
            Ok(page) => page.latest,
            Err(error) => return failed(&PageError::from(error), &viewer),
        };
        match view.render(&console.sources, viewer.actions).await {
            Ok(rendered) => Layout::page(&rendered.title, &rendered.html, nav, &viewer)
                .fixed(&rendered.fixed)
                .live(seq)
                .answer(StatusCode::OK),
            Err(error) => failed(&error, &viewer),
        }
    }

    /// Answers the error page of a request the page cannot show.
    pub fn refuse(&self, error: PageError) -> Response {
        failed(&error, &self.viewer)
    }
}
