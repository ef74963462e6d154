//! The live progress line: one line on stderr rewritten with `\r` while a
//! run is going, only when stderr is a terminal.

use std::io::{IsTerminal, Write};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use super::limits::Limits;
use super::stats::Counters;

/// How often the line is redrawn.
const REFRESH: Duration = Duration::from_millis(250);

/// Returns whether progress should be drawn: stderr is a terminal.
pub fn enabled() -> bool {
    std::io::stderr().is_terminal()
}

/// A progress line being drawn by a background task.
pub struct Progress {
    stop: oneshot::Sender<()>,
    task: JoinHandle<()>,
}

impl Progress {
    /// Starts redrawing `label` with the counts in `counters`.
    pub fn start(label: &str, counters: Arc<Counters>, limits: Limits) -> Self {
        let (stop, mut stopped) = oneshot::channel();
        let label = label.to_owned();
        let task = tokio::spawn(async move {
            let started = Instant::now();
            let mut ticker = tokio::time::interval(REFRESH);
            loop {
                tokio::select! {
                    _ = ticker.tick() => {}
                    _ = &mut stopped => break,
                }
                let elapsed = started.elapsed().as_secs_f64();
                let ops = counters.ops.load(Ordering::Relaxed);
                let errors = counters.errors.load(Ordering::Relaxed);
                let rate = if elapsed > 0.0 {
                    ops as f64 / elapsed
                } else {
                    0.0
                };
                let mut stderr = std::io::stderr().lock();
                let _ = write!(
                    stderr,
                    "\r\x1b[2K{label}: {ops}/{} ops, {rate:.0}/s, {errors} errors, {elapsed:.1}/{:.0}s",
                    limits.count,
                    limits.duration.as_secs_f64()
                );
                let _ = stderr.flush();
            }
            let mut stderr = std::io::stderr().lock();
            let _ = write!(stderr, "\r\x1b[2K");
            let _ = stderr.flush();
        });
        Self { stop, task }
    }

    /// Stops drawing and clears the line.
    pub async fn finish(self) {
        let _ = self.stop.send(());
        let _ = self.task.await;
    }
}
