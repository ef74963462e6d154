//! The LLM gateway's rules, as agent-lightning 1.x's server applies them
//! (`agentlightning/server/proxy.py`): which model server a rollout's calls
//! go to, the settings a request is rewritten with for training or
//! validation, which upstream failures are retried and after how long. The
//! bodies of a call and its `model_request` event are
//! [`super::model_call`]'s; the HTTP forwarding lives in [`crate::gateway`].

use std::time::Duration;

use sha2::{Digest, Sha256};

use super::records::ModelServer;

/// When and how often upstream calls are retried.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RetryPolicy {
    /// Upstream calls per proxied request, the first included.
    pub max_attempts: u32,
    /// Backoff before the first retry; it doubles per retry up to `cap`.
    pub base: Duration,
    /// Longest backoff between two upstream calls (before jitter).
    pub cap: Duration,
}

impl Default for RetryPolicy {
    /// Returns upstream's policy: 6 calls, 0.5 s doubling up to 8 s.
    fn default() -> Self {
        Self {
            max_attempts: 6,
            base: Duration::from_millis(500),
            cap: Duration::from_secs(8),
        }
    }
}

impl RetryPolicy {
    /// Returns the pause before retry number `attempt_index + 1`:
    /// exponential from `base`, capped at `cap`, times `jitter` (drawn from
    /// 0.75..1.25 by the caller).
    pub fn delay(&self, attempt_index: u32, jitter: f64) -> Duration {
        let exponential = self.base.as_secs_f64() * 2f64.powi(attempt_index.min(30) as i32);
        Duration::from_secs_f64(exponential.min(self.cap.as_secs_f64()) * jitter)
    }
}

/// The data split a proxied call belongs to (the `mode` path segment).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GatewayMode {
    Train,
    Val,
}

impl GatewayMode {
    /// Parses the `mode` path segment.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "train" => Some(Self::Train),
            "val" => Some(Self::Val),
            _ => None,
        }
    }

    /// Returns the segment's text.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Train => "train",
            Self::Val => "val",
        }
    }
}

/// The OpenAI endpoints the gateway forwards (the path after `openai/v1/`).
pub const UPSTREAM_PATHS: [&str; 2] = ["chat/completions", "completions"];

/// How the gateway rewrites requests (`serve --gateway-*`).
#[derive(Debug, Clone, PartialEq)]
pub struct GatewaySettings {
    /// The model every call is sent to; its registered servers serve it.
    pub model: String,
    pub train_temperature: f64,
    pub val_temperature: f64,
    /// Ask for log-probabilities on training calls.
    pub include_log_probs: bool,
    /// Ask for the MoE routing tensor on training calls.
    pub include_routed_experts: bool,
}

impl GatewaySettings {
    /// Returns the settings for `model` with upstream's defaults.
    pub fn for_model(model: impl Into<String>) -> Self {
        Self {
            model: model.into(),
            train_temperature: 1.0,
            val_temperature: 0.7,
            include_log_probs: true,
            include_routed_experts: false,
        }
    }
}

/// Chooses the server of a rollout's calls among a model's servers: the
/// first 8 bytes of sha256(rollout id), big-endian, modulo the number of
/// servers sorted by endpoint, so that a rollout sticks to one server (and
/// its prefix cache) for as long as the set of servers stays the same.
pub fn select_server<'a>(servers: &'a [ModelServer], rollout_id: &str) -> Option<&'a ModelServer> {
    if servers.is_empty() {
        return None;
    }
    let mut pool: Vec<&ModelServer> = servers.iter().collect();
    pool.sort_by(|a, b| a.endpoint.cmp(&b.endpoint));
    let digest = Sha256::digest(rollout_id.as_bytes());
    let head: [u8; 8] = digest[..8]
        .try_into()
        .expect("a sha256 digest has 32 bytes");
    let index = u64::from_be_bytes(head) % pool.len() as u64;
    Some(pool[index as usize])
}

/// Returns whether an upstream answer with this status is retried: 408,
/// 409, 429 and every 5xx.
pub fn is_retryable_status(status: u16) -> bool {
    matches!(status, 408 | 409 | 429) || status >= 500
}

/// Returns an event's `status` for an upstream HTTP status.
pub fn status_of(http_status: u16) -> &'static str {
    if http_status < 400 { "ok" } else { "error" }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(endpoint: &str) -> ModelServer {
        ModelServer {
            model: "m".into(),
            endpoint: endpoint.into(),
            version: 0,
        }
    }

    #[test]
    fn servers_are_chosen_by_sha256_over_sorted_endpoints() {
        // Python: int.from_bytes(sha256(b"rollout-1").digest()[:8], "big") % 3 == 1,
        // and % 3 == 0 for "abc".
        let servers = [
            server("http://c/v1"),
            server("http://a/v1"),
            server("http://b/v1"),
        ];
        let chosen = select_server(&servers, "rollout-1").unwrap();
        assert_eq!(chosen.endpoint, "http://b/v1");
        assert_eq!(
            select_server(&servers, "abc").unwrap().endpoint,
            "http://a/v1"
        );
        // Order of registration does not matter.
        let reversed: Vec<_> = servers.iter().rev().cloned().collect();
        assert_eq!(select_server(&reversed, "rollout-1"), Some(chosen));
        assert_eq!(select_server(&[], "rollout-1"), None);
    }

    #[test]
    fn retries_back_off_exponentially_with_a_cap() {
        assert!(is_retryable_status(429) && is_retryable_status(503) && is_retryable_status(408));
        assert!(!is_retryable_status(400) && !is_retryable_status(200));
        let policy = RetryPolicy::default();
        assert_eq!(policy.delay(0, 1.0), Duration::from_millis(500));
        assert_eq!(policy.delay(3, 1.0), Duration::from_secs(4));
        assert_eq!(policy.delay(5, 1.0), policy.cap);
        assert_eq!(policy.delay(5, 0.75), Duration::from_secs(6));
    }
}
