-- The statements that travel with the COMMIT, as routines. That round trip
-- is one simple query (its values written as literals), which the database
-- parses, analyses and plans in full on every call; a routine's call is
-- short to parse and has nothing to plan, and PL/pgSQL prepares the
-- statements inside once per connection and keeps their plans
-- (src/store/sql/apply.rs). Additive: binaries of migration 0006 ignore
-- them.

-- Numbers `changes` (taken at `times`) after the last event, inserts and
-- announces them, trims the history to `retention` events when the numbers
-- cross a slice of it (an eighth), and returns the new last number. The
-- counter row is locked by its update until the transaction ends: numbers
-- are handed out in commit order, without gaps (see apply.rs).
CREATE FUNCTION append_events(times BIGINT[], changes TEXT[], retention BIGINT)
RETURNS BIGINT LANGUAGE plpgsql AS $$
DECLARE
    n BIGINT := cardinality(changes);
    latest BIGINT;
BEGIN
    UPDATE event_counter SET last = last + n WHERE id = 0 RETURNING last INTO latest;
    INSERT INTO events (seq, time, change)
    SELECT latest - n + v.k, v.t, v.c
    FROM unnest(times, changes) WITH ORDINALITY AS v (t, c, k);
    IF latest % GREATEST(retention / 8, 1) < n THEN
        DELETE FROM events WHERE seq <= latest - retention;
    END IF;
    PERFORM pg_notify('lightning_store', '');
    RETURN latest;
END;
$$;

-- Appends rollouts to agent-lightning 1.x's completion log, in order, at
-- the positions the counter row hands out (its lock orders the appends,
-- see 0003).
CREATE PROCEDURE append_completions(rollout_ids TEXT[]) LANGUAGE plpgsql AS $$
DECLARE
    n BIGINT := cardinality(rollout_ids);
    total_after BIGINT;
BEGIN
    UPDATE completion_counter SET total = total + n WHERE id = 0
    RETURNING total INTO total_after;
    INSERT INTO completions (seq, rollout_id)
    SELECT total_after - n + v.k - 1, v.r FROM unnest(rollout_ids) WITH ORDINALITY AS v (r, k);
END;
$$;

-- Waits until everything this connection committed is durable: called in
-- a transaction of its own (with the database's synchronous_commit), it
-- writes this connection's row of commit_barrier, and the commit record of
-- that write is flushed after every record logged before it
-- (src/store/postgres.rs, group commit).
CREATE PROCEDURE wait_durable() LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO commit_barrier (pid, commits) VALUES (pg_backend_pid(), 1)
    ON CONFLICT (pid) DO UPDATE SET commits = commit_barrier.commits + 1;
END;
$$;
