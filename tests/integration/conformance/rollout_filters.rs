//! QueryRollouts' narrowing filters (mode, creation time, worker, resources
//! version), their combinations with each other and with upstream's pooled
//! conditions, sorting and paging under them, and their validation.

use std::sync::Arc;
use std::time::Duration;

use lightning_store::core::clock::ManualClock;
use lightning_store::core::model::Timestamp;
use lightning_store::proto as pb;
use tonic::Code;

use super::BACKEND;
use super::TestServer;
use crate::common::TestOptions;
use crate::conformance::support::*;

/// Seconds between the creations of the fixture's rollouts.
const STEP: Duration = Duration::from_secs(1);

/// The fixture: six rollouts created one [`STEP`] apart from `t0`, with
/// their modes, resources and workers; `ids[i]` is rollout `i`.
struct Fixture {
    server: TestServer,
    client: Client,
    clock: Arc<ManualClock>,
    t0: Timestamp,
    ids: Vec<String>,
}

fn proto_time(t: Timestamp) -> prost_types::Timestamp {
    prost_types::Timestamp {
        seconds: t.0.div_euclid(1_000_000_000),
        nanos: t.0.rem_euclid(1_000_000_000) as i32,
    }
}

fn at(t0: Timestamp, steps: i64) -> Timestamp {
    Timestamp(t0.0 + steps * STEP.as_nanos() as i64)
}

/// Creates, at t0 + i steps, rollout i:
///
/// | i | mode  | resources | attempts (workers)  | status    |
/// |---|-------|-----------|---------------------|-----------|
/// | 0 | train | rs-a      | w-1 (failed), w-2   | preparing |
/// | 1 | val   | rs-b      | w-2                 | succeeded |
/// | 2 | none  | rs-a      |                     | queuing   |
/// | 3 | train | rs-b      |                     | queuing   |
/// | 4 | test  | none      |                     | queuing   |
/// | 5 | train | rs-a      |                     | queuing   |
async fn fixture() -> Fixture {
    let clock = Arc::new(ManualClock::at_system_time());
    let server = TestServer::start_opts(
        BACKEND,
        TestOptions {
            clock: clock.clone(),
            ..Default::default()
        },
    )
    .await;
    let mut c = server.client().await;
    let t0 = lightning_store::core::clock::Clock::now(&*clock);
    let rows: [(pb::RolloutMode, Option<&str>); 6] = [
        (pb::RolloutMode::Train, Some("rs-a")),
        (pb::RolloutMode::Val, Some("rs-b")),
        (pb::RolloutMode::Unspecified, Some("rs-a")),
        (pb::RolloutMode::Train, Some("rs-b")),
        (pb::RolloutMode::Test, None),
        (pb::RolloutMode::Train, Some("rs-a")),
    ];
    let mut ids = Vec::new();
    for (mode, resources_id) in rows {
        let spec = pb::RolloutSpec {
            mode: mode as i32,
            resources_id: resources_id.map(str::to_owned),
            ..spec("{}")
        };
        ids.push(enqueue_spec(&mut c, spec).await.rollout_id);
        clock.advance(STEP);
    }
    // Rollout 0 runs on w-1, which fails it; a new attempt runs on w-2.
    let first = dequeue(&mut c, Some("w-1")).await.unwrap();
    assert_eq!(first.rollout_id, ids[0]);
    let second = dequeue(&mut c, Some("w-2")).await.unwrap();
    assert_eq!(second.rollout_id, ids[1]);
    set_attempt_status(&mut c, &ids[1], "latest", A::Succeeded)
        .await
        .unwrap();
    c.start_attempt(pb::StartAttemptRequest {
        rollout_id: ids[0].clone(),
        worker_id: Some("w-2".into()),
    })
    .await
    .unwrap();
    Fixture {
        server,
        client: c,
        clock,
        t0,
        ids,
    }
}

impl Fixture {
    async fn query(
        &mut self,
        f: impl FnOnce(&mut pb::QueryRolloutsRequest),
    ) -> pb::QueryRolloutsResponse {
        let mut request = pb::QueryRolloutsRequest::default();
        f(&mut request);
        self.client
            .query_rollouts(request)
            .await
            .unwrap()
            .into_inner()
    }

    /// Dequeues the next queuing rollout and lets its attempt succeed now.
    async fn finish_next(&mut self, expected: usize) {
        let attempt = dequeue(&mut self.client, Some("w-3")).await.unwrap();
        assert_eq!(attempt.rollout_id, self.ids[expected]);
        set_attempt_status(
            &mut self.client,
            &self.ids[expected],
            "latest",
            A::Succeeded,
        )
        .await
        .unwrap();
    }

    /// Returns the ids the query matches, as fixture indexes.
    async fn matching(&mut self, f: impl FnOnce(&mut pb::QueryRolloutsRequest)) -> Vec<usize> {
        let page = self.query(f).await;
        let found: Vec<usize> = page
            .rollouts
            .iter()
            .map(|r| self.ids.iter().position(|id| *id == r.rollout_id).unwrap())
            .collect();
        assert_eq!(page.total as usize, found.len(), "no paging: every match");
        found
    }
}

#[tokio::test]
async fn each_narrowing_filter_keeps_its_rollouts_in_creation_order() {
    let mut f = fixture().await;
    use pb::RolloutMode as M;
    let modes = |modes: &[M]| modes.iter().map(|&m| m as i32).collect::<Vec<_>>();
    assert_eq!(
        f.matching(|q| q.mode_in = modes(&[M::Train])).await,
        [0, 3, 5]
    );
    assert_eq!(
        f.matching(|q| q.mode_in = modes(&[M::Unspecified])).await,
        [2]
    );
    assert_eq!(
        f.matching(|q| q.mode_in = modes(&[M::Val, M::Unspecified]))
            .await,
        [1, 2]
    );

    // Creation time: `from` inclusive, `until` exclusive.
    let t0 = f.t0;
    assert_eq!(
        f.matching(|q| {
            q.start_time_from = Some(proto_time(at(t0, 1)));
            q.start_time_until = Some(proto_time(at(t0, 3)));
        })
        .await,
        [1, 2]
    );
    assert_eq!(
        f.matching(|q| q.start_time_from = Some(proto_time(at(t0, 4))))
            .await,
        [4, 5]
    );
    assert_eq!(
        f.matching(|q| q.start_time_until = Some(proto_time(at(t0, 1))))
            .await,
        [0]
    );
    let nothing = f
        .matching(|q| {
            q.start_time_from = Some(proto_time(at(t0, 3)));
            q.start_time_until = Some(proto_time(at(t0, 3)));
        })
        .await;
    assert!(nothing.is_empty(), "an empty window matches nothing");

    // Any attempt counts, not only the latest one.
    assert_eq!(f.matching(|q| q.worker_id = Some("w-1".into())).await, [0]);
    assert_eq!(
        f.matching(|q| q.worker_id = Some("w-2".into())).await,
        [0, 1]
    );
    assert!(
        f.matching(|q| q.worker_id = Some("w-3".into()))
            .await
            .is_empty()
    );

    assert_eq!(
        f.matching(|q| q.resources_id = Some("rs-a".into())).await,
        [0, 2, 5]
    );
    assert!(
        f.matching(|q| q.resources_id = Some("rs".into()))
            .await
            .is_empty(),
        "resources ids match exactly"
    );
    f.server.stop().await;
}

#[tokio::test]
async fn the_end_window_keeps_rollouts_that_ended_in_it() {
    let mut f = fixture().await;
    let t0 = f.t0;
    // Rollout 1 ended at t0 + 6 steps; 2 ends at + 7, 3 at + 8.
    f.clock.advance(STEP);
    f.finish_next(2).await;
    f.clock.advance(STEP);
    f.finish_next(3).await;
    let window = |from: Option<i64>, until: Option<i64>| {
        move |q: &mut pb::QueryRolloutsRequest| {
            q.end_time_from = from.map(|steps| proto_time(at(t0, steps)));
            q.end_time_until = until.map(|steps| proto_time(at(t0, steps)));
        }
    };
    assert_eq!(f.matching(window(Some(7), None)).await, [2, 3]);
    assert_eq!(f.matching(window(None, Some(7))).await, [1]);
    assert_eq!(f.matching(window(Some(6), Some(8))).await, [1, 2]);
    assert_eq!(
        f.matching(window(None, Some(1_000))).await,
        [1, 2, 3],
        "a rollout that has not ended is outside every end window"
    );
    assert!(f.matching(window(Some(7), Some(7))).await.is_empty());
    // AND-ed with the other conditions, under OR too.
    assert_eq!(
        f.matching(|q| {
            window(Some(6), None)(q);
            q.mode_in = vec![pb::RolloutMode::Train as i32];
        })
        .await,
        [3]
    );
    let one = f.ids[1].clone();
    assert_eq!(
        f.matching(|q| {
            window(None, Some(8))(q);
            q.filter_logic = pb::FilterLogic::Or as i32;
            q.status_in = vec![pb::RolloutStatus::Queuing as i32];
            q.rollout_id_contains = Some(one);
        })
        .await,
        [1],
        "the queuing rollouts the pool matches have not ended"
    );
    f.server.stop().await;
}

#[tokio::test]
async fn narrowing_filters_combine_with_each_other_and_with_the_pool() {
    let mut f = fixture().await;
    let train = pb::RolloutMode::Train as i32;
    // All narrowing conditions at once: AND-ed.
    let t0 = f.t0;
    assert_eq!(
        f.matching(|q| {
            q.mode_in = vec![train];
            q.resources_id = Some("rs-a".into());
            q.start_time_from = Some(proto_time(at(t0, 1)));
        })
        .await,
        [5]
    );
    assert_eq!(
        f.matching(|q| {
            q.mode_in = vec![train];
            q.worker_id = Some("w-2".into());
            q.resources_id = Some("rs-a".into());
        })
        .await,
        [0]
    );
    // With upstream's conditions under AND.
    assert_eq!(
        f.matching(|q| {
            q.status_in = vec![R::Queuing as i32];
            q.mode_in = vec![train];
        })
        .await,
        [3, 5]
    );
    // Under OR the pool (succeeded OR id 3) is narrowed by the mode: rollout
    // 3 is train, rollout 1 val.
    let (one, three) = (f.ids[1].clone(), f.ids[3].clone());
    assert_eq!(
        f.matching(|q| {
            q.status_in = vec![R::Succeeded as i32];
            q.rollout_id_in = vec![three.clone()];
            q.filter_logic = pb::FilterLogic::Or as i32;
        })
        .await,
        [1, 3]
    );
    assert_eq!(
        f.matching(|q| {
            q.status_in = vec![R::Succeeded as i32];
            q.rollout_id_in = vec![three];
            q.filter_logic = pb::FilterLogic::Or as i32;
            q.mode_in = vec![pb::RolloutMode::Val as i32];
        })
        .await,
        [1]
    );
    // OR without pooled conditions matches everything the narrowing keeps.
    assert_eq!(
        f.matching(|q| {
            q.filter_logic = pb::FilterLogic::Or as i32;
            q.worker_id = Some("w-2".into());
        })
        .await,
        [0, 1]
    );
    // An empty explicit list still matches nothing.
    assert!(
        f.matching(|q| {
            q.status_in_list = Some(pb::RolloutStatusList { values: vec![] });
            q.rollout_id_contains = Some(one[3..9].to_owned());
            q.filter_logic = pb::FilterLogic::Or as i32;
            q.resources_id = Some("rs-a".into());
        })
        .await
        .is_empty(),
        "rollout 1 has rs-b"
    );
    f.server.stop().await;
}

#[tokio::test]
async fn filtered_queries_sort_and_page() {
    let mut f = fixture().await;
    let train = pb::RolloutMode::Train as i32;
    let ids = f.ids.clone();
    let window = f
        .query(|q| {
            q.mode_in = vec![train];
            q.page = page("start_time", true, Some(2), 1);
        })
        .await;
    let got: Vec<&str> = window
        .rollouts
        .iter()
        .map(|r| r.rollout_id.as_str())
        .collect();
    assert_eq!(got, [ids[3].as_str(), ids[0].as_str()]);
    assert_eq!((window.limit, window.offset, window.total), (2, 1, 3));
    assert!(window.rollouts.iter().all(|r| r.mode == train));
    // The page carries each rollout's latest attempt: rollout 0's is w-2's.
    assert_eq!(
        attempt_of(&window.rollouts[1]).worker_id.as_deref(),
        Some("w-2")
    );

    // Status order: "queuing" < "succeeded".
    let by_status = f
        .query(|q| {
            q.resources_id = Some("rs-b".into());
            q.page = page("status", false, None, 0);
        })
        .await;
    let got: Vec<&str> = by_status
        .rollouts
        .iter()
        .map(|r| r.rollout_id.as_str())
        .collect();
    assert_eq!(got, [ids[3].as_str(), ids[1].as_str()]);

    // Ended first, the rest in creation order (ties keep the default order).
    let by_end = f
        .query(|q| {
            q.worker_id = Some("w-2".into());
            q.page = page("end_time", false, None, 0);
        })
        .await;
    let got: Vec<&str> = by_end
        .rollouts
        .iter()
        .map(|r| r.rollout_id.as_str())
        .collect();
    assert_eq!(got, [ids[1].as_str(), ids[0].as_str()]);

    // Past the last match: no rollout, the total still counted.
    let beyond = f
        .query(|q| {
            q.resources_id = Some("rs-a".into());
            q.page = page("rollout_id", false, Some(10), 3);
        })
        .await;
    assert!(beyond.rollouts.is_empty());
    assert_eq!(beyond.total, 3);
    // Only the total.
    let counted = f
        .query(|q| {
            q.mode_in = vec![train];
            q.page = page("", false, Some(0), 0);
        })
        .await;
    assert!(counted.rollouts.is_empty());
    assert_eq!(counted.total, 3);
    f.server.stop().await;
}

#[tokio::test]
async fn malformed_filters_are_refused() {
    let server = TestServer::start(BACKEND).await;
    let mut c = server.client().await;
    let query = |f: &dyn Fn(&mut pb::QueryRolloutsRequest)| {
        let mut request = pb::QueryRolloutsRequest::default();
        f(&mut request);
        request
    };
    assert_code(
        c.query_rollouts(query(&|q| q.mode_in = vec![9])).await,
        Code::InvalidArgument,
        "invalid rollout mode: 9",
    );
    assert_code(
        c.query_rollouts(query(&|q| {
            q.start_time_from = Some(prost_types::Timestamp {
                seconds: 1,
                nanos: -1,
            })
        }))
        .await,
        Code::InvalidArgument,
        "start_time_from has invalid nanos",
    );
    assert_code(
        c.query_rollouts(query(&|q| q.resources_id = Some(String::new())))
            .await,
        Code::InvalidArgument,
        "resources_id",
    );
    // An empty worker id is a worker id (upstream stores it as given).
    let empty = c
        .query_rollouts(query(&|q| q.worker_id = Some(String::new())))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(empty.total, 0);
    server.stop().await;
}
