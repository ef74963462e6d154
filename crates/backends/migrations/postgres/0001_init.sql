-- The lightning-store schema on PostgreSQL: the SQLite schema
-- (migrations/sqlite) in PostgreSQL's types. Times are integer nanoseconds
-- since the Unix epoch, JSON payloads are JSON text, and `pos` columns keep
-- creation (or arrival) order, which is every query's default order.

CREATE TABLE rollouts (
    pos BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    rollout_id TEXT NOT NULL UNIQUE,
    input TEXT NOT NULL,
    start_time BIGINT NOT NULL,
    end_time BIGINT,
    mode TEXT,
    resources_id TEXT,
    status TEXT NOT NULL,
    config TEXT NOT NULL,
    metadata TEXT NOT NULL,
    -- When the watchdog must next look at the rollout; NULL: never.
    watchdog_deadline BIGINT
);
CREATE INDEX rollouts_watchdog ON rollouts (watchdog_deadline, rollout_id)
    WHERE watchdog_deadline IS NOT NULL;

CREATE TABLE attempts (
    pos BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    rollout_id TEXT NOT NULL,
    attempt_id TEXT NOT NULL,
    sequence_id BIGINT NOT NULL,
    start_time BIGINT NOT NULL,
    end_time BIGINT,
    status TEXT NOT NULL,
    worker_id TEXT,
    last_heartbeat_time BIGINT,
    metadata TEXT NOT NULL,
    UNIQUE (rollout_id, attempt_id)
);
CREATE INDEX attempts_by_sequence ON attempts (rollout_id, sequence_id, pos);

-- The queue: a FIFO of rollout ids; positions only grow.
CREATE TABLE queue (
    pos BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    rollout_id TEXT NOT NULL UNIQUE,
    enqueue_time BIGINT
);

-- Per rollout: the span sequence counter (only grows, survives eviction),
-- the stored spans and their bytes, and whether retention deleted spans.
CREATE TABLE rollout_spans (
    rollout_id TEXT PRIMARY KEY,
    last_sequence_id BIGINT NOT NULL,
    spans BIGINT NOT NULL DEFAULT 0,
    span_bytes BIGINT NOT NULL DEFAULT 0,
    evicted BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX rollout_spans_stored ON rollout_spans (rollout_id) WHERE spans > 0;

CREATE TABLE spans (
    pos BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    rollout_id TEXT NOT NULL,
    attempt_id TEXT NOT NULL,
    span_id TEXT NOT NULL,
    sequence_id BIGINT NOT NULL,
    trace_id TEXT NOT NULL,
    parent_id TEXT,
    name TEXT NOT NULL,
    start_time BIGINT,
    end_time BIGINT,
    -- Accounted size (core::retention::span_size).
    size BIGINT NOT NULL,
    -- Status, attributes, events, links, contexts, resource, kind and scope as JSON.
    body TEXT NOT NULL,
    UNIQUE (rollout_id, attempt_id, span_id)
);
CREATE INDEX spans_by_sequence ON spans (rollout_id, sequence_id, pos);

CREATE TABLE resources (
    pos BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    resources_id TEXT NOT NULL UNIQUE,
    create_time BIGINT NOT NULL,
    update_time BIGINT NOT NULL,
    version BIGINT NOT NULL,
    resources TEXT NOT NULL
);

-- The most recently written resources snapshot (one row at most).
CREATE TABLE latest_resources (
    id BIGINT PRIMARY KEY CHECK (id = 0),
    resources_id TEXT NOT NULL
);

CREATE TABLE workers (
    pos BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    worker_id TEXT NOT NULL UNIQUE,
    status TEXT NOT NULL,
    heartbeat_stats TEXT NOT NULL,
    last_heartbeat_time BIGINT,
    last_dequeue_time BIGINT,
    last_busy_time BIGINT,
    last_idle_time BIGINT,
    current_rollout_id TEXT,
    current_attempt_id TEXT
);

-- The retained event history; `seq` is store-wide and gapless (every
-- transaction holds the store lock, so sequence numbers follow commit order).
CREATE TABLE events (
    seq BIGINT PRIMARY KEY,
    time BIGINT NOT NULL,
    change TEXT NOT NULL
);

-- Exact counts for statistics. Triggers keep the entity and per-status
-- counts; the store keeps the span and eviction totals in the same
-- transactions.
CREATE TABLE counters (
    name TEXT PRIMARY KEY,
    value BIGINT NOT NULL
);
INSERT INTO counters (name, value) VALUES
    ('rollouts', 0), ('attempts', 0), ('resources', 0), ('workers', 0), ('queued', 0),
    ('spans', 0), ('span_bytes', 0),
    ('evicted_rollouts', 0), ('evicted_spans', 0), ('evicted_span_bytes', 0);
INSERT INTO counters (name, value)
SELECT 'rollouts.' || status, 0
FROM unnest(ARRAY['queuing', 'preparing', 'running', 'failed', 'succeeded', 'cancelled',
    'requeuing']) AS status;
INSERT INTO counters (name, value)
SELECT 'attempts.' || status, 0
FROM unnest(ARRAY['preparing', 'running', 'failed', 'succeeded', 'unresponsive',
    'timeout']) AS status;

-- Adds `delta` to the counter `name`.
CREATE FUNCTION bump_counter(counter TEXT, delta BIGINT) RETURNS VOID
LANGUAGE SQL AS $$
    UPDATE counters SET value = value + delta WHERE name = counter;
$$;

-- Keeps the total (TG_ARGV[0], e.g. `rollouts`) and the per-status counts
-- (`rollouts.queuing`, ...) of a table with a `status` column.
CREATE FUNCTION status_counted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        PERFORM bump_counter(TG_ARGV[0], 1);
        PERFORM bump_counter(TG_ARGV[0] || '.' || NEW.status, 1);
    ELSIF OLD.status <> NEW.status THEN
        PERFORM bump_counter(TG_ARGV[0] || '.' || OLD.status, -1);
        PERFORM bump_counter(TG_ARGV[0] || '.' || NEW.status, 1);
    END IF;
    RETURN NULL;
END;
$$;
CREATE TRIGGER rollouts_counted AFTER INSERT OR UPDATE OF status ON rollouts
    FOR EACH ROW EXECUTE FUNCTION status_counted('rollouts');
CREATE TRIGGER attempts_counted AFTER INSERT OR UPDATE OF status ON attempts
    FOR EACH ROW EXECUTE FUNCTION status_counted('attempts');

CREATE FUNCTION entity_counted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM bump_counter(TG_ARGV[0], CASE TG_OP WHEN 'INSERT' THEN 1 ELSE -1 END);
    RETURN NULL;
END;
$$;
CREATE TRIGGER resources_counted AFTER INSERT ON resources
    FOR EACH ROW EXECUTE FUNCTION entity_counted('resources');
CREATE TRIGGER workers_counted AFTER INSERT ON workers
    FOR EACH ROW EXECUTE FUNCTION entity_counted('workers');
CREATE TRIGGER queue_counted AFTER INSERT OR DELETE ON queue
    FOR EACH ROW EXECUTE FUNCTION entity_counted('queued');
