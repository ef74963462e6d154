//! One model: a 1.x rollout is a rollout of the store, seen by the gRPC
//! queries, streams and statistics, and the two APIs keep to their own
//! rollouts where they dispatch.

use lightning_store::proto::{self as pb, watch_events_response::Message};
use serde_json::json;

use super::BACKEND;
use crate::agl1::support::{Api, detail, grpc, start};

fn rollout(response: pb::GetRolloutResponse) -> pb::Rollout {
    response.rollout.unwrap()
}

#[tokio::test]
async fn a_1x_rollout_is_a_rollout_of_the_store() {
    skip_without!(super::BACKEND);
    let server = start(BACKEND).await;
    let api = Api::new(&server);
    let mut grpc = grpc(&server).await;
    let mut events = grpc
        .watch_events(pb::WatchEventsRequest {
            after_seq: Some(0),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();

    api.create(json!([{"rollout_id": "m1", "input": {"q": 1}, "is_train": false}]))
        .await;
    let get = |id: &str| pb::GetRolloutRequest {
        rollout_id: id.to_owned(),
    };
    let seen = rollout(grpc.get_rollout(get("m1")).await.unwrap().into_inner());
    assert_eq!(seen.status, pb::RolloutStatus::Queuing as i32);
    assert_eq!(
        seen.mode,
        pb::RolloutMode::Val as i32,
        "is_train false is the val split"
    );
    assert_eq!(seen.input_json, r#"{"q":1}"#);
    assert!(seen.attempt.is_none());
    let dequeued = grpc
        .dequeue_rollout(pb::DequeueRolloutRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert!(
        dequeued.rollout.is_none(),
        "a 1.x rollout waits for its controller, not a worker"
    );

    api.set_state("m1", "running").await;
    let running = rollout(grpc.get_rollout(get("m1")).await.unwrap().into_inner());
    assert_eq!(running.status, pb::RolloutStatus::Running as i32);
    let attempt = running.attempt.unwrap();
    assert_eq!((attempt.attempt_id.as_str(), attempt.sequence_id), ("0", 1));
    assert_eq!(attempt.status, pb::AttemptStatus::Running as i32);
    let stats = grpc
        .get_statistics(pb::GetStatisticsRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(stats.rollouts_by_status["running"], 1);
    assert_eq!(stats.attempts_by_status["running"], 1);

    let mut completions = grpc
        .watch_rollout_completions(pb::WatchRolloutCompletionsRequest {
            rollout_ids: vec!["m1".into()],
            timeout: None,
        })
        .await
        .unwrap()
        .into_inner();
    api.set_state("m1", "succeeded").await;
    let completed = completions
        .message()
        .await
        .unwrap()
        .unwrap()
        .rollout
        .unwrap();
    assert_eq!(completed.status, pb::RolloutStatus::Succeeded as i32);
    let attempt = completed.attempt.unwrap();
    assert_eq!(attempt.status, pb::AttemptStatus::Succeeded as i32);
    assert!(attempt.end_time.is_some());

    assert_eq!(
        api.send("DELETE", "/api/rollouts/m1", &[], "").await.status,
        204
    );
    let gone = grpc.get_rollout(get("m1")).await.unwrap_err();
    assert_eq!(gone.code(), tonic::Code::NotFound);
    let stats = grpc
        .get_statistics(pb::GetStatisticsRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (stats.total_rollouts, stats.total_attempts),
        (0, 0),
        "counts stay exact"
    );
    assert_eq!(stats.rollouts_by_status["succeeded"], 0);

    // The change feed saw every step, in order.
    let mut kinds = Vec::new();
    while kinds.last() != Some(&pb::EventKind::RolloutDeleted) {
        if let Some(Message::Event(event)) = events.message().await.unwrap().unwrap().message {
            kinds.push(pb::EventKind::try_from(event.kind).unwrap());
        }
    }
    use pb::EventKind::*;
    assert_eq!(
        kinds,
        [
            RolloutCreated,
            RolloutChanged,
            AttemptCreated,
            AttemptChanged,
            RolloutChanged,
            AttemptChanged,
            RolloutChanged,
            RolloutDeleted
        ]
    );
    server.stop().await;
}

#[tokio::test]
async fn rollouts_of_other_apis_are_not_dispatched_by_1x_controllers() {
    skip_without!(super::BACKEND);
    let server = start(BACKEND).await;
    let api = Api::new(&server);
    let mut grpc = grpc(&server).await;
    let other = grpc
        .enqueue_rollout(pb::EnqueueRolloutRequest {
            request_id: None,
            rollout: Some(pb::RolloutSpec {
                input_json: "{}".into(),
                ..Default::default()
            }),
        })
        .await
        .unwrap()
        .into_inner()
        .rollout
        .unwrap();
    let id = other.rollout_id;
    assert_eq!(api.get(&format!("/api/rollouts/{id}")).await.status, 404);
    let listed = api.get("/api/rollouts?state_in=queuing").await.json();
    assert_eq!(listed, json!([]));
    let conflict = api
        .json(
            "POST",
            "/api/rollouts",
            &json!([{"rollout_id": "fresh", "input": 1}, {"rollout_id": id, "input": 1}]),
        )
        .await;
    assert_eq!(conflict.status, 409);
    assert_eq!(
        detail(&conflict),
        json!(format!(
            "Rollout {id} exists and was not created through the 1.x API"
        ))
    );
    assert_eq!(
        api.get("/api/rollouts/fresh").await.status,
        404,
        "the batch wrote nothing"
    );
    assert_eq!(
        api.send("DELETE", &format!("/api/rollouts/{id}"), &[], "")
            .await
            .status,
        204
    );
    assert!(
        grpc.get_rollout(pb::GetRolloutRequest { rollout_id: id })
            .await
            .is_ok(),
        "not deleted"
    );
    server.stop().await;
}
