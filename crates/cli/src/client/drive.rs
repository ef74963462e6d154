//! The commands that write: enqueue or start a rollout, claim one, add a span,
//! complete an attempt.

use std::time::Duration;

use serde_json::Value;

use super::args::{AddSpanArgs, CompleteArgs, DequeueArgs, EnqueueArgs, StartArgs};
use super::error::{ClientError, ClientResult};
use super::json::{attempt_json, attribute_json, print_json, rollout_json, span_json};
use super::session::Session;
use super::text::{attempt_rows, details, or_dash, rollout_rows, time_cell};
use lightning_store_proto as pb;

/// The rollout that `enqueue` and `start` create.
fn rollout_spec(args: EnqueueArgs) -> pb::RolloutSpec {
    pb::RolloutSpec {
        input_json: args.input,
        mode: args.mode.unwrap_or(pb::RolloutMode::Unspecified) as i32,
        resources_id: args.resources_id,
        config: Some(pb::RolloutConfig {
            timeout_seconds: args.timeout_secs,
            unresponsive_seconds: args.unresponsive_secs,
            max_attempts: args.max_attempts,
            retry_condition: args
                .retry_on
                .into_iter()
                .map(|status| status as i32)
                .collect(),
        }),
        metadata_json: args.metadata.unwrap_or_default(),
    }
}

pub(super) async fn enqueue(mut s: Session, args: EnqueueArgs) -> ClientResult {
    let rollout = s
        .client
        .enqueue_rollout(pb::EnqueueRolloutRequest {
            rollout: Some(rollout_spec(args)),
            request_id: None,
        })
        .await?
        .into_inner()
        .rollout
        .unwrap_or_default();
    print_rollout(&s, &rollout)
}

pub(super) async fn start(mut s: Session, args: StartArgs) -> ClientResult {
    let rollout = s
        .client
        .start_rollout(pb::StartRolloutRequest {
            rollout: Some(rollout_spec(args.rollout)),
            worker_id: args.worker_id,
        })
        .await?
        .into_inner()
        .rollout
        .unwrap_or_default();
    print_rollout(&s, &rollout)
}

pub(super) async fn dequeue(mut s: Session, args: DequeueArgs) -> ClientResult {
    let wait = Duration::try_from_secs_f64(args.wait_secs)
        .ok()
        .and_then(|d| prost_types::Duration::try_from(d).ok())
        .ok_or_else(|| ClientError::Other("--wait-secs must be a number >= 0".to_owned()))?;
    let claimed = s
        .client
        .dequeue_rollout(pb::DequeueRolloutRequest {
            worker_id: args.worker_id,
            wait: Some(wait),
        })
        .await?
        .into_inner()
        .rollout;
    match claimed {
        Some(rollout) => print_rollout(&s, &rollout),
        None if s.json => print_json(&Value::Null),
        None => {
            out!("the queue is empty");
            Ok(())
        }
    }
}

pub(super) async fn add_span(mut s: Session, args: AddSpanArgs) -> ClientResult {
    let attempt_id = if args.attempt_id == "latest" {
        s.client
            .get_latest_attempt(pb::GetLatestAttemptRequest {
                rollout_id: args.rollout_id.clone(),
            })
            .await?
            .into_inner()
            .attempt
            .ok_or_else(|| {
                ClientError::Other(format!("rollout {} has no attempt", args.rollout_id))
            })?
            .attempt_id
    } else {
        args.attempt_id
    };
    let trace_id = uuid::Uuid::new_v4().simple().to_string();
    let span_id = uuid::Uuid::new_v4().simple().to_string()[..16].to_owned();
    let now = prost_types::Timestamp::from(std::time::SystemTime::now());
    let span = pb::Span {
        rollout_id: args.rollout_id,
        attempt_id,
        name: args.name,
        attributes: args.attributes,
        start_time: Some(now),
        end_time: Some(now),
        context: Some(pb::SpanContext {
            trace_id: trace_id.clone(),
            span_id: span_id.clone(),
            ..Default::default()
        }),
        trace_id,
        span_id,
        ..Default::default()
    };
    let stored = s
        .client
        .add_span(pb::AddSpanRequest {
            span: Some(span),
            owner_epoch: None,
        })
        .await?
        .into_inner()
        .span
        .ok_or_else(|| {
            ClientError::Other("the server ignored the span as a duplicate".to_owned())
        })?;
    if s.json {
        return print_json(&span_json(&stored));
    }
    let attributes = stored
        .attributes
        .iter()
        .map(|kv| format!("{}={}", kv.key, attribute_json(kv.value.as_ref())))
        .collect::<Vec<_>>()
        .join("\n");
    out!(
        "{}",
        details(vec![
            (
                "sequence",
                stored.sequence_id.unwrap_or_default().to_string()
            ),
            ("name", stored.name.clone()),
            ("rollout", stored.rollout_id.clone()),
            ("attempt", stored.attempt_id.clone()),
            ("trace", stored.trace_id.clone()),
            ("span", stored.span_id.clone()),
            ("start", time_cell(stored.start_time.as_ref())),
            (
                "attributes",
                or_dash(Some(attributes.as_str()).filter(|a| !a.is_empty()))
            ),
        ])
    );
    Ok(())
}

pub(super) async fn complete(mut s: Session, args: CompleteArgs) -> ClientResult {
    let CompleteArgs {
        rollout_ids,
        attempt_id,
        status,
    } = args;
    if rollout_ids.len() > 1 && attempt_id != "latest" {
        return Err(ClientError::Other(
            "--attempt-id names one attempt: give one rollout id with it".to_owned(),
        ));
    }
    let mut updates: Vec<pb::UpdateAttemptRequest> = rollout_ids
        .into_iter()
        .map(|rollout_id| pb::UpdateAttemptRequest {
            rollout_id,
            attempt_id: attempt_id.clone(),
            update_mask: Some(prost_types::FieldMask {
                paths: vec!["status".to_owned()],
            }),
            status: status as i32,
            ..Default::default()
        })
        .collect();
    if updates.len() > 1 {
        let attempts = s
            .client
            .update_attempts(pb::UpdateAttemptsRequest { updates })
            .await?
            .into_inner()
            .attempts;
        if s.json {
            return print_json(&Value::Array(attempts.iter().map(attempt_json).collect()));
        }
        let blocks: Vec<String> = attempts
            .iter()
            .map(|attempt| details(attempt_rows(attempt)))
            .collect();
        out!("{}", blocks.join("\n"));
        return Ok(());
    }
    let attempt = s
        .client
        .update_attempt(updates.remove(0))
        .await?
        .into_inner()
        .attempt
        .unwrap_or_default();
    if s.json {
        return print_json(&attempt_json(&attempt));
    }
    out!("{}", details(attempt_rows(&attempt)));
    Ok(())
}

fn print_rollout(s: &Session, rollout: &pb::Rollout) -> ClientResult {
    if s.json {
        return print_json(&rollout_json(rollout));
    }
    out!("{}", details(rollout_rows(rollout, true)));
    Ok(())
}
