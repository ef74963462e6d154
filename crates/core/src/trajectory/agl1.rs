//! Agent-lightning 1.x's rollouts in both layouts, from the raw events of
//! the rollout's event attempt.
//!
//! Triplets are the rows 1.x's trainer builds
//! (`agentlightning/verl/agl_rollout_manager.py`, `_build_completed_rollout`)
//! from the `triplet` view of the events ([`crate::agl1::events`]): each
//! kept model request that did not fail and has response token ids is a
//! row, with the prompt and response token ids, the log-probabilities, the
//! routing tensor and the server; the rollout's reward
//! ([`crate::agl1::diagnosis`]) goes on the last row; image URLs come from
//! the raw request's messages (its `_aligned_image_urls`). Where upstream
//! passes token ids that are not lists of integers on to the trainer, the
//! call is skipped here as [`SkipReason::MalformedTokenIds`].
//!
//! The conversation is read from the gateway's recorded requests (OpenAI
//! chat `messages`, or a completion's `prompt`) and answers.

use super::chat::{self, ChatCall};
use super::records::{
    ChatMessage, NoRows, Origin, ReasonCode, RolloutReason, SkipReason, SkippedCall, TrainingRow,
    TripletRecord,
};
use crate::agl1::diagnosis::{self, Finding};
use crate::agl1::events::{MODEL_REQUEST, parse_data, triplet_view};
use crate::agl1::{Agl1Event, Agl1State};
use crate::error::StoreResult;
use crate::model::Json;

/// The triplet records of a 1.x rollout in `state` (with its
/// `error_message`) from the raw `events` of its event attempt. `origin`'s
/// attempt is replaced by the events' own where they name one.
pub fn triplets(
    origin: Origin,
    state: Agl1State,
    error_message: Option<&str>,
    events: &[Agl1Event],
) -> StoreResult<Vec<TripletRecord>> {
    let diagnosis = diagnosis::diagnose(state, error_message, events)?;
    let origin = Origin {
        attempt_id: events
            .first()
            .map(|event| event.attempt_id.clone())
            .or(origin.attempt_id),
        ..origin
    };
    // Each raw model request's place among the model calls.
    let mut call_of = vec![0; events.len()];
    let mut calls = 0;
    for (index, event) in events.iter().enumerate() {
        if event.event_type == MODEL_REQUEST {
            call_of[index] = calls;
            calls += 1;
        }
    }
    let view = triplet_view(events.iter().cloned())?;
    let kept: std::collections::HashSet<usize> = view.iter().map(|(index, _)| *index).collect();
    let mut records = Vec::new();
    let mut malformed = 0;
    for (index, event) in events.iter().enumerate() {
        if event.event_type == MODEL_REQUEST && !kept.contains(&index) {
            let trimmed = crate::agl1::events::trim_model_request(&parse_data(&event.data)?);
            records.push(skipped(
                &origin,
                call_of[index],
                &trimmed,
                SkipReason::Superseded,
            ));
        }
    }
    for (index, event) in &view {
        if event.event_type != MODEL_REQUEST {
            continue;
        }
        let data = parse_data(&event.data)?;
        let call_index = call_of[*index];
        let http_status = data.get("http_status").and_then(Json::as_i64);
        if data.get("status").and_then(Json::as_str) == Some("error")
            || http_status.is_some_and(|status| status >= 400)
        {
            records.push(skipped(&origin, call_index, &data, SkipReason::FailedCall));
            continue;
        }
        if !crate::agl1::truthy(&data["response_token_ids"]) {
            records.push(skipped(&origin, call_index, &data, SkipReason::NoTokenIds));
            continue;
        }
        let (Some(prompt), Some(response)) = (
            token_ids(&data["prompt_token_ids"]),
            token_ids(&data["response_token_ids"]),
        ) else {
            malformed += 1;
            let reason = SkipReason::MalformedTokenIds;
            records.push(skipped(&origin, call_index, &data, reason));
            continue;
        };
        let raw = parse_data(&events[*index].data)?;
        let urls = chat::image_urls(&raw["request"]["messages"]);
        records.push(TripletRecord::Row(TrainingRow {
            origin: origin.clone(),
            row_index: 0,
            call_index,
            model: data["server"]["model"].as_str().map(str::to_owned),
            model_version: data["server"]["version"].as_i64(),
            prompt_token_ids: prompt,
            response_token_ids: response,
            response_log_probs: data["response_log_probs"]
                .as_array()
                .map(|probs| probs.iter().filter_map(Json::as_f64).collect()),
            reward: None,
            image_urls: (!urls.is_empty()).then_some(urls),
            routed_experts: data.get("routed_experts").filter(|r| !r.is_null()).cloned(),
            agent_name: None,
            response_id: None,
        }));
    }
    records.sort_by_key(|record| match record {
        TripletRecord::Row(row) => row.call_index,
        TripletRecord::SkippedCall(call) => call.call_index,
        TripletRecord::NoRows(_) => usize::MAX,
    });
    let rows = records.iter_mut().filter_map(|record| match record {
        TripletRecord::Row(row) => Some(row),
        _ => None,
    });
    let mut last = None;
    for (row_index, row) in rows.enumerate() {
        row.row_index = row_index;
        last = Some(row);
    }
    match last {
        Some(row) => row.reward = diagnosis.reward,
        None => records.push(TripletRecord::NoRows(NoRows {
            origin,
            model_calls: diagnosis.model_calls,
            reasons: reasons(diagnosis.findings, malformed),
        })),
    }
    Ok(records)
}

/// A call of the triplet view (`data`) that gives no row.
fn skipped(origin: &Origin, call_index: usize, data: &Json, reason: SkipReason) -> TripletRecord {
    TripletRecord::SkippedCall(SkippedCall {
        origin: origin.clone(),
        call_index,
        model: data["server"]["model"].as_str().map(str::to_owned),
        model_version: data["server"]["version"].as_i64(),
        reason,
        http_status: data.get("http_status").and_then(Json::as_i64),
        error: data
            .get("error")
            .filter(|error| !error.is_null())
            .map(|error| match error {
                Json::String(text) => text.clone(),
                other => other.to_string(),
            }),
        reward: None,
    })
}

/// Token ids as integers: `None` unless a list of integers.
fn token_ids(value: &Json) -> Option<Vec<i64>> {
    value.as_array()?.iter().map(Json::as_i64).collect()
}

/// The diagnosis's findings as the reasons of a rollout without rows
/// (`malformed`: calls skipped for malformed token ids).
fn reasons(findings: Vec<Finding>, malformed: usize) -> Vec<RolloutReason> {
    let reason = |code, count, detail| RolloutReason {
        code,
        count,
        detail,
    };
    let mut reasons: Vec<RolloutReason> = findings
        .into_iter()
        .filter_map(|finding| {
            Some(match finding {
                Finding::NoModelCalls => reason(ReasonCode::NoModelCalls, None, None),
                Finding::FailedCalls { calls } => {
                    reason(ReasonCode::FailedCalls, Some(calls), None)
                }
                Finding::NoTokenIds { calls } => reason(ReasonCode::NoTokenIds, Some(calls), None),
                // Only rows lack log-probabilities, and there are none.
                Finding::NoLogProbs { .. } => return None,
                Finding::NoReward => reason(ReasonCode::NoReward, None, None),
                Finding::RewardNotANumber { value } => {
                    reason(ReasonCode::RewardNotANumber, None, Some(value.to_string()))
                }
                Finding::Failed { error } => reason(ReasonCode::RolloutFailed, None, error),
                Finding::NotFinished => reason(ReasonCode::NotFinished, None, None),
            })
        })
        .collect();
    if malformed > 0 {
        reasons.push(reason(ReasonCode::MalformedTokenIds, Some(malformed), None));
    }
    reasons
}

/// The model calls of a 1.x rollout's raw events read for its
/// conversation: each `model_request`'s recorded request and answer.
pub fn chat_calls(events: &[Agl1Event]) -> StoreResult<Vec<ChatCall>> {
    events
        .iter()
        .filter(|event| event.event_type == MODEL_REQUEST)
        .map(|event| Ok(call(&parse_data(&event.data)?)))
        .collect()
}

/// One recorded call: OpenAI chat's `messages` and the first choice's
/// `message`, or a completion's `prompt` (a `user` message) and the first
/// choice's `text`. A failed call has no answer.
fn call(data: &Json) -> ChatCall {
    let request = &data["request"];
    let choice = &data["response"]["choices"][0];
    let prompt = match request.get("messages") {
        Some(messages) => chat::messages(messages),
        None => match request.get("prompt") {
            Some(Json::String(text)) => vec![ChatMessage::text("user", text.clone())],
            Some(prompt) if !prompt.is_null() => {
                vec![ChatMessage::text("user", prompt.to_string())]
            }
            _ => Vec::new(),
        },
    };
    let http_status = data.get("http_status").and_then(Json::as_i64);
    let failed = data.get("status").and_then(Json::as_str) == Some("error")
        || http_status.is_some_and(|status| status >= 400);
    let answer = match (choice.get("message"), choice.get("text")) {
        _ if failed => None,
        (Some(message), _) => chat::message(message).map(|mut message| {
            if message.role == "unknown" {
                "assistant".clone_into(&mut message.role);
            }
            message
        }),
        (None, Some(Json::String(text))) => Some(ChatMessage::text("assistant", text.clone())),
        _ => None,
    };
    let model = data["server"]["model"]
        .as_str()
        .or_else(|| data["model"].as_str())
        .map(str::to_owned);
    ChatCall {
        prompt,
        answer,
        model,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agl1::events::{REWARD, test_event as event};
    use serde_json::json;

    fn origin() -> Origin {
        Origin {
            rollout_id: "r".into(),
            attempt_id: None,
            resources_id: Some("rs-1".into()),
        }
    }

    fn call(prompt: Json, response: &[i64], status: u16) -> Agl1Event {
        event(
            MODEL_REQUEST,
            json!({"request": {"messages": [{"role": "user", "content": [
                    {"type": "text", "text": "look"}, {"type": "image_url", "image_url": {"url": "data:x"}}]}]},
                "response": {"prompt_token_ids": prompt, "choices": [{"token_ids": response,
                    "message": {"role": "assistant", "content": "ok"},
                    "logprobs": {"content": [{"logprob": -0.25}]}}]},
                "server": {"model": "m", "version": 2}, "http_status": status,
                "status": if status < 400 { "ok" } else { "error" }}),
        )
    }

    fn kinds(records: &[TripletRecord]) -> Vec<String> {
        records
            .iter()
            .map(|record| match record {
                TripletRecord::Row(row) => format!("row {} call {}", row.row_index, row.call_index),
                TripletRecord::SkippedCall(call) => {
                    format!("{:?} call {}", call.reason, call.call_index)
                }
                TripletRecord::NoRows(_) => "no rows".into(),
            })
            .collect()
    }

    #[test]
    fn rows_and_skipped_calls_follow_the_trainer_in_call_order() {
        let events = vec![
            call(json!([1]), &[2], 200),
            call(json!([1]), &[3], 200),
            call(json!([4]), &[], 200),
            call(json!([5]), &[6], 503),
            call(json!([7.5]), &[8], 200),
            call(json!([9]), &[10], 200),
            event(REWARD, json!({"value": 0.5})),
            event(REWARD, json!({"value": 2})),
        ];
        let records = triplets(origin(), Agl1State::Succeeded, None, &events).unwrap();
        assert_eq!(
            kinds(&records),
            [
                "Superseded call 0",
                "row 0 call 1",
                "NoTokenIds call 2",
                "FailedCall call 3",
                "MalformedTokenIds call 4",
                "row 1 call 5",
            ]
        );
        let TripletRecord::Row(first) = &records[1] else {
            panic!()
        };
        assert_eq!(first.prompt_token_ids, [1]);
        assert_eq!(first.response_token_ids, [3]);
        assert_eq!(first.response_log_probs, Some(vec![-0.25]));
        assert_eq!(first.reward, None, "only the last row has the reward");
        assert_eq!(first.image_urls, Some(vec!["data:x".to_owned()]));
        assert_eq!(
            (first.model.as_deref(), first.model_version),
            (Some("m"), Some(2))
        );
        assert_eq!(
            first.origin.attempt_id.as_deref(),
            Some("0"),
            "the events' attempt"
        );
        assert_eq!(first.origin.resources_id.as_deref(), Some("rs-1"));
        let TripletRecord::Row(last) = &records[5] else {
            panic!()
        };
        assert_eq!(last.reward, Some(2.0), "the last reward event wins");
        let TripletRecord::SkippedCall(failed) = &records[3] else {
            panic!()
        };
        assert_eq!(failed.http_status, Some(503));
        let written = serde_json::to_value(&records[1]).unwrap();
        assert_eq!(written["kind"], "row");
        assert_eq!(written["rollout_id"], "r");
        assert_eq!(written["routed_experts"], Json::Null, "always written");
    }

    #[test]
    fn a_rollout_without_rows_says_why() {
        let records = triplets(origin(), Agl1State::Failed, Some("boom"), &[]).unwrap();
        let [TripletRecord::NoRows(none)] = &records[..] else {
            panic!("{records:?}")
        };
        let codes: Vec<ReasonCode> = none.reasons.iter().map(|r| r.code).collect();
        assert_eq!(
            codes,
            [
                ReasonCode::NoModelCalls,
                ReasonCode::NoReward,
                ReasonCode::RolloutFailed
            ]
        );
        assert_eq!(none.reasons[2].detail.as_deref(), Some("boom"));
        let events = [
            call(json!([1]), &[], 200),
            call(json!(["x"]), &[2], 200),
            event(REWARD, json!({"value": "high"})),
        ];
        let records = triplets(origin(), Agl1State::Running, None, &events).unwrap();
        let Some(TripletRecord::NoRows(none)) = records.last() else {
            panic!()
        };
        assert_eq!(none.model_calls, 2);
        let reasons: Vec<(ReasonCode, Option<usize>)> =
            none.reasons.iter().map(|r| (r.code, r.count)).collect();
        assert_eq!(
            reasons,
            [
                (ReasonCode::NoTokenIds, Some(1)),
                (ReasonCode::RewardNotANumber, None),
                (ReasonCode::NotFinished, None),
                (ReasonCode::MalformedTokenIds, Some(1)),
            ]
        );
        assert_eq!(none.reasons[1].detail.as_deref(), Some("\"high\""));
    }

    #[test]
    fn calls_read_chat_and_completions_and_failures_have_no_answer() {
        let events = [
            call(json!([1]), &[2], 200),
            call(json!([1]), &[2], 500),
            event(
                MODEL_REQUEST,
                json!({"request": {"prompt": "2+2="}, "model": "c",
                       "response": {"choices": [{"text": "4"}]}}),
            ),
            event(MODEL_REQUEST, json!({"request": 5, "response": null})),
        ];
        let calls = chat_calls(&events).unwrap();
        assert_eq!(calls.len(), 4);
        assert_eq!(calls[0].prompt[0].content, "look");
        assert_eq!(
            calls[0].answer,
            Some(ChatMessage::text("assistant", "ok".into()))
        );
        assert_eq!(calls[1].answer, None, "failed");
        assert_eq!(calls[2].prompt, [ChatMessage::text("user", "2+2=".into())]);
        assert_eq!(
            calls[2].answer,
            Some(ChatMessage::text("assistant", "4".into()))
        );
        assert_eq!(calls[2].model.as_deref(), Some("c"));
        assert_eq!(calls[3].prompt, [], "garbage reads as nothing");
    }
}
