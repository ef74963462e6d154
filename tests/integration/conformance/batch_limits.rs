//! A batch over `--max-batch-items` is refused before any of its items is
//! read, on every route that takes a batch: with a malformed item among too
//! many it answers with the limit, not with the item's error (at the limit
//! the same item answers with its own error), and it writes nothing. The
//! same for an id list over `--max-ids-per-list` (waits, watches, id
//! filters). A request id is checked before the batch: a bad one answers
//! with its own error whatever the batch holds.

use lightning_store::core::limits::RequestLimits;
use lightning_store::proto as pb;
use tonic::Code;

use super::BACKEND;
use super::TestServer;
use crate::common::http::{HttpClient, Version};
use crate::conformance::support::*;

/// The batch limit of these tests.
const LIMIT: usize = 4;

/// Returns `LIMIT + extra` copies of `good` with the last one replaced by
/// `bad`.
fn with_bad_last<T: Clone>(good: T, bad: T, extra: usize) -> Vec<T> {
    let mut items = vec![good; LIMIT + extra];
    *items.last_mut().expect("at least one item") = bad;
    items
}

/// Asserts that a call failed with `code` and an item's error, not the limit.
#[track_caller]
fn assert_item_error<T: std::fmt::Debug>(result: Result<T, tonic::Status>, text: &str) {
    assert_code(result, Code::InvalidArgument, text);
}

#[tokio::test]
async fn grpc_batches_over_the_limit_are_refused_before_their_items_are_read() {
    skip_without!(super::BACKEND);
    let limits = RequestLimits {
        max_batch_items: LIMIT,
        ..RequestLimits::default()
    };
    let server = TestServer::start_with_limits(BACKEND, limits).await;
    let mut c = server.client().await;
    let over = "holds 5 items, more than the limit of 4";

    let unreadable_spec = pb::RolloutSpec {
        input_json: "{".to_owned(),
        ..spec("{}")
    };
    let enqueue = |extra| pb::EnqueueRolloutsRequest {
        rollouts: with_bad_last(spec("{}"), unreadable_spec.clone(), extra),
        ..Default::default()
    };
    assert_item_error(c.enqueue_rollouts(enqueue(0)).await, "input_json");
    assert_code(
        c.enqueue_rollouts(enqueue(1)).await,
        Code::InvalidArgument,
        &format!("rollouts {over}"),
    );

    let claimed = enqueue_and_claim(&mut c).await;
    let attempt_id = attempt_of(&claimed).attempt_id.clone();
    let good_span = span(&claimed.rollout_id, &attempt_id, "s", None);
    let unreadable_span = pb::Span {
        rollout_id: String::new(),
        ..good_span.clone()
    };
    let add = |extra| pb::AddSpansRequest {
        spans: with_bad_last(good_span.clone(), unreadable_span.clone(), extra),
        ..Default::default()
    };
    assert_item_error(c.add_spans(add(0)).await, "span.rollout_id");
    assert_code(
        c.add_spans(add(1)).await,
        Code::InvalidArgument,
        &format!("spans {over}"),
    );

    let pair = pb::RolloutAttemptRef {
        rollout_id: claimed.rollout_id.clone(),
        attempt_id: attempt_id.clone(),
    };
    let unreadable_pair = pb::RolloutAttemptRef {
        rollout_id: String::new(),
        ..pair.clone()
    };
    let allocate = |extra| pb::GetSpanSequenceIdsRequest {
        attempts: with_bad_last(pair.clone(), unreadable_pair.clone(), extra),
        ..Default::default()
    };
    assert_item_error(c.get_span_sequence_ids(allocate(0)).await, "rollout_id");
    assert_code(
        c.get_span_sequence_ids(allocate(1)).await,
        Code::InvalidArgument,
        &format!("attempts {over}"),
    );

    let stats = stats(&mut c).await;
    assert_eq!(stats.total_rollouts, 1, "no refused batch enqueued");
    assert_eq!(stats.total_spans, 0, "no refused batch added spans");
    server.stop().await;
}

#[tokio::test]
async fn http_batches_over_the_limit_are_refused_before_their_items_are_read() {
    skip_without!(super::BACKEND);
    let limits = RequestLimits {
        max_batch_items: LIMIT,
        ..RequestLimits::default()
    };
    let server = TestServer::start_with_limits(BACKEND, limits).await;
    let mut c = server.client().await;
    let http = HttpClient::new(server.addr, Version::Http1);
    let not_an_object = serde_json::json!(7);

    // agent-lightning 0.x: the item's 422 at the limit, the limit's 400 over it.
    let good = serde_json::json!({ "input": 1 });
    for (extra, status) in [(0, 422), (1, 400)] {
        let rollouts = with_bad_last(good.clone(), not_an_object.clone(), extra);
        let answer = http
            .post_json(
                "/v1/agl/queues/rollouts/enqueue",
                &serde_json::json!({ "rollouts": rollouts }),
            )
            .await;
        assert_eq!(answer.status, status, "{}", answer.text());
    }
    let refused = http
        .post_json(
            "/v1/agl/queues/rollouts/enqueue",
            &serde_json::json!({ "rollouts": with_bad_last(good.clone(), not_an_object.clone(), 1) }),
        )
        .await;
    assert_eq!(
        refused.json()["detail"].as_str(),
        Some("rollouts holds 5 items, more than the limit of 4; split the request"),
        "{}",
        refused.text()
    );

    // agent-lightning 1.x: the same.
    let good = serde_json::json!({ "input": { "n": 1 } });
    for (extra, status) in [(0, 422), (1, 400)] {
        let creations = with_bad_last(good.clone(), not_an_object.clone(), extra);
        let answer = http
            .post_json("/api/rollouts", &serde_json::json!(creations))
            .await;
        assert_eq!(answer.status, status, "{}", answer.text());
    }
    let refused = http
        .post_json(
            "/api/rollouts",
            &serde_json::json!(with_bad_last(good, not_an_object.clone(), 1)),
        )
        .await;
    assert!(
        refused
            .text()
            .contains("rollouts holds 5 items, more than the limit of 4"),
        "{}",
        refused.text()
    );

    // agent-lightning 1.x's model servers: the same.
    let good = serde_json::json!({ "model": "m", "endpoint": "http://127.0.0.1:1" });
    for (extra, status) in [(0, 422), (1, 400)] {
        let models = with_bad_last(good.clone(), not_an_object.clone(), extra);
        let answer = http
            .post_json("/api/models", &serde_json::json!(models))
            .await;
        assert_eq!(answer.status, status, "{}", answer.text());
        if status == 400 {
            assert_eq!(
                answer.json(),
                serde_json::json!({
                    "detail": "models holds 5 items, more than the limit of 4; split the request"
                })
            );
        }
    }

    assert_eq!(stats(&mut c).await.total_rollouts, 0, "nothing enqueued");
    server.stop().await;
}

/// Returns `LIMIT + extra` ids with the last one empty (a bad id).
fn ids_with_bad_last(extra: usize) -> Vec<String> {
    with_bad_last("r-1".to_owned(), String::new(), extra)
}

#[tokio::test]
async fn grpc_id_lists_over_the_limit_are_refused_before_their_ids_are_read() {
    skip_without!(super::BACKEND);
    let limits = RequestLimits {
        max_ids_per_list: LIMIT,
        ..RequestLimits::default()
    };
    let server = TestServer::start_with_limits(BACKEND, limits).await;
    let mut c = server.client().await;
    let over = "holds 5 ids, more than the limit of 4; split the request";
    let no_wait = Some(prost_types::Duration::default());

    let wait = |extra| pb::WaitForRolloutsRequest {
        rollout_ids: ids_with_bad_last(extra),
        timeout: no_wait,
    };
    assert_item_error(
        c.wait_for_rollouts(wait(0)).await,
        "rollout_ids must not be empty",
    );
    assert_code(
        c.wait_for_rollouts(wait(1)).await,
        Code::InvalidArgument,
        &format!("rollout_ids {over}"),
    );

    let watch = |extra| pb::WatchRolloutCompletionsRequest {
        rollout_ids: ids_with_bad_last(extra),
        timeout: no_wait,
    };
    assert_item_error(
        c.watch_rollout_completions(watch(0)).await.map(|_| ()),
        "rollout_ids must not be empty",
    );
    assert_code(
        c.watch_rollout_completions(watch(1)).await.map(|_| ()),
        Code::InvalidArgument,
        &format!("rollout_ids {over}"),
    );

    let events = |extra| pb::WatchEventsRequest {
        rollout_ids: ids_with_bad_last(extra),
        ..Default::default()
    };
    assert_item_error(
        c.watch_events(events(0)).await.map(|_| ()),
        "rollout_ids must not be empty",
    );
    assert_code(
        c.watch_events(events(1)).await.map(|_| ()),
        Code::InvalidArgument,
        &format!("rollout_ids {over}"),
    );

    // The filter's two spellings; a bad status beside too many ids answers
    // with the ids' limit too (nothing is converted first).
    let legacy = |extra| pb::QueryRolloutsRequest {
        rollout_id_in: ids_with_bad_last(extra),
        ..Default::default()
    };
    let explicit = |extra| pb::QueryRolloutsRequest {
        rollout_id_in_list: Some(pb::StringList {
            values: ids_with_bad_last(extra),
        }),
        ..Default::default()
    };
    for query in [legacy, explicit] {
        assert_item_error(
            c.query_rollouts(query(0)).await,
            "rollout_id_in must not be empty",
        );
        assert_code(
            c.query_rollouts(query(1)).await,
            Code::InvalidArgument,
            &format!("rollout_id_in {over}"),
        );
        assert_code(
            c.query_rollouts(pb::QueryRolloutsRequest {
                status_in: vec![999],
                ..query(1)
            })
            .await,
            Code::InvalidArgument,
            &format!("rollout_id_in {over}"),
        );
    }
    server.stop().await;
}

#[tokio::test]
async fn http_id_lists_over_the_limit_are_refused_before_their_ids_are_read() {
    skip_without!(super::BACKEND);
    let limits = RequestLimits {
        max_ids_per_list: LIMIT,
        ..RequestLimits::default()
    };
    let server = TestServer::start_with_limits(BACKEND, limits).await;
    let http = HttpClient::new(server.addr, Version::Http1);
    let ids = |extra| with_bad_last(serde_json::json!("r-1"), serde_json::json!(7), extra);

    // agent-lightning 0.x: the id's 422 at the limit, the limit's 400 over it.
    let wait = |extra| serde_json::json!({ "rollout_ids": ids(extra), "timeout": 0 });
    let search = |extra| serde_json::json!({ "rollout_id_in": ids(extra) });
    for (path, field, body) in [
        (
            "/v1/agl/waits/rollouts",
            "rollout_ids",
            &wait as &dyn Fn(usize) -> _,
        ),
        ("/v1/agl/rollouts/search", "rollout_id_in", &search),
    ] {
        let at_limit = http.post_json(path, &body(0)).await;
        assert_eq!(at_limit.status, 422, "{path}: {}", at_limit.text());
        let over = http.post_json(path, &body(1)).await;
        assert_eq!(over.status, 400, "{path}: {}", over.text());
        assert_eq!(
            over.json()["detail"].as_str(),
            Some(
                format!("{field} holds 5 ids, more than the limit of 4; split the request")
                    .as_str()
            ),
            "{path}"
        );
    }
    // In a query string every value is a string: only the count can fail.
    let query = |count: usize| {
        let pairs: Vec<String> = (0..count).map(|n| format!("rollout_id_in=r-{n}")).collect();
        format!("/v1/agl/rollouts?{}", pairs.join("&"))
    };
    assert_eq!(http.get(&query(LIMIT)).await.status, 200);
    let over = http.get(&query(LIMIT + 1)).await;
    assert_eq!(over.status, 400, "{}", over.text());
    assert!(
        over.text().contains("rollout_id_in holds 5 ids"),
        "{}",
        over.text()
    );
    server.stop().await;
}

#[tokio::test]
async fn a_bad_request_id_is_refused_before_the_batch_is_read() {
    skip_without!(super::BACKEND);
    let limits = RequestLimits {
        max_batch_items: LIMIT,
        ..RequestLimits::default()
    };
    let server = TestServer::start_with_limits(BACKEND, limits).await;
    let mut c = server.client().await;
    let unreadable_spec = pb::RolloutSpec {
        input_json: "{".to_owned(),
        ..spec("{}")
    };
    let bad_request_id = Some("a request id".to_owned());
    let not_visible = "must be visible ASCII";

    // Over the batch limit, with a bad item: the request id's error.
    assert_code(
        c.enqueue_rollouts(pb::EnqueueRolloutsRequest {
            rollouts: with_bad_last(spec("{}"), unreadable_spec.clone(), 1),
            request_id: bad_request_id.clone(),
            ..Default::default()
        })
        .await,
        Code::InvalidArgument,
        not_visible,
    );
    assert_code(
        c.enqueue_rollout(pb::EnqueueRolloutRequest {
            rollout: Some(unreadable_spec),
            request_id: bad_request_id,
        })
        .await,
        Code::InvalidArgument,
        not_visible,
    );

    // agent-lightning 0.x's Idempotency-Key: the same.
    let http = HttpClient::new(server.addr, Version::Http1);
    let too_long = "k".repeat(129);
    let rollouts = with_bad_last(serde_json::json!({ "input": 1 }), serde_json::json!(7), 1);
    let refused = http
        .request(
            "POST",
            "/v1/agl/queues/rollouts/enqueue",
            &[
                ("content-type", "application/json"),
                ("idempotency-key", &too_long),
            ],
            serde_json::to_vec(&serde_json::json!({ "rollouts": rollouts })).unwrap(),
        )
        .await;
    assert_eq!(refused.status, 400, "{}", refused.text());
    assert_eq!(
        refused.json()["detail"].as_str(),
        Some("request_id must be 1 to 128 bytes, got 129")
    );

    assert_eq!(stats(&mut c).await.total_rollouts, 0, "nothing enqueued");
    server.stop().await;
}

/// Enqueues one rollout and claims it.
async fn enqueue_and_claim(c: &mut Client) -> pb::Rollout {
    enqueue(c, "{}").await;
    dequeue(c, None).await.expect("the rollout just enqueued")
}
