-- Client request ids of enqueues (idempotency keys): a retry under the same
-- id returns the rollouts the first call created (JSON text: an array of
-- rollout ids) instead of enqueuing again; `digest` tells another request
-- under the same id apart. Kept until `expires_at` (nanoseconds since the
-- epoch), then removed by the retention task.
CREATE TABLE request_ids (
    request_id TEXT PRIMARY KEY,
    digest TEXT NOT NULL,
    rollout_ids TEXT NOT NULL,
    expires_at INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX request_ids_expiry ON request_ids (expires_at);
