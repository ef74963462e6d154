//! The rollout/attempt state machine, written once as plain functions over
//! domain values. Every backend reaches these through the engine; nothing
//! here does I/O. Anchors (`#…`) refer to `docs/semantics.md`.

use super::model::{
    Attempt, AttemptStatus, Rollout, RolloutConfig, RolloutStatus, Timestamp, Worker, WorkerStatus,
};

/// Maps an attempt's status to the status its rollout should take
/// (`docs/semantics.md#attempt-to-rollout-status`).
///
/// `failed`, `timeout` and `unresponsive` requeue the rollout when the status is in
/// `retry_condition` and the attempt's sequence id is below `max_attempts`; otherwise the rollout
/// fails.
pub fn rollout_status_from_attempt(
    status: AttemptStatus,
    sequence_id: u32,
    config: &RolloutConfig,
) -> RolloutStatus {
    match status {
        AttemptStatus::Preparing => RolloutStatus::Preparing,
        AttemptStatus::Running => RolloutStatus::Running,
        AttemptStatus::Succeeded => RolloutStatus::Succeeded,
        AttemptStatus::Failed | AttemptStatus::Timeout | AttemptStatus::Unresponsive => {
            let retry =
                config.retry_condition.contains(status) && sequence_id < config.max_attempts.get();
            if retry {
                RolloutStatus::Requeuing
            } else {
                RolloutStatus::Failed
            }
        }
    }
}

/// Returns the status a rollout must move to after its *latest* attempt changed, or `None` when it
/// stays as it is (`docs/semantics.md#propagation`). Cancellation is final: a cancelled rollout is
/// never revived by its attempts (our decision 4).
pub fn propagated_status(rollout: &Rollout, latest: &Attempt) -> Option<RolloutStatus> {
    if rollout.status == RolloutStatus::Cancelled {
        return None;
    }
    let target = rollout_status_from_attempt(latest.status, latest.sequence_id, &rollout.config);
    (target != rollout.status).then_some(target)
}

/// Returns whether a rollout with `status` may be cancelled: unless it has
/// finished (a finished rollout stays as it ended; the console's cancel and
/// its rollout page both ask this).
pub fn may_cancel(status: RolloutStatus) -> bool {
    !status.is_finished()
}

/// Sets a rollout's status (`docs/semantics.md#update-rollout`): terminal statuses stamp `end_time`
/// (again each time); leaving a terminal status keeps it. Returns true when the rollout must be
/// (re)entered in the queue, which the caller does unless it is already queued.
#[must_use]
pub fn set_rollout_status(rollout: &mut Rollout, status: RolloutStatus, now: Timestamp) -> bool {
    rollout.status = status;
    if status.is_finished() {
        rollout.end_time = Some(now);
    }
    status.is_queuing()
}

/// Returns whether a rollout moving from `before` (`None`: created) to
/// `after` enters the completion log: it becomes terminal from a live
/// status. Moves between terminal statuses do not complete it again.
pub fn completes(before: Option<RolloutStatus>, after: RolloutStatus) -> bool {
    after.is_finished() && !before.is_some_and(RolloutStatus::is_finished)
}

/// Sets an attempt's status (`docs/semantics.md#update-attempt`): `failed` and `succeeded` stamp
/// `end_time` (again each time); `timeout` and `unresponsive` do not.
pub fn set_attempt_status(attempt: &mut Attempt, status: AttemptStatus, now: Timestamp) {
    attempt.status = status;
    if matches!(status, AttemptStatus::Failed | AttemptStatus::Succeeded) {
        attempt.end_time = Some(now);
    }
}

/// Records a heartbeat (a span arrived) on an attempt (`docs/semantics.md#span-heartbeat`): a
/// `preparing` or `unresponsive` attempt becomes `running`; other statuses only record the time.
pub fn record_heartbeat(attempt: &mut Attempt, now: Timestamp) {
    attempt.last_heartbeat_time = Some(now);
    if matches!(
        attempt.status,
        AttemptStatus::Preparing | AttemptStatus::Unresponsive
    ) {
        attempt.status = AttemptStatus::Running;
    }
}

/// Returns true when a heartbeat on the rollout's latest attempt moves the
/// rollout to `running` (`docs/semantics.md#span-heartbeat`). Upstream's list has a typo that skips
/// `queuing`; we include it (our decision 1).
pub fn heartbeat_promotes(status: RolloutStatus) -> bool {
    matches!(
        status,
        RolloutStatus::Queuing | RolloutStatus::Preparing | RolloutStatus::Requeuing
    )
}

/// Synchronises a worker with the attempt it executes (`docs/semantics.md#workers`).
pub fn sync_worker(worker: &mut Worker, attempt: &Attempt, now: Timestamp) {
    match attempt.status {
        AttemptStatus::Succeeded | AttemptStatus::Failed => {
            release_worker(worker, WorkerStatus::Idle, now)
        }
        AttemptStatus::Timeout | AttemptStatus::Unresponsive => {
            release_worker(worker, WorkerStatus::Unknown, now)
        }
        AttemptStatus::Preparing | AttemptStatus::Running => {
            worker.status = WorkerStatus::Busy;
            worker.last_busy_time = Some(now);
            worker.current_rollout_id = Some(attempt.rollout_id.clone());
            worker.current_attempt_id = Some(attempt.attempt_id.clone());
        }
    }
}

fn release_worker(worker: &mut Worker, status: WorkerStatus, now: Timestamp) {
    worker.status = status;
    worker.last_idle_time = Some(now);
    worker.current_rollout_id = None;
    worker.current_attempt_id = None;
}

/// Marks a worker idle after it found the queue empty (`docs/semantics.md#dequeue`).
pub fn mark_idle_after_empty_dequeue(worker: &mut Worker, now: Timestamp) {
    worker.status = WorkerStatus::Idle;
    worker.last_idle_time = Some(now);
    worker.last_dequeue_time = Some(now);
}

/// Returns the watchdog's verdict for a rollout's latest attempt at `now`
/// (`docs/semantics.md#watchdog`, first match wins, strict comparisons), or `None` when it is
/// healthy.
pub fn watchdog_verdict(
    config: &RolloutConfig,
    latest: &Attempt,
    now: Timestamp,
) -> Option<AttemptStatus> {
    let deadlines = watchdog_deadlines(config, latest);
    if deadlines.timeout.is_some_and(|deadline| now > deadline) {
        return Some(AttemptStatus::Timeout);
    }
    if deadlines
        .unresponsive
        .is_some_and(|deadline| now > deadline)
    {
        return Some(AttemptStatus::Unresponsive);
    }
    None
}

struct Deadlines {
    timeout: Option<Timestamp>,
    unresponsive: Option<Timestamp>,
}

fn watchdog_deadlines(config: &RolloutConfig, latest: &Attempt) -> Deadlines {
    Deadlines {
        timeout: config
            .timeout_seconds
            .map(|seconds| latest.start_time.plus_seconds(seconds.get())),
        unresponsive: config.unresponsive_seconds.map(|seconds| {
            latest
                .last_heartbeat_time
                .unwrap_or(latest.start_time)
                .plus_seconds(seconds.get())
        }),
    }
}

/// Returns the earliest time after which the watchdog may act on a rollout,
/// or `None` when it is out of the watchdog's scope (not `preparing` or
/// `running`, no attempt, or no limits configured). Backends index this value
/// so that a scan only visits rollouts that are due.
pub fn watchdog_deadline(rollout: &Rollout, latest: Option<&Attempt>) -> Option<Timestamp> {
    if !rollout.status.is_running() {
        return None;
    }
    let deadlines = watchdog_deadlines(&rollout.config, latest?);
    match (deadlines.timeout, deadlines.unresponsive) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Json;
    use crate::model::{MaxAttempts, RetryCondition, Seconds};
    use AttemptStatus as A;
    use RolloutStatus as R;

    const NOW: Timestamp = Timestamp(1_000_000_000_000);

    fn config(max_attempts: u32, retry_condition: &[AttemptStatus]) -> RolloutConfig {
        RolloutConfig {
            max_attempts: MaxAttempts::new(i64::from(max_attempts)).unwrap(),
            retry_condition: RetryCondition::new(retry_condition.to_vec()).unwrap(),
            ..RolloutConfig::default()
        }
    }

    fn rollout(status: RolloutStatus, config: RolloutConfig) -> Rollout {
        Rollout {
            rollout_id: "ro-1".into(),
            input: Json::Null,
            start_time: Timestamp(0),
            end_time: None,
            mode: None,
            resources_id: None,
            status,
            config,
            metadata: Json::Null,
        }
    }

    fn attempt(status: AttemptStatus, sequence_id: u32) -> Attempt {
        Attempt {
            rollout_id: "ro-1".into(),
            attempt_id: "at-1".into(),
            sequence_id,
            start_time: Timestamp(0),
            end_time: None,
            status,
            worker_id: None,
            last_heartbeat_time: None,
            metadata: Json::Null,
        }
    }

    #[test]
    fn only_a_rollout_that_has_not_finished_may_be_cancelled() {
        for &status in R::ALL {
            let live = matches!(
                status,
                R::Queuing | R::Preparing | R::Running | R::Requeuing
            );
            assert_eq!(may_cancel(status), live, "{status}");
        }
    }

    #[test]
    fn attempt_status_maps_to_rollout_status() {
        // (attempt status, in retry_condition, sequence_id < max_attempts) => rollout status
        let retryable = [A::Failed, A::Timeout, A::Unresponsive];
        for &status in A::ALL {
            for in_condition in [false, true] {
                for below_max in [false, true] {
                    // A status that cannot retry cannot be in a condition:
                    // the fullest condition stands in for it.
                    let condition: Vec<_> = match (in_condition, status.can_be_retried()) {
                        (false, _) => vec![],
                        (true, true) => vec![status],
                        (true, false) => retryable.to_vec(),
                    };
                    let max = if below_max { 3 } else { 2 };
                    let got = rollout_status_from_attempt(status, 2, &config(max, &condition));
                    let expected = match status {
                        A::Preparing => R::Preparing,
                        A::Running => R::Running,
                        A::Succeeded => R::Succeeded,
                        _ if in_condition && below_max => R::Requeuing,
                        _ => R::Failed,
                    };
                    assert_eq!(
                        got, expected,
                        "{status} in={in_condition} below={below_max}"
                    );
                    if !retryable.contains(&status) {
                        assert_ne!(got, R::Requeuing);
                    }
                }
            }
        }
        // A retry condition naming another status does not retry.
        assert_eq!(
            rollout_status_from_attempt(A::Timeout, 1, &config(5, &[A::Failed])),
            R::Failed
        );
    }

    #[test]
    fn propagation_covers_every_status_pair() {
        let cfg = config(3, &[A::Failed, A::Timeout, A::Unresponsive]);
        for &current in R::ALL {
            for &status in A::ALL {
                let got = propagated_status(&rollout(current, cfg.clone()), &attempt(status, 1));
                let target = rollout_status_from_attempt(status, 1, &cfg);
                let expected = if current == R::Cancelled || current == target {
                    None
                } else {
                    Some(target)
                };
                assert_eq!(got, expected, "rollout {current} attempt {status}");
            }
        }
        // Terminal non-cancelled rollouts are overwritten, as upstream does.
        assert_eq!(
            propagated_status(&rollout(R::Failed, cfg.clone()), &attempt(A::Succeeded, 1)),
            Some(R::Succeeded)
        );
    }

    #[test]
    fn rollout_status_change_stamps_end_time_and_requests_queueing() {
        for &status in R::ALL {
            let mut r = rollout(R::Running, RolloutConfig::default());
            let enqueue = set_rollout_status(&mut r, status, NOW);
            assert_eq!(r.status, status);
            assert_eq!(
                enqueue,
                matches!(status, R::Queuing | R::Requeuing),
                "{status}"
            );
            assert_eq!(r.end_time.is_some(), status.is_finished(), "{status}");
        }
        // Leaving a terminal status keeps the stale end time.
        let mut r = rollout(R::Running, RolloutConfig::default());
        let _ = set_rollout_status(&mut r, R::Failed, NOW);
        let _ = set_rollout_status(&mut r, R::Running, Timestamp(NOW.0 + 1));
        assert_eq!(r.end_time, Some(NOW));
    }

    #[test]
    fn completion_is_the_entry_into_a_terminal_status() {
        for &after in R::ALL {
            assert_eq!(completes(None, after), after.is_finished(), "new {after}");
            for &before in R::ALL {
                let expected = after.is_finished() && !before.is_finished();
                assert_eq!(
                    completes(Some(before), after),
                    expected,
                    "{before}->{after}"
                );
            }
        }
    }

    #[test]
    fn attempt_status_change_stamps_end_time_only_when_reported() {
        for &status in A::ALL {
            let mut a = attempt(A::Running, 1);
            set_attempt_status(&mut a, status, NOW);
            assert_eq!(a.status, status);
            assert_eq!(
                a.end_time.is_some(),
                matches!(status, A::Failed | A::Succeeded),
                "{status}"
            );
        }
    }

    #[test]
    fn heartbeat_revives_preparing_and_unresponsive_only() {
        for &status in A::ALL {
            let mut a = attempt(status, 1);
            record_heartbeat(&mut a, NOW);
            assert_eq!(a.last_heartbeat_time, Some(NOW));
            let expected = match status {
                A::Preparing | A::Unresponsive => A::Running,
                other => other,
            };
            assert_eq!(a.status, expected, "{status}");
        }
        for &status in R::ALL {
            assert_eq!(
                heartbeat_promotes(status),
                matches!(status, R::Queuing | R::Preparing | R::Requeuing),
                "{status}"
            );
        }
    }

    #[test]
    fn worker_follows_its_attempt() {
        for &status in A::ALL {
            let mut w = Worker::new("Worker-0");
            w.heartbeat_stats = serde_json::json!({"cpu": 1});
            sync_worker(&mut w, &attempt(status, 1), NOW);
            let (expected, holds) = match status {
                A::Succeeded | A::Failed => (WorkerStatus::Idle, false),
                A::Timeout | A::Unresponsive => (WorkerStatus::Unknown, false),
                A::Preparing | A::Running => (WorkerStatus::Busy, true),
            };
            assert_eq!(w.status, expected, "{status}");
            assert_eq!(w.current_attempt_id.is_some(), holds, "{status}");
            assert_eq!(w.last_busy_time.is_some(), holds, "{status}");
            assert_eq!(w.last_idle_time.is_some(), !holds, "{status}");
            assert_eq!(w.heartbeat_stats, serde_json::json!({"cpu": 1}));
        }
        let mut w = Worker::new("Worker-0");
        mark_idle_after_empty_dequeue(&mut w, NOW);
        assert_eq!(w.status, WorkerStatus::Idle);
        assert_eq!(w.last_dequeue_time, Some(NOW));
    }

    #[test]
    fn watchdog_rules_apply_in_order_with_strict_comparisons() {
        let secs = |s: f64| Timestamp(0).plus_seconds(s);
        let cfg = RolloutConfig {
            timeout_seconds: Some(Seconds::new(10.0).unwrap()),
            unresponsive_seconds: Some(Seconds::new(4.0).unwrap()),
            ..RolloutConfig::default()
        };
        let mut a = attempt(A::Running, 1);
        assert_eq!(watchdog_verdict(&cfg, &a, secs(4.0)), None, "strict >");
        assert_eq!(watchdog_verdict(&cfg, &a, secs(4.5)), Some(A::Unresponsive));
        a.last_heartbeat_time = Some(secs(8.0));
        assert_eq!(watchdog_verdict(&cfg, &a, secs(9.0)), None);
        assert_eq!(
            watchdog_verdict(&cfg, &a, secs(10.5)),
            Some(A::Timeout),
            "timeout first"
        );
        assert_eq!(
            watchdog_verdict(&RolloutConfig::default(), &a, secs(1e6)),
            None
        );

        let r = rollout(R::Running, cfg.clone());
        assert_eq!(watchdog_deadline(&r, Some(&a)), Some(secs(10.0)));
        assert_eq!(watchdog_deadline(&r, None), None);
        for &status in R::ALL {
            let r = rollout(status, cfg.clone());
            assert_eq!(
                watchdog_deadline(&r, Some(&a)).is_some(),
                status.is_running()
            );
        }
    }
}
