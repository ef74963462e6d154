-- The reward timeline (crates/core/src/training.rs): the training
-- summary's numbers by the minute and the hour rollouts ended in, changed
-- by the write set's deltas in the commit of every change of what a
-- rollout counts for. Rollouts that ended before this migration are not
-- in it.

-- One row per (resolution, period, mode, reward bin): `resolution` is the
-- period's length in seconds (60 or 3600), `period_start` its first
-- instant in nanoseconds since the epoch; `rewarded` and `bin` as in
-- `training_summary`. `shard` is 0 on SQLite's one writer.
CREATE TABLE reward_timeline (
    resolution INTEGER NOT NULL,
    period_start INTEGER NOT NULL,
    mode TEXT NOT NULL,
    rewarded INTEGER NOT NULL,
    bin INTEGER NOT NULL,
    shard INTEGER NOT NULL DEFAULT 0,
    rollouts INTEGER NOT NULL,
    succeeded INTEGER NOT NULL,
    reward_micros INTEGER NOT NULL,
    PRIMARY KEY (resolution, period_start, mode, rewarded, bin, shard)
) WITHOUT ROWID;
