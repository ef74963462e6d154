//! The LLM gateway against fake model servers: routing, rewriting, the
//! recorded events, retries and failures, pause and drain, and agents
//! that go away.

use std::sync::atomic::Ordering;

use lightning_store::proto as pb;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tokio::io::AsyncWriteExt;

use super::BACKEND;
use crate::agl1::support::{
    Api, KEY, MODEL, chat_body, detail, grpc, rollouts_of_model_version, start, start_with,
};
use crate::common::model_server::{ModelServer, token_ids};

/// The endpoint upstream's rule picks for `rollout_id` among `endpoints`.
fn chosen<'a>(endpoints: &'a [String], rollout_id: &str) -> &'a str {
    let mut sorted: Vec<&String> = endpoints.iter().collect();
    sorted.sort();
    let digest = Sha256::digest(rollout_id.as_bytes());
    let head = u64::from_be_bytes(digest[..8].try_into().unwrap());
    sorted[(head % sorted.len() as u64) as usize]
}

#[tokio::test]
async fn calls_are_routed_rewritten_answered_and_recorded() {
    skip_without!(super::BACKEND);
    let server = start(BACKEND).await;
    let api = Api::new(&server);
    let models = [ModelServer::start().await, ModelServer::start().await];
    let endpoints: Vec<String> = models.iter().map(ModelServer::endpoint).collect();
    api.register(&endpoints).await;
    let ids = ["g1", "g2", "g3", "g4"];
    for id in ids {
        api.create_one(id, json!({})).await;
    }
    for id in ids {
        for _ in 0..2 {
            let answer = api.chat(id, "train", &chat_body("hello")).await;
            assert_eq!(answer.status, 200, "{}", answer.text());
        }
    }
    for (model, endpoint) in models.iter().zip(&endpoints) {
        let expected = ids
            .iter()
            .filter(|id| chosen(&endpoints, id) == endpoint)
            .count();
        let got = model.seen.requests.lock().len();
        assert_eq!(got, expected * 2, "every rollout sticks to its server");
    }

    let answer = api.chat("g1", "train", &chat_body("hi")).await;
    let body = answer.json();
    assert_eq!(body["choices"][0]["token_ids"], json!(token_ids("re:2")));
    assert_eq!(
        body["model"], MODEL,
        "the model server got the configured model"
    );
    let sent = models
        .iter()
        .flat_map(|m| m.seen.requests.lock().clone())
        .last()
        .unwrap();
    assert_eq!(sent["temperature"], json!(1.0));
    assert_eq!(
        (sent["return_token_ids"].clone(), sent["logprobs"].clone()),
        (json!(true), json!(true))
    );
    let val = api.chat("g2", "val", &chat_body("hi")).await;
    assert_eq!(val.status, 200);
    let sent = models
        .iter()
        .flat_map(|m| m.seen.requests.lock().clone())
        .find(|r| r["temperature"] == json!(0.7))
        .expect("a validation call at 0.7");
    assert!(
        sent.get("logprobs").is_none(),
        "log-probs only for training"
    );

    let events = api.events("g1", "").await;
    assert_eq!(events.len(), 3);
    let data = &events[2]["data"];
    assert_eq!(data["model"], MODEL);
    assert_eq!(data["request"]["messages"][0]["content"], "hi");
    assert_eq!(data["request"]["model"], MODEL);
    assert_eq!(
        (data["http_status"].clone(), data["status"].clone()),
        (json!(200), json!("ok"))
    );
    assert_eq!(data["server"]["endpoint"], json!(chosen(&endpoints, "g1")));
    assert_eq!(data["finish_reason"], "stop");
    assert_eq!(data["usage"]["prompt_tokens"], 2);
    assert_eq!(data["retry_count"], 0);
    assert!(data["latency_ms"].as_f64().unwrap() > 0.0);
    // Each rollout's policy version is that of the server of its first call.
    let version = data["server"]["version"].as_i64().unwrap();
    let mut grpc = grpc(&server).await;
    assert_eq!(rollouts_of_model_version(&mut grpc, version).await, ids);
    let triplets = api.events("g1", "?format=triplet").await;
    assert_eq!(
        triplets.len(),
        2,
        "two prompts: hello (twice, deduplicated) and hi"
    );
    assert_eq!(
        triplets[1]["data"]["prompt_token_ids"],
        json!(token_ids("hi"))
    );
    assert_eq!(
        triplets[1]["data"]["response_log_probs"],
        json!(vec![-0.25; 4])
    );

    // The completions endpoint reads its prompt ids from the choice.
    let completion = api
        .json(
            "POST",
            "/proxy/rollout/g3/attempt/0/mode/train/openai/v1/completions",
            &json!({"prompt": "abc"}),
        )
        .await;
    assert_eq!(completion.status, 200);
    let triplets = api.events("g3", "?format=triplet").await;
    assert_eq!(
        triplets.last().unwrap()["data"]["prompt_token_ids"],
        json!(token_ids("abc"))
    );

    // Once it ends, a rollout counts what its calls used, as the gateway
    // recorded them.
    api.set_state("g4", "running").await;
    api.set_state("g4", "succeeded").await;
    let calls: Vec<Value> = api.events("g4", "").await;
    let tokens = |key: &str| {
        let sum: i64 = calls
            .iter()
            .map(|call| call["data"]["usage"][key].as_i64().unwrap())
            .sum();
        Some(sum as f64)
    };
    let millis: f64 = calls
        .iter()
        .map(|call| call["data"]["latency_ms"].as_f64().unwrap().round())
        .sum();
    let summary = grpc
        .get_training_summary(pb::GetTrainingSummaryRequest::default())
        .await
        .unwrap()
        .into_inner();
    let v = &summary.versions[0];
    assert_eq!(
        (v.rollouts, v.model_version),
        (1, Some(version)),
        "g4 alone ended"
    );
    assert_eq!(v.prompt_tokens.unwrap().mean, tokens("prompt_tokens"));
    assert_eq!(v.response_tokens.unwrap().mean, tokens("completion_tokens"));
    let latency = v.model_call_latency_seconds.unwrap();
    assert_eq!(latency.count, calls.len() as i64);
    assert_eq!(latency.mean, Some(millis / calls.len() as f64 / 1000.0));
    server.stop().await;
}

#[tokio::test]
async fn upstream_failures_are_retried_recorded_or_refused() {
    skip_without!(super::BACKEND);
    let server = start(BACKEND).await;
    let api = Api::new(&server);
    let model = ModelServer::start().await;
    api.create_one("f", json!({})).await;
    let no_servers = api.chat("f", "train", &chat_body("x")).await;
    assert_eq!(
        (no_servers.status, detail(&no_servers)),
        (
            503,
            json!(format!("No servers available for model '{MODEL}'"))
        )
    );
    api.register(&[model.endpoint()]).await;

    let flaky = api.chat("f", "train", &chat_body("flaky")).await;
    assert_eq!(flaky.status, 200, "two 503s are retried");
    let teapot = api.chat("f", "train", &chat_body("teapot")).await;
    assert_eq!(teapot.status, 418, "a 4xx is the agent's answer");
    assert_eq!(teapot.json()["error"]["message"], "short and stout");
    let html = api.chat("f", "train", &chat_body("html")).await;
    assert_eq!((html.status, html.json()), (200, json!({})));
    let events = api.events("f", "").await;
    let recorded: Vec<(Value, Value, Value)> = events
        .iter()
        .map(|e| {
            (
                e["data"]["http_status"].clone(),
                e["data"]["status"].clone(),
                e["data"]["retry_count"].clone(),
            )
        })
        .collect();
    assert_eq!(
        recorded,
        [
            (json!(200), json!("ok"), json!(2)),
            (json!(418), json!("error"), json!(0)),
            (json!(200), json!("ok"), json!(0)),
        ]
    );

    // No answer, no event: garbage, a hang (timed out) and refused connections.
    let garbage = api.chat("f", "train", &chat_body("garbage")).await;
    assert_eq!(garbage.status, 502);
    let before = model.seen.started.load(Ordering::SeqCst);
    let hang = api.chat("f", "train", &chat_body("hang")).await;
    assert_eq!(
        (hang.status, detail(&hang)),
        (504, json!("Upstream model server timed out"))
    );
    assert_eq!(
        model.seen.started.load(Ordering::SeqCst) - before,
        3,
        "every attempt tried"
    );
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead = format!("http://{}/v1", closed.local_addr().unwrap());
    drop(closed);
    api.create_one("dead", json!({})).await;
    api.json("DELETE", "/api/models", &json!(null)).await;
    api.register(&[dead]).await;
    let refused = api.chat("dead", "train", &chat_body("x")).await;
    assert_eq!(
        (refused.status, detail(&refused)),
        (502, json!("Upstream model server request failed"))
    );
    assert_eq!(api.events("f", "").await.len(), 3, "nothing half written");
    assert_eq!(api.events("dead", "").await.len(), 0);
    server.stop().await;
}

#[tokio::test]
async fn requests_the_gateway_refuses() {
    skip_without!(super::BACKEND);
    let server = start(BACKEND).await;
    let api = Api::new(&server);
    let model = ModelServer::start().await;
    api.register(&[model.endpoint()]).await;
    api.create_one("q", json!({})).await;
    let cases = [
        (
            "/proxy/rollout/q/attempt/0/mode/test/openai/v1/chat/completions",
            "{}",
            404,
            json!("Unsupported proxy mode: test"),
        ),
        (
            "/proxy/rollout/q/attempt/0/mode/train/openai/v1/embeddings",
            "{}",
            404,
            json!("Unsupported upstream path: embeddings"),
        ),
        (
            "/proxy/rollout/nope/attempt/0/mode/train/openai/v1/chat/completions",
            "{}",
            404,
            json!("Rollout not found: nope"),
        ),
        (
            "/proxy/rollout/q/attempt/0/mode/train/openai/v1/chat/completions",
            "{oops",
            400,
            json!("Invalid JSON in request body"),
        ),
        (
            "/proxy/rollout/q/attempt/0/mode/train/openai/v1/chat/completions",
            "[1]",
            400,
            json!("Request body must be a JSON object"),
        ),
        (
            "/proxy/rollout/q/attempt/0/mode/train/openai/v1/chat/completions",
            r#"{"stream": true}"#,
            400,
            json!("Streaming responses are not supported"),
        ),
    ];
    for (path, body, status, expected) in cases {
        let response = api
            .send("POST", path, &[("content-type", "application/json")], body)
            .await;
        assert_eq!(
            (response.status, detail(&response)),
            (status, expected),
            "{path} {body}"
        );
    }
    let get = api
        .get("/proxy/rollout/q/attempt/0/mode/train/openai/v1/chat/completions")
        .await;
    assert_eq!(get.status, 405);
    assert_eq!(
        model.seen.started.load(Ordering::SeqCst),
        0,
        "nothing reached the model"
    );
    assert_eq!(api.events("q", "").await.len(), 0);

    let unconfigured = start_with(BACKEND, |options| options.config.gateway.settings = None).await;
    let api = Api::new(&unconfigured);
    api.create_one("q", json!({})).await;
    let answer = api.chat("q", "train", &chat_body("x")).await;
    assert_eq!(
        (answer.status, detail(&answer)),
        (503, json!("Proxy not configured"))
    );
    unconfigured.stop().await;
    server.stop().await;
}

#[tokio::test]
async fn a_pause_refuses_new_calls_and_lets_calls_in_flight_finish() {
    skip_without!(super::BACKEND);
    let server = start(BACKEND).await;
    let api = Api::new(&server);
    let model = ModelServer::start().await;
    api.register(&[model.endpoint()]).await;
    api.create_one("p", json!({})).await;
    model.seen.hold();
    let in_flight = {
        let api = api.clone();
        tokio::spawn(async move { api.chat("p", "train", &chat_body("slow")).await })
    };
    model.seen.wait_until(&model.seen.started, 1).await;
    let paused = api
        .json(
            "POST",
            "/proxy/pause",
            &json!({"retry_after_seconds": 9, "reason": "weights"}),
        )
        .await;
    assert_eq!(
        paused.json(),
        json!({"paused": true, "retry_after_seconds": 9, "reason": "weights", "inflight": 1})
    );
    let refused = api.chat("p", "train", &chat_body("new")).await;
    assert_eq!(refused.status, 429);
    assert_eq!(refused.headers["retry-after"], "9");
    assert_eq!(refused.headers["x-agl-paused"], "true");
    assert_eq!(
        refused.text(),
        r#"{"error": "gateway paused", "reason": "weights"}"#
    );
    model.seen.release();
    assert_eq!(
        in_flight.await.unwrap().status,
        200,
        "the call in flight finished"
    );
    let state = api.get("/proxy/state").await.json();
    assert_eq!(state["inflight"], 0);
    assert_eq!(state["paused"], true);
    let missing_body = api.send("POST", "/proxy/pause", &[], "").await;
    assert_eq!(missing_body.status, 422);
    let resumed = api.send("POST", "/proxy/resume", &[], "").await.json();
    assert_eq!(
        resumed,
        json!({"paused": false, "retry_after_seconds": 9, "reason": null, "inflight": 0})
    );
    assert_eq!(api.chat("p", "train", &chat_body("new")).await.status, 200);
    assert_eq!(
        api.events("p", "").await.len(),
        2,
        "the refused call recorded nothing"
    );
    server.stop().await;
}

#[tokio::test]
async fn an_agent_that_goes_away_cancels_its_call_and_records_nothing() {
    skip_without!(super::BACKEND);
    let server = start(BACKEND).await;
    let api = Api::new(&server);
    let model = ModelServer::start().await;
    api.register(&[model.endpoint()]).await;
    api.create_one("gone", json!({})).await;
    model.seen.hold();
    let body = serde_json::to_string(&chat_body("bye")).unwrap();
    let mut agent = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    let request = format!(
        "POST /proxy/rollout/gone/attempt/0/mode/train/openai/v1/chat/completions HTTP/1.1\r\n\
         host: localhost\r\nauthorization: Bearer {KEY}\r\ncontent-type: application/json\r\n\
         content-length: {}\r\n\r\n{body}",
        body.len()
    );
    agent.write_all(request.as_bytes()).await.unwrap();
    model.seen.wait_until(&model.seen.started, 1).await;
    assert_eq!(api.get("/proxy/state").await.json()["inflight"], 1);
    drop(agent);
    model.seen.wait_until(&model.seen.cancelled, 1).await;
    model.seen.release();
    // The call was dropped before the model server saw its connection go.
    assert_eq!(api.get("/proxy/state").await.json()["inflight"], 0);
    assert_eq!(api.events("gone", "").await.len(), 0);
    server.stop().await;
}

#[tokio::test]
async fn routing_tensors_are_kept_beside_the_response_when_asked_for() {
    skip_without!(super::BACKEND);
    let server = start_with(BACKEND, |options| {
        if let Some(settings) = &mut options.config.gateway.settings {
            settings.include_routed_experts = true;
        }
    })
    .await;
    let api = Api::new(&server);
    let model = ModelServer::start().await;
    api.register(&[model.endpoint()]).await;
    api.create_one("moe", json!({})).await;
    let first = api.chat("moe", "train", &chat_body("a")).await.json();
    assert!(
        first["choices"][0].get("routed_experts").is_none(),
        "not sent to the agent"
    );
    let mut long = chat_body("a");
    long["messages"]
        .as_array_mut()
        .unwrap()
        .push(json!({"role": "assistant", "content": "re:1"}));
    long["messages"]
        .as_array_mut()
        .unwrap()
        .push(json!({"role": "user", "content": "b"}));
    api.chat("moe", "train", &long).await;
    let events = api.events("moe", "").await;
    assert!(
        events[0]["data"].get("routed_experts").is_none(),
        "superseded by the longer trajectory"
    );
    assert_eq!(
        events[1]["data"]["routed_experts"],
        json!([[6, 1], [2, 3]]),
        "are:1b"
    );
    let sent = model.seen.requests.lock()[0].clone();
    assert_eq!(sent["return_routed_experts"], true);
    server.stop().await;
}
