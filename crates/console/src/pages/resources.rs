//! The Resources page: the resources versions (what training publishes:
//! prompts, model endpoints, weights' locations), one shown whole, and the
//! difference between two, line by line.

use askama::Template;
use similar::{ChangeTag, TextDiff};

use crate::context::Sources;
use crate::format::{self, ShownTime};
use crate::rendered::render_error;
use crate::rendered::{PageError, Rendered};
use crate::url::{PREFIX, query_get, query_pairs, query_value};
use lightning_store_core::error::StoreResult;
use lightning_store_core::ids::ResourcesId;
use lightning_store_core::model::ResourcesUpdate;
use lightning_store_core::query::Page;

/// Versions listed.
const LISTED: usize = 50;

/// What the Resources page shows, as its URL says.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct ResourcesQuery {
    /// The version shown (default: the latest).
    pub a: Option<ResourcesId>,
    /// The version it is compared with.
    pub b: Option<ResourcesId>,
}

impl ResourcesQuery {
    /// Parses the page's query string, its ids by the core's rule.
    pub fn parse(query: &str) -> StoreResult<Self> {
        let pairs = query_pairs(query);
        let id = |name| {
            query_get(&pairs, name)
                .map(|id| ResourcesId::parse(name, id))
                .transpose()
        };
        Ok(Self {
            a: id("a")?,
            b: id("b")?,
        })
    }
}

struct Row {
    /// The order of publication: 1 for the first resources published.
    published: usize,
    resources_id: String,
    /// The revision: 1 when published, one more at each change in place
    /// (agent-lightning's `version`).
    version: i64,
    created: ShownTime,
    updated: ShownTime,
    names: String,
    show: String,
    compare: Option<String>,
    shown: bool,
}

/// One line of a difference.
struct Line {
    /// `add`, `del` or `same`.
    class: &'static str,
    sign: &'static str,
    text: String,
}

struct Shown {
    resources_id: String,
    version: i64,
    json: String,
}

#[derive(Template)]
#[template(path = "resources.html")]
struct ResourcesPage {
    rows: Vec<Row>,
    total: String,
    shown: Option<Shown>,
    compared: Option<Shown>,
    diff: Vec<Line>,
    changes: usize,
}

/// Renders the Resources page.
pub async fn render(sources: &Sources, query: &ResourcesQuery) -> Result<Rendered, PageError> {
    let engine = &sources.engine;
    let page = Page {
        sort_by: Some("create_time".to_owned()),
        descending: true,
        limit: Some(LISTED),
        offset: 0,
    };
    let read = engine
        .resources_page(&page, query.a.as_ref(), query.b.as_ref())
        .await?;
    let (listed, a, b) = (read.listed, read.shown, read.compared);
    let shown_id = a.as_ref().map(|a| a.resources_id.clone());
    let rows = listed
        .items
        .iter()
        .enumerate()
        .map(|(index, update)| Row {
            published: listed.total - index,
            resources_id: update.resources_id.clone(),
            version: update.version,
            created: format::time(update.create_time),
            updated: format::time(update.update_time),
            names: names(update),
            show: sources.links.to(&format!(
                "{PREFIX}/resources?a={}",
                query_value(&update.resources_id)
            )),
            compare: shown_id
                .as_ref()
                .filter(|shown| **shown != update.resources_id)
                .map(|shown| {
                    format!(
                        "{}{PREFIX}/resources?a={}&b={}",
                        sources.links.base(),
                        query_value(shown),
                        query_value(&update.resources_id)
                    )
                }),
            shown: shown_id.as_ref() == Some(&update.resources_id),
        })
        .collect();
    let (diff, changes) = match (&a, &b) {
        (Some(a), Some(b)) => difference(&b.resources, &a.resources),
        _ => (Vec::new(), 0),
    };
    let html = ResourcesPage {
        rows,
        total: format::count(listed.total as u64),
        shown: a.as_ref().map(shown),
        compared: b.as_ref().map(shown),
        diff,
        changes,
    }
    .render()
    .map_err(render_error)?;
    Ok(Rendered {
        title: "Resources".to_owned(),
        html,
        ..Rendered::default()
    })
}

fn shown(update: &ResourcesUpdate) -> Shown {
    Shown {
        resources_id: update.resources_id.clone(),
        version: update.version,
        json: pretty(&update.resources),
    }
}

fn pretty(value: &serde_json::Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_default()
}

/// The resource names of a version.
fn names(update: &ResourcesUpdate) -> String {
    match update.resources.as_object() {
        Some(object) => object.keys().cloned().collect::<Vec<_>>().join(", "),
        None => String::new(),
    }
}

/// Returns the lines from `old` to `new` (pretty JSON), with the number of
/// changed lines.
fn difference(old: &serde_json::Value, new: &serde_json::Value) -> (Vec<Line>, usize) {
    let (old, new) = (pretty(old), pretty(new));
    let diff = TextDiff::from_lines(&old, &new);
    let mut changes = 0;
    let lines = diff
        .iter_all_changes()
        .map(|change| {
            let (class, sign) = match change.tag() {
                ChangeTag::Insert => ("add", "+"),
                ChangeTag::Delete => ("del", "-"),
                ChangeTag::Equal => ("same", " "),
            };
            if change.tag() != ChangeTag::Equal {
                changes += 1;
            }
            Line {
                class,
                sign,
                text: format::cut(change.value().trim_end_matches('\n').to_owned()),
            }
        })
        .collect();
    (lines, changes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn differences_are_line_by_line() {
        let (lines, changes) = difference(
            &json!({"prompt": "a", "llm": {"model": "m1"}}),
            &json!({"prompt": "a", "llm": {"model": "m2"}}),
        );
        assert_eq!(changes, 2);
        let changed: Vec<(&str, &str)> = lines
            .iter()
            .filter(|l| l.class != "same")
            .map(|l| (l.sign, l.text.trim()))
            .collect();
        assert_eq!(
            changed,
            [("-", "\"model\": \"m1\""), ("+", "\"model\": \"m2\"")]
        );
    }
}
