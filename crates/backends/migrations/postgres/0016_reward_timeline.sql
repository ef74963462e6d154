-- The reward timeline (crates/core/src/training.rs): the training
-- summary's numbers by the minute and the hour rollouts ended in, changed
-- by the write set's deltas in the statement of every change of what a
-- rollout counts for. Rollouts that ended before this migration are not
-- in it.

-- One row per (resolution, period, mode, reward bin) and connection shard,
-- as `training_summary` (folded into shard 0 by the housekeeping):
-- `resolution` is the period's length in seconds (60 or 3600),
-- `period_start` its first instant in nanoseconds since the epoch.
CREATE TABLE reward_timeline (
    resolution BIGINT NOT NULL,
    period_start BIGINT NOT NULL,
    mode TEXT COLLATE "C" NOT NULL,
    rewarded BIGINT NOT NULL,
    bin BIGINT NOT NULL,
    shard INTEGER NOT NULL DEFAULT pg_backend_pid(),
    rollouts BIGINT NOT NULL,
    succeeded BIGINT NOT NULL,
    reward_micros BIGINT NOT NULL,
    PRIMARY KEY (resolution, period_start, mode, rewarded, bin, shard)
);
