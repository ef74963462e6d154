//! What an agent-lightning 1.x rollout gives its trainer, and why it gives
//! nothing. The trainer (`agentlightning.verl.agl_rollout_manager`) reads a
//! terminal rollout's `triplet` events: each model request that did not
//! fail (its `status` is not `error`, its HTTP status below 400) and has
//! response token ids is one training row; the last reward event's value,
//! when it is a number, is the reward of the last row. A rollout whose
//! events give no row, or rows without a reward, trains nothing; the
//! findings say which of those rules it missed.

use super::events::{self, MODEL_REQUEST, REWARD, parse_data};
use super::records::{Agl1Event, Agl1State};
use crate::error::StoreResult;
use crate::model::Json;
use crate::training::{NoRowsReason, NoRowsReasons, RowsVerdict};

/// Why a rollout yields fewer training rows than its model calls, or rows
/// without a reward.
#[derive(Debug, Clone, PartialEq)]
pub enum Finding {
    /// The agent made no call through the gateway.
    NoModelCalls,
    /// Calls the model server answered with an error.
    FailedCalls { calls: usize },
    /// Calls whose answer had no response token ids (the model server was
    /// not asked for them, or does not return them).
    NoTokenIds { calls: usize },
    /// Rows without log-probabilities (trainers that need them drop them).
    NoLogProbs { rows: usize },
    /// No reward event, so the rows have no reward.
    NoReward,
    /// The last reward event's value is not a number.
    RewardNotANumber { value: Json },
    /// The rollout failed (the 1.x error message, if any).
    Failed { error: Option<String> },
    /// The rollout has not finished: the trainer reads it once it has.
    NotFinished,
}

/// What the trainer makes of a rollout's events.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Diagnosis {
    /// Model requests recorded (raw, before the triplet view's de-duplication).
    pub model_calls: usize,
    /// Model requests the triplet view keeps (one per prompt).
    pub distinct_calls: usize,
    /// Training rows the trainer builds.
    pub training_rows: usize,
    /// The reward of the last row, when the last reward event has a number.
    pub reward: Option<f64>,
    pub findings: Vec<Finding>,
}

impl Diagnosis {
    /// Returns what the rollout gives the training summary: its rows and,
    /// when it gives none, the findings that say why.
    pub fn verdict(&self) -> RowsVerdict {
        let mut reasons = NoRowsReasons::default();
        if self.training_rows == 0 {
            for finding in &self.findings {
                let reason = match finding {
                    Finding::NoModelCalls => NoRowsReason::NoModelCalls,
                    Finding::FailedCalls { .. } => NoRowsReason::FailedCalls,
                    Finding::NoTokenIds { .. } => NoRowsReason::NoTokenIds,
                    Finding::NoReward => NoRowsReason::NoReward,
                    Finding::RewardNotANumber { .. } => NoRowsReason::RewardNotANumber,
                    Finding::Failed { .. } => NoRowsReason::RolloutFailed,
                    Finding::NoLogProbs { .. } | Finding::NotFinished => continue,
                };
                reasons.insert(reason);
            }
        }
        RowsVerdict {
            rows: self.training_rows as i64,
            reasons,
        }
    }
}

/// Diagnoses a 1.x rollout in `state` (with its `error_message`) from the
/// raw events of its event attempt, by the trainer's rules.
pub fn diagnose(
    state: Agl1State,
    error_message: Option<&str>,
    raw: &[Agl1Event],
) -> StoreResult<Diagnosis> {
    let read = raw.iter().map(read_in_full).collect::<StoreResult<_>>()?;
    Ok(conclude(state, error_message, read))
}

/// Returns what a 1.x rollout ending in `state` gives the training summary
/// from the raw events of its event attempt: [`diagnose`]'s rows and
/// reasons, read without building each model request's JSON tree where its
/// shape allows (the tree of a ~17 KB request of 2,000 token ids costs
/// about half a millisecond; [`read_quickly`]).
pub fn verdict(state: Agl1State, raw: &[Agl1Event]) -> StoreResult<RowsVerdict> {
    let read = raw.iter().map(read_quickly).collect::<StoreResult<_>>()?;
    Ok(conclude(state, None, read).verdict())
}

/// What the trainer's rules read of one raw event.
#[derive(Debug, Clone, PartialEq)]
enum Read {
    Call(Call),
    /// A reward event's value.
    Reward(Json),
    Other,
}

/// What the trainer's rules read of one model request (its triplet view,
/// [`events::trim_model_request`]).
#[derive(Debug, Clone, PartialEq)]
struct Call {
    /// The triplet view's de-duplication key: the prompt token ids.
    key: Option<Vec<i64>>,
    failed: bool,
    has_token_ids: bool,
    /// Whether the answer has log-probabilities; `None`: not read.
    has_log_probs: Option<bool>,
}

/// Reads an event through its JSON tree, as the triplet view does.
fn read_in_full(event: &Agl1Event) -> StoreResult<Read> {
    Ok(match event.event_type.as_str() {
        MODEL_REQUEST => {
            let trimmed = events::trim_model_request(&parse_data(&event.data)?);
            Read::Call(Call {
                key: events::dedupe_key(&trimmed),
                failed: call_failed(&trimmed),
                has_token_ids: has_items(&trimmed["response_token_ids"]),
                has_log_probs: Some(!trimmed["response_log_probs"].is_null()),
            })
        }
        REWARD => Read::Reward(parse_data(&event.data)?["value"].clone()),
        _ => Read::Other,
    })
}

/// Reads an event as [`read_in_full`] does, but a model request of the
/// usual shape (objects where the view reads fields, token ids as lists of
/// integers, a string `status`, an integer `http_status`) without building
/// its tree: only the fields the rules read are decoded, the rest skipped.
/// Any other shape is read in full. Log-probabilities are not read.
fn read_quickly(event: &Agl1Event) -> StoreResult<Read> {
    if event.event_type != MODEL_REQUEST {
        return read_in_full(event);
    }
    match quick_call(&event.data) {
        Some(call) => Ok(Read::Call(call)),
        None => read_in_full(event).map(|read| match read {
            Read::Call(call) => Read::Call(Call {
                has_log_probs: None,
                ..call
            }),
            other => other,
        }),
    }
}

/// The fields of a model request [`quick_call`] decodes.
#[derive(serde::Deserialize)]
struct QuickRequest<'a> {
    status: Option<String>,
    http_status: Option<i64>,
    #[serde(borrow)]
    response: Option<&'a serde_json::value::RawValue>,
}

/// The fields of a model request's `response` [`quick_call`] decodes.
#[derive(serde::Deserialize)]
struct QuickResponse<'a> {
    prompt_token_ids: Option<Vec<i64>>,
    #[serde(borrow)]
    choices: Option<Vec<&'a serde_json::value::RawValue>>,
}

/// The fields of a response's first choice [`quick_call`] decodes.
#[derive(serde::Deserialize)]
struct QuickChoice {
    prompt_token_ids: Option<Vec<i64>>,
    token_ids: Option<Items>,
}

/// Whether a JSON value is a non-empty list (its items skipped unread), as
/// the trainer tests token ids; not a list is an error.
struct Items(bool);

impl<'de> serde::Deserialize<'de> for Items {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = Items;

            fn expecting(&self, formatter: &mut std::fmt::Formatter) -> std::fmt::Result {
                formatter.write_str("a list")
            }

            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<Items, A::Error> {
                let any = seq.next_element::<serde::de::IgnoredAny>()?.is_some();
                while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
                Ok(Items(any))
            }
        }
        deserializer.deserialize_seq(Visitor)
    }
}

/// Reads a model request's data of the usual shape; `None` for another.
fn quick_call(data: &str) -> Option<Call> {
    // A derived struct also reads a JSON array, by position: objects only.
    let object = |text: &str| text.trim_start().starts_with('{');
    if !object(data) {
        return None;
    }
    let request: QuickRequest = serde_json::from_str(data).ok()?;
    let (mut prompt, mut has_token_ids) = (Vec::new(), false);
    if let Some(response) = request.response {
        if !object(response.get()) {
            return None;
        }
        let response: QuickResponse = serde_json::from_str(response.get()).ok()?;
        prompt = response.prompt_token_ids.unwrap_or_default();
        if let Some(first) = response.choices.unwrap_or_default().first() {
            if !object(first.get()) {
                return None;
            }
            let first: QuickChoice = serde_json::from_str(first.get()).ok()?;
            if prompt.is_empty() {
                prompt = first.prompt_token_ids.unwrap_or_default();
            }
            has_token_ids = first.token_ids.is_some_and(|Items(any)| any);
        }
    }
    Some(Call {
        key: (!prompt.is_empty()).then_some(prompt),
        failed: request.status.as_deref() == Some("error")
            || request.http_status.is_some_and(|status| status >= 400),
        has_token_ids,
        has_log_probs: None,
    })
}

/// Applies the trainer's rules to what was read of a rollout's events in
/// `state`: the triplet view keeps the last model request of each prompt
/// (and every request without a valid prompt key), each kept request that
/// did not fail and has token ids is a row, and the last reward event's
/// value is the reward.
fn conclude(state: Agl1State, error_message: Option<&str>, read: Vec<Read>) -> Diagnosis {
    let keys: Vec<Option<&[i64]>> = read
        .iter()
        .map(|event| match event {
            Read::Call(call) => call.key.as_deref(),
            Read::Reward(_) | Read::Other => None,
        })
        .collect();
    let kept = events::kept_by_prompt(&keys);
    let mut diagnosis = Diagnosis::default();
    let (mut failed, mut without_ids, mut without_log_probs) = (0, 0, 0);
    let mut last_reward = None;
    for (event, kept) in read.iter().zip(kept) {
        match event {
            Read::Call(call) => {
                diagnosis.model_calls += 1;
                if !kept {
                    continue;
                }
                diagnosis.distinct_calls += 1;
                if call.failed {
                    failed += 1;
                } else if !call.has_token_ids {
                    without_ids += 1;
                } else {
                    diagnosis.training_rows += 1;
                    if call.has_log_probs == Some(false) {
                        without_log_probs += 1;
                    }
                }
            }
            Read::Reward(value) => last_reward = Some(value),
            Read::Other => {}
        }
    }
    let findings = &mut diagnosis.findings;
    if diagnosis.model_calls == 0 {
        findings.push(Finding::NoModelCalls);
    }
    if failed > 0 {
        findings.push(Finding::FailedCalls { calls: failed });
    }
    if without_ids > 0 {
        findings.push(Finding::NoTokenIds { calls: without_ids });
    }
    if without_log_probs > 0 {
        findings.push(Finding::NoLogProbs {
            rows: without_log_probs,
        });
    }
    match last_reward {
        None => findings.push(Finding::NoReward),
        Some(value) => match events::reward_value(value) {
            Some(reward) => diagnosis.reward = Some(reward),
            None => findings.push(Finding::RewardNotANumber {
                value: value.clone(),
            }),
        },
    }
    match state {
        Agl1State::Failed => findings.push(Finding::Failed {
            error: error_message.map(str::to_owned),
        }),
        Agl1State::Queuing | Agl1State::Running => findings.push(Finding::NotFinished),
        Agl1State::Succeeded => {}
    }
    diagnosis
}

/// The trainer skips a call whose `status` is `error` or whose HTTP status
/// is 400 or more.
fn call_failed(data: &Json) -> bool {
    data["status"] == "error"
        || data["http_status"]
            .as_i64()
            .is_some_and(|status| status >= 400)
}

fn has_items(value: &Json) -> bool {
    value.as_array().is_some_and(|items| !items.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agl1::events::test_event as event;
    use serde_json::json;

    fn call(prompt: &[i64], response: &[i64], status: u16) -> Agl1Event {
        event(
            MODEL_REQUEST,
            json!({"response": {"prompt_token_ids": prompt, "choices": [{"token_ids": response}]},
                   "http_status": status, "status": if status < 400 { "ok" } else { "error" }}),
        )
    }

    #[test]
    fn rows_follow_the_trainers_rules() {
        let events = vec![
            call(&[1], &[2], 200),
            call(&[1], &[3], 200),
            call(&[4], &[], 200),
            call(&[5], &[6], 500),
            call(&[7], &[8], 200),
            event(REWARD, json!({"value": 0.5})),
        ];
        let diagnosis = diagnose(Agl1State::Succeeded, None, &events).unwrap();
        assert_eq!(diagnosis.model_calls, 5);
        assert_eq!(
            diagnosis.distinct_calls, 4,
            "the first [1] prompt is superseded"
        );
        assert_eq!(diagnosis.training_rows, 2);
        assert_eq!(diagnosis.reward, Some(0.5));
        assert_eq!(
            diagnosis.findings,
            [
                Finding::FailedCalls { calls: 1 },
                Finding::NoTokenIds { calls: 1 },
                Finding::NoLogProbs { rows: 2 },
            ]
        );
        let verdict = diagnosis.verdict();
        assert_eq!(verdict.rows, 2);
        assert!(
            verdict.reasons.is_empty(),
            "a rollout with rows has no reason"
        );
    }

    #[test]
    fn a_quick_read_reads_what_a_full_read_does_or_leaves_it_to_one() {
        let shapes = [
            json!({"response": {"prompt_token_ids": [1, 2], "choices": [{"token_ids": [3]}]},
                   "http_status": 200, "status": "ok", "routed_experts": [[1]]}),
            json!({"response": {"prompt_token_ids": [], "choices": [
                {"prompt_token_ids": [4], "token_ids": [], "logprobs": {"content": []}}]}}),
            json!({"response": {"choices": []}, "http_status": 503, "status": "error"}),
            json!({"response": null}),
            json!({}),
            json!({"response": {"prompt_token_ids": null, "choices": null}}),
            json!({"status": "ok", "http_status": 404}),
            // Other shapes, read in full.
            json!({"response": [{"prompt_token_ids": [1], "choices": [{"token_ids": [2]}]}]}),
            json!({"response": {"prompt_token_ids": [1.5], "choices": [{"token_ids": [2]}]}}),
            json!({"response": {"prompt_token_ids": [true]}}),
            json!({"response": {"prompt_token_ids": "x", "choices": [{"prompt_token_ids": [5]}]}}),
            json!({"response": {"choices": [[1, 2]]}}),
            json!({"http_status": 500.0}),
            json!({"status": 7}),
            json!(["error", 500, {"prompt_token_ids": [1]}]),
        ];
        let mut quick_reads = 0;
        for shape in shapes {
            let event = event(MODEL_REQUEST, shape.clone());
            let Read::Call(full) = read_in_full(&event).unwrap() else {
                panic!()
            };
            let Read::Call(quick) = read_quickly(&event).unwrap() else {
                panic!()
            };
            assert_eq!(
                quick,
                Call {
                    has_log_probs: None,
                    ..full
                },
                "{shape}"
            );
            quick_reads += usize::from(quick_call(&event.data).is_some());
        }
        assert_eq!(quick_reads, 7, "the usual shapes are read quickly");
        let events = [
            call(&[1], &[2], 200),
            call(&[1], &[], 200),
            event(REWARD, json!({"value": "high"})),
        ];
        let verdict = verdict(Agl1State::Failed, &events).unwrap();
        let diagnosed = diagnose(Agl1State::Failed, None, &events).unwrap();
        assert_eq!(verdict, diagnosed.verdict());
        let reasons: Vec<NoRowsReason> = verdict.reasons.iter().collect();
        assert_eq!(
            reasons,
            [
                NoRowsReason::NoTokenIds,
                NoRowsReason::RewardNotANumber,
                NoRowsReason::RolloutFailed
            ],
            "the retried prompt's last call has no token ids"
        );
    }

    #[test]
    fn a_rollout_without_calls_or_reward_says_so() {
        let diagnosis = diagnose(Agl1State::Failed, Some("agent crashed"), &[]).unwrap();
        assert_eq!(diagnosis.training_rows, 0);
        assert_eq!(
            diagnosis.findings,
            [
                Finding::NoModelCalls,
                Finding::NoReward,
                Finding::Failed {
                    error: Some("agent crashed".into())
                }
            ]
        );
        let reasons: Vec<NoRowsReason> = diagnosis.verdict().reasons.iter().collect();
        assert_eq!(
            reasons,
            [
                NoRowsReason::NoModelCalls,
                NoRowsReason::NoReward,
                NoRowsReason::RolloutFailed
            ]
        );
        let boolean = [event(REWARD, json!({"value": true}))];
        let diagnosis = diagnose(Agl1State::Running, None, &boolean).unwrap();
        assert_eq!(diagnosis.reward, None);
        assert!(
            diagnosis
                .findings
                .contains(&Finding::RewardNotANumber { value: json!(true) })
        );
        assert!(diagnosis.findings.contains(&Finding::NotFinished));
    }
}
