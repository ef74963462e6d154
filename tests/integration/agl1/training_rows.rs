//! The training rows 1.x rollouts give their trainer, in the training
//! summary and the rollout query: each rollout is judged from its events
//! when it ends, by the trainer's rules, and one that gives none counts
//! under the reasons why.

use lightning_store::proto as pb;
use serde_json::{Value, json};

use super::BACKEND;
use crate::agl1::support::{Api, Grpc, grpc, listed_ids, start};

/// A model request of model version 1 whose answer has `response` token
/// ids (none when empty), answered with `http_status`.
fn call(prompt: &[i64], response: &[i64], http_status: u16) -> Value {
    json!({
        "model_version": 1,
        "http_status": http_status,
        "status": if http_status < 400 { "ok" } else { "error" },
        "response": {"prompt_token_ids": prompt, "choices": [{"token_ids": response}]},
    })
}

/// Creates train rollouts `ids` and sets them running.
async fn running(api: &Api, ids: &[&str]) {
    let items: Vec<Value> = ids
        .iter()
        .map(|id| json!({"rollout_id": id, "input": {}, "is_train": true}))
        .collect();
    api.create(Value::Array(items)).await;
    for id in ids {
        api.set_state(id, "running").await;
    }
}

/// The train summary's (model version, rollouts, training rows, rollouts
/// without rows, [(reason, rollouts)]) per version.
async fn rows_by_version(grpc: &mut Grpc) -> Vec<(Option<i64>, i64, i64, i64, Vec<(i32, i64)>)> {
    let request = pb::GetTrainingSummaryRequest {
        mode: pb::RolloutMode::Train as i32,
        ..Default::default()
    };
    let versions = grpc.get_training_summary(request).await.unwrap();
    versions
        .into_inner()
        .versions
        .into_iter()
        .map(|v| {
            let reasons = v
                .without_rows_by_reason
                .iter()
                .map(|count| (count.reason, count.rollouts))
                .collect();
            let rows = (v.training_rows, v.rollouts_without_rows);
            (v.model_version, v.rollouts, rows.0, rows.1, reasons)
        })
        .collect()
}

/// The ids of the rollouts without training rows for `reason`.
async fn without_rows(grpc: &mut Grpc, reason: pb::NoTrainingRowsReason) -> Vec<String> {
    let request = pb::QueryRolloutsRequest {
        without_training_rows: Some(reason as i32),
        ..Default::default()
    };
    listed_ids(grpc, request).await
}

#[tokio::test]
async fn each_ended_1x_rollout_counts_its_training_rows_or_why_it_gives_none() {
    skip_without!(super::BACKEND);
    use pb::NoTrainingRowsReason as R;
    let server = start(BACKEND).await;
    let api = Api::new(&server);
    let mut grpc = grpc(&server).await;
    running(
        &api,
        &["rows", "no-ids", "failed-call", "silent", "running"],
    )
    .await;
    // Two distinct prompts, and a retried one the trainer keeps once: 2 rows.
    api.record("rows", "model_request", call(&[1], &[2], 200))
        .await;
    api.record("rows", "model_request", call(&[3], &[4], 200))
        .await;
    api.record("rows", "model_request", call(&[3], &[5], 200))
        .await;
    api.record("rows", "reward", json!({"value": 1.0})).await;
    api.record("no-ids", "model_request", call(&[1], &[], 200))
        .await;
    api.record("no-ids", "reward", json!({"value": 0.5})).await;
    api.record("failed-call", "model_request", call(&[1], &[2], 503))
        .await;
    api.record("failed-call", "reward", json!({"value": "high"}))
        .await;
    api.record("running", "model_request", call(&[1], &[], 200))
        .await;
    for id in ["rows", "no-ids", "failed-call"] {
        api.set_state(id, "succeeded").await;
    }
    let failed = api
        .patch(
            "silent",
            json!({"state": "failed", "error_message": "agent crashed"}),
        )
        .await;
    assert_eq!(failed.status, 200, "{}", failed.text());

    let expected_v1 = (
        Some(1),
        3,
        2,
        2,
        vec![
            (R::FailedCalls as i32, 1),
            (R::NoTokenIds as i32, 1),
            (R::RewardNotANumber as i32, 1),
        ],
    );
    let expected_none = (
        None,
        1,
        0,
        1,
        vec![
            (R::NoModelCalls as i32, 1),
            (R::NoReward as i32, 1),
            (R::RolloutFailed as i32, 1),
        ],
    );
    assert_eq!(
        rows_by_version(&mut grpc).await,
        [expected_v1.clone(), expected_none.clone()],
        "a running rollout is not judged yet"
    );
    assert_eq!(
        without_rows(&mut grpc, R::Unspecified).await,
        ["failed-call", "no-ids", "silent"]
    );
    assert_eq!(without_rows(&mut grpc, R::NoTokenIds).await, ["no-ids"]);
    assert_eq!(without_rows(&mut grpc, R::RolloutFailed).await, ["silent"]);
    assert!(without_rows(&mut grpc, R::NoReward).await == ["silent"]);

    // A call recorded after the end: the trainer read the rollout when it
    // ended, and so does the summary.
    api.record("no-ids", "model_request", call(&[9], &[9], 200))
        .await;
    assert_eq!(
        rows_by_version(&mut grpc).await,
        [expected_v1, expected_none],
        "judged once, as it ended"
    );

    // A deleted rollout stops counting, with its reasons.
    let deleted = api.send("DELETE", "/api/rollouts/silent", &[], "").await;
    assert_eq!(deleted.status, 204, "{}", deleted.text());
    assert_eq!(rows_by_version(&mut grpc).await.len(), 1);
    assert_eq!(
        without_rows(&mut grpc, R::Unspecified).await,
        ["failed-call", "no-ids"]
    );

    // Put back to running (through gRPC: the 1.x API refuses it), a
    // rollout stops counting and loses its verdict: ended again through
    // gRPC (which does not judge it), it counts under no reason, not under
    // the one it had.
    for status in [pb::RolloutStatus::Running, pb::RolloutStatus::Succeeded] {
        grpc.update_rollout(pb::UpdateRolloutRequest {
            rollout_id: "no-ids".to_owned(),
            update_mask: Some(prost_types::FieldMask {
                paths: vec!["status".to_owned()],
            }),
            status: status as i32,
            ..Default::default()
        })
        .await
        .unwrap();
    }
    let expected_v1 = (
        Some(1),
        3,
        2,
        1,
        vec![(R::FailedCalls as i32, 1), (R::RewardNotANumber as i32, 1)],
    );
    assert_eq!(rows_by_version(&mut grpc).await, [expected_v1]);
    assert_eq!(
        without_rows(&mut grpc, R::NoTokenIds).await,
        [] as [&str; 0]
    );

    let unknown = grpc
        .query_rollouts(pb::QueryRolloutsRequest {
            without_training_rows: Some(99),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(unknown.code(), tonic::Code::InvalidArgument, "{unknown:?}");
    server.stop().await;
}

/// A model request that took `latency_ms` and reported `usage`.
fn used(latency_ms: f64, usage: Value) -> Value {
    json!({"model_version": 1, "http_status": 200, "latency_ms": latency_ms, "usage": usage})
}

/// The train summary's first version's (prompt tokens, response tokens,
/// call latency).
async fn usage_of_version(grpc: &mut Grpc) -> [pb::Distribution; 3] {
    let request = pb::GetTrainingSummaryRequest {
        mode: pb::RolloutMode::Train as i32,
        ..Default::default()
    };
    let versions = grpc.get_training_summary(request).await.unwrap();
    let v = versions.into_inner().versions.remove(0);
    [
        v.prompt_tokens,
        v.response_tokens,
        v.model_call_latency_seconds,
    ]
    .map(|distribution| distribution.unwrap())
}

#[tokio::test]
async fn model_requests_give_an_ended_rollouts_tokens_and_call_latency() {
    skip_without!(super::BACKEND);
    let server = start(BACKEND).await;
    let api = Api::new(&server);
    let mut grpc = grpc(&server).await;
    running(&api, &["chatty", "untold", "running"]).await;
    let tokens = |prompt: i64, completion: i64| json!({"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion});
    api.record("chatty", "model_request", used(400.0, tokens(100, 20)))
        .await;
    api.record("chatty", "model_request", used(800.4, tokens(300, 40)))
        .await;
    // A model server that reports no usage: the call counts, its tokens
    // do not.
    api.record("untold", "model_request", used(50.0, Value::Null))
        .await;
    api.record("running", "model_request", used(9_000.0, tokens(7, 7)))
        .await;
    for id in ["chatty", "untold"] {
        api.set_state(id, "succeeded").await;
    }
    let [prompt, response, latency] = usage_of_version(&mut grpc).await;
    assert_eq!((prompt.count, prompt.mean), (1, Some(400.0)));
    assert_eq!((response.count, response.mean), (1, Some(60.0)));
    // 1,250 ms over three calls.
    assert_eq!(
        (latency.count, latency.mean),
        (3, Some(1_250.0 / 3.0 / 1000.0))
    );

    // A call recorded after the end adds to the rollout's usage.
    api.record("chatty", "model_request", used(1_000.0, tokens(200, 60)))
        .await;
    let [prompt, response, latency] = usage_of_version(&mut grpc).await;
    // 600 and 120 tokens, read as their bins' centres.
    assert_eq!(
        (prompt.count, prompt.mean, prompt.p50),
        (1, Some(600.0), Some(631.0))
    );
    assert_eq!(
        (response.count, response.mean, response.p50),
        (1, Some(120.0), Some(126.0))
    );
    // Four calls: three at their rollout's mean of 733 ms, one of 50 ms.
    assert_eq!(
        latency,
        pb::Distribution {
            count: 4,
            mean: Some(0.5625),
            p10: Some(0.0501),
            p50: Some(0.708),
            p90: Some(0.708),
        }
    );

    // A deleted rollout takes its usage with it.
    let deleted = api.send("DELETE", "/api/rollouts/chatty", &[], "").await;
    assert_eq!(deleted.status, 204, "{}", deleted.text());
    let [prompt, _, latency] = usage_of_version(&mut grpc).await;
    assert_eq!((prompt.count, latency.count), (0, 1));
    server.stop().await;
}
