-- The catalogue of the SQLite backend's namespaces (`<database>.namespaces/
-- catalogue.db`): a row per namespace, the default one (id 0, the database
-- file itself) included. Times are integer nanoseconds since the Unix epoch.
-- Applied by `sqlite/catalogue.rs`, which counts the migrations applied in
-- `PRAGMA user_version`.

CREATE TABLE namespaces (
    -- AUTOINCREMENT: an id is never reused, so a deleted namespace's file
    -- (`<id>.db`) is never taken for a new one's.
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    name TEXT NOT NULL,
    created INTEGER NOT NULL,
    -- The quotas; NULL: no limit.
    max_queued_rollouts INTEGER,
    max_spans INTEGER,
    max_span_bytes INTEGER,
    -- 1: the namespace has a retention policy of its own (the two columns
    -- below, NULL: no limit); 0: the server's.
    has_retention INTEGER NOT NULL DEFAULT 0,
    retention_max_age_ms INTEGER,
    retention_max_bytes INTEGER,
    -- 1: deleted, its file not purged yet.
    deleted INTEGER NOT NULL DEFAULT 0
);

CREATE UNIQUE INDEX namespaces_name ON namespaces (name) WHERE deleted = 0;
