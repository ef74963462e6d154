//! What an agent-lightning 1.x rollout gives its trainer, and why it gives
//! nothing. The trainer (`agentlightning.verl.agl_rollout_manager`) reads a
//! terminal rollout's `triplet` events: each model request that did not
//! fail (its `status` is not `error`, its HTTP status below 400) and has
//! response token ids is one training row; the last reward event's value,
//! when it is a number, is the reward of the last row. A rollout whose
//! events give no row, or rows without a reward, trains nothing; the
//! findings say which of those rules it missed.

use super::events::{self, EventFormat, EventQuery, MODEL_REQUEST, REWARD, parse_data};
use super::records::{Agl1Event, Agl1State};
use crate::error::StoreResult;
use crate::model::Json;

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

/// Diagnoses a 1.x rollout in `state` (with its `error_message`) from the
/// raw events of its event attempt, by the trainer's rules.
pub fn diagnose(
    state: Agl1State,
    error_message: Option<&str>,
    raw: &[Agl1Event],
) -> StoreResult<Diagnosis> {
    let model_calls = raw.iter().filter(|e| e.event_type == MODEL_REQUEST).count();
    let triplets = events::present(
        raw.to_vec(),
        &EventQuery {
            event_type: None,
            format: EventFormat::Triplet,
            include_routed_experts: false,
        },
    )?;
    let mut diagnosis = Diagnosis {
        model_calls,
        ..Diagnosis::default()
    };
    let (mut failed, mut without_ids, mut without_log_probs) = (0, 0, 0);
    let mut last_reward = None;
    for event in &triplets {
        match event.event_type.as_str() {
            MODEL_REQUEST => {
                diagnosis.distinct_calls += 1;
                let data = parse_data(&event.data)?;
                if call_failed(&data) {
                    failed += 1;
                } else if !has_items(&data["response_token_ids"]) {
                    without_ids += 1;
                } else {
                    diagnosis.training_rows += 1;
                    if data["response_log_probs"].is_null() {
                        without_log_probs += 1;
                    }
                }
            }
            REWARD => last_reward = Some(parse_data(&event.data)?["value"].clone()),
            _ => {}
        }
    }
    let findings = &mut diagnosis.findings;
    if model_calls == 0 {
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
        Some(value) => match events::reward_value(&value) {
            Some(reward) => diagnosis.reward = Some(reward),
            None => findings.push(Finding::RewardNotANumber { value }),
        },
    }
    match state {
        Agl1State::Failed => findings.push(Finding::Failed {
            error: error_message.map(str::to_owned),
        }),
        Agl1State::Queuing | Agl1State::Running => findings.push(Finding::NotFinished),
        Agl1State::Succeeded => {}
    }
    Ok(diagnosis)
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
