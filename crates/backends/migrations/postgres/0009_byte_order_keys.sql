-- Identifiers and keys compare by bytes (`COLLATE "C"`), as they do on the
-- other backends (Rust `String` order in memory, `BINARY` in SQLite).
--
-- Before, every text column took the database's collation: ids sorted in
-- its locale's order (`ORDER BY rollout_id`, the watchdog's ties of equal
-- deadlines), which differs from the other backends for mixed-case and
-- non-ASCII ids, and every B-tree step on a key (span dedupe, lookups by
-- id, claims, joins) called the locale's comparison (`strcoll`, or ICU),
-- which costs far more than `memcmp` in locales like `en_US.UTF-8`.
-- Equality does not change: a deterministic collation compares equal only
-- what is byte-equal.
--
-- Keys (byte order): ids and the names used as keys (`*_id`, counter
-- names, idempotency keys and request digests, model names and endpoints,
-- server ids) and the enumerated values (statuses, modes, session states,
-- 1.x event types). User text that is only stored or matched keeps the
-- database's collation: JSON payloads (input, config, metadata, bodies,
-- resources, heartbeat stats, event changes, 1.x data, session attempts,
-- remembered rollout ids), span names, Kubernetes job names, error
-- messages, the gateway's pause reason. A new table declares its key
-- columns `COLLATE "C"` the same way (tests/integration/postgres_schema.rs checks
-- every text column of the schema against this list).
--
-- Changing a column's collation keeps the table's rows (no rewrite) and
-- rebuilds the indexes on the column.
--
-- The spans table also loses an index: it had three (the `pos` primary key,
-- the unique (rollout_id, attempt_id, span_id) that dedupes inserts, and
-- (rollout_id, sequence_id, pos) for reads in sequence order), and no
-- statement looks a span up by `pos` alone (reads, counts and eviction go
-- by rollout; `pos` only orders arrivals within a sequence id). The dedupe
-- key becomes the primary key and `pos` an unindexed identity column: one
-- B-tree insert less per span. The constraints go before the collation
-- changes, so that only the index that stays is rebuilt, and the key is
-- built once, in byte order.
ALTER TABLE spans DROP CONSTRAINT spans_pkey;
ALTER TABLE spans DROP CONSTRAINT spans_rollout_id_attempt_id_span_id_key;

ALTER TABLE rollouts
    ALTER COLUMN rollout_id TYPE TEXT COLLATE "C",
    ALTER COLUMN mode TYPE TEXT COLLATE "C",
    ALTER COLUMN resources_id TYPE TEXT COLLATE "C",
    ALTER COLUMN status TYPE TEXT COLLATE "C";
ALTER TABLE attempts
    ALTER COLUMN rollout_id TYPE TEXT COLLATE "C",
    ALTER COLUMN attempt_id TYPE TEXT COLLATE "C",
    ALTER COLUMN status TYPE TEXT COLLATE "C",
    ALTER COLUMN worker_id TYPE TEXT COLLATE "C";
ALTER TABLE queue
    ALTER COLUMN rollout_id TYPE TEXT COLLATE "C";
ALTER TABLE rollout_spans
    ALTER COLUMN rollout_id TYPE TEXT COLLATE "C";
ALTER TABLE spans
    ALTER COLUMN rollout_id TYPE TEXT COLLATE "C",
    ALTER COLUMN attempt_id TYPE TEXT COLLATE "C",
    ALTER COLUMN span_id TYPE TEXT COLLATE "C",
    ALTER COLUMN trace_id TYPE TEXT COLLATE "C",
    ALTER COLUMN parent_id TYPE TEXT COLLATE "C";
ALTER TABLE resources
    ALTER COLUMN resources_id TYPE TEXT COLLATE "C";
ALTER TABLE latest_resources
    ALTER COLUMN resources_id TYPE TEXT COLLATE "C";
ALTER TABLE workers
    ALTER COLUMN worker_id TYPE TEXT COLLATE "C",
    ALTER COLUMN status TYPE TEXT COLLATE "C",
    ALTER COLUMN current_rollout_id TYPE TEXT COLLATE "C",
    ALTER COLUMN current_attempt_id TYPE TEXT COLLATE "C";
ALTER TABLE counters
    ALTER COLUMN name TYPE TEXT COLLATE "C";
ALTER TABLE agl1_rollouts
    ALTER COLUMN rollout_id TYPE TEXT COLLATE "C",
    ALTER COLUMN last_attempt_id TYPE TEXT COLLATE "C";
ALTER TABLE agl1_events
    ALTER COLUMN rollout_id TYPE TEXT COLLATE "C",
    ALTER COLUMN attempt_id TYPE TEXT COLLATE "C",
    ALTER COLUMN event_type TYPE TEXT COLLATE "C",
    ALTER COLUMN idempotency_key TYPE TEXT COLLATE "C",
    ALTER COLUMN digest TYPE TEXT COLLATE "C";
ALTER TABLE completions
    ALTER COLUMN rollout_id TYPE TEXT COLLATE "C";
ALTER TABLE agl1_models
    ALTER COLUMN model TYPE TEXT COLLATE "C",
    ALTER COLUMN endpoint TYPE TEXT COLLATE "C";
ALTER TABLE agl1_replicas
    ALTER COLUMN server_id TYPE TEXT COLLATE "C";
ALTER TABLE worker_sessions
    ALTER COLUMN worker_id TYPE TEXT COLLATE "C",
    ALTER COLUMN server_id TYPE TEXT COLLATE "C",
    ALTER COLUMN state TYPE TEXT COLLATE "C";
ALTER TABLE request_ids
    ALTER COLUMN request_id TYPE TEXT COLLATE "C",
    ALTER COLUMN digest TYPE TEXT COLLATE "C";

ALTER TABLE spans ADD PRIMARY KEY (rollout_id, attempt_id, span_id);
