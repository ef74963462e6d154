-- Indexes for the rollout filters of QueryRollouts (and the console's
-- Rollouts page) and for the aggregate reads of its Overview, so that
-- neither reads every rollout (src/store/sql/reads.rs, src/store/sql/overview.rs).
-- Each rollout index ends with `pos` (creation order): an equality on its
-- first column reads the matches in the default order.
--
-- Additive. The indexes are built in the migration's transaction, so
-- writes to rollouts and attempts wait while it runs (docs/upgrades.md).

CREATE INDEX rollouts_by_status ON rollouts (status, pos);
CREATE INDEX rollouts_by_mode ON rollouts (mode, pos);
CREATE INDEX rollouts_by_start ON rollouts (start_time, pos);
CREATE INDEX rollouts_by_resources ON rollouts (resources_id, pos);
-- Sorting by end time, absent ones last (the sort key of
-- src/store/sql/query.rs).
CREATE INDEX rollouts_by_end ON rollouts ((end_time IS NULL), end_time, pos);

-- Ended rollouts by status and end time (ties by id): the latest
-- failures. Rollouts that have not ended take no room.
CREATE INDEX rollouts_ended ON rollouts (status, end_time, rollout_id) WHERE end_time IS NOT NULL;

-- Attempts by their id alone (the console's search box).
CREATE INDEX attempts_by_id ON attempts (attempt_id);

-- The rollouts a worker ran (the `worker_id` filter).
CREATE INDEX attempts_by_worker ON attempts (worker_id, rollout_id) WHERE worker_id IS NOT NULL;

-- Rollouts created and ended per minute, for the activity of the last hour
-- (GetRolloutActivity): `minute` is the minute's first instant, `name`
-- `created` (by `start_time`) or the terminal status a rollout ended with
-- (by `end_time`, while it has that status). The write set's statement
-- counts its rollouts' changes here, to this connection's shard as it
-- does the status counters (src/store/sql/apply.rs), so the counts are
-- exact in the commit of every change and the read costs the window's
-- rows, not its rollouts; minutes older than the window are deleted by the
-- servers' periodic housekeeping.
CREATE TABLE rollout_minutes (
    minute BIGINT NOT NULL,
    name TEXT COLLATE "C" NOT NULL,
    shard INTEGER NOT NULL,
    value BIGINT NOT NULL,
    PRIMARY KEY (minute, name, shard)
);

-- The last two hours' rollouts, as they are now.
INSERT INTO rollout_minutes (minute, name, shard, value)
SELECT start_time - ((start_time % 60000000000) + 60000000000) % 60000000000, 'created', 0,
    COUNT(*)
FROM rollouts
WHERE start_time >= (CAST(extract(epoch FROM now()) AS BIGINT) - 7200) * 1000000000
GROUP BY 1;
INSERT INTO rollout_minutes (minute, name, shard, value)
SELECT end_time - ((end_time % 60000000000) + 60000000000) % 60000000000, status, 0, COUNT(*)
FROM rollouts
WHERE end_time >= (CAST(extract(epoch FROM now()) AS BIGINT) - 7200) * 1000000000
    AND status IN ('succeeded', 'failed', 'cancelled')
GROUP BY 1, 2;

-- Deleting rollouts (rare, see 0003) keeps the counts exact, as it keeps
-- the status counters.
CREATE FUNCTION rollout_minutes_uncounted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO rollout_minutes (minute, name, shard, value)
    SELECT m, n, pg_backend_pid(), -1 FROM (VALUES
        (OLD.start_time - ((OLD.start_time % 60000000000) + 60000000000) % 60000000000,
            'created'),
        (OLD.end_time - ((OLD.end_time % 60000000000) + 60000000000) % 60000000000,
            OLD.status)) AS d (m, n)
    WHERE n = 'created' OR (m IS NOT NULL AND n IN ('succeeded', 'failed', 'cancelled'))
    ON CONFLICT (minute, name, shard) DO UPDATE SET value = rollout_minutes.value - 1;
    RETURN NULL;
END;
$$;
CREATE TRIGGER rollout_minutes_deleted AFTER DELETE ON rollouts
    FOR EACH ROW EXECUTE FUNCTION rollout_minutes_uncounted();
