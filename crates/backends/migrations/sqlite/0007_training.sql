-- The training summary (crates/core/src/training.rs): each rollout's final
-- reward, and the summary's rows, which the write set's deltas change in
-- the commit of every change of what a rollout counts for.

-- `value` holds the reward's f64 bits.
CREATE TABLE rollout_rewards (
    rollout_id TEXT PRIMARY KEY,
    sequence_id INTEGER NOT NULL,
    value INTEGER NOT NULL
) WITHOUT ROWID;

-- One row per (resources version, mode, reward bin): `rewarded` 0 counts
-- the rollouts without a reward (`bin` 0), 1 those whose reward falls in
-- `bin` (the bits of the bin's f64). `shard` is 0 on SQLite's one writer.
CREATE TABLE training_summary (
    version TEXT NOT NULL,
    mode TEXT NOT NULL,
    rewarded INTEGER NOT NULL,
    bin INTEGER NOT NULL,
    shard INTEGER NOT NULL DEFAULT 0,
    rollouts INTEGER NOT NULL,
    succeeded INTEGER NOT NULL,
    reward_micros INTEGER NOT NULL,
    PRIMARY KEY (version, mode, rewarded, bin, shard)
) WITHOUT ROWID;
