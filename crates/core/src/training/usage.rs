//! What a rollout's model calls used: each call's latency and token
//! counts as its records report them ([`ModelCall`]), summed per rollout
//! as they arrive ([`RolloutUsage`]), from which a counted rollout
//! measures its tokens and its calls' latency ([`super::measure`]).
//!
//! * agent-lightning 1.x: each `model_request` event the gateway records
//!   is a call: its `latency_ms`, and its `usage` (`prompt_tokens`,
//!   `completion_tokens`) when the model server reported one.
//! * agent-lightning 0.x: each span named like a model call is a call
//!   (read by `crate::trajectory::agl0::model_call`).

/// What one model call reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ModelCall {
    /// How long the call took, in milliseconds.
    pub latency_ms: i64,
    /// Its prompt and response tokens, when reported.
    pub tokens: Option<Tokens>,
}

/// A call's token counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Tokens {
    pub prompt: i64,
    pub response: i64,
}

impl Tokens {
    /// Returns the counts a call reported, `None` when it reported
    /// neither (one reported alone leaves the other 0).
    pub fn reported(prompt: Option<i64>, response: Option<i64>) -> Option<Self> {
        (prompt.is_some() || response.is_some()).then(|| Self {
            prompt: prompt.unwrap_or(0),
            response: response.unwrap_or(0),
        })
    }
}

impl ModelCall {
    /// Returns the call a 1.x `model_request` event's data records: its
    /// `latency_ms` (0 when absent), and the `prompt_tokens` and
    /// `completion_tokens` of its `usage` when that is an object holding
    /// either.
    pub fn of_model_request(latency_ms: Option<f64>, usage: Option<&serde_json::Value>) -> Self {
        let count = |key: &str| usage?.get(key)?.as_i64();
        let tokens = Tokens::reported(count("prompt_tokens"), count("completion_tokens"));
        let latency_ms = latency_ms
            .filter(|ms| ms.is_finite() && *ms > 0.0)
            .map_or(0, |ms| ms.round() as i64);
        Self { latency_ms, tokens }
    }
}

/// What a rollout's model calls used, summed (saturating), or what new
/// calls add to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RolloutUsage {
    /// Calls made.
    pub calls: i64,
    /// Their latencies' sum, in milliseconds.
    pub latency_ms: i64,
    /// Of them, those that reported their tokens.
    pub reported: i64,
    /// The tokens those reported.
    pub prompt_tokens: i64,
    pub response_tokens: i64,
}

impl RolloutUsage {
    /// Adds a call.
    pub fn add_call(&mut self, call: ModelCall) {
        let mut one = RolloutUsage {
            calls: 1,
            latency_ms: call.latency_ms,
            ..Self::default()
        };
        if let Some(tokens) = call.tokens {
            one.reported = 1;
            one.prompt_tokens = tokens.prompt;
            one.response_tokens = tokens.response;
        }
        self.add(one);
    }

    /// Adds what other calls used.
    pub fn add(&mut self, other: RolloutUsage) {
        self.calls = self.calls.saturating_add(other.calls);
        self.latency_ms = self.latency_ms.saturating_add(other.latency_ms);
        self.reported = self.reported.saturating_add(other.reported);
        self.prompt_tokens = self.prompt_tokens.saturating_add(other.prompt_tokens);
        self.response_tokens = self.response_tokens.saturating_add(other.response_tokens);
    }

    /// Returns the sum of two usages.
    pub fn plus(mut self, other: RolloutUsage) -> Self {
        self.add(other);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn a_1x_call_reads_its_latency_and_its_usage() {
        let usage =
            serde_json::json!({"prompt_tokens": 11, "completion_tokens": 3, "total_tokens": 14});
        assert_eq!(
            ModelCall::of_model_request(Some(812.6), Some(&usage)),
            ModelCall {
                latency_ms: 813,
                tokens: Some(Tokens {
                    prompt: 11,
                    response: 3
                }),
            }
        );
        let other = serde_json::json!({"n": 1});
        assert_eq!(
            ModelCall::of_model_request(None, Some(&other)),
            ModelCall::default()
        );
        assert_eq!(
            ModelCall::of_model_request(Some(f64::NAN), None).latency_ms,
            0
        );
    }

    #[test]
    fn usage_sums_calls_and_counts_those_that_reported_tokens() {
        let mut usage = RolloutUsage::default();
        usage.add_call(ModelCall {
            latency_ms: 100,
            tokens: Some(Tokens {
                prompt: 10,
                response: 2,
            }),
        });
        usage.add_call(ModelCall {
            latency_ms: 300,
            tokens: None,
        });
        assert_eq!(
            usage,
            RolloutUsage {
                calls: 2,
                latency_ms: 400,
                reported: 1,
                prompt_tokens: 10,
                response_tokens: 2,
            }
        );
        assert_eq!(usage.plus(usage).calls, 4);
    }
}
