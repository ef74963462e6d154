-- agent-lightning 1.x's records beside the core's (src/core/storage/agl1.rs), and
-- what deleting a rollout needs.

-- A rollout's 1.x fields; `pos` keeps the order 1.x lists rollouts in.
CREATE TABLE agl1_rollouts (
    pos BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    rollout_id TEXT NOT NULL UNIQUE,
    config TEXT NOT NULL,
    k8s_job_name TEXT,
    last_attempt_id TEXT,
    error_message TEXT,
    version BIGINT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);

-- 1.x events, append-only per (rollout, attempt); `data` is a JSON object.
-- An event posted with an Idempotency-Key keeps it, with a digest of the
-- request it came with.
CREATE TABLE agl1_events (
    pos BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    rollout_id TEXT NOT NULL,
    attempt_id TEXT NOT NULL,
    event_type TEXT NOT NULL,
    time BIGINT NOT NULL,
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
    seq BIGINT PRIMARY KEY,
    rollout_id TEXT NOT NULL
);
-- The log's length. Its one row, updated by every transaction that appends
-- to the log and locked until it commits, keeps positions gapless and in
-- commit order across servers.
CREATE TABLE completion_counter (
    id BIGINT PRIMARY KEY CHECK (id = 0),
    total BIGINT NOT NULL
);
INSERT INTO completion_counter (id, total) VALUES (0, 0);

-- The gateway's model servers, keyed by (model, endpoint).
CREATE TABLE agl1_models (
    pos BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    model TEXT NOT NULL,
    endpoint TEXT NOT NULL,
    version BIGINT NOT NULL,
    UNIQUE (model, endpoint)
);

-- The gateway's pause (one row), shared by every server.
CREATE TABLE agl1_gateway (
    id BIGINT PRIMARY KEY CHECK (id = 0),
    paused BIGINT NOT NULL,
    retry_after_seconds BIGINT NOT NULL,
    reason TEXT,
    generation BIGINT NOT NULL
);
INSERT INTO agl1_gateway (id, paused, retry_after_seconds, reason, generation)
VALUES (0, 0, 5, NULL, 0);

-- Each server running the gateway: its calls in flight and the pause it applies.
CREATE TABLE agl1_replicas (
    server_id TEXT PRIMARY KEY,
    inflight BIGINT NOT NULL,
    generation_seen BIGINT NOT NULL,
    heartbeat BIGINT NOT NULL
);

-- Deleting rollouts and attempts keeps the counts exact.
CREATE FUNCTION status_uncounted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM bump_counter(TG_ARGV[0], -1);
    PERFORM bump_counter(TG_ARGV[0] || '.' || OLD.status, -1);
    RETURN NULL;
END;
$$;
CREATE TRIGGER rollouts_uncounted AFTER DELETE ON rollouts
    FOR EACH ROW EXECUTE FUNCTION status_uncounted('rollouts');
CREATE TRIGGER attempts_uncounted AFTER DELETE ON attempts
    FOR EACH ROW EXECUTE FUNCTION status_uncounted('attempts');
