//! Malformed requests get a clear INVALID_ARGUMENT (or RESOURCE_EXHAUSTED)
//! and leave the store exactly as it was.

use lightning_store::core::limits::RequestLimits;
use lightning_store::proto as pb;
use tonic::Code;

use super::BACKEND;
use super::TestServer;
use crate::conformance::support::*;

/// Returns everything a client can observe, to compare before and after.
async fn snapshot(c: &mut Client) -> (pb::GetStatisticsResponse, Vec<pb::Rollout>) {
    let mut stats = stats(c).await;
    stats.uptime_seconds = 0.0;
    let rollouts = c
        .query_rollouts(pb::QueryRolloutsRequest::default())
        .await
        .unwrap()
        .into_inner()
        .rollouts;
    (stats, rollouts)
}

#[tokio::test]
async fn malformed_requests_are_rejected_without_side_effects() {
    skip_without!(super::BACKEND);
    let server = TestServer::start_with_limits(
        BACKEND,
        RequestLimits {
            max_message_bytes: 64 * 1024,
            ..RequestLimits::default()
        },
    )
    .await;
    let mut c = server.client().await;
    let rollout = enqueue(&mut c, "1").await;
    let claimed = dequeue(&mut c, Some("Worker-0")).await.unwrap();
    let attempt_id = attempt_of(&claimed).attempt_id.clone();
    let before = snapshot(&mut c).await;
    let invalid = Code::InvalidArgument;

    // Malformed ids.
    assert_code(
        c.get_rollout(pb::GetRolloutRequest {
            rollout_id: String::new(),
        })
        .await,
        invalid,
        "rollout_id must not be empty",
    );
    assert_code(
        c.get_rollout(pb::GetRolloutRequest {
            rollout_id: "ro\n1".into(),
        })
        .await,
        invalid,
        "control characters",
    );
    assert_code(
        c.get_rollout(pb::GetRolloutRequest {
            rollout_id: "r".repeat(300),
        })
        .await,
        invalid,
        "longer than",
    );
    let mut bad_extra = span(&rollout.rollout_id, &attempt_id, "x", None);
    bad_extra.extra_json = "[1]".into();
    assert_code(
        c.add_span(pb::AddSpanRequest {
            span: Some(bad_extra),
            ..Default::default()
        })
        .await,
        invalid,
        "span.extra_json must be a JSON object",
    );
    assert_code(
        c.add_span(pb::AddSpanRequest {
            span: None,
            ..Default::default()
        })
        .await,
        invalid,
        "span is required",
    );

    // Invalid JSON text.
    assert_code(
        c.enqueue_rollout(pb::EnqueueRolloutRequest {
            request_id: None,
            rollout: Some(spec("{not json")),
        })
        .await,
        invalid,
        "input_json is not valid JSON",
    );
    assert_code(
        c.add_resources(pb::AddResourcesRequest {
            resources_json: "[1, 2]".into(),
        })
        .await,
        invalid,
        "resources_json must be a JSON object",
    );
    // A batch with one bad item writes nothing.
    assert_code(
        c.enqueue_rollouts(pb::EnqueueRolloutsRequest {
            rollouts: vec![spec("1"), spec("{")],
            ..Default::default()
        })
        .await,
        invalid,
        "input_json",
    );

    // Unknown or unspecified enum values.
    assert_code(
        c.update_rollout(pb::UpdateRolloutRequest {
            rollout_id: rollout.rollout_id.clone(),
            update_mask: mask(&["status"]),
            status: 42,
            ..Default::default()
        })
        .await,
        invalid,
        "invalid rollout status: 42",
    );
    assert_code(
        set_attempt_status(&mut c, &rollout.rollout_id, "latest", A::Unspecified).await,
        invalid,
        "invalid attempt status: 0",
    );
    assert_code(
        c.query_rollouts(pb::QueryRolloutsRequest {
            status_in: vec![99],
            ..Default::default()
        })
        .await,
        invalid,
        "invalid rollout status: 99",
    );
    assert_code(
        c.update_rollout(pb::UpdateRolloutRequest {
            rollout_id: rollout.rollout_id.clone(),
            update_mask: mask(&["nope"]),
            ..Default::default()
        })
        .await,
        invalid,
        "update_mask path \"nope\"",
    );
    assert_code(
        c.update_rollout(pb::UpdateRolloutRequest {
            rollout_id: rollout.rollout_id.clone(),
            update_mask: mask(&["config"]),
            ..Default::default()
        })
        .await,
        invalid,
        "config is in update_mask but not set",
    );

    // Bad numbers.
    for (limit, offset, text) in [
        (Some(-5), 0, "limit must be -1 or >= 0, got -5"),
        (None, -1, "offset must be >= 0"),
    ] {
        assert_code(
            c.query_rollouts(pb::QueryRolloutsRequest {
                page: Some(pb::PageRequest {
                    limit,
                    offset,
                    ..Default::default()
                }),
                ..Default::default()
            })
            .await,
            invalid,
            text,
        );
    }
    assert_code(
        c.dequeue_rollouts(pb::DequeueRolloutsRequest {
            limit: -1,
            ..Default::default()
        })
        .await,
        invalid,
        "limit must be between 1 and 10000, got -1",
    );
    let mut zero_attempts = retry_spec(0, &[]);
    assert_code(
        c.enqueue_rollout(pb::EnqueueRolloutRequest {
            request_id: None,
            rollout: Some(zero_attempts.clone()),
        })
        .await,
        invalid,
        "max_attempts must be 1 to 4294967295, got 0",
    );
    // An int64 beyond the store's 32-bit attempt count is refused, not truncated.
    zero_attempts.config.as_mut().unwrap().max_attempts = Some((1 << 32) + 1);
    assert_code(
        c.enqueue_rollout(pb::EnqueueRolloutRequest {
            rollout: Some(zero_attempts.clone()),
            request_id: None,
        })
        .await,
        invalid,
        "max_attempts must be 1 to 4294967295, got 4294967297",
    );
    zero_attempts.config.as_mut().unwrap().max_attempts = Some(1);
    zero_attempts.config.as_mut().unwrap().timeout_seconds = Some(-1.0);
    assert_code(
        c.enqueue_rollout(pb::EnqueueRolloutRequest {
            request_id: None,
            rollout: Some(zero_attempts),
        })
        .await,
        invalid,
        "timeout_seconds must be a finite number",
    );
    assert_code(
        c.dequeue_rollout(pb::DequeueRolloutRequest {
            worker_id: None,
            wait: Some(prost_types::Duration {
                seconds: -1,
                nanos: 0,
            }),
        })
        .await,
        invalid,
        "wait must be a non-negative duration",
    );

    // A payload over the size limit.
    assert_code(
        c.enqueue_rollout(pb::EnqueueRolloutRequest {
            request_id: None,
            rollout: Some(spec(&format!("\"{}\"", "x".repeat(100 * 1024)))),
        })
        .await,
        Code::ResourceExhausted,
        "message length too large",
    );

    assert_eq!(snapshot(&mut c).await, before, "the store is unchanged");
}
