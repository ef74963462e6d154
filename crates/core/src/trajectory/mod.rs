//! A rollout's training data in the two layouts the export writes
//! (issue #47; the schemas are in docs/trajectories.md):
//!
//! - `triplets` ([`triplets`]): one record per training row, as
//!   agent-lightning's own trainer builds them from the rollout (1.x:
//!   [`agl1`], from its events; 0.x: [`agl0`], from its spans), one per
//!   model call that gives no row with the reason, and one for a rollout
//!   that gives none with the rollout's reasons.
//! - `messages` ([`conversation`]): the rollout as one conversation in the
//!   chat format TRL's SFT trainer reads ([`chat`] says which messages).
//!
//! Pure functions over values the engine has read: nothing here does I/O.

pub mod agl0;
pub mod agl1;
pub mod attributes;
pub mod chat;
pub mod records;

pub use self::records::{
    ChatMessage, Conversation, NoRows, Origin, ReasonCode, RolloutReason, SkipReason, SkippedCall,
    TrainingRow, TripletRecord,
};

use crate::agl1::{Agl1Event, Agl1State};
use crate::error::StoreResult;
use crate::model::{Attempt, Rollout, Span};

/// Where a rollout's model calls were recorded.
#[derive(Debug, Clone, Copy)]
pub enum Trace<'a> {
    /// Agent-lightning 0.x: the attempt's spans, in sequence order.
    Spans(&'a [Span]),
    /// Agent-lightning 1.x: the raw events of the rollout's event attempt
    /// (routing tensors included), and the rollout's 1.x error message.
    Events {
        events: &'a [Agl1Event],
        error_message: Option<&'a str>,
    },
}

/// The ids of `rollout` and `attempt` every record carries.
fn origin(rollout: &Rollout, attempt: Option<&Attempt>) -> Origin {
    Origin {
        rollout_id: rollout.rollout_id.clone(),
        attempt_id: attempt.map(|attempt| attempt.attempt_id.clone()),
        resources_id: rollout.resources_id.clone(),
    }
}

/// The `triplets` records of `rollout` (its `attempt`, when it has one),
/// from its `source`: training rows and skipped calls in call order, then,
/// when there is no row, one [`NoRows`]. Fails only on stored event data
/// that is not JSON.
pub fn triplets(
    rollout: &Rollout,
    attempt: Option<&Attempt>,
    source: Trace<'_>,
) -> StoreResult<Vec<TripletRecord>> {
    let origin = origin(rollout, attempt);
    match source {
        Trace::Events {
            events,
            error_message,
        } => agl1::triplets(origin, Agl1State::of(rollout.status), error_message, events),
        Trace::Spans(spans) => Ok(agl0_triplets(origin, rollout, spans)),
    }
}

/// 0.x's records: each transition with prompt and response token ids is
/// a row, the others are skipped calls keeping the reward they matched.
fn agl0_triplets(origin: Origin, rollout: &Rollout, spans: &[Span]) -> Vec<TripletRecord> {
    let origin = Origin {
        attempt_id: origin
            .attempt_id
            .or_else(|| spans.first().map(|span| span.attempt_id.clone())),
        ..origin
    };
    let transitions = agl0::transitions(spans);
    let mut records = Vec::with_capacity(transitions.len() + 1);
    let mut rows = 0;
    for (call_index, transition) in transitions.iter().enumerate() {
        let model = agl0::model(transition.span);
        if transition.prompt_token_ids.is_empty() || transition.response_token_ids.is_empty() {
            records.push(TripletRecord::SkippedCall(SkippedCall {
                origin: origin.clone(),
                call_index,
                model,
                model_version: None,
                reason: SkipReason::NoTokenIds,
                http_status: None,
                error: None,
                reward: transition.reward,
            }));
            continue;
        }
        records.push(TripletRecord::Row(TrainingRow {
            origin: origin.clone(),
            row_index: rows,
            call_index,
            model,
            model_version: None,
            prompt_token_ids: transition.prompt_token_ids.clone(),
            response_token_ids: transition.response_token_ids.clone(),
            response_log_probs: transition.log_probs.clone(),
            reward: transition.reward,
            image_urls: (!transition.image_urls.is_empty()).then(|| transition.image_urls.clone()),
            routed_experts: None,
            agent_name: Some(transition.agent_name.clone()),
            response_id: transition.response_id.clone(),
        }));
        rows += 1;
    }
    if rows == 0 {
        let reason = |code, count| RolloutReason {
            code,
            count,
            detail: None,
        };
        let mut reasons = vec![match (spans.is_empty(), transitions.len()) {
            (true, _) => reason(ReasonCode::NoSpans, None),
            (false, 0) => reason(ReasonCode::NoModelCalls, None),
            (false, calls) => reason(ReasonCode::NoTokenIds, Some(calls)),
        }];
        if rollout.status == crate::model::RolloutStatus::Failed {
            reasons.push(reason(ReasonCode::RolloutFailed, None));
        } else if !rollout.status.is_finished() {
            reasons.push(reason(ReasonCode::NotFinished, None));
        }
        records.push(TripletRecord::NoRows(NoRows {
            origin,
            model_calls: transitions.len(),
            reasons,
        }));
    }
    records
}

/// The `messages` record of `rollout` from its `source`: its model calls
/// made one conversation ([`chat::assemble`]), with its reward, status and
/// mode; `None` when no call was answered. Fails only on stored event data
/// that is not JSON.
pub fn conversation(
    rollout: &Rollout,
    attempt: Option<&Attempt>,
    source: Trace<'_>,
) -> StoreResult<Option<Conversation>> {
    let mut origin = origin(rollout, attempt);
    let (calls, reward) = match source {
        Trace::Events { events, .. } => {
            if let Some(first) = events.first() {
                origin.attempt_id = Some(first.attempt_id.clone());
            }
            let reward =
                crate::agl1::diagnosis::diagnose(Agl1State::of(rollout.status), None, events)?
                    .reward;
            (agl1::chat_calls(events)?, reward)
        }
        Trace::Spans(spans) => {
            if origin.attempt_id.is_none() {
                origin.attempt_id = spans.first().map(|span| span.attempt_id.clone());
            }
            let reward = crate::reward::final_reward(spans.iter()).map(|reward| reward.value());
            (agl0::chat_calls(spans), reward)
        }
    };
    let Some(assembled) = chat::assemble(&calls) else {
        return Ok(None);
    };
    Ok(Some(Conversation {
        messages: assembled.messages,
        reward,
        origin,
        status: rollout.status.as_str().to_owned(),
        mode: rollout.mode.map(|mode| mode.as_str().to_owned()),
        model: assembled.model,
        model_calls: calls.len(),
        calls_in_conversation: assembled.calls_in_conversation,
    }))
}

#[cfg(test)]
pub(crate) mod tests {
    use crate::model::{Span, SpanKind, SpanStatus, Timestamp};

    /// A span named `n` with id `id` under `parent`, from `start` to `end`.
    pub(crate) fn span(id: &str, parent: Option<&str>, start: i64, end: i64) -> Span {
        Span {
            rollout_id: "r".into(),
            attempt_id: "a".into(),
            sequence_id: 1,
            trace_id: "t".into(),
            span_id: id.into(),
            parent_id: parent.map(str::to_owned),
            name: "n".into(),
            status: SpanStatus::default(),
            attributes: Vec::new(),
            events: Vec::new(),
            links: Vec::new(),
            start_time: Some(Timestamp(start)),
            end_time: Some(Timestamp(end)),
            context: None,
            parent: None,
            resource: None,
            kind: SpanKind::Internal,
            scope: None,
            extra: Default::default(),
        }
    }
}
