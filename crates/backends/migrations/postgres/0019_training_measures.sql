-- What counted rollouts measure besides their reward
-- (crates/core/src/training/measure.rs): one row per (version, mode,
-- measure, bin) and connection shard, changed by the write set's deltas in
-- the statement of every change of what a rollout counts for and folded
-- into shard 0 by the housekeeping, as `training_summary`. Rollouts that
-- ended before this migration are not in it.

-- `measure`: the measure's code (1: a rollout's duration in
-- milliseconds); `bin`: the bits of the f64 the values are rounded to (two
-- significant digits); `measured`: the values in the bin; `total`: their
-- sum.
CREATE TABLE training_measures (
    version TEXT COLLATE "C" NOT NULL,
    mode TEXT COLLATE "C" NOT NULL,
    measure BIGINT NOT NULL,
    bin BIGINT NOT NULL,
    shard INTEGER NOT NULL DEFAULT pg_backend_pid(),
    measured BIGINT NOT NULL,
    total BIGINT NOT NULL,
    PRIMARY KEY (version, mode, measure, bin, shard)
);
