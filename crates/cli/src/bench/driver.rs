//! Runs closed-loop client tasks: each task issues its next operation as
//! soon as the previous one returns, until the run's shared budget (an
//! operation count and a deadline) is spent.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::task::JoinSet;

use super::error::{BenchError, BenchResult};
use super::limits::Limits;
use super::progress::Progress;
use super::stats::{Counters, Recorder};

/// The operations left to issue, shared by the tasks of a run.
#[derive(Debug)]
pub struct Budget {
    count: u64,
    issued: AtomicU64,
    deadline: Instant,
}

impl Budget {
    /// Returns a budget of `limits.count` operations ending `limits.duration` from now.
    pub fn new(limits: Limits) -> Self {
        Self {
            count: limits.count,
            issued: AtomicU64::new(0),
            deadline: Instant::now() + limits.duration,
        }
    }

    /// Takes up to `n` operations; returns how many were granted (zero when
    /// the budget is spent or the deadline has passed).
    pub fn take(&self, n: u64) -> u64 {
        if Instant::now() >= self.deadline {
            return 0;
        }
        let mut issued = self.issued.load(Ordering::Relaxed);
        loop {
            let granted = n.min(self.count.saturating_sub(issued));
            if granted == 0 {
                return 0;
            }
            match self.issued.compare_exchange_weak(
                issued,
                issued + granted,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return granted,
                Err(current) => issued = current,
            }
        }
    }

    /// Spends what is left of the budget: the tasks stop after their
    /// current operation (a load that runs as long as another's does).
    pub fn exhaust(&self) {
        self.issued.store(u64::MAX, Ordering::Relaxed);
    }
}

/// What a run measured: the merged recorders and the wall time.
#[derive(Debug)]
pub struct Measured {
    /// Everything the tasks recorded.
    pub recorder: Recorder,
    /// Time from the start of the run until its last task finished.
    pub elapsed: Duration,
}

impl Measured {
    /// Adds a later run's records and wall time to this one's, as if they
    /// were one run (the gateway bench's slices).
    pub fn append(&mut self, later: &Measured) {
        self.recorder.merge(&later.recorder);
        self.elapsed += later.elapsed;
    }
}

/// What a client task receives: its index, the shared budget and its recorder.
pub struct TaskContext {
    /// Index of the task within the run, from zero.
    pub index: usize,
    /// The run's shared budget.
    pub budget: Arc<Budget>,
    /// The task's own recorder, handed back when the task ends.
    pub recorder: Recorder,
}

/// Runs `tasks` client tasks built by `task` under `limits`, with a live
/// progress line labelled `label`, and merges what they recorded.
pub async fn run_tasks<F, Fut>(
    label: &str,
    tasks: usize,
    limits: Limits,
    progress: bool,
    task: F,
) -> BenchResult<Measured>
where
    F: Fn(TaskContext) -> Fut,
    Fut: Future<Output = Recorder> + Send + 'static,
{
    let budget = Arc::new(Budget::new(limits));
    run_tasks_within(label, tasks, limits, budget, progress, task).await
}

/// Runs `tasks` client tasks as [`run_tasks`] does, within `budget` (made
/// of `limits`), which the caller may [`Budget::exhaust`] to end the run.
pub async fn run_tasks_within<F, Fut>(
    label: &str,
    tasks: usize,
    limits: Limits,
    budget: Arc<Budget>,
    progress: bool,
    task: F,
) -> BenchResult<Measured>
where
    F: Fn(TaskContext) -> Fut,
    Fut: Future<Output = Recorder> + Send + 'static,
{
    let counters = Arc::new(Counters::default());
    let progress = progress.then(|| Progress::start(label, counters.clone(), limits));
    let started = Instant::now();
    let mut set = JoinSet::new();
    for index in 0..tasks {
        set.spawn(task(TaskContext {
            index,
            budget: budget.clone(),
            recorder: Recorder::new(counters.clone()),
        }));
    }
    let mut merged = Recorder::new(counters);
    while let Some(joined) = set.join_next().await {
        let recorder = joined.map_err(|e| BenchError::new(format!("a client task failed: {e}")))?;
        merged.merge(&recorder);
    }
    let elapsed = started.elapsed();
    if let Some(progress) = progress {
        progress.finish().await;
    }
    Ok(Measured {
        recorder: merged,
        elapsed,
    })
}

/// Awaits one RPC, records its latency under `name` and returns its result.
pub async fn timed<T>(
    recorder: &mut Recorder,
    name: &'static str,
    call: impl Future<Output = Result<tonic::Response<T>, tonic::Status>>,
) -> Result<T, tonic::Status> {
    let start = Instant::now();
    let result = call.await.map(tonic::Response::into_inner);
    recorder.call(name, start.elapsed(), &result);
    result
}
