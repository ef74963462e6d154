//! A batch over `--max-batch-items` is refused before any of its items is
//! read, on every route that takes a batch: with a malformed item among too
//! many it answers with the limit, not with the item's error (at the limit
//! the same item answers with its own error), and it writes nothing.

use lightning_store::core::limits::RequestLimits;
use lightning_store::proto as pb;
use tonic::Code;

use super::BACKEND;
use crate::common::TestServer;
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
            &serde_json::json!(with_bad_last(good, not_an_object, 1)),
        )
        .await;
    assert!(
        refused
            .text()
            .contains("rollouts holds 5 items, more than the limit of 4"),
        "{}",
        refused.text()
    );

    assert_eq!(stats(&mut c).await.total_rollouts, 0, "nothing enqueued");
    server.stop().await;
}

/// Enqueues one rollout and claims it.
async fn enqueue_and_claim(c: &mut Client) -> pb::Rollout {
    enqueue(c, "{}").await;
    dequeue(c, None).await.expect("the rollout just enqueued")
}
