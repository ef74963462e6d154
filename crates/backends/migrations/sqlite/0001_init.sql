-- The lightning-store schema. Times are integer nanoseconds since the Unix
-- epoch, JSON payloads are JSON text, and `pos` columns keep creation
-- (or arrival) order, which is every query's default order.

-- Marks the file as a lightning-store database ("LSTO"), so that opening a
-- foreign SQLite file is refused instead of adding tables to it.
PRAGMA application_id = 1280529487;

CREATE TABLE rollouts (
    pos INTEGER PRIMARY KEY,
    rollout_id TEXT NOT NULL UNIQUE,
    input TEXT NOT NULL,
    start_time INTEGER NOT NULL,
    end_time INTEGER,
    mode TEXT,
    resources_id TEXT,
    status TEXT NOT NULL,
    config TEXT NOT NULL,
    metadata TEXT NOT NULL,
    -- When the watchdog must next look at the rollout; NULL: never.
    watchdog_deadline INTEGER
);
CREATE INDEX rollouts_watchdog ON rollouts (watchdog_deadline, rollout_id)
    WHERE watchdog_deadline IS NOT NULL;

CREATE TABLE attempts (
    pos INTEGER PRIMARY KEY,
    rollout_id TEXT NOT NULL,
    attempt_id TEXT NOT NULL,
    sequence_id INTEGER NOT NULL,
    start_time INTEGER NOT NULL,
    end_time INTEGER,
    status TEXT NOT NULL,
    worker_id TEXT,
    last_heartbeat_time INTEGER,
    metadata TEXT NOT NULL,
    UNIQUE (rollout_id, attempt_id)
);
CREATE INDEX attempts_by_sequence ON attempts (rollout_id, sequence_id, pos);

-- The queue: a FIFO of rollout ids; positions only grow.
CREATE TABLE queue (
    pos INTEGER PRIMARY KEY AUTOINCREMENT,
    rollout_id TEXT NOT NULL UNIQUE
);

-- Per rollout: the span sequence counter (only grows, survives eviction),
-- the stored spans and their bytes, and whether retention deleted spans.
CREATE TABLE rollout_spans (
    rollout_id TEXT PRIMARY KEY,
    last_sequence_id INTEGER NOT NULL,
    spans INTEGER NOT NULL DEFAULT 0,
    span_bytes INTEGER NOT NULL DEFAULT 0,
    evicted INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
CREATE INDEX rollout_spans_stored ON rollout_spans (rollout_id) WHERE spans > 0;

CREATE TABLE spans (
    pos INTEGER PRIMARY KEY,
    rollout_id TEXT NOT NULL,
    attempt_id TEXT NOT NULL,
    span_id TEXT NOT NULL,
    sequence_id INTEGER NOT NULL,
    trace_id TEXT NOT NULL,
    parent_id TEXT,
    name TEXT NOT NULL,
    start_time INTEGER,
    end_time INTEGER,
    -- Accounted size (core::retention::span_size).
    size INTEGER NOT NULL,
    -- Status, attributes, events, links, contexts, resource, kind and scope as JSON.
    body TEXT NOT NULL,
    UNIQUE (rollout_id, attempt_id, span_id)
);
CREATE INDEX spans_by_sequence ON spans (rollout_id, sequence_id, pos);

CREATE TABLE resources (
    pos INTEGER PRIMARY KEY,
    resources_id TEXT NOT NULL UNIQUE,
    create_time INTEGER NOT NULL,
    update_time INTEGER NOT NULL,
    version INTEGER NOT NULL,
    resources TEXT NOT NULL
);

-- The most recently written resources snapshot (one row at most).
CREATE TABLE latest_resources (
    id INTEGER PRIMARY KEY CHECK (id = 0),
    resources_id TEXT NOT NULL
);

CREATE TABLE workers (
    pos INTEGER PRIMARY KEY,
    worker_id TEXT NOT NULL UNIQUE,
    status TEXT NOT NULL,
    heartbeat_stats TEXT NOT NULL,
    last_heartbeat_time INTEGER,
    last_dequeue_time INTEGER,
    last_busy_time INTEGER,
    last_idle_time INTEGER,
    current_rollout_id TEXT,
    current_attempt_id TEXT
);

-- The retained event history; `seq` is store-wide and gapless.
CREATE TABLE events (
    seq INTEGER PRIMARY KEY,
    time INTEGER NOT NULL,
    change TEXT NOT NULL
);

-- Exact counts for statistics. Triggers keep the entity counts; the store
-- keeps the span and eviction totals in the same transactions.
CREATE TABLE counters (
    name TEXT PRIMARY KEY,
    value INTEGER NOT NULL
) WITHOUT ROWID;
INSERT INTO counters (name, value) VALUES
    ('rollouts', 0), ('attempts', 0), ('resources', 0), ('workers', 0), ('queued', 0),
    ('spans', 0), ('span_bytes', 0),
    ('evicted_rollouts', 0), ('evicted_spans', 0), ('evicted_span_bytes', 0);

CREATE TRIGGER rollouts_counted AFTER INSERT ON rollouts BEGIN
    UPDATE counters SET value = value + 1 WHERE name = 'rollouts';
END;
CREATE TRIGGER attempts_counted AFTER INSERT ON attempts BEGIN
    UPDATE counters SET value = value + 1 WHERE name = 'attempts';
END;
CREATE TRIGGER resources_counted AFTER INSERT ON resources BEGIN
    UPDATE counters SET value = value + 1 WHERE name = 'resources';
END;
CREATE TRIGGER workers_counted AFTER INSERT ON workers BEGIN
    UPDATE counters SET value = value + 1 WHERE name = 'workers';
END;
CREATE TRIGGER queue_entered AFTER INSERT ON queue BEGIN
    UPDATE counters SET value = value + 1 WHERE name = 'queued';
END;
CREATE TRIGGER queue_left AFTER DELETE ON queue BEGIN
    UPDATE counters SET value = value - 1 WHERE name = 'queued';
END;
