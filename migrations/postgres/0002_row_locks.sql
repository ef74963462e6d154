-- Row locks instead of the store lock: what concurrent transactions share
-- must not be one hot row.
--
-- Event numbers come from one counter row, updated last before COMMIT (see
-- src/store/sql/apply.rs for why that keeps them gapless and in commit order).
CREATE TABLE event_counter (
    id BIGINT PRIMARY KEY CHECK (id = 0),
    last BIGINT NOT NULL
);
INSERT INTO event_counter (id, last) SELECT 0, COALESCE(MAX(seq), 0) FROM events;

-- Counters are sharded by connection: each adds to the rows of its own
-- backend process, which no other open connection touches, so concurrent
-- transactions never wait for (or deadlock on) a counter. Readers sum the
-- shards; shards of closed connections are folded into shard 0 when a
-- server starts.
ALTER TABLE counters ADD COLUMN shard INTEGER NOT NULL DEFAULT 0;
ALTER TABLE counters DROP CONSTRAINT counters_pkey;
ALTER TABLE counters ADD PRIMARY KEY (name, shard);

CREATE OR REPLACE FUNCTION bump_counter(counter TEXT, delta BIGINT) RETURNS VOID
LANGUAGE SQL AS $$
    INSERT INTO counters (name, shard, value) VALUES (counter, pg_backend_pid(), delta)
    ON CONFLICT (name, shard) DO UPDATE SET value = counters.value + excluded.value;
$$;

-- One row per connection, written after each commit to wait for its
-- durability (see src/store/postgres.rs, COMMIT).
CREATE TABLE commit_barrier (
    pid INTEGER PRIMARY KEY,
    commits BIGINT NOT NULL
);
