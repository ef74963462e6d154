//! What the console's browser tests share: a store seeded through gRPC
//! with a finished rollout (its spans a tree, one with an error, one with a
//! reward), a waiting one, a worker and two resources versions; and the
//! sign-in of a browser.

use std::time::{Duration, SystemTime};

use lightning_store::proto as pb;

use crate::common::browser::Browser;
pub use crate::common::text;
use crate::common::{Client, number};

/// The trace of the finished rollout's spans.
pub const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";

/// The worker that ran the finished rollout.
pub const WORKER: &str = "worker-a";

/// What [`seed`] put in the store.
pub struct Seeded {
    /// A succeeded rollout with a tree of spans.
    pub done: String,
    /// A rollout waiting in the queue.
    pub queued: String,
    /// The older and the newer resources version.
    pub resources: (String, String),
    /// The span names in the order the waterfall must show them.
    pub span_order: Vec<&'static str>,
}

fn at(base: SystemTime, millis: u64) -> Option<prost_types::Timestamp> {
    Some((base + Duration::from_millis(millis)).into())
}

/// A span of an attempt, `start..end` milliseconds after `base`.
#[allow(clippy::too_many_arguments)]
pub fn span(
    rollout_id: &str,
    attempt_id: &str,
    span_id: &str,
    parent: Option<&str>,
    name: &str,
    base: SystemTime,
    (start, end): (u64, u64),
    attributes: Vec<pb::KeyValue>,
) -> pb::Span {
    pb::Span {
        rollout_id: rollout_id.to_owned(),
        attempt_id: attempt_id.to_owned(),
        trace_id: TRACE_ID.to_owned(),
        span_id: span_id.to_owned(),
        parent_id: parent.map(str::to_owned),
        name: name.to_owned(),
        start_time: at(base, start),
        end_time: at(base, end),
        attributes,
        ..Default::default()
    }
}

pub use crate::common::add_resources;

/// Enqueues a rollout whose input is `input` (JSON text); returns its id.
pub async fn enqueue(client: &mut Client, input: &str) -> String {
    crate::common::enqueue(client, input).await.rollout_id
}

/// Dequeues the next rollout for `worker`; returns (rollout id, attempt id).
pub async fn dequeue(client: &mut Client, worker: &str) -> (String, String) {
    let rollout = client
        .dequeue_rollout(pb::DequeueRolloutRequest {
            worker_id: Some(worker.to_owned()),
            wait: None,
        })
        .await
        .unwrap()
        .into_inner()
        .rollout
        .expect("a queued rollout");
    let attempt = rollout.attempt.expect("an attempt").attempt_id;
    (rollout.rollout_id, attempt)
}

/// Stores spans.
pub async fn add_spans(client: &mut Client, spans: Vec<pb::Span>) {
    client
        .add_spans(pb::AddSpansRequest {
            spans,
            ..Default::default()
        })
        .await
        .unwrap();
}

/// Finishes an attempt with `status`.
pub async fn finish(
    client: &mut Client,
    rollout_id: &str,
    attempt_id: &str,
    status: pb::AttemptStatus,
) {
    client
        .update_attempt(pb::UpdateAttemptRequest {
            rollout_id: rollout_id.to_owned(),
            attempt_id: attempt_id.to_owned(),
            update_mask: Some(prost_types::FieldMask {
                paths: vec!["status".to_owned()],
            }),
            status: status as i32,
            ..Default::default()
        })
        .await
        .unwrap();
}

/// Seeds the store: see [`Seeded`].
pub async fn seed(client: &mut Client) -> Seeded {
    let older = add_resources(
        client,
        r#"{"prompt": {"template": "Answer briefly."}, "llm": {"model": "policy-v1"}}"#,
    )
    .await;
    let newer = add_resources(
        client,
        r#"{"prompt": {"template": "Answer briefly."}, "llm": {"model": "policy-v2"}}"#,
    )
    .await;
    let done = enqueue(client, r#"{"question": "What is 2 + 2?", "answer": "4"}"#).await;
    let queued = enqueue(client, r#"{"question": "What is the capital of France?"}"#).await;
    let (rollout_id, attempt_id) = dequeue(client, WORKER).await;
    assert_eq!(rollout_id, done, "the queue is first in, first out");
    let base = SystemTime::now();
    let (r, a) = (done.as_str(), attempt_id.as_str());
    // Children before their parents: the waterfall orders them, not arrival.
    let spans = vec![
        span(
            r,
            a,
            "b2",
            Some("b1"),
            "http.get",
            base,
            (500, 700),
            vec![text("http.url", "http://index/search?q=2%2B2")],
        ),
        span(
            r,
            a,
            "a1",
            Some("root"),
            "llm.call",
            base,
            (100, 400),
            vec![text("gen_ai.request.model", "policy-v2")],
        ),
        span(r, a, "root", None, "agent.run", base, (0, 900), Vec::new()),
        pb::Span {
            status: Some(pb::SpanStatus {
                code: pb::SpanStatusCode::Error as i32,
                description: Some("the index timed out".to_owned()),
                ..Default::default()
            }),
            ..span(
                r,
                a,
                "b1",
                Some("root"),
                "tool.search",
                base,
                (450, 800),
                Vec::new(),
            )
        },
        span(
            r,
            a,
            "c1",
            Some("root"),
            "agentlightning.annotation",
            base,
            (850, 860),
            vec![
                text("agentlightning.reward.0.name", "primary"),
                number("agentlightning.reward.0.value", 0.75),
            ],
        ),
    ];
    add_spans(client, spans).await;
    client
        .update_worker(pb::UpdateWorkerRequest {
            worker_id: WORKER.to_owned(),
            heartbeat_stats_json: Some(r#"{"gpu_memory_gb": 21.5}"#.to_owned()),
        })
        .await
        .unwrap();
    finish(client, &done, &attempt_id, pb::AttemptStatus::Succeeded).await;
    Seeded {
        done,
        queued,
        resources: (older, newer),
        span_order: vec![
            "agent.run",
            "llm.call",
            "tool.search",
            "http.get",
            "agentlightning.annotation",
        ],
    }
}

/// Signs the browser in with `token` through the console's form.
pub async fn sign_in(browser: &Browser, base: &str, token: &str) {
    browser.goto(&format!("{base}/console/login")).await;
    browser.type_into("input[name=token]", token).await;
    browser.click_to_load("form button[type=submit]").await;
    browser.wait_for_text("h1", "Overview").await;
}
