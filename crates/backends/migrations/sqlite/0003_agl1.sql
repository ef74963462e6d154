-- agent-lightning 1.x's records beside the core's (src/core/storage/agl1.rs), and
-- what deleting a rollout needs.

-- A rollout's 1.x fields; `pos` keeps the order 1.x lists rollouts in.
CREATE TABLE agl1_rollouts (
    pos INTEGER PRIMARY KEY,
    rollout_id TEXT NOT NULL UNIQUE,
    config TEXT NOT NULL,
    k8s_job_name TEXT,
    last_attempt_id TEXT,
    error_message TEXT,
    version INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);

-- 1.x events, append-only per (rollout, attempt); `data` is a JSON object.
-- An event posted with an Idempotency-Key keeps it, with a digest of the
-- request it came with.
CREATE TABLE agl1_events (
    pos INTEGER PRIMARY KEY,
    rollout_id TEXT NOT NULL,
    attempt_id TEXT NOT NULL,
    event_type TEXT NOT NULL,
    time INTEGER NOT NULL,
    data TEXT NOT NULL,
    idempotency_key TEXT,
    digest TEXT
);
CREATE INDEX agl1_events_by_attempt ON agl1_events (rollout_id, attempt_id, pos);
CREATE UNIQUE INDEX agl1_events_by_key ON agl1_events (rollout_id, attempt_id, idempotency_key)
    WHERE idempotency_key IS NOT NULL;

-- The completion log: rollouts in the order they entered a terminal
-- status; `seq` is 0, 1, 2, ... and never shifts (deletes keep entries).
CREATE TABLE completions (
    seq INTEGER PRIMARY KEY,
    rollout_id TEXT NOT NULL
);
-- The log's length. Its one row, updated by every transaction that appends
-- to the log and locked until it commits, keeps positions gapless and in
-- commit order across servers.
CREATE TABLE completion_counter (
    id INTEGER PRIMARY KEY CHECK (id = 0),
    total INTEGER NOT NULL
);
INSERT INTO completion_counter (id, total) VALUES (0, 0);

-- The gateway's model servers, keyed by (model, endpoint).
CREATE TABLE agl1_models (
    pos INTEGER PRIMARY KEY,
    model TEXT NOT NULL,
    endpoint TEXT NOT NULL,
    version INTEGER NOT NULL,
    UNIQUE (model, endpoint)
);

-- The gateway's pause (one row), shared by every server.
CREATE TABLE agl1_gateway (
    id INTEGER PRIMARY KEY CHECK (id = 0),
    paused INTEGER NOT NULL,
    retry_after_seconds INTEGER NOT NULL,
    reason TEXT,
    generation INTEGER NOT NULL
);
INSERT INTO agl1_gateway (id, paused, retry_after_seconds, reason, generation)
VALUES (0, 0, 5, NULL, 0);

-- Each server running the gateway: its calls in flight and the pause it applies.
CREATE TABLE agl1_replicas (
    server_id TEXT PRIMARY KEY,
    inflight INTEGER NOT NULL,
    generation_seen INTEGER NOT NULL,
    heartbeat INTEGER NOT NULL
) WITHOUT ROWID;

-- Deleting rollouts and attempts keeps the counts exact.
CREATE TRIGGER rollouts_uncounted AFTER DELETE ON rollouts BEGIN
    UPDATE counters SET value = value - 1
    WHERE name IN ('rollouts', 'rollouts.' || OLD.status);
END;
CREATE TRIGGER attempts_uncounted AFTER DELETE ON attempts BEGIN
    UPDATE counters SET value = value - 1
    WHERE name IN ('attempts', 'attempts.' || OLD.status);
END;
