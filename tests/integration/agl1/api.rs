//! The store API under `/api`: rollouts, the state machine, the terminal
//! cursor, events, models, and the key.

use std::time::{Duration, Instant};

use lightning_store::proto;
use serde_json::{Value, json};

use super::BACKEND;
use crate::agl1::support::{Api, KEY, detail, grpc, start};
use crate::common::http::{HttpClient, Version};

/// Concurrent first creations of one caller-chosen id: one of them creates
/// the rollout, every other returns it untouched (1.x's "an id that exists
/// is returned as it is"), and the queue holds it once. On a shared
/// database the creations run in separate transactions with no row to lock
/// yet.
#[tokio::test]
async fn concurrent_creations_of_one_id_create_it_once() {
    skip_without!(super::BACKEND);
    const ROUNDS: usize = 12;
    const RACERS: usize = 6;
    let server = start(BACKEND).await;
    let racers: Vec<Api> = (0..RACERS).map(|_| Api::new(&server)).collect();
    for round in 0..ROUNDS {
        let id = format!("race-{round}");
        let answers = futures::future::join_all(racers.iter().enumerate().map(|(racer, api)| {
            let body = json!([{"rollout_id": id, "input": {"racer": racer}}]);
            async move { api.json("POST", "/api/rollouts", &body).await }
        }))
        .await;
        let bodies: Vec<Value> = answers
            .iter()
            .map(|answer| {
                assert_eq!(answer.status, 201, "round {round}: {}", answer.text());
                answer.json()[0].clone()
            })
            .collect();
        for body in &bodies {
            assert_eq!(
                body, &bodies[0],
                "round {round}: every racer sees the one rollout"
            );
        }
        assert_eq!(
            racers[0].rollout(&id).await["rollout"]["input"],
            bodies[0]["input"]
        );
    }
    let queuing = racers[0].get("/api/rollouts?state_in=queuing").await.json();
    assert_eq!(queuing.as_array().unwrap().len(), ROUNDS, "{queuing}");
    let stats = grpc(&server)
        .await
        .get_statistics(proto::GetStatisticsRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(stats.total_rollouts, ROUNDS as i64);
    server.stop().await;
}

#[tokio::test]
async fn health_is_open_and_everything_else_needs_the_key() {
    skip_without!(super::BACKEND);
    let server = start(BACKEND).await;
    let open = HttpClient::new(server.addr, Version::Http1);
    let health = open.get("/healthz").await;
    assert_eq!(
        (health.status, health.text()),
        (200, r#"{"status":"ok"}"#.to_owned())
    );
    for path in [
        "/api/rollouts?state_in=queuing",
        "/proxy/state",
        "/v1/agl/health",
    ] {
        let refused = open.get(path).await;
        let expected = if path == "/v1/agl/health" { 200 } else { 401 };
        assert_eq!(refused.status, expected, "{path}");
        if expected == 401 {
            assert_eq!(
                refused.json(),
                json!({"detail": "Invalid or missing API key"})
            );
        }
    }
    let wrong = open
        .request(
            "GET",
            "/proxy/state",
            &[("authorization", "Bearer nope")],
            "",
        )
        .await;
    assert_eq!(wrong.status, 401);
    let header = open
        .request("GET", "/proxy/state", &[("x-api-key", KEY)], "")
        .await;
    assert_eq!(header.status, 200, "x-api-key is accepted");
    assert_eq!(
        open.get("/no/such/route").await.status,
        404,
        "unknown routes stay 404"
    );

    // gRPC: the same key as metadata; health stays open.
    let mut grpc = server.client().await;
    let refused = grpc
        .get_statistics(proto::GetStatisticsRequest {})
        .await
        .unwrap_err();
    assert_eq!(refused.code(), tonic::Code::Unauthenticated);
    let mut request = tonic::Request::new(proto::GetStatisticsRequest {});
    request
        .metadata_mut()
        .insert("authorization", format!("Bearer {KEY}").parse().unwrap());
    assert!(grpc.get_statistics(request).await.is_ok());
    let mut health = tonic_health::pb::health_client::HealthClient::new(server.channel().await);
    let status = health
        .check(tonic_health::pb::HealthCheckRequest::default())
        .await
        .unwrap();
    assert_eq!(status.into_inner().status, 1, "SERVING without the key");
    server.stop().await;
}

#[tokio::test]
async fn rollouts_are_created_idempotently_listed_fetched_and_deleted() {
    skip_without!(super::BACKEND);
    let server = start(BACKEND).await;
    let api = Api::new(&server);
    let created = api
        .create(json!([
            {"rollout_id": "r1", "input": {"data_id": "d1"}, "is_train": false,
             "config": {"timeout_seconds": 60, "local": {"agent_class": "m:A", "env_map": {"Q": "input.q"}}},
             "metadata": {"batch_idx": 1, "extra": [1]}},
            {"input": "generated id"},
            {"rollout_id": "r1", "input": "ignored: r1 exists"},
        ]))
        .await;
    assert_eq!(created.len(), 3);
    let r1 = &created[0];
    assert_eq!(r1["rollout_id"], "r1");
    assert_eq!(r1["is_train"], false);
    assert_eq!(
        r1["config"],
        json!({"timeout_seconds": 60, "local": {"agent_class": "m:A", "env_map": {"Q": "input.q"}}, "k8s": null})
    );
    assert_eq!(
        r1["metadata"],
        json!({"batch_idx": 1, "sample_idx_in_batch": null, "extra": [1]})
    );
    let status = &r1["status"];
    assert_eq!(status["state"], "queuing");
    assert_eq!(status["version"], 1);
    assert_eq!(status["created_at"], status["updated_at"]);
    assert!(status["created_at"].as_f64().unwrap() > 1.7e9);
    let generated = created[1]["rollout_id"].as_str().unwrap();
    assert!(generated.len() == 32 && generated.bytes().all(|b| b.is_ascii_hexdigit()));
    assert_eq!(
        &created[2], r1,
        "a repeated id returns the rollout untouched"
    );

    // A retried creation returns the existing rollout, whatever it carries now.
    api.set_state("r1", "running").await;
    let again = api.create(json!([{"rollout_id": "r1", "input": 2}])).await;
    assert_eq!(again[0]["status"]["state"], "running");
    assert_eq!(again[0]["input"], json!({"data_id": "d1"}));

    let listed = api
        .get("/api/rollouts?state_in=queuing&state_in=running")
        .await;
    let ids: Vec<Value> = listed
        .json()
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["rollout_id"].clone())
        .collect();
    assert_eq!(ids, [json!("r1"), json!(generated)], "creation order");
    let queuing = api.get("/api/rollouts?state_in=queuing").await.json();
    assert_eq!(queuing.as_array().unwrap().len(), 1);
    for (limit, count) in [("1", 1), ("0", 0), ("-1", 1), ("-5", 0)] {
        let page = api
            .get(&format!(
                "/api/rollouts?state_in=queuing&state_in=running&limit={limit}"
            ))
            .await;
        assert_eq!(
            page.json().as_array().unwrap().len(),
            count,
            "limit {limit}: Python slicing"
        );
    }

    let detail_body = api.rollout("r1").await;
    assert_eq!(detail_body["rollout"]["status"]["state"], "running");
    assert_eq!(detail_body["attempts"], json!([]), "no events yet");
    let missing = api.get("/api/rollouts/nope").await;
    assert_eq!(
        (missing.status, detail(&missing)),
        (404, json!("Rollout not found: nope"))
    );

    // DELETE drops the rollout and its events; it is idempotent.
    assert_eq!(
        api.post_event("r1", "0", "reward", json!({"value": 1}))
            .await
            .status,
        200
    );
    let deleted = api.send("DELETE", "/api/rollouts/r1", &[], "").await;
    assert_eq!((deleted.status, deleted.body.len()), (204, 0));
    assert_eq!(
        api.send("DELETE", "/api/rollouts/r1", &[], "").await.status,
        204
    );
    assert_eq!(api.get("/api/rollouts/r1").await.status, 404);
    assert_eq!(api.get("/api/rollouts/r1/events").await.status, 404);
    // The same id creates a fresh rollout afterwards, without the old events.
    let fresh = api.create_one("r1", json!("again")).await;
    assert_eq!(
        (
            fresh["status"]["state"].clone(),
            fresh["status"]["version"].clone()
        ),
        (json!("queuing"), json!(1))
    );
    assert_eq!(api.events("r1", "").await, Vec::<Value>::new());
    server.stop().await;
}

#[tokio::test]
async fn patches_follow_the_state_machine_and_bump_the_version() {
    skip_without!(super::BACKEND);
    let server = start(BACKEND).await;
    let api = Api::new(&server);
    for id in ["a", "b", "c"] {
        api.create_one(id, json!({})).await;
    }
    let refused = api.patch("a", json!({"state": "succeeded"})).await;
    assert_eq!(
        (refused.status, detail(&refused)),
        (
            409,
            json!("Rollout a: cannot transition queuing -> succeeded")
        )
    );
    let refused = api.patch("a", json!({"state": null})).await;
    assert_eq!(
        detail(&refused),
        json!("Rollout a: cannot transition queuing -> None")
    );
    let unchanged = api
        .json("PATCH", "/api/rollouts/a", &json!({"status": {}}))
        .await;
    assert_eq!(
        unchanged.json()["status"]["version"],
        1,
        "an empty patch changes nothing"
    );
    let unchanged = api.json("PATCH", "/api/rollouts/a", &json!({})).await;
    assert_eq!(unchanged.json()["status"]["version"], 1);

    let running = api
        .patch(
            "a",
            json!({"state": "running", "last_attempt_id": "7", "k8s_job_name": "job-a"}),
        )
        .await
        .json();
    assert_eq!(running["status"]["state"], "running");
    assert_eq!(running["status"]["version"], 2);
    assert_eq!(running["status"]["last_attempt_id"], "7");
    assert_eq!(running["status"]["k8s_job_name"], "job-a");
    assert!(running["status"]["updated_at"].as_f64() > running["status"]["created_at"].as_f64());
    let refused = api.patch("a", json!({"state": "running"})).await;
    assert_eq!(
        detail(&refused),
        json!("Rollout a: cannot transition running -> running")
    );
    let noted = api
        .patch("a", json!({"error_message": "note"}))
        .await
        .json();
    assert_eq!(
        (
            noted["status"]["version"].clone(),
            noted["status"]["state"].clone()
        ),
        (json!(3), json!("running"))
    );
    let done = api.set_state("a", "succeeded").await;
    assert_eq!(done["status"]["version"], 4);
    for target in ["running", "failed", "queuing", "succeeded"] {
        let refused = api.patch("a", json!({"state": target})).await;
        assert_eq!(refused.status, 409, "succeeded is final ({target})");
    }

    // queuing -> failed without ever running; running -> failed.
    let failed = api
        .patch(
            "b",
            json!({"state": "failed", "error_message": "spawn failed"}),
        )
        .await;
    assert_eq!(failed.json()["status"]["error_message"], "spawn failed");
    api.set_state("c", "running").await;
    assert_eq!(
        api.set_state("c", "failed").await["status"]["state"],
        "failed"
    );
    let missing = api.patch("zz", json!({"state": "running"})).await;
    assert_eq!(
        (missing.status, detail(&missing)),
        (404, json!("Rollout not found: zz"))
    );

    // Events are read from the attempt last_attempt_id names.
    api.post_event("a", "7", "reward", json!({"value": 7}))
        .await;
    api.post_event("a", "0", "reward", json!({"value": 0}))
        .await;
    let events = api.events("a", "").await;
    assert_eq!(events.len(), 1);
    assert_eq!(events[0]["data"], json!({"value": 7}));
    assert_eq!(
        api.rollout("a").await["attempts"],
        json!(["7", "0"]),
        "by first event"
    );
    server.stop().await;
}

#[tokio::test]
async fn the_terminal_cursor_pages_completions_and_never_shifts() {
    skip_without!(super::BACKEND);
    let server = start(BACKEND).await;
    let api = Api::new(&server);
    for (id, input) in [
        ("t1", json!({"data_id": "d1"})),
        ("t2", json!({"instance_id": 5})),
        ("t3", json!("x")),
    ] {
        api.create_one(id, input).await;
    }
    api.set_state("t3", "failed").await;
    api.set_state("t1", "running").await;
    api.set_state("t1", "succeeded").await;
    let page = api.get("/api/rollouts/terminal").await.json();
    assert_eq!(
        page,
        json!({"items": [
            {"rollout_id": "t3", "state": "failed", "data_id": "", "is_train": true},
            {"rollout_id": "t1", "state": "succeeded", "data_id": "d1", "is_train": true},
        ], "next_after": 2, "total_terminal": 2})
    );
    let second = api
        .get("/api/rollouts/terminal?after=1&limit=5")
        .await
        .json();
    assert_eq!(
        (
            second["next_after"].clone(),
            second["items"][0]["rollout_id"].clone()
        ),
        (json!(2), json!("t1"))
    );
    let clamped = api
        .get("/api/rollouts/terminal?after=-3&limit=0")
        .await
        .json();
    assert_eq!(
        (
            clamped["next_after"].clone(),
            clamped["items"].as_array().unwrap().len()
        ),
        (json!(1), 1)
    );
    assert_eq!(
        api.send("DELETE", "/api/rollouts/t3", &[], "").await.status,
        204
    );
    let after_delete = api.get("/api/rollouts/terminal").await.json();
    assert_eq!(
        after_delete["total_terminal"], 2,
        "a delete never shifts the log"
    );
    assert_eq!(after_delete["next_after"], 2);
    assert_eq!(after_delete["items"].as_array().unwrap().len(), 1);

    // A long poll returns when the next completion arrives.
    let waiting = {
        let api = api.clone();
        tokio::spawn(async move { api.get("/api/rollouts/terminal?after=2&wait=30").await })
    };
    let started = Instant::now();
    api.set_state("t2", "failed").await;
    let page = waiting.await.unwrap().json();
    assert_eq!(page["items"][0]["rollout_id"], "t2");
    assert_eq!(page["items"][0]["data_id"], "5");
    assert!(started.elapsed() < Duration::from_secs(30));
    let empty = api
        .get("/api/rollouts/terminal?after=3&wait=0.05")
        .await
        .json();
    assert_eq!(
        (empty["items"].clone(), empty["next_after"].clone()),
        (json!([]), json!(3))
    );

    // Server-sent events from a position, then live.
    let mut events = sse_events(&server, 1).await;
    let first = events.next().await;
    assert_eq!(
        (first.0.as_str(), first.1["rollout_id"].clone()),
        ("2", json!("t1"))
    );
    api.create_one("t4", json!({})).await;
    api.set_state("t4", "failed").await;
    let next = events.next().await;
    assert_eq!(next.1["rollout_id"], "t2");
    let live = events.next().await;
    assert_eq!(
        (live.0.as_str(), live.1["rollout_id"].clone()),
        ("4", json!("t4"))
    );
    server.stop().await;
}

/// A reader of the terminal cursor's server-sent events.
struct SseEvents {
    body: hyper::body::Incoming,
    buffer: String,
}

impl SseEvents {
    /// Returns the next event's id and data.
    async fn next(&mut self) -> (String, Value) {
        use http_body_util::BodyExt as _;
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                let field = |name: &str| {
                    block
                        .lines()
                        .find_map(|l| l.strip_prefix(name))
                        .map(|v| v.trim().to_owned())
                };
                if let (Some(id), Some(data)) = (field("id:"), field("data:")) {
                    return (id, serde_json::from_str(&data).unwrap());
                }
                continue;
            }
            let frame = tokio::time::timeout(Duration::from_secs(20), self.body.frame())
                .await
                .expect("an event within 20 s")
                .expect("the stream stays open")
                .unwrap();
            if let Ok(data) = frame.into_data() {
                self.buffer.push_str(&String::from_utf8_lossy(&data));
            }
        }
    }
}

async fn sse_events(server: &crate::common::TestServer, after: i64) -> SseEvents {
    let stream = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .unwrap();
    tokio::spawn(connection);
    let request = http::Request::get(format!("/api/rollouts/terminal?after={after}"))
        .header("host", "localhost")
        .header("authorization", format!("Bearer {KEY}"))
        .header("accept", "text/event-stream")
        .body(http_body_util::Empty::<bytes::Bytes>::new())
        .unwrap();
    let response = sender.send_request(request).await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    SseEvents {
        body: response.into_body(),
        buffer: String::new(),
    }
}

#[tokio::test]
async fn events_are_recorded_per_attempt_and_presented_as_asked() {
    skip_without!(super::BACKEND);
    let server = start(BACKEND).await;
    let api = Api::new(&server);
    api.create_one("e", json!({})).await;
    let model_request = |prompt: &[i64], reply: &[i64]| {
        json!({"model": "m", "response": {"prompt_token_ids": prompt,
            "choices": [{"token_ids": reply, "logprobs": {"content": [{"logprob": -1.5}]}}]},
            "server": {"model": "m", "endpoint": "http://x/v1", "version": 2},
            "http_status": 200, "status": "ok", "routed_experts": null})
    };
    let posted = api
        .post_event("e", "0", "model_request", model_request(&[1, 2], &[3]))
        .await;
    assert_eq!(posted.status, 200);
    let event = posted.json();
    assert_eq!(
        (event["event_type"].clone(), event["attempt_id"].clone()),
        (json!("model_request"), json!("0"))
    );
    assert!(event["timestamp"].as_f64().unwrap() > 1.7e9);
    api.post_event("e", "0", "model_request", model_request(&[1, 2], &[4]))
        .await;
    api.post_event(
        "e",
        "0",
        "reward",
        json!({"value": 0.5, "message": "ok", "source": "agent"}),
    )
    .await;
    api.post_event("e", "1", "reward", json!({"value": 9}))
        .await;
    api.post_event("e", "0", "note", json!({"free": ["form"]}))
        .await;

    let raw = api.events("e", "").await;
    assert_eq!(raw.len(), 4, "attempt 0 only");
    assert_eq!(raw[3]["data"], json!({"free": ["form"]}));
    let rewards = api.events("e", "?event_type=reward").await;
    assert_eq!(rewards.len(), 1);
    assert_eq!(rewards[0]["data"]["message"], "ok");
    let triplets = api.events("e", "?format=triplet").await;
    assert_eq!(
        triplets.len(),
        3,
        "the first [1, 2] request is superseded by the second"
    );
    assert_eq!(
        triplets[0]["data"],
        json!({"prompt_token_ids": [1, 2], "response_token_ids": [4], "response_log_probs": [-1.5],
               "server": {"model": "m", "version": 2}, "http_status": 200, "status": "ok"})
    );
    assert_eq!(
        triplets[1]["data"],
        json!({"value": 0.5, "source": "agent"})
    );
    assert_eq!(api.rollout("e").await["attempts"], json!(["0", "1"]));
    let bad = api
        .get("/api/rollouts/e/events?include_routed_experts=maybe")
        .await;
    assert_eq!(bad.status, 422);
    assert_eq!(
        detail(&bad)[0]["loc"],
        json!(["query", "include_routed_experts"])
    );
    let unknown = api.post_event("nope", "0", "reward", json!({})).await;
    assert_eq!(
        (unknown.status, detail(&unknown)),
        (404, json!("Rollout not found: nope"))
    );

    // An Idempotency-Key records a retried POST once.
    let body = serde_json::to_vec(&json!({"event_type": "reward", "data": {"value": 1}})).unwrap();
    let headers = [
        ("content-type", "application/json"),
        ("idempotency-key", "k-1"),
    ];
    let first = api
        .send(
            "POST",
            "/api/rollouts/e/attempt/2/events",
            &headers,
            body.clone(),
        )
        .await;
    let retried = api
        .send("POST", "/api/rollouts/e/attempt/2/events", &headers, body)
        .await;
    assert_eq!((first.status, retried.status), (200, 200));
    assert_eq!(
        first.json(),
        retried.json(),
        "the same event, timestamp included"
    );
    let other = serde_json::to_vec(&json!({"event_type": "reward", "data": {"value": 2}})).unwrap();
    let conflict = api
        .send("POST", "/api/rollouts/e/attempt/2/events", &headers, other)
        .await;
    assert_eq!(conflict.status, 409);
    api.patch("e", json!({"last_attempt_id": "2"})).await;
    assert_eq!(api.events("e", "").await.len(), 1, "recorded once");
    server.stop().await;
}

#[tokio::test]
async fn a_newer_request_drops_the_routing_tensor_it_supersedes() {
    skip_without!(super::BACKEND);
    let server = start(BACKEND).await;
    let api = Api::new(&server);
    api.create_one("moe", json!({})).await;
    let request = |prompt: &[i64], reply: &[i64], routed: Value| {
        json!({"response": {"prompt_token_ids": prompt, "choices": [{"token_ids": reply}]},
               "routed_experts": routed})
    };
    api.post_event(
        "moe",
        "0",
        "model_request",
        request(&[1], &[2], json!([[1]])),
    )
    .await;
    api.post_event("moe", "0", "reward", json!({"value": 1}))
        .await;
    // Extends the first trajectory (prompt 1 + reply 2): the first tensor goes.
    api.post_event(
        "moe",
        "0",
        "model_request",
        request(&[1, 2, 5], &[6], json!([[2]])),
    )
    .await;
    // A new trajectory keeps the second tensor.
    api.post_event(
        "moe",
        "0",
        "model_request",
        request(&[9], &[9], json!([[3]])),
    )
    .await;
    let raw = api.events("moe", "").await;
    assert!(raw[0]["data"].get("routed_experts").is_none(), "superseded");
    assert_eq!(raw[2]["data"]["routed_experts"], json!([[2]]));
    assert_eq!(raw[3]["data"]["routed_experts"], json!([[3]]));
    let without = api.events("moe", "?include_routed_experts=false").await;
    assert!(
        without
            .iter()
            .all(|e| e["data"].get("routed_experts").is_none())
    );
    let triplets = api.events("moe", "?format=triplet").await;
    assert_eq!(triplets[2]["data"]["routed_experts"], json!([[2]]));
    server.stop().await;
}

#[tokio::test]
async fn models_are_upserted_by_model_and_endpoint_and_deleted() {
    skip_without!(super::BACKEND);
    let server = start(BACKEND).await;
    let api = Api::new(&server);
    let registered = api
        .json(
            "POST",
            "/api/models",
            &json!([{"model": "m", "endpoint": "http://a/v1"}, {"model": "m", "endpoint": "http://a/v1", "version": "3"}]),
        )
        .await;
    assert_eq!(registered.status, 201);
    assert_eq!(
        registered.json(),
        json!([{"model": "m", "endpoint": "http://a/v1", "version": 0},
               {"model": "m", "endpoint": "http://a/v1", "version": 3}])
    );
    let bad = api
        .json("POST", "/api/models", &json!([{"model": 1}]))
        .await;
    assert_eq!(
        detail(&bad),
        json!([
            {"type": "string_type", "loc": ["body", 0, "model"], "msg": "Input should be a valid string", "input": 1},
            {"type": "missing", "loc": ["body", 0, "endpoint"], "msg": "Field required", "input": {"model": 1}},
        ])
    );
    let deleted = api.send("DELETE", "/api/models", &[], "").await;
    assert_eq!(
        (deleted.status, deleted.json()),
        (200, json!({"status": "ok"}))
    );
    server.stop().await;
}
