//! Who owns an attempt: the rules of worker sessions as plain functions over
//! domain values, written once for every backend and server.
//!
//! A worker's session record ([`WorkerSession`]) names the attempts the
//! session owns (pushed to it or adopted by it). While a server holds the
//! stream the record is `open` and its deadline is a lease the server
//! renews; once the stream ends it is `dropped` and its deadline is the end
//! of the grace period, after which its live attempts become `unresponsive`
//! (and are retried per their configuration). A new session of the worker,
//! on any server, takes a new epoch and adopts the live attempts: the epoch
//! is the fencing token a runner presents with its writes, so that a former
//! owner's writes are refused.

use super::error::StoreError;
use super::model::{
    Attempt, AttemptRef, AttemptStatus, RolloutView, SessionState, Timestamp, Worker,
    WorkerSession, WorkerStatus,
};

/// Returns whether `worker_id` still runs attempt `attempt_id` of the rollout
/// in `view` (with its latest attempt): the rollout is `preparing` or
/// `running`, and the attempt is its latest, `preparing` or `running`, and
/// the worker's. Finished, timed-out, unresponsive and superseded attempts,
/// and those of cancelled rollouts, are not live.
pub fn is_live(view: &RolloutView, attempt_id: &str, worker_id: &str) -> bool {
    let Some(latest) = &view.attempt else {
        return false;
    };
    view.rollout.status.is_running()
        && latest.attempt_id == attempt_id
        && matches!(
            latest.status,
            AttemptStatus::Preparing | AttemptStatus::Running
        )
        && latest.worker_id.as_deref() == Some(worker_id)
}

/// Checks a write for `attempt` (whose rollout's latest attempt is
/// `latest`) that presents `epoch`: the attempt must not have been
/// superseded by a retry, and its worker's session (`owner`, the record of
/// `attempt.worker_id`) must be the one with that epoch. Returns the
/// FAILED_PRECONDITION to answer otherwise.
pub fn check_owner(
    attempt: &Attempt,
    latest: &Attempt,
    owner: Option<&WorkerSession>,
    epoch: u64,
) -> Result<(), StoreError> {
    let refuse = |why: String| {
        Err(StoreError::FailedPrecondition(format!(
            "attempt {} of rollout {} is not owned by the session with owner_epoch {epoch}: {why}",
            attempt.attempt_id, attempt.rollout_id
        )))
    };
    if attempt.attempt_id != latest.attempt_id {
        return refuse(format!(
            "it was superseded by attempt {}",
            latest.attempt_id
        ));
    }
    let Some(worker_id) = &attempt.worker_id else {
        return refuse("it has no worker".to_owned());
    };
    match owner {
        Some(session) if session.epoch == epoch => Ok(()),
        Some(session) => refuse(format!(
            "worker {worker_id}'s session now has owner_epoch {}",
            session.epoch
        )),
        None => refuse(format!("worker {worker_id} never opened a session")),
    }
}

/// Returns whether `session` is the one this server holds with `epoch`.
pub fn holds(session: &WorkerSession, epoch: u64, server_id: &str) -> bool {
    session.epoch == epoch && session.state == SessionState::Open && session.server_id == server_id
}

/// Marks a session whose stream ended (or whose lease expired) `dropped`:
/// its `live` attempts wait for the worker until `grace_end`. With none
/// left, it is `closed` at once.
pub fn drop_session(session: &mut WorkerSession, live: Vec<AttemptRef>, grace_end: Timestamp) {
    if live.is_empty() {
        close_session(session);
    } else {
        session.state = SessionState::Dropped;
        session.deadline = Some(grace_end);
        session.attempts = live;
    }
}

/// Marks a session `closed`: nothing is pending.
pub fn close_session(session: &mut WorkerSession) {
    session.state = SessionState::Closed;
    session.deadline = None;
    session.attempts.clear();
}

/// Sets a worker's status when its session's stream ends: `lost` when the
/// stream broke; after a clean close, `idle` (upstream's status of a worker
/// without work) unless it still holds unfinished attempts.
pub fn end_worker_session(worker: &mut Worker, broken: bool, holds_attempts: bool, now: Timestamp) {
    if broken {
        worker.status = WorkerStatus::Lost;
        worker.last_idle_time = Some(now);
    } else if !holds_attempts {
        worker.status = WorkerStatus::Idle;
        worker.last_idle_time = Some(now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Json, Rollout, RolloutConfig, RolloutStatus};
    use AttemptStatus as A;
    use RolloutStatus as R;

    const NOW: Timestamp = Timestamp(1_000);

    fn attempt(id: &str, status: AttemptStatus, worker: Option<&str>) -> Attempt {
        Attempt {
            rollout_id: "ro-1".into(),
            attempt_id: id.into(),
            sequence_id: 1,
            start_time: Timestamp(0),
            end_time: None,
            status,
            worker_id: worker.map(str::to_owned),
            last_heartbeat_time: None,
            metadata: Json::Null,
        }
    }

    fn view(status: RolloutStatus, latest: Attempt) -> RolloutView {
        RolloutView {
            rollout: Rollout {
                rollout_id: "ro-1".into(),
                input: Json::Null,
                start_time: Timestamp(0),
                end_time: None,
                mode: None,
                resources_id: None,
                status,
                config: RolloutConfig::default(),
                metadata: Json::Null,
            },
            attempt: Some(latest),
        }
    }

    fn session(epoch: u64) -> WorkerSession {
        WorkerSession {
            worker_id: "W".into(),
            epoch,
            server_id: "s1".into(),
            state: SessionState::Open,
            deadline: Some(NOW),
            attempts: vec![("ro-1".into(), "at-1".into())],
        }
    }

    #[test]
    fn only_the_workers_unfinished_latest_attempt_of_a_running_rollout_is_live() {
        for &rollout in R::ALL {
            for &status in A::ALL {
                let live = is_live(
                    &view(rollout, attempt("at-1", status, Some("W"))),
                    "at-1",
                    "W",
                );
                let expected = rollout.is_running() && matches!(status, A::Preparing | A::Running);
                assert_eq!(live, expected, "rollout {rollout}, attempt {status}");
            }
        }
        let running = view(R::Running, attempt("at-2", A::Running, Some("W")));
        assert!(!is_live(&running, "at-1", "W"), "superseded");
        assert!(!is_live(&running, "at-2", "V"), "another worker's");
        let mut none = running.clone();
        none.attempt = None;
        assert!(!is_live(&none, "at-2", "W"));
    }

    #[test]
    fn a_write_is_fenced_once_the_attempt_moved_on() {
        let at1 = attempt("at-1", A::Running, Some("W"));
        assert_eq!(check_owner(&at1, &at1, Some(&session(7)), 7), Ok(()));
        let moved = check_owner(&at1, &at1, Some(&session(8)), 7).unwrap_err();
        assert_eq!(
            moved,
            StoreError::FailedPrecondition(
                "attempt at-1 of rollout ro-1 is not owned by the session with owner_epoch 7: \
                 worker W's session now has owner_epoch 8"
                    .into()
            )
        );
        let at2 = attempt("at-2", A::Preparing, Some("V"));
        let superseded = check_owner(&at1, &at2, Some(&session(7)), 7).unwrap_err();
        assert!(
            superseded
                .to_string()
                .ends_with("it was superseded by attempt at-2"),
            "{superseded}"
        );
        let unowned = attempt("at-1", A::Running, None);
        assert!(check_owner(&unowned, &unowned, None, 7).is_err());
        assert!(
            check_owner(&at1, &at1, None, 7)
                .unwrap_err()
                .to_string()
                .ends_with("worker W never opened a session")
        );
    }

    #[test]
    fn a_session_holds_only_while_open_on_its_server_with_its_epoch() {
        let open = session(3);
        assert!(holds(&open, 3, "s1"));
        assert!(!holds(&open, 2, "s1"));
        assert!(!holds(&open, 3, "s2"));
        let mut dropped = open.clone();
        drop_session(&mut dropped, open.attempts.clone(), Timestamp(5_000));
        assert_eq!(dropped.state, SessionState::Dropped);
        assert_eq!(dropped.deadline, Some(Timestamp(5_000)));
        assert!(!holds(&dropped, 3, "s1"));
        let mut nothing_left = open.clone();
        drop_session(&mut nothing_left, Vec::new(), Timestamp(5_000));
        assert_eq!(
            (
                nothing_left.state,
                nothing_left.deadline,
                nothing_left.attempts.len()
            ),
            (SessionState::Closed, None, 0)
        );
    }

    #[test]
    fn a_clean_close_is_not_lost() {
        let ended = |status: WorkerStatus, broken: bool, holds_attempts: bool| {
            let mut worker = Worker::new("W");
            worker.status = status;
            end_worker_session(&mut worker, broken, holds_attempts, NOW);
            worker.status
        };
        assert_eq!(ended(WorkerStatus::Busy, true, true), WorkerStatus::Lost);
        assert_eq!(ended(WorkerStatus::Idle, true, false), WorkerStatus::Lost);
        assert_eq!(ended(WorkerStatus::Busy, false, false), WorkerStatus::Idle);
        assert_eq!(ended(WorkerStatus::Busy, false, true), WorkerStatus::Busy);
    }
}
