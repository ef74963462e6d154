//! The LLM gateway's rules, as agent-lightning 1.x's server applies them
//! (`agentlightning/server/proxy.py`): which model server a rollout's calls
//! go to, how a request body is rewritten for training or validation, which
//! upstream failures are retried and after how long, and the
//! `model_request` event recorded for every upstream answer. The HTTP
//! forwarding itself lives in [`crate::gateway`].

use std::time::Duration;

use sha2::{Digest, Sha256};

use super::ModelServer;
use crate::core::model::Json;

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

    /// Rewrites a request body: the configured model and the mode's
    /// temperature replace the caller's, token ids are always asked for,
    /// and training calls also ask for log-probabilities and routing when
    /// enabled. Keys keep their place; new ones are appended in this order.
    pub fn prepare_body(&self, mut body: serde_json::Map<String, Json>, mode: GatewayMode) -> Json {
        let temperature = match mode {
            GatewayMode::Train => self.train_temperature,
            GatewayMode::Val => self.val_temperature,
        };
        body.insert("model".into(), Json::String(self.model.clone()));
        body.insert("temperature".into(), Json::from(temperature));
        body.insert("return_token_ids".into(), Json::Bool(true));
        if mode == GatewayMode::Train {
            if self.include_log_probs {
                body.insert("logprobs".into(), Json::Bool(true));
            }
            if self.include_routed_experts {
                body.insert("return_routed_experts".into(), Json::Bool(true));
            }
        }
        Json::Object(body)
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

/// Removes the routing tensor from an upstream response's choices and
/// returns the first non-null one (`null` when none): it is recorded
/// beside the response, not in it.
pub fn pop_routed_experts(response: &mut Json) -> Json {
    let Some(choices) = response.get_mut("choices").and_then(Json::as_array_mut) else {
        return Json::Null;
    };
    for choice in choices {
        if let Some(object) = choice.as_object_mut()
            && let Some(routed) = object.shift_remove(super::events::ROUTED_EXPERTS)
            && !routed.is_null()
        {
            return routed;
        }
    }
    Json::Null
}

/// One upstream answer, as the `model_request` event records it.
#[derive(Debug, Clone, PartialEq)]
pub struct UpstreamAnswer {
    /// The rewritten request body sent upstream.
    pub request: Json,
    /// The answer's JSON body (`{}` when it was not JSON), routing removed.
    pub response: Json,
    pub routed_experts: Json,
    pub http_status: u16,
    pub latency_ms: f64,
    /// Upstream calls made before this answer.
    pub retry_count: u32,
}

/// Returns the data of the `model_request` event of an answer, keyed as
/// upstream keys it.
pub fn model_request_data(server: &ModelServer, answer: UpstreamAnswer) -> Json {
    let usage = answer
        .response
        .get("usage")
        .filter(|usage| usage.is_object())
        .cloned()
        .unwrap_or(Json::Null);
    let finish_reason = answer
        .response
        .get("choices")
        .and_then(Json::as_array)
        .and_then(|choices| choices.first())
        .and_then(|choice| choice.get("finish_reason"))
        .and_then(Json::as_str)
        .filter(|reason| !reason.is_empty())
        .map_or(Json::Null, |reason| Json::String(reason.to_owned()));
    let mut data = serde_json::Map::new();
    data.insert("model".into(), Json::String(server.model.clone()));
    data.insert("model_version".into(), Json::from(server.version));
    data.insert("request".into(), answer.request);
    data.insert("response".into(), answer.response);
    data.insert(
        "server".into(),
        serde_json::json!({
            "model": server.model,
            "endpoint": server.endpoint,
            "version": server.version,
        }),
    );
    data.insert("latency_ms".into(), Json::from(answer.latency_ms));
    data.insert("http_status".into(), Json::from(answer.http_status));
    data.insert(
        "status".into(),
        Json::String(status_of(answer.http_status).to_owned()),
    );
    data.insert("retry_count".into(), Json::from(answer.retry_count));
    data.insert("routed_experts".into(), answer.routed_experts);
    data.insert("usage".into(), usage);
    data.insert("finish_reason".into(), finish_reason);
    Json::Object(data)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
    fn bodies_are_rewritten_per_mode() {
        let mut settings = GatewaySettings::for_model("M");
        settings.include_routed_experts = true;
        let body = json!({"temperature": 0.1, "messages": [], "model": "x"});
        let Json::Object(body) = body else {
            unreachable!()
        };
        let train = settings.prepare_body(body.clone(), GatewayMode::Train);
        assert_eq!(
            serde_json::to_string(&train).unwrap(),
            r#"{"temperature":1.0,"messages":[],"model":"M","return_token_ids":true,"logprobs":true,"return_routed_experts":true}"#
        );
        let val = settings.prepare_body(body, GatewayMode::Val);
        assert_eq!(val["temperature"], json!(0.7));
        assert!(val.get("logprobs").is_none());
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

    #[test]
    fn events_record_the_answer_with_routing_beside_it() {
        let mut response = json!({"choices": [{"routed_experts": null, "finish_reason": "stop"},
            {"routed_experts": [1]}], "usage": {"total_tokens": 3}});
        let routed = pop_routed_experts(&mut response);
        assert_eq!(routed, json!([1]));
        assert_eq!(response["choices"], json!([{"finish_reason": "stop"}, {}]));
        let data = model_request_data(
            &server("http://a/v1"),
            UpstreamAnswer {
                request: json!({}),
                response,
                routed_experts: routed,
                http_status: 503,
                latency_ms: 1.5,
                retry_count: 5,
            },
        );
        let keys: Vec<&str> = data
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(
            keys,
            [
                "model",
                "model_version",
                "request",
                "response",
                "server",
                "latency_ms",
                "http_status",
                "status",
                "retry_count",
                "routed_experts",
                "usage",
                "finish_reason"
            ]
        );
        assert_eq!(data["status"], json!("error"));
        assert_eq!(data["finish_reason"], json!("stop"));
        assert_eq!(data["usage"], json!({"total_tokens": 3}));
    }
}
