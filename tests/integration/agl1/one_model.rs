//! One model: a 1.x rollout is a rollout of the store, seen by the gRPC
//! queries, streams and statistics, and the two APIs keep to their own
//! rollouts where they dispatch.

use lightning_store::proto::{self as pb, watch_events_response::Message};
use serde_json::json;

use super::BACKEND;
use crate::agl1::support::{Api, Grpc, detail, grpc, start};

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

/// Each version and mode's (rollouts, succeeded, rewarded, mean reward)
/// in `mode`, from the training summary.
async fn trained(grpc: &mut Grpc, mode: pb::RolloutMode) -> Vec<(i64, i64, i64, Option<f64>)> {
    let summary = grpc
        .get_training_summary(pb::GetTrainingSummaryRequest {
            mode: mode as i32,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    summary
        .versions
        .iter()
        .map(|v| (v.rollouts, v.succeeded, v.rewarded, v.reward_mean))
        .collect()
}

/// A 1.x rollout's reward events give it its final reward, as reward spans
/// do: the latest one whose value is a number, also when it is recorded
/// after the rollout ended. The summary and the reward timeline count it
/// once the rollout ended; the rollout query reads it at once.
#[tokio::test]
async fn a_1x_rollouts_reward_events_give_its_final_reward() {
    skip_without!(super::BACKEND);
    let server = start(BACKEND).await;
    let api = Api::new(&server);
    let mut grpc = grpc(&server).await;
    api.create(json!([
        {"rollout_id": "t1", "input": {}, "is_train": true},
        {"rollout_id": "v1", "input": {}, "is_train": false},
        {"rollout_id": "t2", "input": {}, "is_train": true},
    ]))
    .await;
    for id in ["t1", "v1", "t2"] {
        api.set_state(id, "running").await;
    }
    let reward = |id: &'static str, value: serde_json::Value| {
        let api = api.clone();
        async move {
            let posted = api
                .post_event(id, "0", "reward", json!({ "value": value }))
                .await;
            assert_eq!(posted.status, 200, "{}", posted.text());
        }
    };
    reward("t1", json!(0.5)).await;
    reward("t1", json!(0.75)).await;
    reward("t1", json!(true)).await;
    reward("t2", json!(1)).await;
    api.set_state("t1", "succeeded").await;
    api.set_state("v1", "failed").await;
    assert_eq!(
        trained(&mut grpc, pb::RolloutMode::Train).await,
        [(1, 1, 1, Some(0.75))],
        "the latest number counts; t2 is still running"
    );
    assert_eq!(
        trained(&mut grpc, pb::RolloutMode::Val).await,
        [(1, 0, 0, None)]
    );

    reward("t1", json!(0.25)).await;
    assert_eq!(
        trained(&mut grpc, pb::RolloutMode::Train).await,
        [(1, 1, 1, Some(0.25))],
        "a reward recorded after the end is the final one"
    );
    let timeline = grpc
        .get_reward_timeline(pb::GetRewardTimelineRequest {
            mode: pb::RolloutMode::Train as i32,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let periods: Vec<(i64, Option<f64>)> = timeline
        .periods
        .iter()
        .map(|p| (p.rollouts, p.reward_mean))
        .collect();
    assert_eq!(periods, [(1, Some(0.25))]);
    let listed = grpc
        .query_rollouts(pb::QueryRolloutsRequest {
            reward_min: Some(0.0),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let mut rewards: Vec<(&str, f64)> = listed
        .rewards
        .iter()
        .map(|(id, reward)| (id.as_str(), *reward))
        .collect();
    rewards.sort_by(|a, b| a.0.cmp(b.0));
    assert_eq!(rewards, [("t1", 0.25), ("t2", 1.0)], "v1 has no reward");
    server.stop().await;
}
