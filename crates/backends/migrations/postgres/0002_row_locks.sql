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

-- Status counts once per statement, not per row: a batch of N rollouts
-- costs a few counter updates instead of 3 N (the transition tables hold
-- the statement's rows). `pos` identifies a row across its old and new
-- versions.
DROP TRIGGER rollouts_counted ON rollouts;
DROP TRIGGER attempts_counted ON attempts;
DROP TRIGGER queue_counted ON queue;

CREATE FUNCTION statuses_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO counters (name, shard, value)
    SELECT name, pg_backend_pid(), n FROM (
        SELECT TG_ARGV[0] AS name, COUNT(*) AS n FROM new_rows
        UNION ALL
        SELECT TG_ARGV[0] || '.' || status, COUNT(*) FROM new_rows GROUP BY status
    ) AS c WHERE n <> 0
    ON CONFLICT (name, shard) DO UPDATE SET value = counters.value + excluded.value;
    RETURN NULL;
END;
$$;

CREATE FUNCTION statuses_updated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO counters (name, shard, value)
    SELECT name, pg_backend_pid(), SUM(n) FROM (
        SELECT TG_ARGV[0] || '.' || o.status AS name, -1 AS n
        FROM old_rows o JOIN new_rows r ON r.pos = o.pos WHERE o.status <> r.status
        UNION ALL
        SELECT TG_ARGV[0] || '.' || r.status, 1
        FROM old_rows o JOIN new_rows r ON r.pos = o.pos WHERE o.status <> r.status
    ) AS c GROUP BY name
    ON CONFLICT (name, shard) DO UPDATE SET value = counters.value + excluded.value;
    RETURN NULL;
END;
$$;

CREATE FUNCTION rows_counted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        PERFORM bump_counter(TG_ARGV[0], (SELECT COUNT(*) FROM new_rows));
    ELSE
        PERFORM bump_counter(TG_ARGV[0], -(SELECT COUNT(*) FROM old_rows));
    END IF;
    RETURN NULL;
END;
$$;

CREATE TRIGGER rollouts_inserted AFTER INSERT ON rollouts
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION statuses_inserted('rollouts');
CREATE TRIGGER rollouts_updated AFTER UPDATE ON rollouts
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION statuses_updated('rollouts');
CREATE TRIGGER attempts_inserted AFTER INSERT ON attempts
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION statuses_inserted('attempts');
CREATE TRIGGER attempts_updated AFTER UPDATE ON attempts
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION statuses_updated('attempts');
CREATE TRIGGER queue_entered AFTER INSERT ON queue
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION rows_counted('queued');
CREATE TRIGGER queue_left AFTER DELETE ON queue
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION rows_counted('queued');
