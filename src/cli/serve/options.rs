//! The options of `serve`, in groups (listening and transport, storage,
//! request limits, worker sessions and watchdog, LLM gateway, security,
//! telemetry), each converted here, once, into the configuration type of
//! the part it configures ([`StoreConfig`], [`RequestLimits`],
//! [`TransportLimits`], [`GatewayConfig`], ...). Durations are written
//! `10s`, `500ms`, `5m` ([`duration`]); the old unit-suffixed names
//! (`--drain-timeout-secs`, `--watchdog-interval-ms`, and their
//! `LIGHTNING_STORE_*_SECS` / `*_MS` variables) are hidden aliases that
//! take the old unit and conflict with the new name.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::ValueEnum;

use lightning_store_adapters::gateway::GatewayConfig;
use lightning_store_adapters::namespaces::{DEFAULT_MAX_NAMESPACES, NamespacePolicy};
use lightning_store_adapters::transport::TransportLimits;
use lightning_store_backends::StoreConfig;
use lightning_store_backends::postgres::PostgresOptions;
use lightning_store_backends::sqlite::SqliteOptions;
use lightning_store_cli::duration;
use lightning_store_core::agl1::gateway::GatewaySettings;
use lightning_store_core::idempotency::DEFAULT_REQUEST_ID_TTL;
use lightning_store_core::limits::RequestLimits;
use lightning_store_core::retention::RetentionPolicy;

/// Options of `serve`; every option is also an environment variable.
#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    #[command(flatten)]
    pub listen: ListenOptions,
    #[command(flatten)]
    pub storage: StorageOptions,
    #[command(flatten)]
    pub limits: LimitOptions,
    #[command(flatten)]
    pub sessions: SessionOptions,
    #[command(flatten)]
    pub gateway: GatewayOptions,
    #[command(flatten)]
    pub security: SecurityOptions,
    #[command(flatten)]
    pub telemetry: TelemetryOptions,
}

/// The address, connections and streams.
#[derive(Debug, clap::Args)]
#[command(next_help_heading = "Listening and transport")]
pub struct ListenOptions {
    /// Address to listen on: gRPC (store, OTLP, health, reflection) and HTTP
    /// (agent-lightning's store API, OTLP/HTTP) share it.
    #[arg(long, env = "LIGHTNING_STORE_LISTEN", default_value = "127.0.0.1:4747")]
    pub listen: SocketAddr,
    /// How long in-flight calls may run after SIGINT/SIGTERM before the
    /// server exits.
    #[arg(long, env = "LIGHTNING_STORE_DRAIN_TIMEOUT", default_value = "10s", value_parser = duration::parse)]
    drain_timeout: Duration,
    /// Old name of `--drain-timeout`, in seconds.
    #[arg(long, env = "LIGHTNING_STORE_DRAIN_TIMEOUT_SECS", hide = true, conflicts_with = "drain_timeout", value_parser = duration::parse_legacy_seconds)]
    drain_timeout_secs: Option<Duration>,
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
    max_connections: usize,
    /// How long a connection with no call in flight stays open.
    #[arg(
        long,
        env = "LIGHTNING_STORE_IDLE_TIMEOUT",
        default_value = duration::format(TransportLimits::default().idle_timeout),
        value_parser = duration::parse_positive
    )]
    idle_timeout: Duration,
    /// Old name of `--idle-timeout`, in seconds.
    #[arg(long, env = "LIGHTNING_STORE_IDLE_TIMEOUT_SECS", hide = true, conflicts_with = "idle_timeout", value_parser = duration::parse_legacy_positive_seconds)]
    idle_timeout_secs: Option<Duration>,
    /// Concurrent calls (HTTP/2 streams) per connection; clients queue more.
    #[arg(
        long,
        env = "LIGHTNING_STORE_MAX_CONCURRENT_STREAMS",
        default_value_t = TransportLimits::default().max_concurrent_streams,
        value_parser = clap::value_parser!(u32).range(1..)
    )]
    max_concurrent_streams: u32,
    /// Event subscriptions (WatchEvents, WatchRolloutCompletions) open at
    /// once; more are refused with RESOURCE_EXHAUSTED and a retry delay.
    #[arg(
        long,
        env = "LIGHTNING_STORE_MAX_SUBSCRIBERS",
        default_value_t = TransportLimits::default().max_subscribers
    )]
    max_subscribers: usize,
    /// Bytes of events queued for one WatchEvents subscriber that has not
    /// read them yet.
    #[arg(
        long,
        env = "LIGHTNING_STORE_SUBSCRIBER_BUFFER_BYTES",
        default_value_t = TransportLimits::default().subscriber_buffer_bytes
    )]
    subscriber_buffer_bytes: usize,
    /// How long a subscriber's buffer may stay full before the subscriber is
    /// disconnected as too slow (it can resume from the last event it got).
    #[arg(long, env = "LIGHTNING_STORE_SUBSCRIBER_TIMEOUT", default_value = "10s", value_parser = duration::parse)]
    subscriber_timeout: Duration,
    /// Old name of `--subscriber-timeout`, in seconds.
    #[arg(long, env = "LIGHTNING_STORE_SUBSCRIBER_TIMEOUT_SECS", hide = true, conflicts_with = "subscriber_timeout", value_parser = duration::parse_legacy_seconds)]
    subscriber_timeout_secs: Option<Duration>,
    /// Browser origins allowed to call the HTTP API (CORS), for example the
    /// origin serving agent-lightning's dashboard; `*` allows any. Repeat
    /// the option (or separate origins with commas) for several.
    #[arg(long, env = "LIGHTNING_STORE_CORS_ORIGIN", value_delimiter = ',')]
    pub cors_origin: Vec<String>,
}

impl ListenOptions {
    /// The grace of in-flight calls at shutdown.
    pub fn drain_timeout(&self) -> Duration {
        self.drain_timeout_secs.unwrap_or(self.drain_timeout)
    }

    /// How long a subscriber's buffer may stay full.
    pub fn subscriber_timeout(&self) -> Duration {
        self.subscriber_timeout_secs
            .unwrap_or(self.subscriber_timeout)
    }

    /// The transport's limits.
    pub fn transport_limits(&self) -> TransportLimits {
        TransportLimits {
            max_connections: self.max_connections,
            idle_timeout: self.idle_timeout_secs.unwrap_or(self.idle_timeout),
            max_concurrent_streams: self.max_concurrent_streams,
            max_subscribers: self.max_subscribers,
            subscriber_buffer_bytes: self.subscriber_buffer_bytes,
        }
    }
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

/// The backend, its database and what it retains.
#[derive(Debug, clap::Args)]
#[command(next_help_heading = "Storage")]
pub struct StorageOptions {
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
    database: PathBuf,
    /// PostgreSQL database of `--store postgres`, e.g.
    /// `postgres://user:password@host:5432/lightning_store`.
    #[arg(long, env = "LIGHTNING_STORE_DATABASE_URL", hide_env_values = true)]
    database_url: Option<String>,
    /// Connections each server keeps to PostgreSQL.
    #[arg(
        long,
        env = "LIGHTNING_STORE_DATABASE_MAX_CONNECTIONS",
        default_value_t = 16
    )]
    database_max_connections: u32,
    /// How long a PostgreSQL call waits for a connection before failing with
    /// UNAVAILABLE.
    #[arg(long, env = "LIGHTNING_STORE_DATABASE_CONNECT_TIMEOUT", default_value = "5s", value_parser = duration::parse)]
    database_connect_timeout: Duration,
    /// Old name of `--database-connect-timeout`, in seconds.
    #[arg(long, env = "LIGHTNING_STORE_DATABASE_CONNECT_TIMEOUT_SECS", hide = true, conflicts_with = "database_connect_timeout", value_parser = duration::parse_legacy_seconds)]
    database_connect_timeout_secs: Option<Duration>,
    /// How long one PostgreSQL statement may take (enforced by the server
    /// and by the database) before the call fails with UNAVAILABLE.
    #[arg(long, env = "LIGHTNING_STORE_DATABASE_STATEMENT_TIMEOUT", default_value = "30s", value_parser = duration::parse)]
    database_statement_timeout: Duration,
    /// Old name of `--database-statement-timeout`, in seconds.
    #[arg(long, env = "LIGHTNING_STORE_DATABASE_STATEMENT_TIMEOUT_SECS", hide = true, conflicts_with = "database_statement_timeout", value_parser = duration::parse_legacy_seconds)]
    database_statement_timeout_secs: Option<Duration>,
    /// How long an idle PostgreSQL connection is kept.
    #[arg(long, env = "LIGHTNING_STORE_DATABASE_IDLE_TIMEOUT", default_value = "5m", value_parser = duration::parse)]
    database_idle_timeout: Duration,
    /// Old name of `--database-idle-timeout`, in seconds.
    #[arg(long, env = "LIGHTNING_STORE_DATABASE_IDLE_TIMEOUT_SECS", hide = true, conflicts_with = "database_idle_timeout", value_parser = duration::parse_legacy_seconds)]
    database_idle_timeout_secs: Option<Duration>,
    /// Events kept for subscribers that resume after a given sequence number.
    #[arg(
        long,
        env = "LIGHTNING_STORE_EVENT_RETENTION",
        default_value_t = 100_000
    )]
    event_retention: usize,
    /// Deletes the spans of rollouts that finished longer ago than this.
    #[arg(long, env = "LIGHTNING_STORE_SPAN_RETENTION_AGE", value_parser = duration::parse)]
    span_retention_age: Option<Duration>,
    /// Old name of `--span-retention-age`, in seconds.
    #[arg(long, env = "LIGHTNING_STORE_SPAN_RETENTION_AGE_SECS", hide = true, conflicts_with = "span_retention_age", value_parser = duration::parse_legacy_seconds)]
    span_retention_age_secs: Option<Duration>,
    /// Deletes the spans of the rollouts that finished first while all spans
    /// take more than this many bytes (an estimate of their content).
    #[arg(long, env = "LIGHTNING_STORE_SPAN_RETENTION_MAX_BYTES")]
    span_retention_max_bytes: Option<u64>,
    /// How long a client's request id (an enqueue's `request_id` or
    /// `Idempotency-Key`) is remembered: a retry within it returns the
    /// first call's rollouts.
    #[arg(
        long,
        env = "LIGHTNING_STORE_REQUEST_ID_TTL",
        default_value = duration::format(DEFAULT_REQUEST_ID_TTL),
        value_parser = duration::parse
    )]
    request_id_ttl: Duration,
    /// How often span retention runs (which also forgets expired request ids).
    #[arg(long, env = "LIGHTNING_STORE_SPAN_RETENTION_INTERVAL", default_value = "10s", value_parser = duration::parse_positive)]
    span_retention_interval: Duration,
    /// Old name of `--span-retention-interval`, in seconds.
    #[arg(long, env = "LIGHTNING_STORE_SPAN_RETENTION_INTERVAL_SECS", hide = true, conflicts_with = "span_retention_interval", value_parser = duration::parse_legacy_seconds)]
    span_retention_interval_secs: Option<Duration>,
    /// A call naming a namespace that does not exist creates it, instead of
    /// NOT_FOUND (for development: a typo then starts a new training's
    /// queue).
    #[arg(long, env = "LIGHTNING_STORE_CREATE_NAMESPACES", default_value_t = false, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    create_namespaces: bool,
    /// How many namespaces may exist, the default one included (it also
    /// bounds the namespace label of the metrics).
    #[arg(long, env = "LIGHTNING_STORE_MAX_NAMESPACES", default_value_t = DEFAULT_MAX_NAMESPACES as u64, value_parser = clap::value_parser!(u64).range(1..=10_000))]
    max_namespaces: u64,
}

impl StorageOptions {
    /// The backend to open, with its settings.
    pub fn store_config(&self) -> Result<StoreConfig, String> {
        let event_retention = self.event_retention;
        Ok(match self.store {
            Backend::Sqlite => StoreConfig::Sqlite {
                path: self.database.clone(),
                options: SqliteOptions { event_retention },
            },
            Backend::Memory => StoreConfig::Memory { event_retention },
            Backend::Postgres => StoreConfig::Postgres {
                url: self.database_url.clone().ok_or(
                    "--store postgres needs --database-url (or LIGHTNING_STORE_DATABASE_URL)",
                )?,
                options: PostgresOptions {
                    event_retention,
                    max_connections: self.database_max_connections,
                    connect_timeout: self
                        .database_connect_timeout_secs
                        .unwrap_or(self.database_connect_timeout),
                    statement_timeout: self
                        .database_statement_timeout_secs
                        .unwrap_or(self.database_statement_timeout),
                    idle_timeout: self
                        .database_idle_timeout_secs
                        .unwrap_or(self.database_idle_timeout),
                },
            },
        })
    }

    /// Which spans retention deletes.
    pub fn span_retention(&self) -> RetentionPolicy {
        RetentionPolicy {
            max_age: self.span_retention_age_secs.or(self.span_retention_age),
            max_bytes: self.span_retention_max_bytes,
        }
    }

    /// How long an enqueue's request id is remembered.
    pub fn request_id_ttl(&self) -> Duration {
        self.request_id_ttl
    }

    /// How namespaces are created and how many may exist; deleted ones get
    /// `stop_timeout` to stop their services.
    pub fn namespace_policy(&self, stop_timeout: Duration) -> NamespacePolicy {
        NamespacePolicy {
            create_on_first_use: self.create_namespaces,
            max_namespaces: usize::try_from(self.max_namespaces).unwrap_or(usize::MAX),
            stop_timeout,
        }
    }

    /// How often retention runs (at least every millisecond).
    pub fn retention_interval(&self) -> Duration {
        self.span_retention_interval_secs
            .unwrap_or(self.span_retention_interval)
            .max(Duration::from_millis(1))
    }
}

/// Bounds on what one request may carry and how long it may wait.
#[derive(Debug, clap::Args)]
#[command(next_help_heading = "Request limits")]
pub struct LimitOptions {
    /// Largest request that carries payloads in bytes (span and batch
    /// writes, rollout inputs, resources, OTLP exports, HTTP bodies, also
    /// after decompression).
    #[arg(
        long,
        env = "LIGHTNING_STORE_MAX_MESSAGE_BYTES",
        default_value_t = RequestLimits::default().max_message_bytes
    )]
    max_message_bytes: usize,
    /// Largest request of a control call in bytes (reads, queries, waits,
    /// dequeues, heartbeats, sequence ids, subscriptions).
    #[arg(
        long,
        env = "LIGHTNING_STORE_MAX_CONTROL_MESSAGE_BYTES",
        default_value_t = RequestLimits::default().max_control_message_bytes
    )]
    max_control_message_bytes: usize,
    /// Ids in one list (rollouts waited for or watched, id filters).
    #[arg(
        long,
        env = "LIGHTNING_STORE_MAX_IDS_PER_LIST",
        default_value_t = RequestLimits::default().max_ids_per_list
    )]
    max_ids_per_list: usize,
    /// Items in one batch (rollouts enqueued, spans added, sequence ids
    /// allocated, attempts updated, rollouts claimed by one dequeue).
    #[arg(
        long,
        env = "LIGHTNING_STORE_MAX_BATCH_ITEMS",
        default_value_t = RequestLimits::default().max_batch_items
    )]
    max_batch_items: usize,
    /// How long any call waits at most (dequeue waits, rollout waits,
    /// completion watches); longer client durations are clamped to it.
    #[arg(
        long,
        env = "LIGHTNING_STORE_LONGEST_WAIT",
        default_value = duration::format(RequestLimits::default().longest_wait),
        value_parser = duration::parse
    )]
    longest_wait: Duration,
    /// Old name of `--longest-wait`, in seconds.
    #[arg(long, env = "LIGHTNING_STORE_LONGEST_WAIT_SECS", hide = true, conflicts_with = "longest_wait", value_parser = duration::parse_legacy_seconds)]
    longest_wait_secs: Option<Duration>,
}

impl LimitOptions {
    /// The engine's request limits, checked for consistency.
    pub fn request_limits(&self) -> Result<RequestLimits, String> {
        RequestLimits {
            max_ids_per_list: self.max_ids_per_list,
            max_batch_items: self.max_batch_items,
            max_control_message_bytes: self.max_control_message_bytes,
            max_message_bytes: self.max_message_bytes,
            longest_wait: self.longest_wait_secs.unwrap_or(self.longest_wait),
        }
        .validated()
    }
}

/// Worker sessions across servers and the watchdog's timer.
#[derive(Debug, clap::Args)]
#[command(next_help_heading = "Worker sessions and watchdog")]
pub struct SessionOptions {
    /// How long the attempts of a dropped worker session wait for the worker
    /// to reconnect before they become unresponsive.
    #[arg(long, env = "LIGHTNING_STORE_SESSION_GRACE", default_value = "30s", value_parser = duration::parse)]
    session_grace: Duration,
    /// Old name of `--session-grace`, in seconds.
    #[arg(long, env = "LIGHTNING_STORE_SESSION_GRACE_SECS", hide = true, conflicts_with = "session_grace", value_parser = duration::parse_legacy_seconds)]
    session_grace_secs: Option<Duration>,
    /// How long a worker session's record in the store stays valid without
    /// being renewed (the server renews it three times per lease while the
    /// stream lives): when a server dies, another takes its sessions over
    /// this long after the last renewal, then applies the grace period.
    #[arg(long, env = "LIGHTNING_STORE_SESSION_LEASE", default_value = "10s", value_parser = duration::parse)]
    session_lease: Duration,
    /// Old name of `--session-lease`, in seconds.
    #[arg(long, env = "LIGHTNING_STORE_SESSION_LEASE_SECS", hide = true, conflicts_with = "session_lease", value_parser = duration::parse_legacy_seconds)]
    session_lease_secs: Option<Duration>,
    /// This server's name in the worker session records (default: a random
    /// name). Give a restarted server the name it had (the pod name in a
    /// StatefulSet) and it drops the sessions it held at once instead of
    /// waiting for their leases; two running servers must never share one.
    #[arg(long, env = "LIGHTNING_STORE_SERVER_ID", value_parser = not_blank)]
    pub server_id: Option<String>,
    /// Time between watchdog scans for timed-out and unresponsive attempts.
    #[arg(long, env = "LIGHTNING_STORE_WATCHDOG_INTERVAL", default_value = "50ms", value_parser = duration::parse)]
    watchdog_interval: Duration,
    /// Old name of `--watchdog-interval`, in milliseconds.
    #[arg(long, env = "LIGHTNING_STORE_WATCHDOG_INTERVAL_MS", hide = true, conflicts_with = "watchdog_interval", value_parser = duration::parse_legacy_millis)]
    watchdog_interval_ms: Option<Duration>,
}

impl SessionOptions {
    /// The grace of a dropped session's attempts.
    pub fn session_grace(&self) -> Duration {
        self.session_grace_secs.unwrap_or(self.session_grace)
    }

    /// The lease of a session record (at least 3 ms: it is renewed thrice per lease).
    pub fn session_lease(&self) -> Duration {
        self.session_lease_secs
            .unwrap_or(self.session_lease)
            .max(Duration::from_millis(3))
    }

    /// The watchdog's timer (at least a millisecond).
    pub fn watchdog_interval(&self) -> Duration {
        self.watchdog_interval_ms
            .unwrap_or(self.watchdog_interval)
            .max(Duration::from_millis(1))
    }
}

/// agent-lightning 1.x's LLM gateway under `/proxy`.
#[derive(Debug, clap::Args)]
#[command(next_help_heading = "LLM gateway")]
pub struct GatewayOptions {
    /// The model agent-lightning 1.x's LLM gateway sends every call to
    /// (served by the servers registered for it under `/api/models`);
    /// without it, proxy calls answer 503.
    #[arg(long, env = "LIGHTNING_STORE_GATEWAY_MODEL")]
    gateway_model: Option<String>,
    /// Temperature the gateway sets on training calls.
    #[arg(
        long,
        env = "LIGHTNING_STORE_GATEWAY_TRAIN_TEMPERATURE",
        default_value_t = 1.0
    )]
    gateway_train_temperature: f64,
    /// Temperature the gateway sets on validation calls.
    #[arg(
        long,
        env = "LIGHTNING_STORE_GATEWAY_VAL_TEMPERATURE",
        default_value_t = 0.7
    )]
    gateway_val_temperature: f64,
    /// Whether training calls ask the model server for log-probabilities.
    #[arg(
        long,
        env = "LIGHTNING_STORE_GATEWAY_LOGPROBS",
        default_value_t = true,
        action = clap::ArgAction::Set
    )]
    gateway_logprobs: bool,
    /// Whether training calls ask the model server for the MoE routing
    /// tensor (`return_routed_experts`).
    #[arg(
        long,
        env = "LIGHTNING_STORE_GATEWAY_ROUTED_EXPERTS",
        default_value_t = false,
        action = clap::ArgAction::Set
    )]
    gateway_routed_experts: bool,
    /// How long the gateway waits for one model server call before retrying.
    #[arg(long, env = "LIGHTNING_STORE_GATEWAY_TIMEOUT", default_value = "5m", value_parser = duration::parse)]
    gateway_timeout: Duration,
    /// Old name of `--gateway-timeout`, in seconds.
    #[arg(long, env = "LIGHTNING_STORE_GATEWAY_TIMEOUT_SECS", hide = true, conflicts_with = "gateway_timeout", value_parser = duration::parse_legacy_seconds)]
    gateway_timeout_secs: Option<Duration>,
}

impl GatewayOptions {
    /// The gateway's configuration.
    pub fn gateway_config(&self) -> GatewayConfig {
        GatewayConfig {
            settings: self.gateway_model.as_ref().map(|model| GatewaySettings {
                model: model.clone(),
                train_temperature: self.gateway_train_temperature,
                val_temperature: self.gateway_val_temperature,
                include_log_probs: self.gateway_logprobs,
                include_routed_experts: self.gateway_routed_experts,
            }),
            upstream_timeout: self.gateway_timeout_secs.unwrap_or(self.gateway_timeout),
            ..GatewayConfig::default()
        }
    }
}

/// Tokens, TLS and what the port exposes.
#[derive(Debug, clap::Args)]
#[command(next_help_heading = "Security")]
pub struct SecurityOptions {
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
    /// How often the tokens and TLS files are checked for changes.
    #[arg(long, env = "LIGHTNING_STORE_RELOAD_INTERVAL", default_value = "5s", value_parser = duration::parse)]
    reload_interval: Duration,
    /// Old name of `--reload-interval`, in seconds.
    #[arg(long, env = "LIGHTNING_STORE_RELOAD_INTERVAL_SECS", hide = true, conflicts_with = "reload_interval", value_parser = duration::parse_legacy_seconds)]
    reload_interval_secs: Option<Duration>,
    /// Whether gRPC server reflection (the public schema, for grpcurl) is served.
    #[arg(
        long,
        env = "LIGHTNING_STORE_REFLECTION",
        default_value_t = true,
        action = clap::ArgAction::Set
    )]
    pub reflection: bool,
    /// Whether the web console is served at `/` (and under `/console`):
    /// pages to watch and debug training, guarded by the same tokens.
    #[arg(
        long,
        env = "LIGHTNING_STORE_CONSOLE",
        default_value_t = true,
        action = clap::ArgAction::Set
    )]
    pub console: bool,
    /// Allows listening on a non-loopback address with neither tokens nor
    /// client certificates: anyone who reaches the port can then read and
    /// rewrite the training.
    #[arg(long, env = "LIGHTNING_STORE_INSECURE")]
    pub insecure: bool,
}

impl SecurityOptions {
    /// How often the tokens and TLS files are checked (at least every 10 ms).
    pub fn reload_interval(&self) -> Duration {
        self.reload_interval_secs
            .unwrap_or(self.reload_interval)
            .max(Duration::from_millis(10))
    }
}

/// Log output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// Logs, metrics and health probes.
#[derive(Debug, clap::Args)]
#[command(next_help_heading = "Telemetry")]
pub struct TelemetryOptions {
    /// Address of the Prometheus metrics endpoint (`GET /metrics`), for
    /// example `0.0.0.0:9464`; no metrics are served when unset.
    #[arg(long, env = "LIGHTNING_STORE_METRICS_LISTEN")]
    pub metrics_listen: Option<SocketAddr>,
    /// Time between backend probes; the gRPC health status is NOT_SERVING
    /// while a probe fails.
    #[arg(long, env = "LIGHTNING_STORE_HEALTH_CHECK_INTERVAL", default_value = "5s", value_parser = duration::parse)]
    health_check_interval: Duration,
    /// Old name of `--health-check-interval`, in milliseconds.
    #[arg(long, env = "LIGHTNING_STORE_HEALTH_CHECK_INTERVAL_MS", hide = true, conflicts_with = "health_check_interval", value_parser = duration::parse_legacy_millis)]
    health_check_interval_ms: Option<Duration>,
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

impl TelemetryOptions {
    /// Time between backend probes (at least a millisecond).
    pub fn health_check_interval(&self) -> Duration {
        self.health_check_interval_ms
            .unwrap_or(self.health_check_interval)
            .max(Duration::from_millis(1))
    }
}

/// Refuses an empty or blank name.
fn not_blank(text: &str) -> Result<String, String> {
    if text.trim().is_empty() {
        return Err("must not be empty".into());
    }
    Ok(text.to_owned())
}
