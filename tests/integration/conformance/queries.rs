//! Filters, sorting and pagination of the list queries.

use lightning_store::proto as pb;
use tonic::Code;

use super::BACKEND;
use super::TestServer;
use crate::conformance::support::*;

fn ids(items: &[pb::Rollout]) -> Vec<String> {
    items.iter().map(|r| r.rollout_id.clone()).collect()
}

#[tokio::test]
async fn rollout_queries_filter_sort_and_paginate() {
    skip_without!(super::BACKEND);
    let server = TestServer::start(BACKEND).await;
    let mut c = server.client().await;
    let mut created = Vec::new();
    for i in 0..5 {
        created.push(enqueue(&mut c, &i.to_string()).await.rollout_id);
    }
    // created[0] and created[1] are claimed; created[0] then succeeds.
    dequeue(&mut c, None).await.unwrap();
    dequeue(&mut c, None).await.unwrap();
    set_attempt_status(&mut c, &created[0], "latest", A::Succeeded)
        .await
        .unwrap();

    let query = |f: &dyn Fn(&mut pb::QueryRolloutsRequest)| {
        let mut request = pb::QueryRolloutsRequest::default();
        f(&mut request);
        request
    };
    let all = c.query_rollouts(query(&|_| {})).await.unwrap().into_inner();
    assert_eq!(
        ids(&all.rollouts),
        created,
        "default order is creation order"
    );
    assert_eq!((all.limit, all.offset, all.total), (-1, 0, 5));
    assert!(
        all.rollouts[0].attempt.is_some() && all.rollouts[4].attempt.is_none(),
        "latest attempt attached"
    );

    let queuing = c
        .query_rollouts(query(&|q| q.status_in = vec![R::Queuing as i32]))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(ids(&queuing.rollouts), created[2..].to_vec());

    let by_ids = c
        .query_rollouts(query(&|q| {
            q.rollout_id_in = vec![created[1].clone(), created[3].clone()];
            q.status_in = vec![R::Succeeded as i32];
            q.filter_logic = pb::FilterLogic::Or as i32;
        }))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        ids(&by_ids.rollouts),
        vec![created[0].clone(), created[1].clone(), created[3].clone()]
    );

    let contains = c
        .query_rollouts(query(&|q| {
            q.rollout_id_contains = Some(created[4][3..9].to_owned())
        }))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(ids(&contains.rollouts), vec![created[4].clone()]);

    let by_status = c
        .query_rollouts(query(&|q| q.page = page("status", false, Some(2), 0)))
        .await
        .unwrap()
        .into_inner();
    // "preparing" < "queuing" < "succeeded"
    assert_eq!(
        ids(&by_status.rollouts),
        vec![created[1].clone(), created[2].clone()]
    );
    assert_eq!(by_status.total, 5);

    let window = c
        .query_rollouts(query(&|q| q.page = page("", false, Some(2), 3)))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(ids(&window.rollouts), created[3..5].to_vec());

    // Limits and offsets are int64: values past the int32 range are taken
    // as given and answered back unchanged.
    let wide = c
        .query_rollouts(query(&|q| q.page = page("", false, Some(1 << 40), 1)))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(ids(&wide.rollouts), created[1..].to_vec());
    assert_eq!((wide.limit, wide.offset, wide.total), (1 << 40, 1, 5));
    let far = c
        .query_rollouts(query(&|q| q.page = page("", false, None, 1 << 40)))
        .await
        .unwrap()
        .into_inner();
    assert!(far.rollouts.is_empty());
    assert_eq!((far.offset, far.total), (1 << 40, 5));

    let end_desc = c
        .query_rollouts(query(&|q| q.page = page("end_time", true, None, 0)))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        end_desc.rollouts[4].rollout_id, created[0],
        "absent end times sort after present ones"
    );

    assert_code(
        c.query_rollouts(query(&|q| q.page = page("input", false, None, 0)))
            .await,
        Code::InvalidArgument,
        "Invalid sort_by: input, allowed fields are: rollout_id, start_time, end_time, mode, resources_id, status, reward",
    );
}

#[tokio::test]
async fn attempt_queries_sort_by_sequence_and_check_the_rollout() {
    skip_without!(super::BACKEND);
    let server = TestServer::start(BACKEND).await;
    let mut c = server.client().await;
    let rollout = enqueue(&mut c, "1").await;
    dequeue(&mut c, None).await.unwrap();
    for _ in 0..2 {
        start_attempt(&mut c, &rollout.rollout_id).await;
    }
    let request = |page| pb::QueryAttemptsRequest {
        rollout_id: rollout.rollout_id.clone(),
        page,
    };
    let asc = c.query_attempts(request(None)).await.unwrap().into_inner();
    assert_eq!(
        asc.attempts
            .iter()
            .map(|a| a.sequence_id)
            .collect::<Vec<_>>(),
        [1, 2, 3]
    );
    let desc = c
        .query_attempts(request(page("sequence_id", true, Some(2), 0)))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        desc.attempts
            .iter()
            .map(|a| a.sequence_id)
            .collect::<Vec<_>>(),
        [3, 2]
    );
    assert_eq!(desc.total, 3);
    let latest = c
        .get_latest_attempt(pb::GetLatestAttemptRequest {
            rollout_id: rollout.rollout_id.clone(),
        })
        .await
        .unwrap()
        .into_inner()
        .attempt
        .unwrap();
    assert_eq!(latest.sequence_id, 3);

    let fresh = enqueue(&mut c, "2").await;
    let none = c
        .get_latest_attempt(pb::GetLatestAttemptRequest {
            rollout_id: fresh.rollout_id,
        })
        .await
        .unwrap()
        .into_inner();
    assert!(none.attempt.is_none());
    assert_code(
        c.query_attempts(pb::QueryAttemptsRequest {
            rollout_id: "ro-000000000000".into(),
            page: None,
        })
        .await,
        Code::NotFound,
        "Rollout ro-000000000000 not found",
    );
}

#[tokio::test]
async fn worker_queries_filter_by_status_and_id() {
    skip_without!(super::BACKEND);
    let server = TestServer::start(BACKEND).await;
    let mut c = server.client().await;
    enqueue(&mut c, "1").await;
    dequeue(&mut c, Some("Worker-busy")).await.unwrap();
    dequeue(&mut c, Some("Worker-idle")).await;
    c.update_worker(pb::UpdateWorkerRequest {
        worker_id: "other-unknown".into(),
        heartbeat_stats_json: None,
    })
    .await
    .unwrap();
    let query = |status_in: Vec<i32>, contains: Option<&str>, logic: pb::FilterLogic| {
        pb::QueryWorkersRequest {
            status_in,
            worker_id_contains: contains.map(str::to_owned),
            filter_logic: logic as i32,
            page: page("worker_id", false, None, 0),
            status_in_list: None,
        }
    };
    let names = |r: pb::QueryWorkersResponse| {
        r.workers
            .into_iter()
            .map(|w| w.worker_id)
            .collect::<Vec<_>>()
    };
    let busy = c
        .query_workers(query(
            vec![pb::WorkerStatus::Busy as i32],
            None,
            pb::FilterLogic::And,
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(names(busy), ["Worker-busy"]);
    let either = c
        .query_workers(query(
            vec![pb::WorkerStatus::Unknown as i32],
            Some("idle"),
            pb::FilterLogic::Or,
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(names(either), ["Worker-idle", "other-unknown"]);
    let all = c
        .query_workers(query(vec![], None, pb::FilterLogic::And))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(all.total, 3);
}

/// `Queries::ended_rollout_ids` at the storage port: ended rollouts only,
/// in byte order of their ids, a keyset page after a position, the
/// filter's conditions, and a rollout listed once it ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ended_rollout_ids_are_keyset_pages_in_id_order() {
    use lightning_store::core::model::{RolloutStatus, Timestamp};
    use lightning_store::core::query::{RolloutFilter, TimeRange};
    use lightning_store::core::storage::WriteSet;

    use super::port::{self, rollout};

    let Some(port) = port::open().await else {
        return;
    };
    let mut writes = WriteSet::default();
    for (id, status, created) in [
        ("ro-a", RolloutStatus::Succeeded, 1_000),
        ("ro-b", RolloutStatus::Running, 1_000),
        ("ro-c", RolloutStatus::Failed, 2_000),
        ("ro-d", RolloutStatus::Succeeded, 3_000),
        ("ro-Z", RolloutStatus::Cancelled, 1_000),
    ] {
        writes.put_rollout(&rollout(id, status, created), None);
    }
    port.commit(&mut writes).await;

    let list = |filter: RolloutFilter, limit: usize| {
        let store = std::sync::Arc::clone(&port.store);
        async move {
            let mut tx = store.begin_read().await.unwrap();
            let ids = tx.ended_rollout_ids(&filter, limit).await.unwrap();
            tx.commit(&mut WriteSet::default()).await.unwrap();
            ids
        }
    };
    let after = |id: &str| RolloutFilter {
        rollout_id_after: Some(id.to_owned()),
        ..RolloutFilter::default()
    };
    assert_eq!(
        list(RolloutFilter::default(), 10).await,
        ["ro-Z", "ro-a", "ro-c", "ro-d"]
    );
    assert_eq!(list(RolloutFilter::default(), 2).await, ["ro-Z", "ro-a"]);
    assert_eq!(list(after("ro-a"), 2).await, ["ro-c", "ro-d"]);
    assert!(list(after("ro-d"), 2).await.is_empty());
    let succeeded_before = RolloutFilter {
        status_in: Some(vec![RolloutStatus::Succeeded]),
        end_time: TimeRange {
            from: None,
            until: Some(Timestamp(3_000)),
        },
        ..RolloutFilter::default()
    };
    assert_eq!(list(succeeded_before, 10).await, ["ro-a"]);

    // A rollout that ends joins the listing at its id's place.
    let mut writes = WriteSet::default();
    writes.put_rollout(&rollout("ro-b", RolloutStatus::Failed, 1_000), None);
    port.commit(&mut writes).await;
    assert_eq!(list(after("ro-a"), 2).await, ["ro-b", "ro-c"]);
}
