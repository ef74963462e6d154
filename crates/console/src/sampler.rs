//! The queue's depth over the last hour, for the Overview's chart. The
//! store keeps no record of when a rollout left the queue, so the depth of
//! past minutes cannot be read back: this server samples each open
//! namespace's queue on its own (one counts read every [`SAMPLE_EVERY`])
//! and keeps the last sample of each of the last 60 minutes. A server that
//! started (or opened the namespace) less than an hour ago shows the
//! minutes since.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

use lightning_store_adapters::namespaces::Namespaces;
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

    /// Returns the start of the oldest minute sampled, if any.
    pub fn first_minute(&self) -> Option<Timestamp> {
        self.minutes.lock().front().map(|(minute, _)| *minute)
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
}

/// The queue depth of each namespace, by the namespace's id (a namespace
/// created again under a deleted one's name starts without samples).
#[derive(Debug, Default)]
pub struct QueueDepths {
    by_namespace: Mutex<HashMap<i64, Arc<QueueDepth>>>,
}

impl QueueDepths {
    /// Returns the queue depth of the namespace whose id is `namespace_id`.
    pub fn of(&self, namespace_id: i64) -> Arc<QueueDepth> {
        self.by_namespace
            .lock()
            .entry(namespace_id)
            .or_default()
            .clone()
    }

    /// Samples the queue of every namespace open on this server every
    /// [`SAMPLE_EVERY`], until the default namespace's engine closes (the
    /// server shuts down); forgets the namespaces no longer open.
    pub async fn run(self: Arc<Self>, namespaces: Arc<Namespaces>) {
        let mut closing = namespaces.default_namespace().engine.closing();
        let mut ticker = tokio::time::interval(SAMPLE_EVERY);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = ticker.tick() => {}
                _ = closing.wait_for(|closed| *closed) => return,
            }
            let open = namespaces.open_now().await;
            self.by_namespace
                .lock()
                .retain(|id, _| open.iter().any(|services| services.namespace.id == *id));
            for services in open {
                let engine = &services.engine;
                match engine.statistics().await {
                    Ok(statistics) => self
                        .of(services.namespace.id)
                        .record(engine.now(), statistics.counts.queued),
                    Err(error) => tracing::debug!(
                        %error,
                        namespace = %services.namespace.name,
                        "console: cannot sample the queue's depth"
                    ),
                }
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
        assert_eq!(depth.first_minute(), None);
        depth.record(Timestamp(MINUTE + 5), 3);
        depth.record(Timestamp(MINUTE + 50), 7);
        depth.record(Timestamp(3 * MINUTE), 1);
        let starts: Vec<Timestamp> = (1..=3).map(|m| Timestamp(m * MINUTE)).collect();
        assert_eq!(depth.at(&starts), [7, 0, 1]);
        assert_eq!(depth.first_minute(), Some(Timestamp(MINUTE)));
        for minute in 0..100 {
            depth.record(Timestamp(minute * MINUTE), minute as u64);
        }
        assert_eq!(depth.minutes.lock().len(), MINUTES);
    }

    #[test]
    fn each_namespace_has_a_depth_of_its_own() {
        let depths = QueueDepths::default();
        depths.of(1).record(Timestamp(MINUTE), 4);
        depths.of(2).record(Timestamp(MINUTE), 9);
        let starts = [Timestamp(MINUTE)];
        assert_eq!(depths.of(1).at(&starts), [4]);
        assert_eq!(depths.of(2).at(&starts), [9]);
        assert_eq!(depths.of(3).at(&starts), [0], "a namespace not sampled yet");
    }
}
