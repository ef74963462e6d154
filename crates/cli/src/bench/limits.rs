//! The bounds of a run: every scenario stops at an operation count or a
//! duration, whichever comes first, and every call has a deadline.

use std::time::Duration;

/// Deadline of every call of the benchmark, gRPC or HTTP, on top of any wait
/// the call asks for.
pub(crate) const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// Bounds of one run: whichever is reached first ends it. The driver runs
/// within them and the progress line shows how far along a run is.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Operations to issue in total across all tasks.
    pub count: u64,
    /// Time after which no new operation starts.
    pub duration: Duration,
}
