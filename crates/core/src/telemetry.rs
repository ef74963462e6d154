//! What the engine reports about its own work, for metrics. The engine calls
//! an [`Observer`] as things happen; the server's Prometheus metrics
//! implement it, and [`NoObserver`] ignores everything.

use std::fmt;
use std::time::Duration;

use super::model::AttemptStatus;

/// A phase of a backend transaction, timed separately.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BackendPhase {
    /// Opening a transaction (waiting for the lock or a connection).
    Begin,
    /// Committing it (for durable backends, until it is on disk).
    Commit,
}

impl BackendPhase {
    /// Returns the phase's lowercase name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Begin => "begin",
            Self::Commit => "commit",
        }
    }
}

/// Receives the engine's reports. Every method has an empty default, and
/// each is called after the work it reports is done (committed, for writes).
pub trait Observer: Send + Sync + 'static {
    /// A span write committed: `stored` new spans, `duplicates` skipped as
    /// already stored, `rejected` skipped for an unknown rollout or attempt.
    fn spans_written(&self, _stored: usize, _duplicates: usize, _rejected: usize) {}

    /// An attempt expired: the watchdog found it `timeout` or
    /// `unresponsive`, or its worker's session did not come back in time.
    fn attempt_expired(&self, _status: AttemptStatus) {}

    /// A backend call of `phase` took `elapsed`; `ok` is false when it failed.
    fn backend_call(&self, _phase: BackendPhase, _elapsed: Duration, _ok: bool) {}

    /// The number of open worker sessions changed to `open`.
    fn worker_sessions(&self, _open: usize) {}

    /// An agent-lightning 1.x event of `event_type` was recorded.
    fn agl1_event(&self, _event_type: &str) {}

    /// A PATCH moved an agent-lightning 1.x rollout to `state`.
    fn agl1_transition(&self, _state: &'static str) {}

    /// A 1.x rollout GET was answered, from the detail cache when `cached`
    /// (memory, SQLite) or else by a read of the store.
    fn agl1_rollout_read(&self, _cached: bool) {}
}

impl fmt::Debug for dyn Observer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Observer")
    }
}

/// An observer that ignores every report.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoObserver;

impl Observer for NoObserver {}
