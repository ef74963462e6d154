//! The rollout GET (the trainer's poll, cached on memory and SQLite) sees
//! every write acknowledged before it, whichever API or the watchdog made
//! it: each step reads the rollout twice (the second read is the one a
//! cache answers), writes, and reads again at once.

use std::time::{Duration, Instant};

use lightning_store::proto as pb;
use serde_json::{Value, json};

use super::BACKEND;
use crate::agl1::support::{Api, grpc, start};
use crate::common::{Backend, TestServer};

/// Reads the rollout until the cache holds it (memory, SQLite; a commit
/// of the server's background work during a read may keep that read from
/// filling it; PostgreSQL has no cache) and returns the last read.
async fn polled(server: &TestServer, api: &Api, id: &str) -> Value {
    let first = api.rollout(id).await;
    for _ in 0..50 {
        let again = api.rollout(id).await;
        assert_eq!(first, again, "nothing changed between the reads");
        let cached = server.engine.cached_agl1_details();
        match BACKEND {
            Backend::Postgres => assert_eq!(cached, None),
            _ if cached.is_none_or(|n| n == 0) => continue,
            _ => {}
        }
        return again;
    }
    panic!("the rollout was never cached");
}

fn update(rollout_id: &str, path: &str) -> pb::UpdateRolloutRequest {
    pb::UpdateRolloutRequest {
        rollout_id: rollout_id.into(),
        update_mask: Some(prost_types::FieldMask {
            paths: vec![path.into()],
        }),
        ..Default::default()
    }
}

#[tokio::test]
async fn a_get_right_after_a_write_through_any_api_sees_it() {
    skip_without!(super::BACKEND);
    let server = start(BACKEND).await;
    let api = Api::new(&server);
    let mut grpc = grpc(&server).await;
    api.create_one("f1", json!({"q": 1})).await;
    assert_eq!(
        polled(&server, &api, "f1").await["rollout"]["metadata"]["by"],
        Value::Null
    );

    // gRPC.
    let mut request = update("f1", "metadata_json");
    request.metadata_json = r#"{"by":"grpc"}"#.into();
    grpc.update_rollout(request).await.unwrap();
    assert_eq!(api.rollout("f1").await["rollout"]["metadata"]["by"], "grpc");

    // 0.x HTTP.
    polled(&server, &api, "f1").await;
    let response = api
        .json(
            "POST",
            "/v1/agl/rollouts/f1",
            &json!({"metadata": {"by": "0.x"}}),
        )
        .await;
    assert_eq!(response.status, 200, "{}", response.text());
    assert_eq!(api.rollout("f1").await["rollout"]["metadata"]["by"], "0.x");

    // 1.x PATCH.
    let version = polled(&server, &api, "f1").await["rollout"]["status"]["version"].clone();
    api.set_state("f1", "running").await;
    let seen = api.rollout("f1").await;
    assert_eq!(seen["rollout"]["status"]["state"], "running");
    assert_ne!(seen["rollout"]["status"]["version"], version);

    // 1.x events: the attempt list.
    assert_eq!(polled(&server, &api, "f1").await["attempts"], json!([]));
    let posted = api
        .post_event("f1", "0", "reward", json!({"value": 1}))
        .await;
    assert_eq!(posted.status, 200, "{}", posted.text());
    assert_eq!(api.rollout("f1").await["attempts"], json!(["0"]));

    // 1.x DELETE.
    polled(&server, &api, "f1").await;
    let deleted = api.send("DELETE", "/api/rollouts/f1", &[], "").await;
    assert_eq!(deleted.status, 204);
    assert_eq!(api.get("/api/rollouts/f1").await.status, 404);
    // Created again under the same id: the new rollout.
    api.create_one("f1", json!({"q": 2})).await;
    assert_eq!(api.rollout("f1").await["rollout"]["input"], json!({"q": 2}));
    server.stop().await;
}

#[tokio::test]
async fn a_get_after_a_watchdog_deadline_sees_the_verdict() {
    skip_without!(super::BACKEND);
    let server = start(BACKEND).await;
    let api = Api::new(&server);
    let mut grpc = grpc(&server).await;
    api.create_one("w1", json!({})).await;
    // The attempt starts between these two instants; its deadline is 0.3 s
    // after its start.
    let started_after = Instant::now();
    api.set_state("w1", "running").await;
    let mut request = update("w1", "config");
    request.config = Some(pb::RolloutConfig {
        timeout_seconds: Some(0.3),
        max_attempts: Some(1),
        ..Default::default()
    });
    grpc.update_rollout(request).await.unwrap();
    let due_by = Instant::now() + Duration::from_millis(300);
    let before = polled(&server, &api, "w1").await;
    if Instant::now() < started_after + Duration::from_millis(300) {
        assert_eq!(before["rollout"]["status"]["state"], "running");
    }
    // Waiting for time itself: the deadline is the event.
    tokio::time::sleep_until((due_by + Duration::from_millis(50)).into()).await;
    let after = api.rollout("w1").await;
    assert_eq!(
        after["rollout"]["status"]["state"], "failed",
        "the first GET past the deadline carries the watchdog's verdict: {after}"
    );
    server.stop().await;
}
