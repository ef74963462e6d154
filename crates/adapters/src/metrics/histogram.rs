//! The buckets of the latency histograms.

use prometheus_client::metrics::histogram::Histogram;

pub(crate) fn latency_histogram() -> Histogram {
    Histogram::new(LATENCY_BUCKETS)
}

/// Latency buckets in seconds: 100 µs to 10 s.
const LATENCY_BUCKETS: [f64; 16] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    5.0, 10.0,
];
