-- The training summary (crates/core/src/training.rs): each rollout's final
-- reward, and the summary's rows, which the write set's deltas change in
-- the statement of every change of what a rollout counts for.

-- Keys compare by bytes (`COLLATE "C"`, migration 0009). `value` holds the
-- reward's f64 bits.
CREATE TABLE rollout_rewards (
    rollout_id TEXT COLLATE "C" PRIMARY KEY,
    sequence_id BIGINT NOT NULL,
    value BIGINT NOT NULL
);

-- One row per (resources version, mode, reward bin) and connection shard
-- (`pg_backend_pid()`, as the counters: concurrent commits do not queue on
-- a row; the server's housekeeping folds every shard into shard 0 on the
-- retention interval): `rewarded` 0 counts the rollouts without a reward (`bin` 0), 1
-- those whose reward falls in `bin` (the bits of the bin's f64).
CREATE TABLE training_summary (
    version TEXT COLLATE "C" NOT NULL,
    mode TEXT COLLATE "C" NOT NULL,
    rewarded BIGINT NOT NULL,
    bin BIGINT NOT NULL,
    shard INTEGER NOT NULL DEFAULT pg_backend_pid(),
    rollouts BIGINT NOT NULL,
    succeeded BIGINT NOT NULL,
    reward_micros BIGINT NOT NULL,
    PRIMARY KEY (version, mode, rewarded, bin, shard)
);
