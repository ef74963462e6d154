-- Indexes for the rollout filters of QueryRollouts (and the console's
-- Rollouts page) and for the aggregate reads of its Overview, so that
-- neither reads every rollout (src/store/sql/reads.rs, src/store/sql/overview.rs).
-- Every index ends with the rowid (`pos`, creation order): an equality on
-- its first column reads the matches in the default order.
--
-- Fewer than PostgreSQL's: the filters by mode, start time and resources
-- version, and an attempt id alone, read the table here (tens of
-- milliseconds on 100,000 rollouts), since each index costs every write
-- (docs/performance.md#indexes-and-activity-counts-for-the-read-model).

CREATE INDEX rollouts_by_status ON rollouts (status);
-- Sorting by end time, absent ones last (the sort key of
-- src/store/sql/query.rs).
CREATE INDEX rollouts_by_end ON rollouts ((end_time IS NULL), end_time);

-- Ended rollouts by status and end time (ties by id): the latest
-- failures. Rollouts that have not ended take no room.
CREATE INDEX rollouts_ended ON rollouts (status, end_time, rollout_id) WHERE end_time IS NOT NULL;

-- The rollouts a worker ran (the `worker_id` filter).
CREATE INDEX attempts_by_worker ON attempts (worker_id, rollout_id) WHERE worker_id IS NOT NULL;

-- Rollouts created and ended per minute, for the activity of the last hour
-- (GetRolloutActivity): `minute` is the minute's first instant, `name`
-- `created` (by `start_time`) or the terminal status a rollout ended with
-- (by `end_time`, while it has that status). The triggers keep the counts
-- exact in the commit of every change, so the read costs the window's
-- rows, not its rollouts; minutes older than the window are deleted by the
-- server's periodic housekeeping.
CREATE TABLE rollout_minutes (
    minute INTEGER NOT NULL,
    name TEXT NOT NULL,
    value INTEGER NOT NULL,
    PRIMARY KEY (minute, name)
) WITHOUT ROWID;

-- The last two hours' rollouts, as they are now.
INSERT INTO rollout_minutes (minute, name, value)
SELECT start_time - ((start_time % 60000000000) + 60000000000) % 60000000000, 'created', COUNT(*)
FROM rollouts WHERE start_time >= (unixepoch() - 7200) * 1000000000
GROUP BY 1;
INSERT INTO rollout_minutes (minute, name, value)
SELECT end_time - ((end_time % 60000000000) + 60000000000) % 60000000000, status, COUNT(*)
FROM rollouts WHERE end_time >= (unixepoch() - 7200) * 1000000000
    AND status IN ('succeeded', 'failed', 'cancelled')
GROUP BY 1, 2;

CREATE TRIGGER rollout_minutes_created AFTER INSERT ON rollouts BEGIN
    INSERT INTO rollout_minutes (minute, name, value)
    VALUES (NEW.start_time - ((NEW.start_time % 60000000000) + 60000000000) % 60000000000,
        'created', 1)
    ON CONFLICT (minute, name) DO UPDATE SET value = value + 1;
    INSERT INTO rollout_minutes (minute, name, value)
    SELECT NEW.end_time - ((NEW.end_time % 60000000000) + 60000000000) % 60000000000,
        NEW.status, 1
    WHERE NEW.end_time IS NOT NULL AND NEW.status IN ('succeeded', 'failed', 'cancelled')
    ON CONFLICT (minute, name) DO UPDATE SET value = value + 1;
END;

CREATE TRIGGER rollout_minutes_ended AFTER UPDATE OF status, end_time ON rollouts
WHEN OLD.status IS NOT NEW.status OR OLD.end_time IS NOT NEW.end_time BEGIN
    INSERT INTO rollout_minutes (minute, name, value)
    SELECT OLD.end_time - ((OLD.end_time % 60000000000) + 60000000000) % 60000000000,
        OLD.status, -1
    WHERE OLD.end_time IS NOT NULL AND OLD.status IN ('succeeded', 'failed', 'cancelled')
    ON CONFLICT (minute, name) DO UPDATE SET value = value - 1;
    INSERT INTO rollout_minutes (minute, name, value)
    SELECT NEW.end_time - ((NEW.end_time % 60000000000) + 60000000000) % 60000000000,
        NEW.status, 1
    WHERE NEW.end_time IS NOT NULL AND NEW.status IN ('succeeded', 'failed', 'cancelled')
    ON CONFLICT (minute, name) DO UPDATE SET value = value + 1;
END;

CREATE TRIGGER rollout_minutes_deleted AFTER DELETE ON rollouts BEGIN
    INSERT INTO rollout_minutes (minute, name, value)
    VALUES (OLD.start_time - ((OLD.start_time % 60000000000) + 60000000000) % 60000000000,
        'created', -1)
    ON CONFLICT (minute, name) DO UPDATE SET value = value - 1;
    INSERT INTO rollout_minutes (minute, name, value)
    SELECT OLD.end_time - ((OLD.end_time % 60000000000) + 60000000000) % 60000000000,
        OLD.status, -1
    WHERE OLD.end_time IS NOT NULL AND OLD.status IN ('succeeded', 'failed', 'cancelled')
    ON CONFLICT (minute, name) DO UPDATE SET value = value - 1;
END;
