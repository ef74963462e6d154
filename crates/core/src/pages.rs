//! What the console's pages show, each page's data read by one engine
//! method in one transaction (`Engine::overview_page`,
//! `Engine::rollout_page` and the others, in `engine::pages`), so that
//! a page is one snapshot of the store. Every list a read returns has a
//! limit its caller chose (at most [`MAX_ROWS`]) and says how many there
//! were; a page renders from the value alone. The rules a page shows are
//! applied by the read: what may be cancelled
//! ([`crate::lifecycle::may_cancel`]) and why a rollout waits
//! ([`crate::waiting::why_waiting`]); facts a caller once read from an
//! error (a rollout whose spans the retention deleted, a rollout that is
//! not an agent-lightning 1.x one) are fields.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use super::agl1::diagnosis::Diagnosis;
use super::agl1::{Agl1Event, Agl1RolloutDetail, ModelServer, Pause, Replica};
use super::error::{StoreError, StoreResult};
use super::events::EventPage;
use super::model::{
    Attempt, Counts, ResourcesUpdate, Rollout, RolloutView, Span, Timestamp, Worker, WorkerSession,
    WorkerStatus,
};
use super::overview::{Failure, MinuteCounts, QueuePlace, QueuedRollout};
use super::query::{Page, Paged};
use super::waiting::WaitReason;

/// The longest list a page read returns.
pub const MAX_ROWS: usize = 10_000;

/// Checks a page read's limit: present, and at most [`MAX_ROWS`].
pub fn check_limit(name: &str, limit: Option<usize>) -> StoreResult<usize> {
    match limit {
        Some(limit) if limit <= MAX_ROWS => Ok(limit),
        Some(_) => Err(StoreError::invalid(format!(
            "{name} must be at most {MAX_ROWS}"
        ))),
        None => Err(StoreError::invalid(format!("{name} must have a limit"))),
    }
}

/// Checks a page read's window: a limit of at most [`MAX_ROWS`].
pub fn check_page(name: &str, page: &Page) -> StoreResult<()> {
    check_limit(name, page.limit).map(drop)
}

/// How much the Overview reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OverviewLimits {
    /// The latest failures (at most [`crate::overview::MAX_FAILURES`]).
    pub failures: usize,
    /// The latest events, for the rate of spans.
    pub events: usize,
    /// Workers whose sessions are counted.
    pub workers: usize,
}

/// What the Overview shows, read in one transaction.
#[derive(Debug, Clone, PartialEq)]
pub struct OverviewPage {
    /// Counts of the whole store (rollouts by status, the queue, spans).
    pub counts: Counts,
    /// The rollout at the queue's head, and how long it has waited.
    pub oldest_queued: Option<QueuedRollout>,
    /// Rollouts created and finished per minute over the last hour.
    pub minutes: Vec<MinuteCounts>,
    /// The latest events (at most the limit), oldest first.
    pub recent_events: EventPage,
    /// Workers per status, every status present (zero included).
    pub workers_by_status: BTreeMap<WorkerStatus, u64>,
    /// Workers the store knows.
    pub workers_total: u64,
    /// Open worker sessions among the first [`OverviewPage::sessions_of`]
    /// workers.
    pub open_sessions: usize,
    /// Workers whose sessions were counted: all of them unless there are
    /// more than the limit.
    pub sessions_of: usize,
    /// The latest failed rollouts, the latest first.
    pub failures: Vec<Failure>,
    /// The present of the read.
    pub now: Timestamp,
}

/// What the Rollouts page shows.
#[derive(Debug, Clone, PartialEq)]
pub struct RolloutsPage {
    pub rollouts: Paged<RolloutView>,
    /// Final rewards of the page's rollouts that have one, by rollout id.
    pub rewards: HashMap<String, f64>,
    pub now: Timestamp,
}

/// How much a rollout's page reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RolloutLimits {
    /// Attempts listed (the first ones).
    pub attempts: usize,
    /// Spans listed, of every attempt.
    pub spans: usize,
    /// 1.x events listed (the first ones; the diagnosis reads them all).
    pub events: usize,
    /// Workers read to say why a waiting rollout waits.
    pub workers: usize,
}

/// What a rollout's page shows, read in one transaction.
#[derive(Debug, Clone, PartialEq)]
pub struct RolloutPage {
    /// The rollout with its latest attempt.
    pub view: RolloutView,
    /// Its first attempts (the limit), with how many it has.
    pub attempts: Paged<Attempt>,
    /// Its first spans of every attempt (the limit), with how many it has;
    /// none when the retention deleted them.
    pub spans: Paged<Arc<Span>>,
    /// The span retention deleted the rollout's spans.
    pub spans_evicted: bool,
    /// Its agent-lightning 1.x part; `None` for a rollout of the 0.x API.
    pub agl1: Option<Agl1Part>,
    /// Why it waits; `None` when it does not (not queuing or requeuing).
    pub waiting: Option<Waiting>,
    /// It may be cancelled ([`crate::lifecycle::may_cancel`]).
    pub cancellable: bool,
    /// The present of the read.
    pub now: Timestamp,
}

/// An agent-lightning 1.x rollout's part of its page.
#[derive(Debug, Clone, PartialEq)]
pub struct Agl1Part {
    pub detail: Agl1RolloutDetail,
    /// The first events of its event attempt (the limit), in append order.
    pub events: Vec<Agl1Event>,
    /// How many events its event attempt has.
    pub events_total: usize,
    /// Why it gives the trainer rows or not, from all its events.
    pub diagnosis: Diagnosis,
}

/// Why a rollout waits.
#[derive(Debug, Clone, PartialEq)]
pub struct Waiting {
    /// Its place in the queue; `None` when it is not in the queue.
    pub place: Option<QueuePlace>,
    /// The reasons, most telling first ([`crate::waiting::why_waiting`]).
    pub reasons: Vec<WaitReason>,
}

/// What the Workers page shows.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkersPage {
    pub workers: Paged<Worker>,
    /// The session records of the listed workers that have one, in worker
    /// id order.
    pub sessions: Vec<WorkerSession>,
}

/// What the Resources page shows.
#[derive(Debug, Clone, PartialEq)]
pub struct ResourcesPage {
    pub listed: Paged<ResourcesUpdate>,
    /// The snapshot shown: the one asked for, else the latest.
    pub shown: Option<ResourcesUpdate>,
    /// The snapshot it is compared with, when one is asked for.
    pub compared: Option<ResourcesUpdate>,
}

/// What the Models page shows (of the store; the gateway's own state is
/// this server's).
#[derive(Debug, Clone, PartialEq)]
pub struct ModelsPage {
    /// The first registered model servers (the limit), in registration order.
    pub servers: Vec<ModelServer>,
    pub servers_total: usize,
    /// The first servers' gateway presences (the limit), in server id order.
    pub replicas: Vec<Replica>,
    pub replicas_total: usize,
    pub pause: Pause,
}

/// Everything stored of a rollout, for its JSON download: complete, not
/// bounded (a download is asked for one rollout at a time).
#[derive(Debug, Clone, PartialEq)]
pub struct RolloutDownload {
    pub view: RolloutView,
    pub attempts: Vec<Attempt>,
    pub spans: Vec<Arc<Span>>,
    /// The span retention deleted the rollout's spans.
    pub spans_evicted: bool,
    /// Its 1.x events; `None` for a rollout of the 0.x API.
    pub agl1_events: Option<Vec<Agl1Event>>,
    /// Its 1.x error message, if any.
    pub agl1_error_message: Option<String>,
}

/// What cancelling a rollout did.
#[derive(Debug, Clone, PartialEq)]
pub enum Cancelled {
    /// The rollout is cancelled now.
    Done(Box<Rollout>),
    /// The rollout had already finished, with this status: nothing changed.
    AlreadyFinished(super::model::RolloutStatus),
}
