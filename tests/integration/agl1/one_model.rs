//! One model: a 1.x rollout is a rollout of the store, seen by the gRPC
//! queries, streams and statistics, and the two APIs keep to their own
//! rollouts where they dispatch.

use lightning_store::proto::{self as pb, watch_events_response::Message};
use serde_json::json;

use super::BACKEND;
use crate::agl1::support::{Api, Grpc, detail, grpc, rollouts_of_model_version, start};

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

/// The training summary of `mode`, of the one version numbered `only`
/// when given.
async fn summary(
    grpc: &mut Grpc,
    mode: pb::RolloutMode,
    only: Option<i64>,
) -> Vec<pb::VersionSummary> {
    let request = pb::GetTrainingSummaryRequest {
        mode: mode as i32,
        version_from: only,
        version_to: only,
    };
    let summary = grpc.get_training_summary(request).await.unwrap();
    summary.into_inner().versions
}

/// Each version's (rollouts, succeeded, rewarded, mean reward) in `mode`.
async fn trained(grpc: &mut Grpc, mode: pb::RolloutMode) -> Vec<(i64, i64, i64, Option<f64>)> {
    let versions = summary(grpc, mode, None).await;
    versions
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
        async move { api.record(id, "reward", json!({ "value": value })).await }
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

/// Each train version's (model version, rollouts, mean reward), of the
/// one version numbered `only` when given.
async fn model_versions(
    grpc: &mut Grpc,
    only: Option<i64>,
) -> Vec<(Option<i64>, i64, Option<f64>)> {
    let versions = summary(grpc, pb::RolloutMode::Train, only).await;
    versions
        .iter()
        .map(|v| {
            assert!(v.resources_id.is_empty() && v.version.is_none(), "{v:?}");
            (v.model_version, v.rollouts, v.reward_mean)
        })
        .collect()
}

/// A 1.x rollout counts under the model version that served its first
/// model call (its `model_version`, else its server's `version`), also
/// when that call is recorded after the rollout ended; the rollout query
/// finds a version's rollouts, and a deleted rollout stops counting.
#[tokio::test]
async fn a_1x_rollout_counts_under_the_model_version_of_its_first_model_call() {
    skip_without!(super::BACKEND);
    let server = start(BACKEND).await;
    let api = Api::new(&server);
    let mut grpc = grpc(&server).await;
    api.create(json!([
        {"rollout_id": "a", "input": {}, "is_train": true},
        {"rollout_id": "b", "input": {}, "is_train": true},
        {"rollout_id": "c", "input": {}, "is_train": false},
        {"rollout_id": "late", "input": {}, "is_train": true},
    ]))
    .await;
    for id in ["a", "b", "c", "late"] {
        api.set_state(id, "running").await;
    }
    api.record(
        "a",
        "model_request",
        json!({"model_version": 2, "server": {"version": 9}}),
    )
    .await;
    api.record("a", "model_request", json!({"model_version": 3}))
        .await;
    api.record(
        "b",
        "model_request",
        json!({"server": {"model": "m", "version": 3}}),
    )
    .await;
    api.record("c", "model_request", json!({"model_version": 2}))
        .await;
    for (id, reward) in [("a", 1.0), ("b", 0.0), ("c", 0.5), ("late", 0.25)] {
        api.record(id, "reward", json!({ "value": reward })).await;
        api.set_state(id, "succeeded").await;
    }
    assert_eq!(
        model_versions(&mut grpc, None).await,
        [
            (Some(2), 1, Some(1.0)),
            (Some(3), 1, Some(0.0)),
            (None, 1, Some(0.25)),
        ],
        "the first call's version counts; `late` made none yet"
    );
    assert_eq!(
        model_versions(&mut grpc, Some(3)).await,
        [(Some(3), 1, Some(0.0))],
        "a range bounds model versions"
    );

    api.record("late", "model_request", json!({"model_version": 3}))
        .await;
    assert_eq!(
        model_versions(&mut grpc, None).await,
        [(Some(2), 1, Some(1.0)), (Some(3), 2, Some(0.125))],
        "a call recorded after the end moves the rollout to its version"
    );
    assert_eq!(rollouts_of_model_version(&mut grpc, 2).await, ["a", "c"]);
    assert_eq!(rollouts_of_model_version(&mut grpc, 3).await, ["b", "late"]);

    // Two model versions compared: every rollout has the same input, one task.
    let compared = grpc
        .compare_versions(pb::CompareVersionsRequest {
            mode: pb::RolloutMode::Train as i32,
            model_version_before: Some(2),
            model_version_after: Some(3),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let side = |d: &Option<pb::VersionDistribution>| {
        let summary = d.as_ref().unwrap().summary.as_ref().unwrap();
        (summary.model_version, summary.rollouts, summary.reward_mean)
    };
    assert_eq!(side(&compared.before), (Some(2), 1, Some(1.0)));
    assert_eq!(side(&compared.after), (Some(3), 2, Some(0.125)));
    let changes: Vec<f64> = compared.tasks.iter().map(|t| t.change).collect();
    assert_eq!(changes, [-0.875]);
    let page = api
        .get("/console/training?compare_mode=train&before=model-2&after=model-3")
        .await;
    assert!(
        page.text().contains(
            "Model version 2 (before): 1 of 1 train rollouts rewarded, mean 1.000. \
             Model version 3 (after): 2 of 2 rewarded, mean 0.125."
        ),
        "{}",
        page.text()
    );
    for (before, after, code) in [
        (Some(7), Some(3), tonic::Code::NotFound),
        (None, Some(3), tonic::Code::NotFound),
    ] {
        let refused = grpc
            .compare_versions(pb::CompareVersionsRequest {
                mode: pb::RolloutMode::Train as i32,
                model_version_before: before,
                model_version_after: after,
                version_before: 0,
                ..Default::default()
            })
            .await
            .unwrap_err();
        assert_eq!(refused.code(), code, "{refused:?}");
    }
    let both = grpc
        .compare_versions(pb::CompareVersionsRequest {
            mode: pb::RolloutMode::Train as i32,
            version_before: 1,
            model_version_before: Some(2),
            model_version_after: Some(3),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(both.code(), tonic::Code::InvalidArgument, "{both:?}");
    assert_eq!(
        both.message(),
        "version_before and model_version_before are both set: name one version"
    );

    assert_eq!(
        api.send("DELETE", "/api/rollouts/b", &[], "").await.status,
        204
    );
    assert_eq!(
        model_versions(&mut grpc, Some(3)).await,
        [(Some(3), 1, Some(0.25))],
        "a deleted rollout stops counting"
    );
    assert_eq!(rollouts_of_model_version(&mut grpc, 3).await, ["late"]);
    // An id used again is a new rollout: its first call gives its version.
    api.create(json!([{"rollout_id": "b", "input": {}, "is_train": true}]))
        .await;
    api.set_state("b", "running").await;
    api.record("b", "model_request", json!({"model_version": 5}))
        .await;
    assert_eq!(rollouts_of_model_version(&mut grpc, 5).await, ["b"]);
    server.stop().await;
}
