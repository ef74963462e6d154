//! Reloads the tokens file and the TLS files while the server runs: every
//! interval each is re-read and, when its content changed, swapped in. A
//! bad new file is logged and counted, and the last good one stays in use.

use std::time::Duration;

use crate::tls::TlsAcceptor;
use lightning_store_adapters::auth::Tokens;
use lightning_store_adapters::metrics::Metrics;

/// Polls until `closing` turns true.
pub async fn run(
    tokens: Option<Tokens>,
    tls: Option<TlsAcceptor>,
    interval: Duration,
    metrics: Metrics,
    mut closing: tokio::sync::watch::Receiver<bool>,
) {
    if tokens.as_ref().and_then(Tokens::file).is_none() && tls.is_none() {
        return;
    }
    let mut ticker = tokio::time::interval(interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticker.tick().await;
    loop {
        tokio::select! {
            _ = ticker.tick() => {}
            _ = closing.wait_for(|closed| *closed) => return,
        }
        if let Some(tokens) = tokens.as_ref().filter(|t| t.file().is_some()) {
            report(&metrics, "tokens", tokens.reload());
        }
        if let Some(tls) = &tls {
            report(&metrics, "tls", tls.reload());
        }
    }
}

fn report(metrics: &Metrics, file: &'static str, outcome: Result<bool, String>) {
    match outcome {
        Ok(false) => {}
        Ok(true) => {
            metrics.reloaded(file, true);
            tracing::info!(file, "reloaded");
        }
        Err(error) => {
            metrics.reloaded(file, false);
            tracing::warn!(file, %error, "reload failed, keeping the previous one");
        }
    }
}
