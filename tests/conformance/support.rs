//! Helpers that keep the conformance tests about behaviour, not plumbing.

use lightning_store::proto::{
    self as pb, lightning_store_service_client::LightningStoreServiceClient,
};
use prost_types::FieldMask;
use tonic::transport::Channel;

pub type Client = LightningStoreServiceClient<Channel>;

pub use pb::{AttemptStatus as A, RolloutStatus as R};

/// Returns a spec with `input` as JSON text and default config.
pub fn spec(input: &str) -> pb::RolloutSpec {
    pb::RolloutSpec {
        input_json: input.to_owned(),
        ..Default::default()
    }
}

/// Returns a spec with a retry configuration.
pub fn retry_spec(max_attempts: i32, retry_on: &[A]) -> pb::RolloutSpec {
    pb::RolloutSpec {
        config: Some(pb::RolloutConfig {
            max_attempts: Some(max_attempts),
            retry_condition: retry_on.iter().map(|&s| s as i32).collect(),
            ..Default::default()
        }),
        ..spec("{}")
    }
}

pub async fn enqueue_spec(client: &mut Client, spec: pb::RolloutSpec) -> pb::Rollout {
    client
        .enqueue_rollout(pb::EnqueueRolloutRequest {
            rollout: Some(spec),
        })
        .await
        .unwrap()
        .into_inner()
        .rollout
        .unwrap()
}

pub async fn enqueue(client: &mut Client, input: &str) -> pb::Rollout {
    enqueue_spec(client, spec(input)).await
}

pub async fn dequeue(client: &mut Client, worker_id: Option<&str>) -> Option<pb::Rollout> {
    client
        .dequeue_rollout(pb::DequeueRolloutRequest {
            worker_id: worker_id.map(str::to_owned),
            wait: None,
        })
        .await
        .unwrap()
        .into_inner()
        .rollout
}

/// Dequeues, waiting up to `secs` for a rollout.
pub async fn dequeue_wait(client: &mut Client, secs: u64) -> Option<pb::Rollout> {
    client
        .dequeue_rollout(pb::DequeueRolloutRequest {
            worker_id: None,
            wait: Some(prost_types::Duration {
                seconds: secs as i64,
                nanos: 0,
            }),
        })
        .await
        .unwrap()
        .into_inner()
        .rollout
}

pub async fn get(client: &mut Client, rollout_id: &str) -> pb::Rollout {
    client
        .get_rollout(pb::GetRolloutRequest {
            rollout_id: rollout_id.to_owned(),
        })
        .await
        .unwrap()
        .into_inner()
        .rollout
        .unwrap()
}

pub fn attempt_of(rollout: &pb::Rollout) -> &pb::Attempt {
    rollout.attempt.as_ref().expect("rollout has an attempt")
}

pub fn status(rollout: &pb::Rollout) -> R {
    R::try_from(rollout.status).unwrap()
}

pub fn attempt_status(attempt: &pb::Attempt) -> A {
    A::try_from(attempt.status).unwrap()
}

pub fn mask(paths: &[&str]) -> Option<FieldMask> {
    Some(FieldMask {
        paths: paths.iter().map(|p| (*p).to_owned()).collect(),
    })
}

pub async fn set_attempt_status(
    client: &mut Client,
    rollout_id: &str,
    attempt_id: &str,
    status: A,
) -> Result<pb::Attempt, tonic::Status> {
    client
        .update_attempt(pb::UpdateAttemptRequest {
            rollout_id: rollout_id.to_owned(),
            attempt_id: attempt_id.to_owned(),
            update_mask: mask(&["status"]),
            status: status as i32,
            ..Default::default()
        })
        .await
        .map(|r| r.into_inner().attempt.unwrap())
}

/// Starts the rollout's next attempt (no worker) and returns its id.
pub async fn start_attempt(client: &mut Client, rollout_id: &str) -> String {
    client
        .start_attempt(pb::StartAttemptRequest {
            rollout_id: rollout_id.to_owned(),
            worker_id: None,
        })
        .await
        .unwrap()
        .into_inner()
        .rollout
        .unwrap()
        .attempt
        .unwrap()
        .attempt_id
}

pub async fn set_rollout_status(client: &mut Client, rollout_id: &str, status: R) -> pb::Rollout {
    client
        .update_rollout(pb::UpdateRolloutRequest {
            rollout_id: rollout_id.to_owned(),
            update_mask: mask(&["status"]),
            status: status as i32,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .rollout
        .unwrap()
}

/// Returns a span with fresh random ids.
pub fn span(rollout_id: &str, attempt_id: &str, name: &str, sequence_id: Option<i64>) -> pb::Span {
    let hex = uuid::Uuid::new_v4().simple().to_string();
    pb::Span {
        rollout_id: rollout_id.to_owned(),
        attempt_id: attempt_id.to_owned(),
        sequence_id,
        trace_id: hex.clone(),
        span_id: hex[..16].to_owned(),
        name: name.to_owned(),
        ..Default::default()
    }
}

pub async fn add_span(client: &mut Client, span: pb::Span) -> Option<pb::Span> {
    client
        .add_span(pb::AddSpanRequest { span: Some(span) })
        .await
        .unwrap()
        .into_inner()
        .span
}

pub async fn query_spans(
    client: &mut Client,
    request: pb::QuerySpansRequest,
) -> pb::QuerySpansResponse {
    client.query_spans(request).await.unwrap().into_inner()
}

pub async fn wait_for(client: &mut Client, ids: &[&str], timeout_secs: f64) -> Vec<pb::Rollout> {
    client
        .wait_for_rollouts(pb::WaitForRolloutsRequest {
            rollout_ids: ids.iter().map(|s| (*s).to_owned()).collect(),
            timeout: Some(
                prost_types::Duration::try_from(std::time::Duration::from_secs_f64(timeout_secs))
                    .unwrap(),
            ),
        })
        .await
        .unwrap()
        .into_inner()
        .rollouts
}

pub async fn worker(client: &mut Client, worker_id: &str) -> pb::Worker {
    client
        .get_worker(pb::GetWorkerRequest {
            worker_id: worker_id.to_owned(),
        })
        .await
        .unwrap()
        .into_inner()
        .worker
        .unwrap()
}

pub async fn stats(client: &mut Client) -> pb::GetStatisticsResponse {
    client
        .get_statistics(pb::GetStatisticsRequest {})
        .await
        .unwrap()
        .into_inner()
}

pub fn page(sort_by: &str, desc: bool, limit: Option<i32>, offset: i32) -> Option<pb::PageRequest> {
    Some(pb::PageRequest {
        sort_by: sort_by.to_owned(),
        sort_order: if desc {
            pb::SortOrder::Desc
        } else {
            pb::SortOrder::Asc
        } as i32,
        limit,
        offset,
    })
}

/// Asserts that a call failed with `code` and a message containing `text`.
#[track_caller]
pub fn assert_code<T: std::fmt::Debug>(
    result: Result<T, tonic::Status>,
    code: tonic::Code,
    text: &str,
) {
    let status = result.expect_err("call should fail");
    assert_eq!(status.code(), code, "unexpected code: {status:?}");
    assert!(
        status.message().contains(text),
        "message {:?} does not contain {text:?}",
        status.message()
    );
}
