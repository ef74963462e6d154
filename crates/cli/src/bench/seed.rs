//! Seeding a store for the read benchmarks (`bench export`, `bench
//! read-model`) through the batch RPCs: rollouts enqueued and claimed in
//! batches, their spans with a few AddSpans calls in flight, their attempts
//! completed. Each benchmark says what it seeds; the calls are written here
//! once.

use futures::StreamExt as _;

use super::error::{BenchError, BenchResult};
use super::payload::SpanIds;
use super::target::{Pool, StoreClient};
use lightning_store_proto as pb;

/// Rollouts per EnqueueRollouts, DequeueRollouts and UpdateAttempts call.
pub const BATCH: usize = 1_000;
/// AddSpans calls in flight while seeding.
pub const SPAN_CALLS_IN_FLIGHT: usize = 4;

/// A claimed rollout's attempt.
pub struct Claimed {
    pub rollout_id: String,
    pub attempt_id: String,
}

/// Enqueues the rollouts `spec` makes of `0..count`, [`BATCH`] to a call.
pub async fn enqueue(
    client: &mut StoreClient,
    count: usize,
    spec: impl Fn(usize) -> pb::RolloutSpec,
) -> BenchResult<()> {
    for first in (0..count).step_by(BATCH) {
        let rollouts = (first..count.min(first + BATCH)).map(&spec).collect();
        client
            .enqueue_rollouts(pb::EnqueueRolloutsRequest {
                rollouts,
                ids_only: true,
                ..Default::default()
            })
            .await?;
    }
    Ok(())
}

/// Claims `count` queued rollouts, [`BATCH`] to a call, the `k`th call as
/// `worker(k)`; an error if the queue runs empty first.
pub async fn claim(
    client: &mut StoreClient,
    count: usize,
    worker: impl Fn(usize) -> String,
) -> BenchResult<Vec<Claimed>> {
    let mut claimed = Vec::with_capacity(count);
    let mut calls = 0;
    while claimed.len() < count {
        let rollouts = client
            .dequeue_rollouts(pb::DequeueRolloutsRequest {
                limit: BATCH.min(count - claimed.len()) as i64,
                worker_id: Some(worker(calls)),
                wait: None,
            })
            .await?
            .into_inner()
            .rollouts;
        if rollouts.is_empty() {
            return Err(BenchError::new(format!(
                "the queue ran empty after {} of the {count} rollouts to claim (was the store \
                 empty?)",
                claimed.len()
            )));
        }
        calls += 1;
        for rollout in rollouts {
            let attempt_id = rollout
                .attempt
                .map(|a| a.attempt_id)
                .ok_or_else(|| BenchError::new("a claimed rollout has no attempt"))?;
            claimed.push(Claimed {
                rollout_id: rollout.rollout_id,
                attempt_id,
            });
        }
    }
    Ok(claimed)
}

/// Adds the spans `spans` makes for each claimed rollout (its index, the
/// rollout, the span ids of its call), `per_call` rollouts' spans to an
/// AddSpans call, a few calls in flight.
pub async fn add_spans(
    pool: &Pool,
    claimed: &[Claimed],
    per_call: usize,
    spans: impl Fn(usize, &Claimed, &mut SpanIds) -> Vec<pb::Span>,
) -> BenchResult<()> {
    let spans = &spans;
    let calls = claimed.chunks(per_call).enumerate().map(|(chunk, part)| {
        let mut ids = SpanIds::new();
        let batch: Vec<pb::Span> = part
            .iter()
            .enumerate()
            .flat_map(|(k, c)| spans(chunk * per_call + k, c, &mut ids))
            .collect();
        let mut client = pool.store(chunk % SPAN_CALLS_IN_FLIGHT);
        async move {
            client
                .add_spans(pb::AddSpansRequest {
                    spans: batch,
                    ids_only: true,
                    ..Default::default()
                })
                .await
        }
    });
    let mut calls = futures::stream::iter(calls).buffer_unordered(SPAN_CALLS_IN_FLIGHT);
    while let Some(result) = calls.next().await {
        result?;
    }
    Ok(())
}

/// Ends the attempts of the claimed rollouts `outcome` gives a status
/// (by index; `None` leaves one running), [`BATCH`] to an UpdateAttempts
/// call.
pub async fn complete(
    client: &mut StoreClient,
    claimed: &[Claimed],
    outcome: impl Fn(usize) -> Option<pb::AttemptStatus>,
) -> BenchResult<()> {
    for (chunk, part) in claimed.chunks(BATCH).enumerate() {
        let updates = part
            .iter()
            .enumerate()
            .filter_map(|(k, c)| {
                let status = outcome(chunk * BATCH + k)?;
                Some(pb::UpdateAttemptRequest {
                    rollout_id: c.rollout_id.clone(),
                    attempt_id: c.attempt_id.clone(),
                    update_mask: Some(prost_types::FieldMask {
                        paths: vec!["status".into()],
                    }),
                    status: status as i32,
                    ..Default::default()
                })
            })
            .collect();
        client
            .update_attempts(pb::UpdateAttemptsRequest { updates })
            .await?;
    }
    Ok(())
}

/// The status of the `i`th attempt when one in `fail_every` fails.
pub fn failing_one_in(fail_every: usize, i: usize) -> pb::AttemptStatus {
    if i.is_multiple_of(fail_every) {
        pb::AttemptStatus::Failed
    } else {
        pb::AttemptStatus::Succeeded
    }
}
