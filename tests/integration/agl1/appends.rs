//! Concurrent event appends, which the engine runs as one transaction
//! (`core::engine::appends`): every member answered on its own, the events
//! of an attempt in append order, and nothing acknowledged lost across a
//! restart of a durable backend.

use std::sync::Arc;

use futures::FutureExt as _;
use lightning_store::core::agl1::events::EventQuery;
use lightning_store::core::agl1::{Agl1Event, IdempotencyKey, NewAgl1Event, NewAgl1Rollout};
use lightning_store::core::engine::{Engine, EngineConfig};
use lightning_store::core::error::{StoreError, StoreResult};
use lightning_store::core::ids::{AttemptId, RolloutId};
use lightning_store::core::storage::Access;
use lightning_store::store;
use serde_json::json;

use super::BACKEND;
use crate::common::{Backend, TestOptions};

const ROLLOUTS: [&str; 3] = ["r0", "r1", "r2"];

fn rollout_id(id: &str) -> RolloutId {
    RolloutId::parse("rollout_id", id).unwrap()
}

/// The attempt 1.x events go to when the agent names none.
fn attempt_0() -> AttemptId {
    AttemptId::parse("attempt_id", "0").unwrap()
}

fn event(data: String, key: Option<&str>) -> NewAgl1Event {
    NewAgl1Event {
        event_type: "reward".to_owned(),
        idempotency: key.map(|key| IdempotencyKey::of(key, &[b"reward", data.as_bytes()])),
        data,
        has_routed_experts: false,
        model_version: None,
        call: None,
    }
}

fn datas(events: &[Agl1Event]) -> Vec<String> {
    events.iter().map(|e| e.data.clone()).collect()
}

/// Appends queued together while the writer is busy (memory and SQLite:
/// one batch; PostgreSQL: as its connections allow), among them one to a
/// deleted rollout, one reusing an idempotency key for other data and one
/// repeating a keyed event: every other append is recorded and
/// acknowledged, the failing ones get their own errors, each rollout's
/// events are in append order, and on SQLite and PostgreSQL all of it is
/// there after the store is opened again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_appends_are_answered_each_and_kept_in_order() {
    skip_without!(super::BACKEND);
    const APPENDS: usize = 24;
    let (config, _dir) = BACKEND.config(&TestOptions::default()).await;
    let store = store::open(&config).await.unwrap();
    let engine = Arc::new(Engine::new(store.clone(), EngineConfig::default()));
    let mut ids: Vec<&str> = ROLLOUTS.to_vec();
    ids.push("gone");
    let requests = ids
        .iter()
        .map(|id| NewAgl1Rollout {
            rollout_id: Some((*id).to_owned()),
            input: json!(null),
            is_train: true,
            config: json!({}),
            metadata: json!({}),
        })
        .collect();
    engine.create_agl1_rollouts(requests).await.unwrap();
    let first = engine
        .append_agl1_event(
            &rollout_id("r0"),
            &attempt_0(),
            event("\"first\"".into(), Some("k")),
        )
        .await
        .unwrap();
    engine
        .delete_agl1_rollout(&rollout_id("gone"))
        .await
        .unwrap();

    // The writer is held (memory, SQLite), and with it the rollouts' locks
    // (PostgreSQL, where a transaction holds only the rows it locks), while
    // every append is queued in order: each is polled once, which queues it.
    let mut held = store.begin().await.unwrap();
    for rollout in ROLLOUTS {
        assert!(
            held.has_agl1_rollout(rollout, Access::Update)
                .await
                .unwrap()
        );
    }
    let mut appends: Vec<_> = (0..APPENDS)
        .map(|i| {
            let rollout = ROLLOUTS[i % ROLLOUTS.len()];
            let new = event(format!("{i}"), None);
            let engine = engine.clone();
            async move {
                engine
                    .append_agl1_event(&rollout_id(rollout), &attempt_0(), new)
                    .await
            }
            .boxed()
        })
        .collect();
    let failing: Vec<(&str, NewAgl1Event)> = vec![
        ("gone", event("\"lost\"".into(), None)),
        ("r0", event("\"other\"".into(), Some("k"))),
        ("r0", event("\"first\"".into(), Some("k"))),
        ("r1", event("\"keyed\"".into(), Some("k1"))),
    ];
    for (rollout, new) in failing {
        let engine = engine.clone();
        appends.push(
            async move {
                engine
                    .append_agl1_event(&rollout_id(rollout), &attempt_0(), new)
                    .await
            }
            .boxed(),
        );
    }
    for append in &mut appends {
        assert!(
            futures::poll!(append).is_pending(),
            "queued behind the writer"
        );
    }
    held.rollback().await;
    let answers: Vec<StoreResult<Agl1Event>> = tokio::time::timeout(
        std::time::Duration::from_secs(30),
        futures::future::join_all(appends),
    )
    .await
    .expect("every append is answered");

    for (i, answer) in answers[..APPENDS].iter().enumerate() {
        let event = answer.as_ref().expect("recorded");
        assert_eq!(
            (event.rollout_id.as_str(), event.data.clone()),
            (ROLLOUTS[i % 3], format!("{i}"))
        );
    }
    let rest = &answers[APPENDS..];
    assert!(
        matches!(&rest[0], Err(StoreError::NotFound(_))),
        "{:?}",
        rest[0]
    );
    assert!(
        matches!(&rest[1], Err(StoreError::FailedPrecondition(_))),
        "{:?}",
        rest[1]
    );
    assert_eq!(rest[2].as_ref().unwrap(), &first, "the first keyed event");
    assert_eq!(rest[3].as_ref().unwrap().data, "\"keyed\"");

    let expected = |rollout: usize| -> Vec<String> {
        let mut data: Vec<String> = (0..APPENDS)
            .filter(|i| i % 3 == rollout)
            .map(|i| format!("{i}"))
            .collect();
        match rollout {
            0 => data.insert(0, "\"first\"".into()),
            1 => data.push("\"keyed\"".into()),
            _ => {}
        }
        data
    };
    for (k, rollout) in ROLLOUTS.iter().enumerate() {
        let events = engine
            .agl1_events(&rollout_id(rollout), &EventQuery::default())
            .await
            .unwrap();
        assert_eq!(datas(&events), expected(k), "{rollout}: append order");
        assert!(events.windows(2).all(|w| w[0].timestamp <= w[1].timestamp));
    }
    if BACKEND == Backend::Memory {
        return;
    }
    // Opened again: every acknowledged event is there.
    drop(store);
    let engine = tokio::time::timeout(std::time::Duration::from_secs(30), async {
        let mut engine = engine;
        loop {
            match Arc::try_unwrap(engine) {
                Ok(engine) => return engine,
                // A drainer task still holds it for a moment.
                Err(shared) => engine = shared,
            }
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("the drainers end");
    engine.close_store().await;
    drop(engine);
    let reopened = Engine::new(store::open(&config).await.unwrap(), EngineConfig::default());
    for (k, rollout) in ROLLOUTS.iter().enumerate() {
        let events = reopened
            .agl1_events(&rollout_id(rollout), &EventQuery::default())
            .await
            .unwrap();
        assert_eq!(datas(&events), expected(k), "{rollout} after a restart");
    }
}
