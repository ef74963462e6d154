//! Latency and count recording: one [`Recorder`] per client task (no
//! contention on the hot path), merged when the run ends; shared atomic
//! [`Counters`] feed the live progress line.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use hdrhistogram::Histogram;
use indexmap::IndexMap;

/// Smallest and largest recordable latency in nanoseconds (1 µs .. 10 min);
/// values outside are clamped.
const LOWEST_NS: u64 = 1_000;
const HIGHEST_NS: u64 = 600_000_000_000;

/// Returns an empty latency histogram in nanoseconds, 3 significant digits.
pub fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(LOWEST_NS, HIGHEST_NS, 3).expect("static histogram bounds are valid")
}

/// Counts shared by all tasks of a run, read by the progress line.
#[derive(Debug, Default)]
pub struct Counters {
    /// Completed operations.
    pub ops: AtomicU64,
    /// Failed operations.
    pub errors: AtomicU64,
}

/// Latencies and counts of one kind of call.
#[derive(Debug, Clone)]
pub struct Series {
    /// Latency of each successful call, in nanoseconds.
    pub latency: Histogram<u64>,
    /// Failed calls.
    pub errors: u64,
}

impl Series {
    fn new() -> Self {
        Self {
            latency: histogram(),
            errors: 0,
        }
    }

    fn merge(&mut self, other: &Series) {
        self.latency
            .add(&other.latency)
            .expect("histograms with the same bounds add");
        self.errors += other.errors;
    }
}

/// What one client task (or a whole run, after merging) measured.
#[derive(Debug, Clone)]
pub struct Recorder {
    /// Completed operations (for example lifecycles or requests).
    pub ops: u64,
    /// Items the operations carried (for example spans); zero when not counted.
    pub items: u64,
    /// Latency per iteration and failed iterations.
    pub total: Series,
    /// Latency and failures per RPC, in first-call order.
    pub calls: IndexMap<&'static str, Series>,
    /// The first error seen, for the report.
    pub first_error: Option<String>,
    counters: Arc<Counters>,
}

impl Recorder {
    /// Returns an empty recorder that also counts into `counters`.
    pub fn new(counters: Arc<Counters>) -> Self {
        Self {
            ops: 0,
            items: 0,
            total: Series::new(),
            calls: IndexMap::new(),
            first_error: None,
            counters,
        }
    }

    /// Records a successful iteration of `ops` operations carrying `items` items.
    pub fn success(&mut self, latency: Duration, ops: u64, items: u64) {
        self.ops += ops;
        self.items += items;
        self.total.latency.saturating_record(nanos(latency));
        self.counters.ops.fetch_add(ops, Ordering::Relaxed);
    }

    /// Records a failed iteration.
    pub fn failure(&mut self, error: String) {
        self.total.errors += 1;
        self.first_error.get_or_insert(error);
        self.counters.errors.fetch_add(1, Ordering::Relaxed);
    }

    /// Records one RPC of an iteration: its latency on success, a failure otherwise.
    pub fn call<T>(
        &mut self,
        name: &'static str,
        latency: Duration,
        result: &Result<T, tonic::Status>,
    ) {
        let series = self.calls.entry(name).or_insert_with(Series::new);
        match result {
            Ok(_) => series.latency.saturating_record(nanos(latency)),
            Err(_) => series.errors += 1,
        }
    }

    /// Adds what `other` recorded to this recorder (the shared counters are not touched).
    pub fn merge(&mut self, other: &Recorder) {
        self.ops += other.ops;
        self.items += other.items;
        self.total.merge(&other.total);
        for (name, series) in &other.calls {
            self.calls
                .entry(name)
                .or_insert_with(Series::new)
                .merge(series);
        }
        if self.first_error.is_none() {
            self.first_error.clone_from(&other.first_error);
        }
    }
}

/// Returns a duration in whole nanoseconds, saturated to `u64`.
pub fn nanos(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX)
}

/// Returns a gRPC status as `CODE: message`, for example `NOT_FOUND: rollout … not found`.
pub fn status_text(status: &tonic::Status) -> String {
    format!("{:?}: {}", status.code(), status.message())
}
