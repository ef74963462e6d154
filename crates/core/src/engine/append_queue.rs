//! The queue of agent-lightning 1.x event appends waiting for a transaction
//! (see [`super::appends`]): a batch is a prefix of it, at most
//! [`MAX_BATCH`] appends, and an append that reads earlier events of an
//! attempt already in the batch waits for the next one.

use crate::agl1::{Agl1Event, NewAgl1Event};
use crate::error::StoreResult;
use std::collections::VecDeque;
use tokio::sync::oneshot;

/// Appends one batch takes at most.
pub(super) const MAX_BATCH: usize = 256;

/// The appends waiting for a drainer.
#[derive(Default)]
pub(super) struct AppendQueue {
    state: parking_lot::Mutex<Queue>,
}

#[derive(Default)]
pub(super) struct Queue {
    waiting: VecDeque<Append>,
    /// A drainer runs that does not hold its rollouts' locks yet: appends
    /// that arrive wait for it to hand over ([`AppendQueue::hand_over`]).
    draining: bool,
}

/// An append's request.
pub(super) struct Request {
    pub(super) rollout_id: String,
    pub(super) attempt_id: String,
    pub(super) new: NewAgl1Event,
}

impl Request {
    /// Whether its rule reads earlier events of its attempt.
    pub(super) fn reads_earlier_events(&self) -> bool {
        self.new.idempotency.is_some() || self.new.has_routed_experts
    }

    pub(super) fn same_attempt(&self, other: &Request) -> bool {
        self.rollout_id == other.rollout_id && self.attempt_id == other.attempt_id
    }
}

/// A queued append and who waits for its outcome.
pub(super) struct Append {
    pub(super) request: Request,
    pub(super) done: oneshot::Sender<StoreResult<Agl1Event>>,
}

impl AppendQueue {
    /// Queues an append; returns true when the caller must start a drainer.
    pub(super) fn push(&self, append: Append) -> bool {
        let mut queue = self.state.lock();
        queue.waiting.push_back(append);
        !std::mem::replace(&mut queue.draining, true)
    }

    /// Takes the next batch: the longest prefix of the queue (at most
    /// [`MAX_BATCH`]) in which no member that reads earlier events of its
    /// attempt follows another member of the same attempt. The drainer
    /// stays the one that starts the next, once it holds its locks
    /// ([`AppendQueue::hand_over`]).
    pub(super) fn take_batch(&self) -> Vec<Append> {
        let mut queue = self.state.lock();
        let mut batch: Vec<Append> = Vec::new();
        while batch.len() < MAX_BATCH
            && let Some(next) = queue.waiting.front()
        {
            let next = &next.request;
            if next.reads_earlier_events()
                && batch.iter().any(|member| member.request.same_attempt(next))
            {
                break;
            }
            batch.extend(queue.waiting.pop_front());
        }
        batch
    }

    /// Called by a drainer once its batch holds its rollouts' locks (or
    /// failed to take them): returns true when appends wait (those left at
    /// take time and those that arrived since), for which the caller starts
    /// the next drainer; else the next append starts one. So a later
    /// drainer queues for the store behind this batch's locks, and an
    /// append is never stored before one that arrived earlier.
    pub(super) fn hand_over(&self) -> bool {
        let mut queue = self.state.lock();
        queue.draining = !queue.waiting.is_empty();
        queue.draining
    }

    /// Takes every waiting append (a drainer that could not open a
    /// transaction fails them).
    pub(super) fn take_all(&self) -> Vec<Append> {
        let mut queue = self.state.lock();
        queue.draining = false;
        queue.waiting.drain(..).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agl1::IdempotencyKey;

    pub(super) fn append(rollout_id: &str, attempt_id: &str, keyed: bool) -> Append {
        let data = "{}".to_owned();
        Append {
            request: Request {
                rollout_id: rollout_id.into(),
                attempt_id: attempt_id.into(),
                new: NewAgl1Event {
                    event_type: "reward".into(),
                    idempotency: keyed.then(|| IdempotencyKey::of("k", &[data.as_bytes()])),
                    data,
                    has_routed_experts: false,
                    model_version: None,
                    call: None,
                },
            },
            done: oneshot::channel().0,
        }
    }

    pub(super) fn ids(batch: &[Append]) -> Vec<(&str, &str)> {
        batch
            .iter()
            .map(|a| (a.request.rollout_id.as_str(), a.request.attempt_id.as_str()))
            .collect()
    }

    #[test]
    pub(super) fn a_batch_stops_before_a_keyed_append_to_an_attempt_it_holds() {
        let queue = AppendQueue::default();
        assert!(
            queue.push(append("a", "0", false)),
            "the first starts a drainer"
        );
        assert!(!queue.push(append("a", "1", true)), "one drainer at a time");
        queue.push(append("b", "0", false));
        queue.push(append("b", "0", false));
        queue.push(append("a", "0", true));
        queue.push(append("c", "0", false));
        let batch = queue.take_batch();
        assert_eq!(
            ids(&batch),
            [("a", "0"), ("a", "1"), ("b", "0"), ("b", "0")]
        );
        assert!(
            !queue.push(append("d", "0", false)),
            "left for the next drainer"
        );
        assert!(queue.hand_over(), "appends wait: the next drainer starts");
        assert_eq!(
            ids(&queue.take_batch()),
            [("a", "0"), ("c", "0"), ("d", "0")]
        );
        assert!(!queue.hand_over(), "nothing waits");
        assert!(
            queue.push(append("e", "0", false)),
            "the next append starts one"
        );
    }

    #[test]
    pub(super) fn an_append_after_a_batch_took_everything_waits_for_its_locks() {
        let queue = AppendQueue::default();
        assert!(queue.push(append("a", "0", false)));
        assert_eq!(ids(&queue.take_batch()), [("a", "0")]);
        // The drainer took everything but does not hold its rollouts yet: a
        // drainer started now could lock them first and store this append
        // before the one taken.
        assert!(
            !queue.push(append("a", "0", false)),
            "no drainer before the batch holds its locks"
        );
        assert!(
            queue.hand_over(),
            "the batch hands over to the next drainer"
        );
        assert_eq!(ids(&queue.take_batch()), [("a", "0")]);
        assert!(!queue.hand_over());
        assert!(queue.push(append("a", "0", false)));
    }

    #[test]
    pub(super) fn a_batch_stops_before_a_routing_tensor_for_an_attempt_it_holds() {
        let queue = AppendQueue::default();
        queue.push(append("a", "0", false));
        let mut routed = append("a", "0", false);
        routed.request.new.has_routed_experts = true;
        queue.push(routed);
        assert_eq!(ids(&queue.take_batch()), [("a", "0")]);
        assert!(queue.hand_over());
        let batch = queue.take_batch();
        assert!(batch[0].request.new.has_routed_experts);
        assert!(!queue.hand_over());
    }

    #[test]
    pub(super) fn a_batch_holds_at_most_max_batch_appends() {
        let queue = AppendQueue::default();
        for _ in 0..MAX_BATCH + 1 {
            queue.push(append("a", "0", false));
        }
        assert_eq!(queue.take_batch().len(), MAX_BATCH);
        assert!(queue.hand_over());
        assert_eq!(queue.take_batch().len(), 1);
    }
}
