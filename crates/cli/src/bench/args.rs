//! The command line of `bench`: the server under test, the load (clients,
//! count, duration) and the spans each scenario sends.

use std::time::Duration;

use super::error::{BenchError, BenchResult};
use super::limits::Limits;

/// Options that choose the server under test.
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "Server options")]
pub struct TargetArgs {
    /// A running lightning-store server: `host:port` or an `http://` URL
    /// (ignored with --server-cmd).
    #[arg(
        long,
        global = true,
        env = "LIGHTNING_STORE_SERVER",
        default_value = "127.0.0.1:4747"
    )]
    pub server: String,
    /// Starts the server under test with this shell command, where `{addr}`
    /// is replaced by a free loopback address (`{port}` by its port), and
    /// stops it with SIGTERM at the end; for example
    /// `target/release/lightning-store serve --store memory --listen {addr}`.
    #[arg(long, global = true, value_name = "COMMAND")]
    pub server_cmd: Option<String>,
    /// Seconds to wait for a started server to report SERVING.
    #[arg(long, global = true, default_value_t = 30.0)]
    pub startup_timeout_secs: f64,
    /// Client tasks sharing one gRPC channel (HTTP/2 connection).
    #[arg(long, global = true, default_value_t = 4)]
    pub tasks_per_channel: usize,
    /// TLS and token of the gRPC and OTLP/HTTP scenarios.
    #[command(flatten)]
    pub connect: crate::connection::ConnectArgs,
}

/// Bounds and concurrency shared by every scenario.
#[derive(Debug, Clone, clap::Args)]
pub struct LoadArgs {
    /// Concurrent clients; a comma-separated list runs once per value
    /// (default: depends on the scenario).
    #[arg(long, short = 'c', value_delimiter = ',')]
    pub concurrency: Vec<usize>,
    /// Stops each run after this many seconds.
    #[arg(long, default_value_t = 10.0)]
    pub duration_secs: f64,
    /// Stops each run after this many operations (default: depends on the scenario).
    #[arg(long)]
    pub count: Option<u64>,
}

/// Payload shape of the spans a scenario writes.
#[derive(Debug, Clone, clap::Args)]
pub struct SpanArgs {
    /// Approximate encoded size of one span in bytes.
    #[arg(long, default_value_t = 1024)]
    pub span_bytes: usize,
}

impl LoadArgs {
    /// Returns the concurrency levels to run, `default` when none was given;
    /// zero is rejected.
    pub(crate) fn levels(&self, default: &[usize]) -> BenchResult<Vec<usize>> {
        let levels = if self.concurrency.is_empty() {
            default.to_vec()
        } else {
            self.concurrency.clone()
        };
        if levels.contains(&0) {
            return Err(BenchError::new("--concurrency must be at least 1"));
        }
        Ok(levels)
    }

    /// Returns the bounds of one run: the count (`default_count` when none
    /// was given) and the duration.
    pub(crate) fn limits(&self, default_count: u64) -> BenchResult<Limits> {
        let duration = Duration::try_from_secs_f64(self.duration_secs)
            .ok()
            .filter(|d| !d.is_zero())
            .ok_or_else(|| BenchError::new("--duration-secs must be a number > 0"))?;
        Ok(Limits {
            count: self.count.unwrap_or(default_count),
            duration,
        })
    }
}
