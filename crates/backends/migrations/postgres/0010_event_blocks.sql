-- A transaction's events are written before it takes the event counter,
-- so the counter (the one row every transaction that records events
-- waits for) is held for a short, bounded time whatever the number of
-- events: a 30,000-rollout enqueue no longer stalls other servers'
-- dequeues while its 30,000 event rows are inserted.
--
-- Until now `append_events` updated the counter first and then inserted
-- the events at the numbers it handed out, so the counter stayed locked
-- through the whole insert (and the history's trim), until the commit.
-- Numbers must still be handed out under the counter's lock, in commit
-- order (src/store/sql/apply.rs), so a large transaction's events are
-- stored as a block: their rows go to `event_rows` under a block number
-- taken from a sequence (no lock), before the counter, and under the
-- counter one row of `events` numbers the whole block: its `seq` is the
-- block's last number and `n` its size, so event `k` of the block (from 1)
-- has the number `seq - n + k`. A transaction of at most 64 events still
-- inserts them into `events` under the counter, one row each, as before (a
-- bounded time; a second row per transaction would cost every small
-- transaction more than it saves).
--
-- Readers go through `events` in `seq` order, one row per event or per
-- block (src/store/postgres.rs, `EVENTS_AFTER`). The trim runs before the
-- counter too, on the numbers already committed, and removes whole blocks
-- with their rows; trimming transactions skip rows another one is
-- removing, so they never wait for each other. The history still keeps at
-- least `retention` events: a block is kept whole until its last event is
-- older than that, and a block of more than `retention` events keeps only
-- its last `retention` (`n` counts the events stored).
--
-- Rolling upgrades: replicas of the previous version read a block's row
-- as an event without a change and fail those reads (docs/upgrades.md).
CREATE TABLE event_rows (
    block BIGINT NOT NULL,
    k BIGINT NOT NULL,
    time BIGINT NOT NULL,
    change TEXT NOT NULL,
    PRIMARY KEY (block, k)
);

CREATE SEQUENCE event_block_ids;

-- A row of `events` is one event (`block` NULL, `n` 1, `time` and
-- `change` set) or a block of `n` events stored in `event_rows`.
ALTER TABLE events
    ALTER COLUMN time DROP NOT NULL,
    ALTER COLUMN change DROP NOT NULL,
    ADD COLUMN n BIGINT NOT NULL DEFAULT 1,
    ADD COLUMN block BIGINT;

-- Numbers `changes` (taken at `times`) after the last event, inserts and
-- announces them, trims the history to `retention` events when the numbers
-- cross a slice of it (an eighth), and returns the new last number. The
-- counter row is locked by its update until the transaction ends: numbers
-- are handed out in commit order, without gaps (see apply.rs). Everything
-- whose time grows with the number of events happens before that update.
CREATE OR REPLACE FUNCTION append_events(times BIGINT[], changes TEXT[], retention BIGINT)
RETURNS BIGINT LANGUAGE plpgsql AS $$
DECLARE
    added BIGINT := cardinality(changes);
    slice BIGINT := GREATEST(retention / 8, 1);
    committed BIGINT;
    kept BIGINT;
    block_id BIGINT;
    latest BIGINT;
BEGIN
    -- The last number committed so far (no lock): the trim removes only
    -- committed events, and keeps at least `retention` of them.
    SELECT last INTO committed FROM event_counter WHERE id = 0;
    IF (committed + added) / slice <> committed / slice AND committed + added > retention THEN
        WITH gone AS (
            DELETE FROM events WHERE seq IN (
                SELECT seq FROM events WHERE seq <= committed + added - retention
                FOR UPDATE SKIP LOCKED)
            RETURNING block)
        DELETE FROM event_rows WHERE block IN (SELECT block FROM gone);
    END IF;
    -- Delivered at commit, whenever it is sent.
    PERFORM pg_notify('lightning_store', '');
    IF added > 64 THEN
        -- A block keeps at most `retention` events, its last ones: the
        -- numbers before them are trimmed as they are handed out.
        kept := LEAST(added, GREATEST(retention, 1));
        block_id := nextval('event_block_ids');
        INSERT INTO event_rows (block, k, time, change)
        SELECT block_id, v.k - (added - kept), v.t, v.c
        FROM unnest(times, changes) WITH ORDINALITY AS v (t, c, k)
        WHERE v.k > added - kept;
        UPDATE event_counter SET last = last + added WHERE id = 0 RETURNING last INTO latest;
        INSERT INTO events (seq, n, block) VALUES (latest, kept, block_id);
    ELSE
        UPDATE event_counter SET last = last + added WHERE id = 0 RETURNING last INTO latest;
        INSERT INTO events (seq, time, change)
        SELECT latest - added + v.k, v.t, v.c
        FROM unnest(times, changes) WITH ORDINALITY AS v (t, c, k);
    END IF;
    RETURN latest;
END;
$$;
