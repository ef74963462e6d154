//! The command line: `serve` runs the server; the other subcommands are a
//! client for looking inside (and driving) a running store.

pub mod client;
mod token;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::{Parser, Subcommand, ValueEnum};

use crate::auth::Tokens;
use crate::core::agl1::gateway::GatewaySettings;
use crate::core::engine::{Engine, EngineConfig};
use crate::core::idempotency::DEFAULT_REQUEST_ID_TTL;
use crate::core::limits::RequestLimits;
use crate::core::retention::RetentionPolicy;
use crate::gateway::GatewayConfig;
use crate::metrics::Metrics;
use crate::server::{self, ServerConfig};
use crate::store::postgres::PostgresOptions;
use crate::store::sqlite::SqliteOptions;
use crate::store::{self, StoreConfig};
use crate::tls::{TlsAcceptor, TlsFiles};
use crate::transport::TransportLimits;

/// lightning-store: the LightningStore of agent-lightning as a gRPC service.
#[derive(Debug, Parser)]
#[command(version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

/// Top-level subcommands.
// Parsed once per process: the size difference between variants costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Runs the gRPC server.
    Serve(Box<ServeArgs>),
    /// Drives a server with a load scenario and reports throughput and latency.
    Bench(crate::bench::BenchArgs),
    /// Makes access tokens and their lines for the tokens file.
    #[command(subcommand)]
    Token(token::TokenCommand),
    #[command(flatten)]
    Client(client::ClientCommand),
}

/// Storage backends `serve` can run on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Backend {
    /// A SQLite file (`--database`): durable, every acknowledged write is on disk.
    Sqlite,
    /// Everything in memory; nothing survives a restart.
    Memory,
    /// A PostgreSQL database (`--database-url`) that several servers can share.
    Postgres,
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
    /// Address to listen on: gRPC (store, OTLP, health, reflection) and HTTP
    /// (agent-lightning's store API, OTLP/HTTP) share it.
    #[arg(long, env = "LIGHTNING_STORE_LISTEN", default_value = "127.0.0.1:4747")]
    pub listen: SocketAddr,
    /// Storage backend.
    #[arg(
        long,
        env = "LIGHTNING_STORE_BACKEND",
        value_enum,
        default_value = "sqlite"
    )]
    pub store: Backend,
    /// SQLite database file of `--store sqlite`; created when missing.
    #[arg(
        long,
        env = "LIGHTNING_STORE_DATABASE",
        default_value = "lightning-store.db"
    )]
    pub database: PathBuf,
    /// PostgreSQL database of `--store postgres`, e.g.
    /// `postgres://user:password@host:5432/lightning_store`.
    #[arg(long, env = "LIGHTNING_STORE_DATABASE_URL", hide_env_values = true)]
    pub database_url: Option<String>,
    /// Connections each server keeps to PostgreSQL.
    #[arg(
        long,
        env = "LIGHTNING_STORE_DATABASE_MAX_CONNECTIONS",
        default_value_t = 16
    )]
    pub database_max_connections: u32,
    /// Seconds a PostgreSQL call waits for a connection before failing
    /// with UNAVAILABLE.
    #[arg(
        long,
        env = "LIGHTNING_STORE_DATABASE_CONNECT_TIMEOUT_SECS",
        default_value_t = 5.0
    )]
    pub database_connect_timeout_secs: f64,
    /// Seconds one PostgreSQL statement may take (enforced by the server
    /// and by the database) before the call fails with UNAVAILABLE.
    #[arg(
        long,
        env = "LIGHTNING_STORE_DATABASE_STATEMENT_TIMEOUT_SECS",
        default_value_t = 30.0
    )]
    pub database_statement_timeout_secs: f64,
    /// Seconds an idle PostgreSQL connection is kept.
    #[arg(
        long,
        env = "LIGHTNING_STORE_DATABASE_IDLE_TIMEOUT_SECS",
        default_value_t = 300.0
    )]
    pub database_idle_timeout_secs: f64,
    /// Events kept for subscribers that resume after a given sequence number.
    #[arg(
        long,
        env = "LIGHTNING_STORE_EVENT_RETENTION",
        default_value_t = 100_000
    )]
    pub event_retention: usize,
    /// Deletes the spans of rollouts that finished more than this many seconds ago.
    #[arg(long, env = "LIGHTNING_STORE_SPAN_RETENTION_AGE_SECS")]
    pub span_retention_age_secs: Option<f64>,
    /// Deletes the spans of the rollouts that finished first while all spans
    /// take more than this many bytes (an estimate of their content).
    #[arg(long, env = "LIGHTNING_STORE_SPAN_RETENTION_MAX_BYTES")]
    pub span_retention_max_bytes: Option<u64>,
    /// Seconds a client's request id (an enqueue's `request_id` or
    /// `Idempotency-Key`) is remembered: a retry within it returns the
    /// first call's rollouts.
    #[arg(
        long,
        env = "LIGHTNING_STORE_REQUEST_ID_TTL_SECS",
        default_value_t = DEFAULT_REQUEST_ID_TTL.as_secs_f64()
    )]
    pub request_id_ttl_secs: f64,
    /// Seconds between span retention runs (which also forget expired
    /// request ids).
    #[arg(
        long,
        env = "LIGHTNING_STORE_SPAN_RETENTION_INTERVAL_SECS",
        default_value_t = 10.0
    )]
    pub span_retention_interval_secs: f64,
    /// Largest request that carries payloads in bytes (span and batch
    /// writes, rollout inputs, resources, OTLP exports, HTTP bodies, also
    /// after decompression).
    #[arg(
        long,
        env = "LIGHTNING_STORE_MAX_MESSAGE_BYTES",
        default_value_t = RequestLimits::default().max_message_bytes
    )]
    pub max_message_bytes: usize,
    /// Largest request of a control call in bytes (reads, queries, waits,
    /// dequeues, heartbeats, sequence ids, subscriptions).
    #[arg(
        long,
        env = "LIGHTNING_STORE_MAX_CONTROL_MESSAGE_BYTES",
        default_value_t = RequestLimits::default().max_control_message_bytes
    )]
    pub max_control_message_bytes: usize,
    /// Ids in one list (rollouts waited for or watched, id filters).
    #[arg(
        long,
        env = "LIGHTNING_STORE_MAX_IDS_PER_LIST",
        default_value_t = RequestLimits::default().max_ids_per_list
    )]
    pub max_ids_per_list: usize,
    /// Items in one batch (rollouts enqueued, spans added, sequence ids
    /// allocated, rollouts claimed by one dequeue).
    #[arg(
        long,
        env = "LIGHTNING_STORE_MAX_BATCH_ITEMS",
        default_value_t = RequestLimits::default().max_batch_items
    )]
    pub max_batch_items: usize,
    /// Seconds any call waits at most (dequeue waits, rollout waits,
    /// completion watches); longer client durations are clamped to it.
    #[arg(
        long,
        env = "LIGHTNING_STORE_LONGEST_WAIT_SECS",
        default_value_t = RequestLimits::default().longest_wait.as_secs_f64()
    )]
    pub longest_wait_secs: f64,
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
    /// Connections served at once; further connections are closed as soon
    /// as they are accepted.
    #[arg(
        long,
        env = "LIGHTNING_STORE_MAX_CONNECTIONS",
        default_value_t = TransportLimits::default().max_connections,
        value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..)
    )]
    pub max_connections: usize,
    /// Seconds a connection with no call in flight stays open.
    #[arg(
        long,
        env = "LIGHTNING_STORE_IDLE_TIMEOUT_SECS",
        default_value_t = TransportLimits::default().idle_timeout.as_secs_f64()
    )]
    pub idle_timeout_secs: f64,
    /// Concurrent calls (HTTP/2 streams) per connection; clients queue more.
    #[arg(
        long,
        env = "LIGHTNING_STORE_MAX_CONCURRENT_STREAMS",
        default_value_t = TransportLimits::default().max_concurrent_streams,
        value_parser = clap::value_parser!(u32).range(1..)
    )]
    pub max_concurrent_streams: u32,
    /// Seconds the attempts of a dropped worker session wait for the worker to
    /// reconnect before they become unresponsive.
    #[arg(
        long,
        env = "LIGHTNING_STORE_SESSION_GRACE_SECS",
        default_value_t = 30.0
    )]
    pub session_grace_secs: f64,
    /// Seconds a worker session's record in the store stays valid without
    /// being renewed (the server renews it three times per lease while the
    /// stream lives): when a server dies, another takes its sessions over
    /// this long after the last renewal, then applies the grace period.
    #[arg(
        long,
        env = "LIGHTNING_STORE_SESSION_LEASE_SECS",
        default_value_t = 10.0
    )]
    pub session_lease_secs: f64,
    /// This server's name in the worker session records (default: a random
    /// name). Give a restarted server the name it had (the pod name in a
    /// StatefulSet) and it drops the sessions it held at once instead of
    /// waiting for their leases; two running servers must never share one.
    #[arg(long, env = "LIGHTNING_STORE_SERVER_ID")]
    pub server_id: Option<String>,
    /// Event subscriptions (WatchEvents, WatchRolloutCompletions) open at
    /// once; more are refused with RESOURCE_EXHAUSTED and a retry delay.
    #[arg(
        long,
        env = "LIGHTNING_STORE_MAX_SUBSCRIBERS",
        default_value_t = TransportLimits::default().max_subscribers
    )]
    pub max_subscribers: usize,
    /// Bytes of events queued for one WatchEvents subscriber that has not
    /// read them yet.
    #[arg(
        long,
        env = "LIGHTNING_STORE_SUBSCRIBER_BUFFER_BYTES",
        default_value_t = TransportLimits::default().subscriber_buffer_bytes
    )]
    pub subscriber_buffer_bytes: usize,
    /// Seconds a subscriber's buffer may stay full before the subscriber is
    /// disconnected as too slow (it can resume from the last event it got).
    #[arg(
        long,
        env = "LIGHTNING_STORE_SUBSCRIBER_TIMEOUT_SECS",
        default_value_t = 10.0
    )]
    pub subscriber_timeout_secs: f64,
    /// Milliseconds between watchdog scans for timed-out and unresponsive attempts.
    #[arg(
        long,
        env = "LIGHTNING_STORE_WATCHDOG_INTERVAL_MS",
        default_value_t = 50
    )]
    pub watchdog_interval_ms: u64,
    /// Milliseconds between backend probes; the gRPC health status is
    /// NOT_SERVING while a probe fails.
    #[arg(
        long,
        env = "LIGHTNING_STORE_HEALTH_CHECK_INTERVAL_MS",
        default_value_t = 5000
    )]
    pub health_check_interval_ms: u64,
    /// Browser origins allowed to call the HTTP API (CORS), for example the
    /// origin serving agent-lightning's dashboard; `*` allows any. Repeat
    /// the option (or separate origins with commas) for several.
    #[arg(long, env = "LIGHTNING_STORE_CORS_ORIGIN", value_delimiter = ',')]
    pub cors_origin: Vec<String>,
    /// Address of the Prometheus metrics endpoint (`GET /metrics`), for
    /// example `0.0.0.0:9464`; no metrics are served when unset.
    #[arg(long, env = "LIGHTNING_STORE_METRICS_LISTEN")]
    pub metrics_listen: Option<SocketAddr>,
    /// The model agent-lightning 1.x's LLM gateway sends every call to
    /// (served by the servers registered for it under `/api/models`);
    /// without it, proxy calls answer 503.
    #[arg(long, env = "LIGHTNING_STORE_GATEWAY_MODEL")]
    pub gateway_model: Option<String>,
    /// Temperature the gateway sets on training calls.
    #[arg(
        long,
        env = "LIGHTNING_STORE_GATEWAY_TRAIN_TEMPERATURE",
        default_value_t = 1.0
    )]
    pub gateway_train_temperature: f64,
    /// Temperature the gateway sets on validation calls.
    #[arg(
        long,
        env = "LIGHTNING_STORE_GATEWAY_VAL_TEMPERATURE",
        default_value_t = 0.7
    )]
    pub gateway_val_temperature: f64,
    /// Whether training calls ask the model server for log-probabilities.
    #[arg(
        long,
        env = "LIGHTNING_STORE_GATEWAY_LOGPROBS",
        default_value_t = true,
        action = clap::ArgAction::Set
    )]
    pub gateway_logprobs: bool,
    /// Whether training calls ask the model server for the MoE routing
    /// tensor (`return_routed_experts`).
    #[arg(
        long,
        env = "LIGHTNING_STORE_GATEWAY_ROUTED_EXPERTS",
        default_value_t = false,
        action = clap::ArgAction::Set
    )]
    pub gateway_routed_experts: bool,
    /// Seconds the gateway waits for one model server call before retrying.
    #[arg(
        long,
        env = "LIGHTNING_STORE_GATEWAY_TIMEOUT_SECS",
        default_value_t = 300.0
    )]
    pub gateway_timeout_secs: f64,
    /// File of access tokens (`sha256:<hex> roles=... [workers=...]
    /// [name=...]` lines, made by `lightning-store token new`), reloaded
    /// when it changes; every call but health checks and reflection must
    /// then carry a token. `LIGHTNING_STORE_API_KEY` adds one admin token.
    #[arg(long, env = "LIGHTNING_STORE_TOKENS_FILE")]
    pub tokens_file: Option<PathBuf>,
    /// TLS certificate chain (PEM) of the port, reloaded when it changes;
    /// with `--tls-key`, every protocol on the port then speaks TLS only.
    #[arg(long, env = "LIGHTNING_STORE_TLS_CERT", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// TLS private key (PEM) of `--tls-cert`.
    #[arg(long, env = "LIGHTNING_STORE_TLS_KEY", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// CA certificates (PEM): clients must present a certificate issued by
    /// one of them (mTLS). Needs `--tls-cert`.
    #[arg(long, env = "LIGHTNING_STORE_TLS_CLIENT_CA", requires = "tls_cert")]
    pub tls_client_ca: Option<PathBuf>,
    /// Seconds between checks of the tokens and TLS files for changes.
    #[arg(
        long,
        env = "LIGHTNING_STORE_RELOAD_INTERVAL_SECS",
        default_value_t = 5.0
    )]
    pub reload_interval_secs: f64,
    /// Whether gRPC server reflection (the public schema, for grpcurl) is served.
    #[arg(
        long,
        env = "LIGHTNING_STORE_REFLECTION",
        default_value_t = true,
        action = clap::ArgAction::Set
    )]
    pub reflection: bool,
    /// Allows listening on a non-loopback address with neither tokens nor
    /// client certificates: anyone who reaches the port can then read and
    /// rewrite the training.
    #[arg(long, env = "LIGHTNING_STORE_INSECURE")]
    pub insecure: bool,
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

/// Exit code of a failure that is not a call's (a server that cannot start,
/// bad output, a benchmark that failed).
const FAILURE_EXIT: u8 = 1;
/// Exit code of a bad command line (clap's, also for a bad `--server`).
const USAGE_EXIT: u8 = 2;
/// A call that failed with gRPC status code `c` exits with `64 + c`, as
/// grpcurl does (for example 69 for NOT_FOUND); a server that cannot be
/// reached exits as UNAVAILABLE (78).
const GRPC_EXIT_BASE: u8 = 64;

/// Returns the process exit code for a command that failed with `error`:
/// `64 + code` for a failed call, 78 when the server cannot be reached, 2 for
/// a bad `--server`, 1 otherwise.
pub fn exit_code(error: &(dyn std::error::Error + 'static)) -> u8 {
    error
        .downcast_ref::<client::ClientError>()
        .map_or(FAILURE_EXIT, client::ClientError::exit_code)
}

/// Runs the parsed command line.
pub async fn run(cli: Cli) -> Result<(), server::ServeError> {
    match cli.command {
        Command::Serve(args) => serve(*args).await,
        Command::Bench(args) => crate::bench::run(args).await,
        Command::Token(command) => token::run(command),
        Command::Client(command) => client::run(command).await.map_err(Into::into),
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
    for (flag, value) in [
        ("--drain-timeout-secs", args.drain_timeout_secs),
        ("--session-grace-secs", args.session_grace_secs),
        ("--session-lease-secs", args.session_lease_secs),
        ("--subscriber-timeout-secs", args.subscriber_timeout_secs),
    ] {
        if !(value.is_finite() && value >= 0.0) {
            return Err(format!("{flag} must be a number >= 0").into());
        }
    }
    if !(args.idle_timeout_secs.is_finite() && args.idle_timeout_secs > 0.0) {
        return Err("--idle-timeout-secs must be a number > 0".into());
    }
    let span_retention = RetentionPolicy {
        max_age: args
            .span_retention_age_secs
            .map(|secs| seconds("--span-retention-age-secs", secs))
            .transpose()?,
        max_bytes: args.span_retention_max_bytes,
    };
    let retention_interval = seconds(
        "--span-retention-interval-secs",
        args.span_retention_interval_secs,
    )?
    .max(Duration::from_millis(1));
    let config = match args.store {
        Backend::Sqlite => StoreConfig::Sqlite {
            path: args.database.clone(),
            options: SqliteOptions {
                event_retention: args.event_retention,
            },
        },
        Backend::Memory => StoreConfig::Memory {
            event_retention: args.event_retention,
        },
        Backend::Postgres => StoreConfig::Postgres {
            url: args
                .database_url
                .clone()
                .ok_or("--store postgres needs --database-url (or LIGHTNING_STORE_DATABASE_URL)")?,
            options: PostgresOptions {
                event_retention: args.event_retention,
                max_connections: args.database_max_connections,
                connect_timeout: seconds(
                    "--database-connect-timeout-secs",
                    args.database_connect_timeout_secs,
                )?,
                statement_timeout: seconds(
                    "--database-statement-timeout-secs",
                    args.database_statement_timeout_secs,
                )?,
                idle_timeout: seconds(
                    "--database-idle-timeout-secs",
                    args.database_idle_timeout_secs,
                )?,
            },
        },
    };
    let tokens = Tokens::load(args.tokens_file.as_deref(), api_key().as_deref())?;
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => Some(TlsAcceptor::load(TlsFiles {
            cert: cert.clone(),
            key: key.clone(),
            client_ca: args.tls_client_ca.clone(),
        })?),
        _ => None,
    };
    check_exposure(&args, tokens.as_ref(), tls.as_ref())?;
    let limits = RequestLimits {
        max_ids_per_list: args.max_ids_per_list,
        max_batch_items: args.max_batch_items,
        max_control_message_bytes: args.max_control_message_bytes,
        max_message_bytes: args.max_message_bytes,
        longest_wait: seconds("--longest-wait-secs", args.longest_wait_secs)?,
    }
    .validated()?;
    let store = store::open(&config).await?;
    let metrics = Metrics::new();
    let engine = Arc::new(Engine::new(
        store,
        EngineConfig {
            watchdog_interval: Duration::from_millis(args.watchdog_interval_ms.max(1)),
            span_retention,
            retention_interval,
            request_id_ttl: seconds("--request-id-ttl-secs", args.request_id_ttl_secs)?,
            observer: Arc::new(metrics.clone()),
            limits,
            ..EngineConfig::default()
        },
    ));
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .map_err(|e| format!("failed to listen on {}: {e}", args.listen))?;
    let metrics_listener = match args.metrics_listen {
        Some(addr) => Some(server::MetricsListener::new(
            tokio::net::TcpListener::bind(addr)
                .await
                .map_err(|e| format!("failed to listen on {addr} for metrics: {e}"))?,
        )),
        None => None,
    };
    let config = ServerConfig {
        drain_timeout: Duration::from_secs_f64(args.drain_timeout_secs),
        otlp_max_in_flight: args.otlp_max_in_flight,
        session_grace: Duration::from_secs_f64(args.session_grace_secs),
        session_lease: Duration::from_secs_f64(args.session_lease_secs)
            .max(Duration::from_millis(3)),
        server_id: match args.server_id {
            Some(server_id) if server_id.trim().is_empty() => {
                return Err("--server-id must not be empty".into());
            }
            Some(server_id) => server_id,
            None => server::random_server_id(),
        },
        transport: TransportLimits {
            max_connections: args.max_connections,
            idle_timeout: Duration::from_secs_f64(args.idle_timeout_secs),
            max_concurrent_streams: args.max_concurrent_streams,
            max_subscribers: args.max_subscribers,
            subscriber_buffer_bytes: args.subscriber_buffer_bytes,
        },
        subscriber_timeout: Duration::from_secs_f64(args.subscriber_timeout_secs),
        metrics_listener,
        metrics,
        health_check_interval: Duration::from_millis(args.health_check_interval_ms.max(1)),
        cors_origins: args.cors_origin,
        tokens,
        tls,
        reload_interval: seconds("--reload-interval-secs", args.reload_interval_secs)?
            .max(Duration::from_millis(10)),
        reflection: args.reflection,
        gateway: GatewayConfig {
            settings: args.gateway_model.as_ref().map(|model| GatewaySettings {
                model: model.clone(),
                train_temperature: args.gateway_train_temperature,
                val_temperature: args.gateway_val_temperature,
                include_log_probs: args.gateway_logprobs,
                include_routed_experts: args.gateway_routed_experts,
            }),
            upstream_timeout: seconds("--gateway-timeout-secs", args.gateway_timeout_secs)?,
            ..GatewayConfig::default()
        },
    };
    tracing::info!(backend = ?args.store, "store opened");
    server::serve(listener, engine, config, shutdown_signal()).await
}

/// Refuses a non-loopback `--listen` that nothing guards (no tokens, no
/// client certificates) unless `--insecure`; says how the port is guarded.
fn check_exposure(
    args: &ServeArgs,
    tokens: Option<&Tokens>,
    tls: Option<&TlsAcceptor>,
) -> Result<(), server::ServeError> {
    let guarded = tokens.is_some() || tls.is_some_and(TlsAcceptor::mutual);
    let loopback = args.listen.ip().is_loopback();
    match (guarded, loopback, args.insecure) {
        (true, ..) => {}
        (false, true, _) => tracing::info!(
            listen = %args.listen,
            "no tokens configured: listening on loopback only, every local process has full access"
        ),
        (false, false, true) => tracing::warn!(
            listen = %args.listen,
            "--insecure: no tokens and no client certificates, anyone who reaches the port has full access"
        ),
        (false, false, false) => {
            return Err(format!(
                "refusing to listen on {} without tokens: set --tokens-file (or \
                 LIGHTNING_STORE_API_KEY), or --tls-client-ca, or pass --insecure",
                args.listen
            )
            .into());
        }
    }
    if tls.is_none() && !loopback {
        tracing::warn!(listen = %args.listen, "no TLS: tokens and data cross the network in cleartext");
    }
    Ok(())
}

/// The environment variable holding the API key: one admin token (never a
/// command-line argument: those are visible to every local user).
pub const API_KEY_ENV: &str = "LIGHTNING_STORE_API_KEY";

/// Returns the API key of the environment, if set and not empty.
pub fn api_key() -> Option<String> {
    std::env::var(API_KEY_ENV)
        .ok()
        .filter(|key| !key.is_empty())
}

/// Converts a number of seconds given as `flag`.
fn seconds(flag: &str, secs: f64) -> Result<Duration, server::ServeError> {
    Duration::try_from_secs_f64(secs)
        .map_err(|_| format!("{flag} must be a number of seconds >= 0").into())
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
