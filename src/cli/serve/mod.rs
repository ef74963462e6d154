//! `lightning-store serve`: turns the options ([`options`]) into an engine,
//! a backend and a server, and runs it until SIGINT/SIGTERM.

mod options;
#[cfg(test)]
mod tests;

use std::sync::Arc;

pub use self::options::{
    Backend, GatewayOptions, LimitOptions, ListenOptions, LogFormat, SecurityOptions, ServeArgs,
    SessionOptions, StorageOptions, TelemetryOptions,
};
use crate::server::{self, ServerConfig};
use crate::tls::{TlsAcceptor, TlsFiles};
use lightning_store_adapters::auth::Tokens;
use lightning_store_adapters::metrics::Metrics;
use lightning_store_backends as store;
use lightning_store_core::engine::{Engine, EngineConfig};

/// The environment variable holding the API key: one admin token (never a
/// command-line argument: those are visible to every local user).
pub const API_KEY_ENV: &str = "LIGHTNING_STORE_API_KEY";

/// Returns the API key of the environment, if set and not empty.
pub fn api_key() -> Option<String> {
    std::env::var(API_KEY_ENV)
        .ok()
        .filter(|key| !key.is_empty())
}

fn init_logging(telemetry: &TelemetryOptions) {
    let filter = tracing_subscriber::EnvFilter::try_new(&telemetry.log)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let colour = colour_logs(
        std::io::IsTerminal::is_terminal(&std::io::stderr()),
        std::env::var_os("NO_COLOR").as_deref(),
    );
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(colour)
        .with_writer(std::io::stderr);
    match telemetry.log_format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

/// Says whether text logs carry ANSI colours: only when stderr is a
/// terminal, and not when `NO_COLOR` is set to a non-empty value
/// (<https://no-color.org>), so that logs sent to a file or a collector hold
/// no escape codes.
fn colour_logs(stderr_is_terminal: bool, no_color: Option<&std::ffi::OsStr>) -> bool {
    stderr_is_terminal && no_color.is_none_or(std::ffi::OsStr::is_empty)
}

/// Runs the server `args` describe until SIGINT/SIGTERM.
pub async fn serve(args: ServeArgs) -> Result<(), server::ServeError> {
    init_logging(&args.telemetry);
    let store_config = args.storage.store_config()?;
    let limits = args.limits.request_limits()?;
    let security = &args.security;
    let tokens = Tokens::load(security.tokens_file.as_deref(), api_key().as_deref())?;
    let tls = match (&security.tls_cert, &security.tls_key) {
        (Some(cert), Some(key)) => Some(TlsAcceptor::load(TlsFiles {
            cert: cert.clone(),
            key: key.clone(),
            client_ca: security.tls_client_ca.clone(),
        })?),
        _ => None,
    };
    check_exposure(&args, tokens.as_ref(), tls.as_ref())?;
    let catalogue = store::open_catalogue(&store_config).await?;
    let store = catalogue
        .open(&catalogue.default_namespace().await?)
        .await?;
    let metrics = Metrics::new();
    let engine = Arc::new(Engine::new(
        store,
        EngineConfig {
            watchdog_interval: args.sessions.watchdog_interval(),
            span_retention: args.storage.span_retention(),
            retention_interval: args.storage.retention_interval(),
            request_id_ttl: args.storage.request_id_ttl(),
            observer: Arc::new(metrics.clone()),
            limits,
            ..EngineConfig::default()
        },
    ));
    let listen = args.listen.listen;
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .map_err(|e| format!("failed to listen on {listen}: {e}"))?;
    let metrics_listener = match args.telemetry.metrics_listen {
        Some(addr) => Some(server::MetricsListener::new(
            tokio::net::TcpListener::bind(addr)
                .await
                .map_err(|e| format!("failed to listen on {addr} for metrics: {e}"))?,
        )),
        None => None,
    };
    let config = ServerConfig {
        drain_timeout: args.listen.drain_timeout(),
        otlp_max_in_flight: args.listen.otlp_max_in_flight,
        session_grace: args.sessions.session_grace(),
        session_lease: args.sessions.session_lease(),
        server_id: args
            .sessions
            .server_id
            .clone()
            .unwrap_or_else(server::random_server_id),
        transport: args.listen.transport_limits(),
        subscriber_timeout: args.listen.subscriber_timeout(),
        metrics_listener,
        metrics,
        health_check_interval: args.telemetry.health_check_interval(),
        cors_origins: args.listen.cors_origin.clone(),
        tokens,
        tls,
        reload_interval: security.reload_interval(),
        reflection: security.reflection,
        gateway: args.gateway.gateway_config(),
        console: security.console,
        catalogue: Some(server::ServedCatalogue(catalogue)),
        namespaces: args.storage.namespace_policy(args.listen.drain_timeout()),
    };
    tracing::info!(backend = ?args.storage.store, "store opened");
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
    let listen = args.listen.listen;
    let loopback = listen.ip().is_loopback();
    match (guarded, loopback, args.security.insecure) {
        (true, ..) => {}
        (false, true, _) => tracing::info!(
            %listen,
            "no tokens configured: listening on loopback only, every local process has full access"
        ),
        (false, false, true) => tracing::warn!(
            %listen,
            "--insecure: no tokens and no client certificates, anyone who reaches the port has full access"
        ),
        (false, false, false) => {
            return Err(format!(
                "refusing to listen on {listen} without tokens: set --tokens-file (or \
                 LIGHTNING_STORE_API_KEY), or --tls-client-ca, or pass --insecure"
            )
            .into());
        }
    }
    if tls.is_none() && !loopback {
        tracing::warn!(%listen, "no TLS: tokens and data cross the network in cleartext");
    }
    Ok(())
}

/// Returns a future that resolves on SIGINT or SIGTERM. The handlers are
/// installed here, before the server answers its first call, not when the
/// future is first polled: the accept loop may serve a connection before
/// it polls the future, and a SIGTERM sent once the server answered (a test
/// harness stopping it right after its health check) would otherwise meet
/// the default action and kill the process without a drain.
fn shutdown_signal() -> impl std::future::Future<Output = ()> {
    #[cfg(unix)]
    let signals = {
        use tokio::signal::unix::{SignalKind, signal};
        [SignalKind::interrupt(), SignalKind::terminate()].map(|kind| {
            signal(kind)
                .inspect_err(|error| tracing::warn!(%error, ?kind, "cannot listen for the signal"))
                .ok()
        })
    };
    async move {
        #[cfg(unix)]
        {
            let [interrupt, terminate] = signals;
            let received = |signal: Option<tokio::signal::unix::Signal>| async move {
                match signal {
                    Some(mut signal) => {
                        signal.recv().await;
                    }
                    None => std::future::pending::<()>().await,
                }
            };
            tokio::select! {
                () = received(interrupt) => {}
                () = received(terminate) => {}
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}
