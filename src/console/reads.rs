//! The aggregate reads the Overview and a waiting rollout need, over the
//! engine's queries. (Replaced by the engine's read model: same names.)

use std::sync::Arc;

use crate::core::engine::Engine;
use crate::core::error::StoreResult;
use crate::core::model::{RolloutStatus, RolloutView, Span, Timestamp};
use crate::core::query::{Page, RolloutFilter};

/// Rollouts that ended in one minute, by how they ended.
#[derive(Debug, Clone, PartialEq)]
pub struct MinuteCounts {
    pub start: Timestamp,
    pub succeeded: u64,
    pub failed: u64,
    pub cancelled: u64,
}

/// A failed rollout with what is known of why.
#[derive(Debug, Clone, PartialEq)]
pub struct Failure {
    pub rollout: RolloutView,
    pub error_span: Option<Arc<Span>>,
    pub agl1_error: Option<String>,
}

/// A queued rollout's place.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct QueuePlace {
    pub ahead: u64,
    pub queued: u64,
}

const MINUTE: i64 = 60_000_000_000;

/// The last hour's 60 minutes, oldest first, the last one the current.
pub async fn finished_per_minute(engine: &Engine) -> StoreResult<Vec<MinuteCounts>> {
    let now = engine.now();
    let first = (now.0.div_euclid(MINUTE) - 59) * MINUTE;
    let mut minutes: Vec<MinuteCounts> = (0..60)
        .map(|i| MinuteCounts {
            start: Timestamp(first + i * MINUTE),
            succeeded: 0,
            failed: 0,
            cancelled: 0,
        })
        .collect();
    let filter = RolloutFilter {
        status_in: Some(vec![
            RolloutStatus::Succeeded,
            RolloutStatus::Failed,
            RolloutStatus::Cancelled,
        ]),
        ..RolloutFilter::default()
    };
    let page = Page {
        sort_by: Some("end_time".into()),
        descending: true,
        limit: Some(5_000),
        offset: 0,
    };
    for view in engine.query_rollouts(&filter, &page).await?.items {
        let Some(end) = view.rollout.end_time else {
            continue;
        };
        let index = (end.0 - first).div_euclid(MINUTE);
        let Some(minute) = usize::try_from(index).ok().and_then(|i| minutes.get_mut(i)) else {
            continue;
        };
        match view.rollout.status {
            RolloutStatus::Succeeded => minute.succeeded += 1,
            RolloutStatus::Failed => minute.failed += 1,
            _ => minute.cancelled += 1,
        }
    }
    Ok(minutes)
}

/// The `limit` failed rollouts that ended last, latest first.
pub async fn latest_failures(engine: &Engine, limit: usize) -> StoreResult<Vec<Failure>> {
    let filter = RolloutFilter {
        status_in: Some(vec![RolloutStatus::Failed]),
        ..RolloutFilter::default()
    };
    let page = Page {
        sort_by: Some("end_time".into()),
        descending: true,
        limit: Some(limit),
        offset: 0,
    };
    let mut failures = Vec::new();
    for view in engine.query_rollouts(&filter, &page).await?.items {
        let agl1_error = match engine.get_agl1_rollout(&view.rollout.rollout_id).await {
            Ok(detail) => detail.error_message.clone(),
            Err(_) => None,
        };
        failures.push(Failure {
            rollout: view,
            error_span: None,
            agl1_error,
        });
    }
    Ok(failures)
}

/// A queued rollout's place, or `None` when it is not queued.
pub async fn queue_place(engine: &Engine, rollout_id: &str) -> StoreResult<Option<QueuePlace>> {
    let filter = RolloutFilter {
        status_in: Some(vec![RolloutStatus::Queuing, RolloutStatus::Requeuing]),
        ..RolloutFilter::default()
    };
    let queued = engine
        .query_rollouts(&filter, &Page::default())
        .await?
        .items;
    let Some(index) = queued
        .iter()
        .position(|view| view.rollout.rollout_id == rollout_id)
    else {
        return Ok(None);
    };
    Ok(Some(QueuePlace {
        ahead: index as u64,
        queued: queued.len() as u64,
    }))
}
