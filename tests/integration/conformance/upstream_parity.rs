//! Where agent-lightning's own store contract, run against this server,
//! found us stricter than upstream without being better: opaque span ids,
//! printable ids, empty worker ids, explicit sequence ids, OR filters
//! without conditions, `limit = 0` and explicitly empty status lists.

use lightning_store::proto as pb;

use super::BACKEND;
use super::TestServer;
use crate::conformance::support::*;

#[tokio::test]
async fn span_ids_are_opaque_text_matched_verbatim() {
    skip_without!(super::BACKEND);
    let server = TestServer::start(BACKEND).await;
    let mut c = server.client().await;
    enqueue(&mut c, "1").await;
    let claimed = dequeue(&mut c, None).await.unwrap();
    let (r, at) = (
        claimed.rollout_id.clone(),
        attempt_of(&claimed).attempt_id.clone(),
    );
    let mut sent = span(&r, &at, "odd ids", Some(3));
    sent.trace_id = "Trace With Spaces".into();
    sent.span_id = "ABCDEF".into();
    sent.parent_id = Some(String::new());
    let stored = add_span(&mut c, sent.clone()).await.unwrap();
    assert_eq!(
        (
            stored.trace_id.as_str(),
            stored.span_id.as_str(),
            stored.parent_id.as_deref()
        ),
        ("Trace With Spaces", "ABCDEF", Some(""))
    );
    let exact = |trace_id: &str| pb::QuerySpansRequest {
        rollout_id: r.clone(),
        trace_id: Some(trace_id.to_owned()),
        ..Default::default()
    };
    assert_eq!(
        query_spans(&mut c, exact("Trace With Spaces")).await.total,
        1
    );
    // Verbatim: no case folding.
    assert_eq!(
        query_spans(&mut c, exact("trace with spaces")).await.total,
        0
    );
}

#[tokio::test]
async fn ids_with_spaces_and_explicit_sequence_ids_are_accepted_as_upstream_does() {
    skip_without!(super::BACKEND);
    let server = TestServer::start(BACKEND).await;
    let mut c = server.client().await;
    let update = c
        .update_resources(pb::UpdateResourcesRequest {
            resources_id: "my resources (v1)".into(),
            resources_json: "{}".into(),
        })
        .await
        .unwrap()
        .into_inner()
        .resources
        .unwrap();
    assert_eq!(update.resources_id, "my resources (v1)");
    enqueue(&mut c, "1").await;
    let claimed = dequeue(&mut c, Some("Worker 0")).await.unwrap();
    assert_eq!(
        worker(&mut c, "Worker 0").await.status,
        pb::WorkerStatus::Busy as i32
    );
    let (r, at) = (
        claimed.rollout_id.clone(),
        attempt_of(&claimed).attempt_id.clone(),
    );
    // Any explicit sequence id is stored as given, negative and zero too;
    // the counter only ever rises.
    for sequence_id in [-3, 0] {
        let stored = add_span(&mut c, span(&r, &at, "explicit", Some(sequence_id)))
            .await
            .unwrap();
        assert_eq!(stored.sequence_id, Some(sequence_id));
    }
    let next = c
        .get_next_span_sequence_id(pb::GetNextSpanSequenceIdRequest {
            rollout_id: r.clone(),
            attempt_id: at.clone(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(next.sequence_id, 1);
}

#[tokio::test]
async fn empty_worker_ids_are_stored_but_name_no_worker() {
    skip_without!(super::BACKEND);
    let server = TestServer::start(BACKEND).await;
    let mut c = server.client().await;
    let started = c
        .start_rollout(pb::StartRolloutRequest {
            rollout: Some(spec("1")),
            worker_id: Some(String::new()),
        })
        .await
        .unwrap()
        .into_inner()
        .rollout
        .unwrap();
    assert_eq!(attempt_of(&started).worker_id.as_deref(), Some(""));
    let again = c
        .start_attempt(pb::StartAttemptRequest {
            rollout_id: started.rollout_id.clone(),
            worker_id: Some(String::new()),
        })
        .await
        .unwrap()
        .into_inner()
        .rollout
        .unwrap();
    assert_eq!(attempt_of(&again).worker_id.as_deref(), Some(""));
    enqueue(&mut c, "2").await;
    let claimed = dequeue(&mut c, Some("")).await.unwrap();
    assert_eq!(attempt_of(&claimed).worker_id.as_deref(), Some(""));
    let updated = c
        .update_attempt(pb::UpdateAttemptRequest {
            rollout_id: claimed.rollout_id.clone(),
            attempt_id: "latest".into(),
            update_mask: mask(&["worker_id", "status"]),
            worker_id: String::new(),
            status: A::Succeeded as i32,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .attempt
        .unwrap();
    assert_eq!(updated.worker_id.as_deref(), Some(""));
    // None of that created a worker.
    assert_eq!(stats(&mut c).await.total_workers, 0);
    // Upstream marks the worker idle when its dequeue finds the queue
    // empty, and does so for the empty id too.
    assert!(dequeue(&mut c, Some("")).await.is_none());
    assert_eq!(
        worker(&mut c, "").await.status,
        pb::WorkerStatus::Idle as i32
    );
}

#[tokio::test]
async fn or_without_conditions_zero_limits_and_explicit_empty_lists() {
    skip_without!(super::BACKEND);
    let server = TestServer::start(BACKEND).await;
    let mut c = server.client().await;
    for input in ["1", "2", "3"] {
        enqueue(&mut c, input).await;
    }
    let claimed = dequeue(&mut c, Some("w")).await.unwrap();
    let or = pb::FilterLogic::Or as i32;

    // No condition is no filter: everything, also under OR.
    let all = c
        .query_rollouts(pb::QueryRolloutsRequest {
            filter_logic: or,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(all.total, 3);
    let workers = c
        .query_workers(pb::QueryWorkersRequest {
            filter_logic: or,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(workers.total, 1);
    // Spans keep upstream's pool: an OR without text conditions finds none.
    let (r, at) = (
        claimed.rollout_id.clone(),
        attempt_of(&claimed).attempt_id.clone(),
    );
    add_span(&mut c, span(&r, &at, "s", None)).await.unwrap();
    let spans_or = query_spans(
        &mut c,
        pb::QuerySpansRequest {
            rollout_id: r.clone(),
            filter_logic: or,
            ..Default::default()
        },
    )
    .await;
    assert_eq!(spans_or.total, 0);

    // limit = 0: no items, only the total.
    let counted = c
        .query_rollouts(pb::QueryRolloutsRequest {
            page: page("", false, Some(0), 0),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (counted.rollouts.len(), counted.limit, counted.total),
        (0, 0, 3)
    );

    // An explicitly empty list is "no status"; the legacy empty field is
    // still "no condition".
    let none = c
        .query_rollouts(pb::QueryRolloutsRequest {
            status_in_list: Some(pb::RolloutStatusList { values: vec![] }),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(none.total, 0);
    let no_ids = c
        .query_rollouts(pb::QueryRolloutsRequest {
            rollout_id_in_list: Some(pb::StringList { values: vec![] }),
            filter_logic: or,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(no_ids.total, 0);
    let listed = c
        .query_rollouts(pb::QueryRolloutsRequest {
            status_in: vec![R::Queuing as i32],
            status_in_list: Some(pb::RolloutStatusList {
                values: vec![R::Running as i32],
            }),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        listed.total, 1,
        "the explicit list replaces the legacy field"
    );
    let no_workers = c
        .query_workers(pb::QueryWorkersRequest {
            status_in_list: Some(pb::WorkerStatusList { values: vec![] }),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(no_workers.total, 0);
}
