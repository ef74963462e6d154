//! The calls this server's gateway made to each model server over the
//! last minutes, for the console: counted in memory as they are answered
//! (reading them back from the store's `model_request` events would read
//! every call's body). Other servers count their own.

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::time::Instant;

/// The window the rates are measured over.
pub const WINDOW: Duration = Duration::from_secs(300);

/// The width of one bucket of counts.
const BUCKET: Duration = Duration::from_secs(10);

/// The calls to one model server over the window.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelRate {
    pub model: String,
    pub endpoint: String,
    /// Calls answered per minute.
    pub per_minute: f64,
    /// Mean time from the first call to the answer, retries included.
    pub mean_latency: Duration,
    /// Calls answered with an error status (4xx or 5xx).
    pub errors: u64,
}

#[derive(Debug, Clone, Copy, Default)]
struct Bucket {
    /// The bucket's index since the counter's start.
    index: u64,
    calls: u64,
    errors: u64,
    latency: Duration,
}

/// Counts of calls per (model, endpoint), in buckets over the window.
#[derive(Debug)]
pub struct CallRates {
    started: Instant,
    servers: Mutex<HashMap<(String, String), VecDeque<Bucket>>>,
}

impl Default for CallRates {
    fn default() -> Self {
        Self {
            started: Instant::now(),
            servers: Mutex::default(),
        }
    }
}

impl CallRates {
    fn bucket_index(&self, at: Instant) -> u64 {
        (at.duration_since(self.started).as_millis() / BUCKET.as_millis()) as u64
    }

    /// Counts an answered call to `endpoint` serving `model`.
    pub fn record(&self, model: &str, endpoint: &str, latency: Duration, error: bool) {
        let index = self.bucket_index(Instant::now());
        let mut servers = self.servers.lock();
        let buckets = servers
            .entry((model.to_owned(), endpoint.to_owned()))
            .or_default();
        if buckets.back().is_none_or(|last| last.index != index) {
            buckets.push_back(Bucket {
                index,
                ..Bucket::default()
            });
        }
        let oldest = index.saturating_sub(WINDOW.as_secs() / BUCKET.as_secs());
        while buckets.front().is_some_and(|first| first.index < oldest) {
            buckets.pop_front();
        }
        let bucket = buckets.back_mut().expect("just pushed");
        bucket.calls += 1;
        bucket.errors += u64::from(error);
        bucket.latency += latency;
    }

    /// Returns the rate of each model server called within the window, by
    /// model and endpoint.
    pub fn rates(&self) -> Vec<ModelRate> {
        let now = Instant::now();
        let index = self.bucket_index(now);
        let oldest = index.saturating_sub(WINDOW.as_secs() / BUCKET.as_secs());
        // The window, or the time since the counts started when shorter.
        let span = now.duration_since(self.started).min(WINDOW).max(BUCKET);
        let servers = self.servers.lock();
        let mut rates: Vec<ModelRate> = servers
            .iter()
            .filter_map(|((model, endpoint), buckets)| {
                let recent = buckets.iter().filter(|b| b.index >= oldest);
                let (calls, errors, latency) = recent.fold(
                    (0u64, 0u64, Duration::ZERO),
                    |(calls, errors, latency), b| {
                        (calls + b.calls, errors + b.errors, latency + b.latency)
                    },
                );
                (calls > 0).then(|| ModelRate {
                    model: model.clone(),
                    endpoint: endpoint.clone(),
                    per_minute: calls as f64 * 60.0 / span.as_secs_f64(),
                    mean_latency: latency / u32::try_from(calls).unwrap_or(u32::MAX),
                    errors,
                })
            })
            .collect();
        rates.sort_by(|a, b| (&a.model, &a.endpoint).cmp(&(&b.model, &b.endpoint)));
        rates
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn rates_count_the_window_only() {
        let rates = CallRates::default();
        rates.record("m", "http://a/v1", Duration::from_millis(100), false);
        tokio::time::advance(Duration::from_secs(30)).await;
        rates.record("m", "http://a/v1", Duration::from_millis(300), true);
        rates.record("n", "http://b/v1", Duration::from_millis(50), false);
        let now = rates.rates();
        assert_eq!(now.len(), 2);
        assert_eq!(now[0].model, "m");
        assert_eq!(now[0].errors, 1);
        assert_eq!(now[0].mean_latency, Duration::from_millis(200));
        assert!((now[0].per_minute - 4.0).abs() < 1e-9, "2 calls in 30 s");
        tokio::time::advance(WINDOW + BUCKET * 2).await;
        assert!(rates.rates().is_empty(), "all calls left the window");
    }
}
