-- What counted rollouts measure besides their reward
-- (crates/core/src/training/measure.rs): one row per (version, mode,
-- measure, bin), changed by the write set's deltas in the commit of every
-- change of what a rollout counts for, as `training_summary`. Rollouts
-- that ended before this migration are not in it.

-- `measure`: the measure's code (1: a rollout's duration in
-- milliseconds); `bin`: the bits of the f64 the values are rounded to (two
-- significant digits); `measured`: the values in the bin; `total`: their
-- sum. `shard` is 0 on SQLite's one writer.
CREATE TABLE training_measures (
    version TEXT NOT NULL,
    mode TEXT NOT NULL,
    measure INTEGER NOT NULL,
    bin INTEGER NOT NULL,
    shard INTEGER NOT NULL DEFAULT 0,
    measured INTEGER NOT NULL,
    total INTEGER NOT NULL,
    PRIMARY KEY (version, mode, measure, bin, shard)
) WITHOUT ROWID;
