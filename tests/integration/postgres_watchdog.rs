//! The watchdog's on-demand scan on a shared database when another
//! transaction holds a due rollout (another server's timer, another call's
//! scan): a call that reads or changes the rollout waits for the holder and
//! answers with the verdict, which is applied once.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::{
    Backend, TestOptions, TestServer, enqueue_spec, postgres_database, until_lock_waiters,
};
use lightning_store::core::clock::ManualClock;
use lightning_store::core::events::Change;
use lightning_store::core::model::AttemptStatus;
use lightning_store::proto as pb;
use prost_types::FieldMask;
use sqlx::Connection as _;

/// A watchdog timer that never ticks during the test: only the calls' own
/// scans act.
const TIMER_OFF: Duration = Duration::from_secs(3600);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_wait_for_a_held_due_rollout_and_answer_with_its_one_verdict() {
    skip_without!(crate::common::Backend::Postgres);
    let url = postgres_database().await;
    let clock = Arc::new(ManualClock::at_system_time());
    let server = TestServer::start_opts(
        Backend::Postgres,
        TestOptions {
            postgres_url: Some(url.clone()),
            watchdog_interval: TIMER_OFF,
            clock: clock.clone(),
            ..TestOptions::default()
        },
    )
    .await;
    let mut c = server.client().await;
    let spec = pb::RolloutSpec {
        config: Some(pb::RolloutConfig {
            unresponsive_seconds: Some(1.0),
            max_attempts: Some(1),
            ..Default::default()
        }),
        ..Default::default()
    };
    let rollout_id = enqueue_spec(&mut c, spec).await.rollout_id;
    let claimed = c
        .dequeue_rollout(pb::DequeueRolloutRequest::default())
        .await
        .unwrap()
        .into_inner()
        .rollout
        .expect("claimed");
    assert_eq!(claimed.rollout_id, rollout_id);

    // Another transaction holds the rollout, as a scan of another server
    // would, while its deadline passes and calls arrive.
    let mut holder = sqlx::PgConnection::connect(&url).await.unwrap();
    let mut held = holder.begin().await.unwrap();
    sqlx::query("SELECT 1 FROM rollouts WHERE rollout_id = $1 FOR UPDATE")
        .bind(&rollout_id)
        .fetch_one(&mut *held)
        .await
        .unwrap();
    clock.advance(Duration::from_millis(1001));
    let reads: Vec<_> = (0..2)
        .map(|_| {
            let (mut c, rollout_id) = (c.clone(), rollout_id.clone());
            tokio::spawn(async move {
                c.get_rollout(pb::GetRolloutRequest { rollout_id })
                    .await
                    .unwrap()
                    .into_inner()
                    .rollout
                    .expect("the rollout exists")
            })
        })
        .collect();
    let update = {
        let (mut c, rollout_id) = (c.clone(), rollout_id.clone());
        tokio::spawn(async move {
            c.update_rollout(pb::UpdateRolloutRequest {
                rollout_id,
                update_mask: Some(FieldMask {
                    paths: vec!["metadata_json".to_owned()],
                }),
                metadata_json: r#"{"touched":true}"#.to_owned(),
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner()
            .rollout
            .expect("the rollout exists")
        })
    };

    // Until the three calls wait for the holder (or one answers without
    // waiting for it, which the assertions below refuse).
    let mut admin = sqlx::PgConnection::connect(&url).await.unwrap();
    until_lock_waiters(&mut admin, 3, || {
        reads.iter().any(|read| read.is_finished()) || update.is_finished()
    })
    .await;
    held.commit().await.unwrap();

    let failed = pb::RolloutStatus::Failed as i32;
    let unresponsive = pb::AttemptStatus::Unresponsive as i32;
    for read in reads {
        let seen = read.await.unwrap();
        assert_eq!(seen.status, failed, "a read answers with the verdict");
        let attempt = seen.attempt.expect("the latest attempt");
        assert_eq!(
            attempt.status, unresponsive,
            "a read answers with the verdict"
        );
    }
    let updated = update.await.unwrap();
    assert_eq!(updated.status, failed, "an update answers with the verdict");
    assert_eq!(updated.metadata_json, r#"{"touched":true}"#);

    let events = server.engine.events_after(0, 10_000).await.unwrap().events;
    let verdicts = events
        .iter()
        .filter(|event| {
            matches!(
                &event.change,
                Change::AttemptChanged { rollout_id: id, status: AttemptStatus::Unresponsive, .. }
                    if *id == rollout_id
            )
        })
        .count();
    assert_eq!(verdicts, 1, "one verdict, one event");
    server.stop().await;
}
