//! The Overview: how the training run stands at a glance. Rollouts by
//! status; the queue (its depth and its oldest rollout's age); rollouts
//! finished per minute over the last hour; spans recorded per second;
//! workers and their sessions; agent-lightning 1.x's gateway; the latest
//! failures with their reason.

use std::collections::BTreeMap;

use askama::Template;

use super::models::GatewayBox;
use super::viewer::Actions;
use crate::charts::{self, Series};
use crate::context::Sources;
use crate::format::{self, ShownTime, status_class};
use crate::rendered::render_error;
use crate::rendered::{PageError, Rendered};
use crate::sampler::QueueDepth;
use crate::url::{Links, PREFIX};
use lightning_store_core::events::{Change, EventPage};
use lightning_store_core::model::{RolloutStatus, Timestamp, WorkerStatus};
use lightning_store_core::overview::Failure;
use lightning_store_core::pages::OverviewLimits;

/// Failures the Overview lists.
const FAILURES: usize = 10;

/// Events read to measure the span rate.
const RATE_EVENTS: usize = 2_048;

/// The window the span rate is measured over.
const RATE_WINDOW_SECONDS: f64 = 10.0;

/// Workers whose sessions the Overview counts.
pub const SESSION_WORKERS: usize = 1_000;

/// A status's count, with its share of all rollouts for the bar.
pub struct StatusCount {
    pub name: &'static str,
    pub class: &'static str,
    pub count: String,
    /// Share of all rollouts, 0..=100.
    pub share: f64,
    pub href: String,
}

/// The rollout at the queue's head.
struct OldestQueued {
    rollout_id: String,
    href: String,
    age: String,
    since: ShownTime,
}

struct FailureRow {
    href: String,
    rollout_id: String,
    ended: Option<ShownTime>,
    attempt: String,
    worker: String,
    reason: String,
}

#[derive(Template)]
#[template(path = "overview.html")]
struct OverviewPage {
    /// What precedes the namespace's console paths.
    base: String,
    total: String,
    statuses: Vec<StatusCount>,
    queued: String,
    oldest_queued: Option<OldestQueued>,
    finished: String,
    depth: DepthChart,
    spans_per_second: SpanRate,
    spans: String,
    workers: Vec<(&'static str, String)>,
    workers_total: String,
    open_sessions: usize,
    /// Says whose sessions were counted when not every worker's were.
    sessions_note: Option<String>,
    slots: (usize, usize),
    gateway: GatewayBox,
    failures: Vec<FailureRow>,
}

/// What the Overview reads at most.
pub const LIMITS: OverviewLimits = OverviewLimits {
    failures: FAILURES,
    events: RATE_EVENTS,
    workers: SESSION_WORKERS,
};

/// Renders the Overview from one engine read.
pub async fn render(sources: &Sources, actions: Actions) -> Result<Rendered, PageError> {
    let read = sources.engine.overview_page(LIMITS).await?;
    let counts = &read.counts;
    let links = &sources.links;
    let statuses = status_counts(&counts.rollouts_by_status, links);
    let oldest_queued = read.oldest_queued.clone().map(|queued| OldestQueued {
        href: sources.links.rollout(&queued.rollout_id),
        rollout_id: queued.rollout_id,
        age: format::duration(queued.age),
        since: format::time(queued.since),
    });
    let minutes = &read.minutes;
    let starts: Vec<_> = minutes.iter().map(|m| m.start).collect();
    let created = [Series {
        name: "created",
        class: "wait",
        values: minutes.iter().map(|m| m.created).collect(),
        summed: true,
    }];
    let ended = [
        Series {
            name: "succeeded",
            class: "ok",
            values: minutes.iter().map(|m| m.succeeded).collect(),
            summed: true,
        },
        Series {
            name: "failed",
            class: "bad",
            values: minutes.iter().map(|m| m.failed).collect(),
            summed: true,
        },
        Series {
            name: "cancelled",
            class: "muted",
            values: minutes.iter().map(|m| m.cancelled).collect(),
            summed: true,
        },
    ];
    let finished = charts::grouped(
        "Rollouts created (left bar) and finished (right bar) per minute over the last hour",
        &starts,
        &[&created, &ended],
    )
    .render()
    .map_err(render_error)?;
    let depth = DepthChart::new(&sources.queue_depth, &starts)?;
    let spans_per_second = span_rate(&read.recent_events, read.now);
    let here = sources.dispatcher.snapshot();
    let slots = (
        here.iter().map(|s| s.held.len()).sum(),
        here.iter().map(|s| s.slots).sum(),
    );
    let failures = read
        .failures
        .iter()
        .map(|failure| failure_row(failure, links))
        .collect();
    let gateway = GatewayBox::read(sources, actions).await?;
    let page = OverviewPage {
        base: links.base().to_owned(),
        total: format::count(counts.rollouts),
        statuses,
        queued: format::count(counts.queued),
        oldest_queued,
        finished,
        depth,
        spans_per_second,
        spans: format::count(counts.spans),
        workers: worker_counts(&read.workers_by_status),
        workers_total: format::count(read.workers_total),
        open_sessions: read.open_sessions,
        sessions_note: ((read.sessions_of as u64) < read.workers_total).then(|| {
            format!(
                "of the first {} workers",
                format::count(read.sessions_of as u64)
            )
        }),
        slots,
        gateway,
        failures,
    };
    Ok(Rendered {
        title: "Overview".to_owned(),
        html: page.render().map_err(render_error)?,
        ..Rendered::default()
    })
}

/// Returns every status with its count, in lifecycle order.
pub fn status_counts(by_status: &BTreeMap<RolloutStatus, u64>, links: &Links) -> Vec<StatusCount> {
    let total: u64 = by_status.values().sum();
    [
        RolloutStatus::Queuing,
        RolloutStatus::Requeuing,
        RolloutStatus::Preparing,
        RolloutStatus::Running,
        RolloutStatus::Succeeded,
        RolloutStatus::Failed,
        RolloutStatus::Cancelled,
    ]
    .into_iter()
    .map(|status| {
        let count = by_status.get(&status).copied().unwrap_or(0);
        StatusCount {
            name: status.as_str(),
            class: status_class(status),
            count: format::count(count),
            share: if total == 0 {
                0.0
            } else {
                count as f64 * 100.0 / total as f64
            },
            href: links.to(&format!("{PREFIX}/rollouts?status={}", status.as_str())),
        }
    })
    .collect()
}

/// The queue depth's chart over the minutes this server has sampled (at
/// most the last hour), so that a server started a minute ago draws one
/// minute, not an hour of zeros.
struct DepthChart {
    /// Minutes drawn.
    minutes: usize,
    /// The chart, once a sample was taken.
    chart: Option<String>,
}

impl DepthChart {
    fn new(depth: &QueueDepth, starts: &[Timestamp]) -> Result<Self, PageError> {
        let Some(first) = depth.first_minute() else {
            return Ok(Self {
                minutes: 0,
                chart: None,
            });
        };
        let sampled: Vec<Timestamp> = starts.iter().copied().filter(|s| *s >= first).collect();
        let chart = charts::stacked(
            "Rollouts waiting in the queue at the end of each minute this server sampled",
            &sampled,
            &[Series {
                name: "waiting",
                class: "wait",
                values: depth.at(&sampled),
                summed: false,
            }],
        )
        .render()
        .map_err(render_error)?;
        Ok(Self {
            minutes: sampled.len(),
            chart: Some(chart),
        })
    }
}

/// Spans recorded per second, and the window that was measured.
struct SpanRate {
    per_second: String,
    window: String,
}

/// Spans recorded per second over the last seconds, from the events'
/// history (on every server, whoever recorded them).
fn span_rate(page: &EventPage, now: Timestamp) -> SpanRate {
    let since = now.plus_seconds(-RATE_WINDOW_SECONDS);
    let mut spans = 0;
    for event in page.events.iter().filter(|event| event.time >= since) {
        if let Change::SpansAdded { count, .. } = event.change {
            spans += count;
        }
    }
    // A full page may not reach back over the whole window.
    let oldest = page.events.first().map(|event| event.time);
    let window = match oldest {
        Some(oldest) if page.events.len() == RATE_EVENTS && oldest > since => {
            format::between(oldest, now).as_secs_f64().max(0.001)
        }
        _ => RATE_WINDOW_SECONDS,
    };
    SpanRate {
        per_second: format::rate(spans as f64 / window),
        window: format::duration(std::time::Duration::from_secs_f64(window)),
    }
}

fn worker_counts(by_status: &BTreeMap<WorkerStatus, u64>) -> Vec<(&'static str, String)> {
    [
        WorkerStatus::Busy,
        WorkerStatus::Idle,
        WorkerStatus::Unknown,
        WorkerStatus::Lost,
    ]
    .into_iter()
    .map(|status| {
        let count = by_status.get(&status).copied().unwrap_or(0);
        (status.as_str(), format::count(count))
    })
    .collect()
}

fn failure_row(failure: &Failure, links: &Links) -> FailureRow {
    let rollout = &failure.rollout.rollout;
    let attempt = failure.rollout.attempt.as_ref();
    let reason = failure
        .agl1_error
        .clone()
        .or_else(|| {
            failure.error_span.as_ref().map(|span| {
                let description = span.status.description.as_deref().unwrap_or("error");
                format!("span {}: {description}", span.name)
            })
        })
        .or_else(|| attempt.map(|a| format!("attempt {}", a.status)))
        .unwrap_or_else(|| "failed before any attempt".to_owned());
    FailureRow {
        href: links.rollout(&rollout.rollout_id),
        rollout_id: rollout.rollout_id.clone(),
        ended: rollout.end_time.map(format::time),
        attempt: attempt.map_or_else(|| "none".to_owned(), |a| a.status.to_string()),
        worker: attempt
            .and_then(|a| a.worker_id.clone())
            .unwrap_or_default(),
        reason: format::cut(reason),
    }
}
