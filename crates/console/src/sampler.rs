//! The queue's depth over the last hour, for the Overview's chart. The
//! store keeps no record of when a rollout left the queue, so the depth of
//! past minutes cannot be read back: this server samples it (one counts
//! read every [`SAMPLE_EVERY`]) and keeps the last sample of each of the
//! last 60 minutes. A server that started less than an hour ago shows the
//! minutes since.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

use lightning_store_core::engine::Engine;
use lightning_store_core::model::Timestamp;

/// How often the depth is sampled.
pub const SAMPLE_EVERY: Duration = Duration::from_secs(10);

/// Minutes kept.
const MINUTES: usize = 60;

const MINUTE: i64 = 60_000_000_000;

/// The queue's depth at the end of each sampled minute.
#[derive(Debug, Default)]
pub struct QueueDepth {
    /// (minute start, depth), oldest first.
    minutes: Mutex<VecDeque<(Timestamp, u64)>>,
}

impl QueueDepth {
    /// Records a sample taken at `time`.
    fn record(&self, time: Timestamp, depth: u64) {
        let minute = Timestamp(time.0.div_euclid(MINUTE) * MINUTE);
        let mut minutes = self.minutes.lock();
        match minutes.back_mut() {
            Some((last, value)) if *last == minute => *value = depth,
            _ => minutes.push_back((minute, depth)),
        }
        while minutes.len() > MINUTES {
            minutes.pop_front();
        }
    }

    /// Returns the depth of each of the 60 minutes whose starts are
    /// `starts` (0 for a minute without a sample).
    pub fn at(&self, starts: &[Timestamp]) -> Vec<u64> {
        let minutes = self.minutes.lock();
        starts
            .iter()
            .map(|start| {
                minutes
                    .iter()
                    .find(|(minute, _)| minute == start)
                    .map_or(0, |(_, depth)| *depth)
            })
            .collect()
    }

    /// Samples the depth every [`SAMPLE_EVERY`] until the engine closes.
    pub async fn run(self: Arc<Self>, engine: Arc<Engine>) {
        let mut closing = engine.closing();
        let mut ticker = tokio::time::interval(SAMPLE_EVERY);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = ticker.tick() => {}
                _ = closing.wait_for(|closed| *closed) => return,
            }
            match engine.statistics().await {
                Ok(statistics) => self.record(engine.now(), statistics.counts.queued),
                Err(error) => tracing::debug!(%error, "console: cannot sample the queue's depth"),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_minute_keeps_its_last_sample() {
        let depth = QueueDepth::default();
        depth.record(Timestamp(MINUTE + 5), 3);
        depth.record(Timestamp(MINUTE + 50), 7);
        depth.record(Timestamp(3 * MINUTE), 1);
        let starts: Vec<Timestamp> = (1..=3).map(|m| Timestamp(m * MINUTE)).collect();
        assert_eq!(depth.at(&starts), [7, 0, 1]);
        for minute in 0..100 {
            depth.record(Timestamp(minute * MINUTE), minute as u64);
        }
        assert_eq!(depth.minutes.lock().len(), MINUTES);
    }
}
