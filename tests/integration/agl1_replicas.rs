//! agent-lightning 1.x's API served by two servers on one PostgreSQL
//! database: a client alternating between them sees the same rollouts,
//! events, terminal cursor and gateway pause, and the gateway's in-flight
//! count sums both servers.

use crate::agl1::support;
use crate::common;

use std::time::{Duration, Instant};

use common::model_server::ModelServer;
use common::{Backend, postgres_database};
use serde_json::{Value, json};
use support::{Api, chat_body, start_with};

#[tokio::test]
async fn two_servers_on_one_database_answer_alike() {
    skip_without!(crate::common::Backend::Postgres);
    let url = postgres_database().await;
    let shared = |options: &mut common::TestOptions| options.postgres_url = Some(url.clone());
    let a = start_with(Backend::Postgres, shared).await;
    let b = start_with(Backend::Postgres, shared).await;
    let apis = [Api::new(&a), Api::new(&b)];
    let both = |path: &'static str| {
        let apis = apis.clone();
        async move {
            let mut answers = Vec::new();
            for api in &apis {
                answers.push(api.get(path).await.json());
            }
            assert_eq!(answers[0], answers[1], "{path}");
            answers.remove(0)
        }
    };

    for (index, id) in ["r0", "r1", "r2", "r3"].iter().enumerate() {
        apis[index % 2].create_one(id, json!({"data_id": id})).await;
    }
    let listed = both("/api/rollouts?state_in=queuing").await;
    assert_eq!(listed.as_array().unwrap().len(), 4);
    apis[0].set_state("r0", "running").await;
    apis[1]
        .post_event("r0", "0", "reward", json!({"value": 1}))
        .await;
    apis[0].post_event("r0", "0", "note", json!({})).await;
    let events = both("/api/rollouts/r0/events").await;
    assert_eq!(events.as_array().unwrap().len(), 2);
    apis[1].set_state("r0", "succeeded").await;
    apis[0].set_state("r1", "failed").await;
    let page = both("/api/rollouts/terminal").await;
    assert_eq!(page["total_terminal"], 2);
    assert_eq!(
        both("/api/rollouts/r0").await["rollout"]["status"]["version"],
        3
    );

    // The gateway: models registered on one, calls through the other.
    let model = ModelServer::start().await;
    apis[0].register(&[model.endpoint()]).await;
    assert_eq!(
        apis[1].chat("r2", "train", &chat_body("hi")).await.status,
        200
    );
    assert_eq!(
        both("/api/rollouts/r2/events")
            .await
            .as_array()
            .unwrap()
            .len(),
        1
    );

    // A call in flight on A is counted by a pause on B, which returns once
    // A applies it; then both refuse new calls.
    model.seen.hold();
    let in_flight = {
        let api = apis[0].clone();
        tokio::spawn(async move { api.chat("r2", "train", &chat_body("slow")).await })
    };
    model.seen.wait_until(&model.seen.started, 2).await;
    let paused = apis[1]
        .json("POST", "/proxy/pause", &json!({"reason": "sync"}))
        .await
        .json();
    assert_eq!(
        (paused["paused"].clone(), paused["inflight"].clone()),
        (json!(true), json!(1))
    );
    for api in &apis {
        let refused = api.chat("r3", "train", &chat_body("new")).await;
        assert_eq!(refused.status, 429);
    }
    model.seen.release();
    assert_eq!(in_flight.await.unwrap().status, 200);
    // A reports its finished call through the database; B sees it within
    // a report interval (polled, as a trainer draining the gateway does).
    let started = Instant::now();
    loop {
        let state = apis[1].get("/proxy/state").await.json();
        if state["inflight"] == 0 {
            assert_eq!(state["paused"], true);
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(10), "{state}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let resumed = apis[0].send("POST", "/proxy/resume", &[], "").await.json();
    assert_eq!(resumed["paused"], false);
    let state: Value = both("/proxy/state").await;
    assert_eq!(
        (state["paused"].clone(), state["inflight"].clone()),
        (json!(false), json!(0))
    );
    assert_eq!(
        apis[1]
            .chat("r3", "train", &chat_body("again"))
            .await
            .status,
        200
    );

    assert_eq!(
        apis[0]
            .send("DELETE", "/api/rollouts/r1", &[], "")
            .await
            .status,
        204
    );
    assert_eq!(apis[1].get("/api/rollouts/r1").await.status, 404);
    // B's gateway knew r2; once A deletes it, a call through B is a 404
    // (refused at once, or after the model answered: nothing is recorded).
    let deleted = apis[0].send("DELETE", "/api/rollouts/r2", &[], "").await;
    assert_eq!(deleted.status, 204);
    let gone = apis[1].chat("r2", "train", &chat_body("late")).await;
    assert_eq!(gone.status, 404);
    let page = both("/api/rollouts/terminal").await;
    assert_eq!(
        (
            page["total_terminal"].clone(),
            page["items"].as_array().unwrap().len()
        ),
        (json!(2), 1)
    );
    a.stop().await;
    b.stop().await;
}

#[tokio::test]
async fn a_pause_survives_a_restart() {
    skip_without!(crate::common::Backend::Postgres);
    let url = postgres_database().await;
    let shared = |options: &mut common::TestOptions| options.postgres_url = Some(url.clone());
    let first = start_with(Backend::Postgres, shared).await;
    let api = Api::new(&first);
    api.json("POST", "/proxy/pause", &json!({"retry_after_seconds": 3}))
        .await;
    first.stop().await;
    let second = start_with(Backend::Postgres, shared).await;
    let api = Api::new(&second);
    let model = ModelServer::start().await;
    api.register(&[model.endpoint()]).await;
    api.create_one("p", json!({})).await;
    let refused = api.chat("p", "train", &chat_body("x")).await;
    assert_eq!(
        (
            refused.status,
            refused.headers["retry-after"].to_str().unwrap()
        ),
        (429, "3")
    );
    second.stop().await;
}
