//! Safe retries: an enqueue retried under its request id (gRPC's
//! `request_id`, the 0.x API's `Idempotency-Key`) returns the first call's
//! rollouts and enqueues nothing; the same id with another request is
//! refused; ids expire; concurrent first uses create once, also on two
//! servers of one PostgreSQL database.

use std::sync::Arc;
use std::time::Duration;

use lightning_store::core::clock::ManualClock;
use lightning_store::proto as pb;
use serde_json::json;
use tonic::Code;

use super::BACKEND;
use super::TestServer;
use crate::common::http::{HttpClient, Version};
use crate::common::{Backend, TestOptions};
use crate::conformance::support::*;

fn batch(request_id: &str, inputs: &[&str]) -> pb::EnqueueRolloutsRequest {
    pb::EnqueueRolloutsRequest {
        rollouts: inputs.iter().map(|input| spec(input)).collect(),
        request_id: Some(request_id.to_owned()),
        ..Default::default()
    }
}

fn one(request_id: &str, input: &str) -> pb::EnqueueRolloutRequest {
    pb::EnqueueRolloutRequest {
        rollout: Some(spec(input)),
        request_id: Some(request_id.to_owned()),
    }
}

async fn queued(c: &mut Client) -> i64 {
    stats(c).await.queued_rollouts
}

#[tokio::test]
async fn a_retried_enqueue_returns_the_first_result_and_writes_nothing() {
    skip_without!(super::BACKEND);
    let server = TestServer::start(BACKEND).await;
    let mut c = server.client().await;
    let first = c
        .enqueue_rollouts(batch("batch-1", &["1", "2"]))
        .await
        .unwrap()
        .into_inner();
    assert!(!first.repeated);
    assert_eq!(first.rollout_ids.len(), 2);
    let retry = c
        .enqueue_rollouts(batch("batch-1", &["1", "2"]))
        .await
        .unwrap()
        .into_inner();
    assert!(retry.repeated);
    assert_eq!(retry.rollout_ids, first.rollout_ids);
    assert_eq!(retry.rollouts, first.rollouts);
    assert_eq!(queued(&mut c).await, 2);

    // The ids-only rules apply to a retry as to the first call.
    let ids_only = c
        .enqueue_rollouts(pb::EnqueueRolloutsRequest {
            ids_only: true,
            ..batch("batch-1", &["1", "2"])
        })
        .await
        .unwrap()
        .into_inner();
    assert!(ids_only.ids_only && ids_only.rollouts.is_empty() && ids_only.repeated);
    assert_eq!(ids_only.rollout_ids, first.rollout_ids);

    // A retry answers with the rollouts as they are now.
    let claimed = dequeue(&mut c, Some("w")).await.unwrap();
    assert_eq!(claimed.rollout_id, first.rollout_ids[0]);
    let now = c
        .enqueue_rollouts(batch("batch-1", &["1", "2"]))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(status(&now.rollouts[0]), R::Preparing);
    assert_eq!(queued(&mut c).await, 1);

    // EnqueueRollout shares the ids: its retry returns its one rollout.
    let single = c
        .enqueue_rollout(one("single", "3"))
        .await
        .unwrap()
        .into_inner();
    let again = c
        .enqueue_rollout(one("single", "3"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(again.rollout, single.rollout);
    assert_eq!(stats(&mut c).await.total_rollouts, 3);

    // Another request under a used id is refused, naming the id.
    for refused in [
        c.enqueue_rollouts(batch("batch-1", &["1", "2", "3"]))
            .await
            .map(drop),
        c.enqueue_rollouts(batch("batch-1", &["2", "1"]))
            .await
            .map(drop),
        c.enqueue_rollout(one("single", "4")).await.map(drop),
    ] {
        assert_code(
            refused,
            Code::FailedPrecondition,
            "was used for another request",
        );
    }
    assert_eq!(stats(&mut c).await.total_rollouts, 3);

    // Without an id, every call enqueues.
    for _ in 0..2 {
        c.enqueue_rollouts(pb::EnqueueRolloutsRequest {
            rollouts: vec![spec("1")],
            ..Default::default()
        })
        .await
        .unwrap();
    }
    assert_eq!(stats(&mut c).await.total_rollouts, 5);
    server.stop().await;
}

#[tokio::test]
async fn request_ids_are_checked_before_anything_is_written() {
    skip_without!(super::BACKEND);
    let server = TestServer::start(BACKEND).await;
    let mut c = server.client().await;
    let long = "x".repeat(129);
    for bad in ["", "two words", "tab\there", long.as_str()] {
        let refused = c.enqueue_rollouts(batch(bad, &["1"])).await;
        assert_code(refused, Code::InvalidArgument, "request_id");
    }
    let longest = "y".repeat(128);
    c.enqueue_rollouts(batch(&longest, &["1"])).await.unwrap();
    assert_eq!(stats(&mut c).await.total_rollouts, 1);
    server.stop().await;
}

/// Ids are remembered this long in the expiry test, on a manual clock: time
/// passes for the store only when the test advances it.
const TTL: Duration = Duration::from_secs(60);

#[tokio::test]
async fn request_ids_expire() {
    skip_without!(super::BACKEND);
    let clock = Arc::new(ManualClock::at_system_time());
    let server = TestServer::start_opts(
        BACKEND,
        TestOptions {
            request_id_ttl: TTL,
            clock: clock.clone(),
            ..Default::default()
        },
    )
    .await;
    let mut c = server.client().await;
    let first = c
        .enqueue_rollouts(batch("k", &["1"]))
        .await
        .unwrap()
        .into_inner();
    let retry = c
        .enqueue_rollouts(batch("k", &["1"]))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(retry.rollout_ids, first.rollout_ids);
    clock.advance(TTL + Duration::from_millis(1));
    // Expired: the id names a new request, even another one.
    let later = c
        .enqueue_rollouts(batch("k", &["2"]))
        .await
        .unwrap()
        .into_inner();
    assert!(!later.repeated);
    assert_ne!(later.rollout_ids, first.rollout_ids);
    server.engine.forget_expired_requests().await.unwrap();
    let retry = c
        .enqueue_rollouts(batch("k", &["2"]))
        .await
        .unwrap()
        .into_inner();
    assert!(
        retry.repeated,
        "the new request is remembered, not forgotten"
    );
    assert_eq!(retry.rollout_ids, later.rollout_ids);
    assert_eq!(stats(&mut c).await.total_rollouts, 2);
    server.stop().await;
}

/// Concurrent first uses of one id, from several clients (and on
/// PostgreSQL from two servers of one database): one creates, every other
/// returns its rollouts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_first_uses_of_an_id_create_once() {
    skip_without!(super::BACKEND);
    const ROUNDS: usize = 8;
    const RACERS: usize = 6;
    let options = match BACKEND {
        Backend::Postgres => {
            let url = crate::common::postgres_database().await;
            vec![url.clone(), url]
        }
        _ => vec![String::new()],
    };
    let mut servers = Vec::new();
    for url in &options {
        servers.push(
            TestServer::start_opts(
                BACKEND,
                TestOptions {
                    postgres_url: (!url.is_empty()).then(|| url.clone()),
                    ..Default::default()
                },
            )
            .await,
        );
    }
    let mut clients = Vec::new();
    for racer in 0..RACERS {
        clients.push(servers[racer % servers.len()].client().await);
    }
    for round in 0..ROUNDS {
        let id = format!("race-{round}");
        let answers = futures::future::join_all(clients.iter().map(|client| {
            let mut client = client.clone();
            let request = batch(&id, &["1", "2"]);
            async move { client.enqueue_rollouts(request).await }
        }))
        .await;
        let answers: Vec<_> = answers
            .into_iter()
            .map(|answer| answer.expect("every racer is answered").into_inner())
            .collect();
        assert_eq!(
            answers.iter().filter(|answer| !answer.repeated).count(),
            1,
            "round {round}: one racer creates"
        );
        for answer in &answers {
            assert_eq!(answer.rollout_ids, answers[0].rollout_ids, "round {round}");
        }
    }
    let mut c = servers[0].client().await;
    assert_eq!(stats(&mut c).await.total_rollouts, (ROUNDS * 2) as i64);
    assert_eq!(queued(&mut c).await, (ROUNDS * 2) as i64);
    for server in servers {
        server.stop().await;
    }
}

/// The 0.x API's enqueue takes the same ids as an `Idempotency-Key` header.
#[tokio::test]
async fn the_http_enqueue_takes_an_idempotency_key() {
    skip_without!(super::BACKEND);
    let server = TestServer::start(BACKEND).await;
    let http = HttpClient::new(server.addr, Version::Http1);
    let path = "/v1/agl/queues/rollouts/enqueue";
    let post = |key: &'static str, body: serde_json::Value| {
        let http = http.clone();
        async move {
            http.request(
                "POST",
                path,
                &[
                    ("content-type", "application/json"),
                    ("idempotency-key", key),
                ],
                serde_json::to_vec(&body).unwrap(),
            )
            .await
        }
    };
    let body = json!({"rollouts": [{"input": {"task": 1}}]});
    let first = post("http-1", body.clone()).await;
    assert_eq!(first.status, 201, "{}", first.text());
    let retry = post("http-1", body).await;
    assert_eq!(retry.status, 201, "{}", retry.text());
    assert_eq!(retry.json()[0]["rollout_id"], first.json()[0]["rollout_id"]);
    let other = post("http-1", json!({"rollouts": [{"input": {"task": 2}}]})).await;
    assert_eq!(other.status, 409, "{}", other.text());
    assert!(other.text().contains("was used for another request"));
    let bad = post("two words", json!({"rollouts": [{"input": 1}]})).await;
    assert_eq!(bad.status, 400, "{}", bad.text());
    // gRPC and HTTP share the ids.
    let mut c = server.client().await;
    let grpc = c
        .enqueue_rollouts(batch("http-1", &[r#"{"task": 3}"#]))
        .await;
    assert_code(grpc, Code::FailedPrecondition, "http-1");
    assert_eq!(stats(&mut c).await.total_rollouts, 1);
    server.stop().await;
}
