//! What the tests of the storage port's roles share: a fresh store of the
//! backend, and entities to write through the port, below the engine.

use std::sync::Arc;

use lightning_store::core::model::{
    Attempt, AttemptStatus, Json, Rollout, RolloutConfig, RolloutStatus, Span, Timestamp,
};
use lightning_store::core::query::{AttemptSelector, FilterLogic, Page, SpanFilter};
use lightning_store::core::storage::{Queries, Store, WriteSet};

use super::{BACKEND, Place};
use crate::common::{Needs, TestOptions};
use crate::conformance::placement;

/// A fresh store of the suite's backend, with what must outlive it.
pub struct Port {
    pub store: Arc<dyn Store>,
    _dir: Option<tempfile::TempDir>,
    _catalogue: Arc<dyn lightning_store::core::storage::Catalogue>,
}

/// Opens a fresh store of the suite's backend, in the suite's namespace
/// (`None`: not here).
pub async fn open() -> Option<Port> {
    if !BACKEND.available() {
        return None;
    }
    let (store, dir, catalogue) =
        placement::open_store::<Place>(BACKEND, &TestOptions::default()).await;
    Some(Port {
        store,
        _dir: dir,
        _catalogue: catalogue,
    })
}

impl Port {
    /// Commits a write set in a transaction of its own.
    pub async fn commit(&self, writes: &mut WriteSet) {
        let tx = self.store.begin().await.unwrap();
        tx.commit(writes).await.unwrap();
    }

    /// Returns the ids of the spans of a rollout, read in a transaction of
    /// its own.
    pub async fn span_ids(&self, rollout_id: &str) -> Vec<String> {
        let mut tx = self.store.begin_read().await.unwrap();
        let ids = span_ids(tx.as_mut(), rollout_id).await;
        tx.commit(&mut WriteSet::default()).await.unwrap();
        ids
    }
}

/// Returns the ids of the spans of a rollout, in the default order.
pub async fn span_ids(tx: &mut (dyn Queries + '_), rollout_id: &str) -> Vec<String> {
    let filter = SpanFilter {
        rollout_id: rollout_id.to_owned(),
        attempt: AttemptSelector::All,
        logic: FilterLogic::And,
        ..SpanFilter::default()
    };
    let page = tx.query_spans(&filter, &Page::default()).await.unwrap();
    page.items.iter().map(|s| s.span_id.clone()).collect()
}

/// A rollout of `status`, created at `created` (ending then too when the
/// status is a finished one).
pub fn rollout(rollout_id: &str, status: RolloutStatus, created: i64) -> Rollout {
    Rollout {
        rollout_id: rollout_id.to_owned(),
        input: Json::Null,
        start_time: Timestamp(created),
        end_time: status.is_finished().then_some(Timestamp(created)),
        mode: None,
        resources_id: None,
        status,
        config: RolloutConfig::default(),
        metadata: Json::Null,
    }
}

/// The first attempt of a rollout.
pub fn attempt(rollout_id: &str, status: AttemptStatus) -> Attempt {
    Attempt {
        rollout_id: rollout_id.to_owned(),
        attempt_id: "at-1".to_owned(),
        sequence_id: 1,
        start_time: Timestamp(2_000),
        end_time: None,
        status,
        worker_id: None,
        last_heartbeat_time: None,
        metadata: Json::Null,
    }
}

/// A span of a rollout's first attempt.
pub fn span(rollout_id: &str, span_id: &str, sequence_id: i64) -> Arc<Span> {
    Arc::new(Span {
        rollout_id: rollout_id.to_owned(),
        attempt_id: "at-1".to_owned(),
        sequence_id,
        trace_id: "trace".to_owned(),
        span_id: span_id.to_owned(),
        parent_id: None,
        name: format!("span {span_id}"),
        status: Default::default(),
        attributes: Vec::new(),
        events: Vec::new(),
        links: Vec::new(),
        start_time: None,
        end_time: None,
        context: None,
        parent: None,
        resource: None,
        kind: Default::default(),
        scope: None,
        extra: Default::default(),
    })
}
