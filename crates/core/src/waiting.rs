//! Why a rollout that waits is not running yet, from what the store and
//! this server know: its place in the queue, whether it waits to be
//! retried, whether any worker could take it (worker sessions with a free
//! slot, workers that asked for work lately), and whether agent-lightning
//! 1.x's gateway is paused. Plain rules over facts read elsewhere.

use std::time::Duration;

use super::agl1::Pause;
use super::model::{AttemptStatus, RolloutStatus, RolloutView, Timestamp};

/// How long without a dequeue counts as "no worker is asking for work".
pub const IDLE_DEQUEUE: Duration = Duration::from_secs(30);

/// What is known around a waiting rollout.
#[derive(Debug, Clone)]
pub struct WaitingFacts<'a> {
    pub rollout: &'a RolloutView,
    /// An agent-lightning 1.x rollout (its controller starts it, not a dequeue).
    pub agl1: bool,
    /// Rollouts ahead of it and the queue's length, when it is queued.
    pub place: Option<(u64, u64)>,
    /// Worker sessions open in the store (on every server).
    pub open_sessions: usize,
    /// Free slots of the sessions this server holds.
    pub free_slots_here: usize,
    /// The latest time any worker asked for work.
    pub last_dequeue: Option<Timestamp>,
    /// The gateway's pause.
    pub pause: Option<&'a Pause>,
    pub now: Timestamp,
}

/// One reason a rollout is not running.
#[derive(Debug, Clone, PartialEq)]
pub enum WaitReason {
    /// Rollouts ahead of it in the queue (0: it is next).
    InQueue { ahead: u64, queued: u64 },
    /// A 1.x rollout: the 1.x controller starts it (by PATCH), not a dequeue.
    WaitsForController,
    /// An earlier attempt ended and the rollout waits to be retried.
    Retry {
        attempts: u32,
        max_attempts: u32,
        last: AttemptStatus,
    },
    /// Sessions are open but none has a free slot here.
    NoFreeSlot { sessions: usize },
    /// No worker asked for work for a while (since `since`, or never).
    NoDequeue { since: Option<Timestamp> },
    /// The gateway is paused: agents' model calls are refused meanwhile.
    GatewayPaused { reason: Option<String> },
}

/// Returns why a waiting rollout (queuing or requeuing) is not running,
/// most telling first; empty for a rollout that does not wait.
pub fn why_waiting(facts: &WaitingFacts<'_>) -> Vec<WaitReason> {
    let rollout = &facts.rollout.rollout;
    if !matches!(
        rollout.status,
        RolloutStatus::Queuing | RolloutStatus::Requeuing
    ) {
        return Vec::new();
    }
    let mut reasons = Vec::new();
    if let Some(attempt) = &facts.rollout.attempt
        && rollout.status == RolloutStatus::Requeuing
    {
        reasons.push(WaitReason::Retry {
            attempts: attempt.sequence_id,
            max_attempts: rollout.config.max_attempts.get(),
            last: attempt.status,
        });
    }
    if facts.agl1 {
        reasons.push(WaitReason::WaitsForController);
    } else {
        if let Some((ahead, queued)) = facts.place {
            reasons.push(WaitReason::InQueue { ahead, queued });
        }
        let asked_lately = facts.last_dequeue.is_some_and(|time| {
            facts.now.0.saturating_sub(time.0) < IDLE_DEQUEUE.as_nanos() as i64
        });
        if facts.open_sessions > 0 && facts.free_slots_here == 0 && !asked_lately {
            reasons.push(WaitReason::NoFreeSlot {
                sessions: facts.open_sessions,
            });
        }
        if facts.open_sessions == 0 && !asked_lately {
            reasons.push(WaitReason::NoDequeue {
                since: facts.last_dequeue,
            });
        }
    }
    if let Some(pause) = facts.pause.filter(|pause| pause.paused) {
        reasons.push(WaitReason::GatewayPaused {
            reason: pause.reason.clone(),
        });
    }
    reasons
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Attempt, Json, Rollout, RolloutConfig};

    fn view(status: RolloutStatus, attempt: Option<AttemptStatus>) -> RolloutView {
        RolloutView {
            rollout: Rollout {
                rollout_id: "r".into(),
                input: Json::Null,
                start_time: Timestamp(0),
                end_time: None,
                mode: None,
                resources_id: None,
                status,
                config: RolloutConfig {
                    max_attempts: crate::model::MaxAttempts::new(3).unwrap(),
                    ..RolloutConfig::default()
                },
                metadata: Json::Null,
            },
            attempt: attempt.map(|status| Attempt {
                rollout_id: "r".into(),
                attempt_id: "a".into(),
                sequence_id: 1,
                start_time: Timestamp(0),
                end_time: Some(Timestamp(1)),
                status,
                worker_id: Some("w".into()),
                last_heartbeat_time: None,
                metadata: Json::Null,
            }),
        }
    }

    fn facts(rollout: &RolloutView) -> WaitingFacts<'_> {
        WaitingFacts {
            rollout,
            agl1: false,
            place: Some((2, 5)),
            open_sessions: 0,
            free_slots_here: 0,
            last_dequeue: None,
            pause: None,
            now: Timestamp(100_000_000_000),
        }
    }

    #[test]
    fn a_queued_rollout_with_nobody_asking_for_work_says_both() {
        let rollout = view(RolloutStatus::Queuing, None);
        assert_eq!(
            why_waiting(&facts(&rollout)),
            [
                WaitReason::InQueue {
                    ahead: 2,
                    queued: 5
                },
                WaitReason::NoDequeue { since: None }
            ]
        );
        let recent = WaitingFacts {
            last_dequeue: Some(Timestamp(99_000_000_000)),
            ..facts(&rollout)
        };
        assert_eq!(why_waiting(&recent).len(), 1, "a worker asked a second ago");
        let busy = WaitingFacts {
            open_sessions: 2,
            ..facts(&rollout)
        };
        assert!(why_waiting(&busy).contains(&WaitReason::NoFreeSlot { sessions: 2 }));
    }

    #[test]
    fn retries_the_controller_and_the_pause_are_reasons() {
        let rollout = view(RolloutStatus::Requeuing, Some(AttemptStatus::Timeout));
        let pause = Pause {
            paused: true,
            reason: Some("weights update".into()),
            ..Pause::default()
        };
        let reasons = why_waiting(&WaitingFacts {
            agl1: true,
            pause: Some(&pause),
            ..facts(&rollout)
        });
        assert_eq!(
            reasons,
            [
                WaitReason::Retry {
                    attempts: 1,
                    max_attempts: 3,
                    last: AttemptStatus::Timeout
                },
                WaitReason::WaitsForController,
                WaitReason::GatewayPaused {
                    reason: Some("weights update".into())
                }
            ]
        );
        let running = view(RolloutStatus::Running, None);
        assert!(why_waiting(&facts(&running)).is_empty());
    }
}
