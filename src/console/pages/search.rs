//! The search box: any rollout, attempt, worker, resources or trace id
//! leads to its page (several matches are listed; none says so, with the
//! rollouts whose id contains the text).

use askama::Template;
use axum::extract::State;
use axum::response::Response;
use http::{StatusCode, Uri};

use super::super::ConsoleContext;
use super::super::session::{Viewer, see_other};
use super::{Layout, Nav, query_get, query_pairs, query_value, rollout_url};
use crate::core::error::{StoreError, StoreResult};

/// What an id names.
struct Match {
    what: &'static str,
    href: String,
}

#[derive(Template)]
#[template(path = "search.html")]
struct SearchPage<'a> {
    text: &'a str,
    matches: Vec<Match>,
    contains: String,
}

/// Answers the search box.
pub async fn search(State(context): State<ConsoleContext>, viewer: Viewer, uri: Uri) -> Response {
    let pairs = query_pairs(uri.query().unwrap_or(""));
    let Some(text) = query_get(&pairs, "q") else {
        return see_other("/console/rollouts");
    };
    let matches = match find(&context, text).await {
        Ok(matches) => matches,
        Err(error) => {
            return super::failed(&error.into(), &viewer);
        }
    };
    if let [only] = matches.as_slice() {
        return see_other(&only.href);
    }
    let status = if matches.is_empty() {
        StatusCode::NOT_FOUND
    } else {
        StatusCode::OK
    };
    let page = SearchPage {
        text,
        contains: format!("/console/rollouts?q={}", query_value(text)),
        matches,
    };
    match page.render() {
        Ok(main) => Layout::page("Search", &main, Nav::None, &viewer)
            .searched(text)
            .answer(status),
        Err(error) => super::failed(&super::overview::render_error(error), &viewer),
    }
}

/// Returns what `text` names exactly.
async fn find(context: &ConsoleContext, text: &str) -> StoreResult<Vec<Match>> {
    let engine = &context.sources().engine;
    let mut matches = Vec::new();
    if found(engine.get_rollout(text).await)? {
        matches.push(Match {
            what: "rollout",
            href: rollout_url(text),
        });
    }
    if found(engine.get_resources(text).await)? {
        matches.push(Match {
            what: "resources",
            href: format!("/console/resources?a={}", query_value(text)),
        });
    }
    if found(engine.get_worker(text).await)? {
        matches.push(Match {
            what: "worker",
            href: format!("/console/workers?q={}", query_value(text)),
        });
    }
    Ok(matches)
}

/// Turns "not found" into `false`.
fn found<T>(result: StoreResult<T>) -> StoreResult<bool> {
    match result {
        Ok(_) => Ok(true),
        Err(StoreError::NotFound(_)) => Ok(false),
        Err(error) => Err(error),
    }
}
