//! The Workers page: every worker the store knows, with its status, its
//! session (which server holds it, its slots on this server and the
//! attempts it owns), its current attempt and its last heartbeat.

use askama::Template;

use crate::context::Sources;
use crate::format::{self, ShownTime};
use crate::rendered::render_error;
use crate::rendered::{PageError, Rendered};
use crate::url::{Links, PREFIX, query_get, query_pairs, query_value};
use lightning_store_core::model::{SessionState, Worker, WorkerSession, WorkerStatus};
use lightning_store_core::query::{Page, WorkerFilter};

/// Workers on one page.
const PER_PAGE: usize = 100;

/// What the Workers page shows, as its URL says.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct WorkersQuery {
    /// A part of the worker id.
    pub id_contains: Option<String>,
    /// The page, from 1.
    pub page: usize,
}

impl WorkersQuery {
    /// Parses the page's query string (a bad page number is the first page).
    pub fn parse(query: &str) -> Self {
        let pairs = query_pairs(query);
        Self {
            id_contains: query_get(&pairs, "q").map(str::to_owned),
            page: query_get(&pairs, "page")
                .and_then(|page| page.parse().ok())
                .filter(|page| *page >= 1)
                .unwrap_or(1),
        }
    }

    fn url(&self, links: &Links, page: usize) -> String {
        let mut url = links.to(&format!("{PREFIX}/workers?page={page}"));
        if let Some(q) = &self.id_contains {
            url.push_str(&format!("&q={}", query_value(q)));
        }
        url
    }
}

struct Row {
    /// A stable element id for the row's heartbeat stats.
    key: String,
    worker_id: String,
    status: &'static str,
    class: &'static str,
    session: String,
    slots: String,
    owned: usize,
    current: Option<(String, String)>,
    heartbeat: Option<ShownTime>,
    dequeue: Option<ShownTime>,
    stats: String,
}

#[derive(Template)]
#[template(path = "workers_filters.html")]
struct Filters<'a> {
    base: &'a str,
    query: &'a WorkersQuery,
}

#[derive(Template)]
#[template(path = "workers.html")]
struct WorkersPage {
    rows: Vec<Row>,
    total: String,
    previous: Option<String>,
    next: Option<String>,
}

/// Renders the Workers page from one engine read.
pub async fn render(sources: &Sources, query: &WorkersQuery) -> Result<Rendered, PageError> {
    let engine = &sources.engine;
    let links = &sources.links;
    let filter = WorkerFilter {
        worker_id_contains: query.id_contains.clone(),
        ..WorkerFilter::default()
    };
    let page = Page {
        sort_by: Some("worker_id".to_owned()),
        descending: false,
        limit: Some(PER_PAGE),
        offset: (query.page - 1) * PER_PAGE,
    };
    let read = engine.workers_page(&filter, &page).await?;
    let (found, sessions) = (read.workers, read.sessions);
    let here = sources.dispatcher.snapshot();
    let rows = found
        .items
        .iter()
        .map(|worker| {
            let session = sessions.iter().find(|s| s.worker_id == worker.worker_id);
            let slots = here
                .iter()
                .find(|s| s.worker_id == worker.worker_id)
                .map(|s| (s.held.len(), s.slots));
            row(worker, session, slots, links)
        })
        .collect();
    let shown = page.offset + found.items.len();
    let html = WorkersPage {
        rows,
        total: format::count(found.total as u64),
        previous: (query.page > 1).then(|| query.url(links, query.page - 1)),
        next: (shown < found.total).then(|| query.url(links, query.page + 1)),
    }
    .render()
    .map_err(render_error)?;
    Ok(Rendered {
        title: "Workers".to_owned(),
        fixed: Filters {
            base: links.base(),
            query,
        }
        .render()
        .map_err(render_error)?,
        html,
        waiting: false,
    })
}

fn row(
    worker: &Worker,
    session: Option<&WorkerSession>,
    slots: Option<(usize, usize)>,
    links: &Links,
) -> Row {
    let class = match worker.status {
        WorkerStatus::Busy => "run",
        WorkerStatus::Idle => "ok",
        WorkerStatus::Unknown => "muted",
        WorkerStatus::Lost => "bad",
    };
    Row {
        key: format!("stats-{}", hex::encode(&worker.worker_id)),
        worker_id: worker.worker_id.clone(),
        status: worker.status.as_str(),
        class,
        session: session.map_or_else(
            || "none (polls with dequeue)".to_owned(),
            |s| match s.state {
                SessionState::Open => format!("open on {} (epoch {})", s.server_id, s.epoch),
                SessionState::Dropped => {
                    format!("dropped by {}, waiting for the worker", s.server_id)
                }
                SessionState::Closed => "closed".to_owned(),
            },
        ),
        slots: slots.map_or_else(String::new, |(used, total)| {
            format!("{used} of {total} in use")
        }),
        owned: session.map_or(0, |s| s.attempts.len()),
        current: worker.current_rollout_id.as_ref().map(|rollout_id| {
            (
                links.rollout(rollout_id),
                format!(
                    "{rollout_id} / {}",
                    worker.current_attempt_id.as_deref().unwrap_or("?")
                ),
            )
        }),
        heartbeat: worker.last_heartbeat_time.map(format::time),
        dequeue: worker.last_dequeue_time.map(format::time),
        stats: if worker.heartbeat_stats.is_null() {
            String::new()
        } else {
            format::json(&worker.heartbeat_stats)
        },
    }
}
