//! The search box: any rollout, attempt, worker, resources or trace id
//! leads to its page (several matches are listed; none says so, with the
//! rollouts whose id contains the text).

use askama::Template;

use axum::response::Response;
use http::{StatusCode, Uri};

use super::layout::{Layout, Nav, failed};
use super::session::see_other;
use super::state::NamespaceConsole;
use super::viewer::Viewer;
use crate::rendered::render_error;
use crate::url::{PREFIX, query_get, query_pairs, query_value};
use lightning_store_core::error::StoreResult;
use lightning_store_core::ids;
use lightning_store_core::overview::Found;

/// What an id names.
struct Match {
    what: String,
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
pub async fn search(console: NamespaceConsole, viewer: Viewer, uri: Uri) -> Response {
    let links = &console.sources.links;
    let pairs = query_pairs(uri.query().unwrap_or(""));
    let Some(text) = query_get(&pairs, "q") else {
        return see_other(&links.to(&format!("{PREFIX}/rollouts")));
    };
    let matches = if ids::validate_id("id", text).is_err() {
        // Not an id at all (control characters, too long): nothing has it.
        Vec::new()
    } else {
        match find(&console, text).await {
            Ok(matches) => matches,
            Err(error) => return failed(&error.into(), &viewer),
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
        contains: links.to(&format!("{PREFIX}/rollouts?q={}", query_value(text))),
        matches,
    };
    match page.render() {
        Ok(main) => Layout::page("Search", &main, Nav::None, &viewer)
            .searched(text)
            .answer(status),
        Err(error) => failed(&render_error(error), &viewer),
    }
}

/// Returns what `text` names exactly (the engine's [`Engine::find_id`]).
///
/// [`Engine::find_id`]: lightning_store_core::engine::Engine::find_id
async fn find(console: &NamespaceConsole, text: &str) -> StoreResult<Vec<Match>> {
    let found = console.sources.engine.find_id(text).await?;
    let links = &console.sources.links;
    Ok(found
        .into_iter()
        .map(|found| match found {
            Found::Rollout(rollout_id) => Match {
                what: "rollout".to_owned(),
                href: links.rollout(&rollout_id),
            },
            Found::Attempt {
                rollout_id,
                attempt_id,
            } => Match {
                what: format!("attempt of rollout {rollout_id}"),
                href: format!(
                    "{}#attempt-{}",
                    links.rollout(&rollout_id),
                    hex::encode(&attempt_id)
                ),
            },
            Found::Worker(worker_id) => Match {
                what: "worker".to_owned(),
                href: links.to(&format!("{PREFIX}/workers?q={}", query_value(&worker_id))),
            },
            Found::Resources(resources_id) => Match {
                what: "resources version".to_owned(),
                href: links.to(&format!(
                    "{PREFIX}/resources?a={}",
                    query_value(&resources_id)
                )),
            },
            Found::Trace {
                rollout_id,
                attempt_id,
            } => Match {
                what: format!("trace of attempt {attempt_id} of rollout {rollout_id}"),
                href: format!(
                    "{}#spans-{}",
                    links.rollout(&rollout_id),
                    hex::encode(&attempt_id)
                ),
            },
        })
        .collect())
}
