//! The command line: `serve` runs the server; the other subcommands are a
//! client for looking inside (and driving) a running store.

pub mod client;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use clap::{Parser, Subcommand, ValueEnum};

use crate::core::engine::{Engine, EngineConfig};
use crate::server::{self, ServerConfig};
use crate::store::memory::MemoryStore;

/// lightning-store: the LightningStore of agent-lightning as a gRPC service.
#[derive(Debug, Parser)]
#[command(version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

/// Top-level subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Runs the gRPC server.
    Serve(ServeArgs),
    #[command(flatten)]
    Client(client::ClientCommand),
}

/// Storage backends `serve` can run on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Backend {
    /// Everything in memory; nothing survives a restart.
    Memory,
}

/// Log output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// Options of `serve`; every option is also an environment variable.
#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// Address to listen on (gRPC: store, health, reflection).
    #[arg(long, env = "LIGHTNING_STORE_LISTEN", default_value = "127.0.0.1:4747")]
    pub listen: SocketAddr,
    /// Storage backend.
    #[arg(
        long,
        env = "LIGHTNING_STORE_BACKEND",
        value_enum,
        default_value = "memory"
    )]
    pub store: Backend,
    /// Largest accepted request in bytes.
    #[arg(long, env = "LIGHTNING_STORE_MAX_MESSAGE_BYTES", default_value_t = 64 * 1024 * 1024)]
    pub max_message_bytes: usize,
    /// Seconds in-flight calls may run after SIGINT/SIGTERM before the server exits.
    #[arg(
        long,
        env = "LIGHTNING_STORE_DRAIN_TIMEOUT_SECS",
        default_value_t = 10.0
    )]
    pub drain_timeout_secs: f64,
    /// OTLP exports processed at once; beyond that exporters are told to retry later.
    #[arg(long, env = "LIGHTNING_STORE_OTLP_MAX_IN_FLIGHT", default_value_t = 64)]
    pub otlp_max_in_flight: usize,
    /// Milliseconds between watchdog scans for timed-out and unresponsive attempts.
    #[arg(
        long,
        env = "LIGHTNING_STORE_WATCHDOG_INTERVAL_MS",
        default_value_t = 50
    )]
    pub watchdog_interval_ms: u64,
    /// Log format.
    #[arg(
        long,
        env = "LIGHTNING_STORE_LOG_FORMAT",
        value_enum,
        default_value = "text"
    )]
    pub log_format: LogFormat,
    /// Log filter in `tracing` syntax, for example `info` or `lightning_store=debug`.
    #[arg(long, env = "LIGHTNING_STORE_LOG", default_value = "info")]
    pub log: String,
}

/// Runs the parsed command line.
pub async fn run(cli: Cli) -> Result<(), server::ServeError> {
    match cli.command {
        Command::Serve(args) => serve(args).await,
        Command::Client(command) => client::run(command).await,
    }
}

fn init_logging(args: &ServeArgs) {
    let filter = tracing_subscriber::EnvFilter::try_new(&args.log)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match args.log_format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

async fn serve(args: ServeArgs) -> Result<(), server::ServeError> {
    init_logging(&args);
    if !(args.drain_timeout_secs.is_finite() && args.drain_timeout_secs >= 0.0) {
        return Err("--drain-timeout-secs must be a number >= 0".into());
    }
    let store = match args.store {
        Backend::Memory => Arc::new(MemoryStore::new()),
    };
    let engine = Arc::new(Engine::new(
        store,
        EngineConfig {
            watchdog_interval: Duration::from_millis(args.watchdog_interval_ms.max(1)),
            ..EngineConfig::default()
        },
    ));
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .map_err(|e| format!("failed to listen on {}: {e}", args.listen))?;
    let config = ServerConfig {
        max_message_bytes: args.max_message_bytes,
        drain_timeout: Duration::from_secs_f64(args.drain_timeout_secs),
        otlp_max_in_flight: args.otlp_max_in_flight,
    };
    tracing::info!(backend = ?args.store, "store opened");
    server::serve(listener, engine, config, shutdown_signal()).await
}

/// Resolves on SIGINT or SIGTERM.
async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(error) => {
                tracing::warn!(%error, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = terminate => {}
    }
}
