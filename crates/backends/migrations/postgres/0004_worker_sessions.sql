-- Worker sessions as data: which server holds each worker's session, the
-- lease that proves it, and the attempts the session owns (JSON text:
-- [[rollout_id, attempt_id], ...]); one row per worker, kept after the
-- session ends so that epochs only grow.
CREATE TABLE worker_sessions (
    worker_id TEXT PRIMARY KEY,
    epoch BIGINT NOT NULL,
    server_id TEXT NOT NULL,
    -- open, dropped or closed.
    state TEXT NOT NULL,
    -- open: the lease's expiry; dropped: the end of the grace period.
    deadline BIGINT,
    attempts TEXT NOT NULL
);
CREATE INDEX worker_sessions_due ON worker_sessions (deadline, worker_id)
    WHERE deadline IS NOT NULL;

-- Session epochs are store-wide; a sequence takes no row lock.
CREATE SEQUENCE session_epochs;

-- The queue holds only rollouts that can still be dequeued: entries of
-- rollouts that left the queuing statuses (cancelled, started) go.
DELETE FROM queue WHERE rollout_id NOT IN (
    SELECT rollout_id FROM rollouts WHERE status IN ('queuing', 'requeuing')
);
