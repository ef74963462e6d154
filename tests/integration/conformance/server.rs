//! The server around the store: health, reflection, capabilities,
//! statistics and graceful shutdown.

use std::time::Duration;

use lightning_store::proto as pb;
use lightning_store::server::ServerConfig;
use tokio_stream::StreamExt;
use tonic::Code;
use tonic_health::pb::health_client::HealthClient;
use tonic_health::pb::{HealthCheckRequest, health_check_response::ServingStatus};

use super::BACKEND;
use super::TestServer;
use crate::conformance::support::*;

#[tokio::test]
async fn health_reports_serving_for_the_store_service() {
    skip_without!(super::BACKEND);
    let server = TestServer::start(BACKEND).await;
    let mut health = HealthClient::new(server.channel().await);
    for service in ["", "lightningstore.v1.LightningStoreService"] {
        let status = health
            .check(HealthCheckRequest {
                service: service.into(),
            })
            .await
            .unwrap()
            .into_inner()
            .status;
        assert_eq!(status, ServingStatus::Serving as i32, "service {service:?}");
    }
}

#[tokio::test]
async fn reflection_lists_the_services_in_v1_and_v1alpha() {
    skip_without!(super::BACKEND);
    use tonic_reflection::pb::{v1, v1alpha};
    let server = TestServer::start(BACKEND).await;
    let channel = server.channel().await;

    let request = v1::ServerReflectionRequest {
        host: String::new(),
        message_request: Some(v1::server_reflection_request::MessageRequest::ListServices(
            String::new(),
        )),
    };
    let mut responses = v1::server_reflection_client::ServerReflectionClient::new(channel.clone())
        .server_reflection_info(tokio_stream::iter([request]))
        .await
        .unwrap()
        .into_inner();
    let Some(v1::server_reflection_response::MessageResponse::ListServicesResponse(list)) =
        responses.next().await.unwrap().unwrap().message_response
    else {
        panic!("expected a service list");
    };
    let names: Vec<_> = list.service.into_iter().map(|s| s.name).collect();
    assert!(
        names.contains(&"lightningstore.v1.LightningStoreService".to_owned()),
        "{names:?}"
    );
    assert!(
        names.contains(&"grpc.health.v1.Health".to_owned()),
        "{names:?}"
    );

    let request = v1alpha::ServerReflectionRequest {
        host: String::new(),
        message_request: Some(
            v1alpha::server_reflection_request::MessageRequest::FileContainingSymbol(
                "lightningstore.v1.Rollout".into(),
            ),
        ),
    };
    let mut responses = v1alpha::server_reflection_client::ServerReflectionClient::new(channel)
        .server_reflection_info(tokio_stream::iter([request]))
        .await
        .unwrap()
        .into_inner();
    let response = responses.next().await.unwrap().unwrap().message_response;
    assert!(
        matches!(response, Some(v1alpha::server_reflection_response::MessageResponse::FileDescriptorResponse(ref f)) if !f.file_descriptor_proto.is_empty()),
        "{response:?}"
    );
}

/// Returns a status count from a statistics map (absent counts as a failure).
fn count(map: &std::collections::HashMap<String, i64>, status: &str) -> i64 {
    *map.get(status)
        .unwrap_or_else(|| panic!("{status} missing in {map:?}"))
}

#[tokio::test]
async fn statistics_count_by_status_and_date_the_queue_head() {
    skip_without!(super::BACKEND);
    let server = TestServer::start(BACKEND).await;
    let mut c = server.client().await;
    let fresh = stats(&mut c).await;
    assert_eq!(fresh.rollouts_by_status.len(), 7, "{fresh:?}");
    assert_eq!(fresh.attempts_by_status.len(), 6, "{fresh:?}");
    assert!(fresh.rollouts_by_status.values().all(|&n| n == 0));
    assert!(fresh.attempts_by_status.values().all(|&n| n == 0));
    assert_eq!(fresh.oldest_queued_time, None);

    let first = enqueue(&mut c, "1").await;
    let second = enqueue_spec(&mut c, retry_spec(2, &[A::Failed])).await;
    let queued = stats(&mut c).await;
    assert_eq!(count(&queued.rollouts_by_status, "queuing"), 2);
    assert_eq!(queued.oldest_queued_time, first.start_time);

    // The head leaves the queue and fails without retry.
    let claimed = dequeue(&mut c, Some("Worker-0")).await.unwrap();
    assert_eq!(claimed.rollout_id, first.rollout_id);
    set_attempt_status(
        &mut c,
        &first.rollout_id,
        &attempt_of(&claimed).attempt_id,
        A::Failed,
    )
    .await
    .unwrap();
    let one_left = stats(&mut c).await;
    assert_eq!(count(&one_left.rollouts_by_status, "failed"), 1);
    assert_eq!(count(&one_left.rollouts_by_status, "queuing"), 1);
    assert_eq!(count(&one_left.attempts_by_status, "failed"), 1);
    assert_eq!(one_left.oldest_queued_time, second.start_time);

    // A retried rollout re-enters the queue now, not at its creation time.
    let claimed = dequeue(&mut c, Some("Worker-0")).await.unwrap();
    assert_eq!(claimed.rollout_id, second.rollout_id);
    let running = stats(&mut c).await;
    assert_eq!(count(&running.rollouts_by_status, "preparing"), 1);
    assert_eq!(count(&running.attempts_by_status, "preparing"), 1);
    assert_eq!(running.oldest_queued_time, None);
    set_attempt_status(
        &mut c,
        &second.rollout_id,
        &attempt_of(&claimed).attempt_id,
        A::Failed,
    )
    .await
    .unwrap();
    let requeued = stats(&mut c).await;
    assert_eq!(count(&requeued.rollouts_by_status, "requeuing"), 1);
    assert_eq!(count(&requeued.rollouts_by_status, "preparing"), 0);
    assert_eq!(count(&requeued.attempts_by_status, "failed"), 2);
    assert_eq!(count(&requeued.attempts_by_status, "preparing"), 0);
    let since = requeued.oldest_queued_time.unwrap();
    let created = second.start_time.unwrap();
    assert!(
        (since.seconds, since.nanos) > (created.seconds, created.nanos),
        "{since:?} after {created:?}"
    );
    assert_eq!(
        requeued.rollouts_by_status.values().sum::<i64>(),
        requeued.total_rollouts
    );
    assert_eq!(
        requeued.attempts_by_status.values().sum::<i64>(),
        requeued.total_attempts
    );
}

#[tokio::test]
async fn capabilities_and_statistics() {
    skip_without!(super::BACKEND);
    let server = TestServer::start(BACKEND).await;
    let mut c = server.client().await;
    let caps = c
        .get_capabilities(pb::GetCapabilitiesRequest {})
        .await
        .unwrap()
        .into_inner();
    assert!(caps.thread_safe && caps.async_safe && caps.zero_copy && caps.otlp_traces);

    let before = stats(&mut c).await;
    assert_eq!(before.name, BACKEND.name());
    let rollout = enqueue(&mut c, "1").await;
    let claimed = dequeue(&mut c, Some("Worker-0")).await.unwrap();
    add_span(
        &mut c,
        span(
            &rollout.rollout_id,
            &attempt_of(&claimed).attempt_id,
            "s",
            None,
        ),
    )
    .await
    .unwrap();
    c.add_resources(pb::AddResourcesRequest {
        resources_json: "{}".into(),
    })
    .await
    .unwrap();
    let after = stats(&mut c).await;
    assert_eq!(after.total_rollouts, before.total_rollouts + 1);
    assert_eq!(after.total_attempts, before.total_attempts + 1);
    assert_eq!(after.total_spans, before.total_spans + 1);
    assert_eq!(after.total_resources, before.total_resources + 1);
    assert_eq!(after.total_workers, before.total_workers + 1);
    assert!(after.uptime_seconds > before.uptime_seconds);
}

/// Waits cut short by the shutdown end promptly and say so: UNAVAILABLE
/// (retry elsewhere), not an empty answer that reads as "nothing queued" or
/// "nothing finished". A claim that committed is still
/// answered with its rollout.
#[tokio::test]
async fn shutdown_ends_open_waits_promptly_with_unavailable() {
    skip_without!(super::BACKEND);
    let server = TestServer::start_with(
        BACKEND,
        ServerConfig {
            drain_timeout: Duration::from_secs(20),
            ..ServerConfig::default()
        },
    )
    .await;
    let long = Some(prost_types::Duration {
        seconds: 600,
        nanos: 0,
    });
    let mut waiters = Vec::new();
    for _ in 0..10 {
        let mut c = server.client().await;
        waiters.push(tokio::spawn(async move {
            c.dequeue_rollout(pb::DequeueRolloutRequest {
                worker_id: None,
                wait: long,
            })
            .await
        }));
    }
    let mut c = server.client().await;
    let rollout = enqueue(&mut c, "1").await;
    let mut w = server.client().await;
    let rollout_ids = vec![rollout.rollout_id.clone()];
    let waiting = tokio::spawn(async move {
        w.wait_for_rollouts(pb::WaitForRolloutsRequest {
            rollout_ids,
            timeout: long,
        })
        .await
    });
    // Make sure every wait is in progress before shutting down.
    tokio::task::yield_now().await;
    let started = std::time::Instant::now();
    tokio::time::timeout(Duration::from_secs(10), server.stop())
        .await
        .expect("the server stops well within its drain deadline");
    let mut claimed = 0;
    for waiter in waiters {
        match waiter.await.unwrap() {
            Ok(answer) => {
                let answer = answer.into_inner();
                assert!(
                    answer.rollout.is_some(),
                    "an OK dequeue carries its claim: {answer:?}"
                );
                claimed += 1;
            }
            Err(status) => assert_eq!(status.code(), Code::Unavailable, "{status:?}"),
        }
    }
    assert!(claimed <= 1, "only the one rollout can be claimed");
    let cut = waiting
        .await
        .unwrap()
        .expect_err("nothing finished: the wait was cut");
    assert_eq!(cut.code(), Code::Unavailable, "{cut:?}");
    assert!(started.elapsed() < Duration::from_secs(10));
}
