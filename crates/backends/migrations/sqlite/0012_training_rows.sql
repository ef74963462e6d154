-- The training rows agent-lightning 1.x rollouts give their trainer
-- (crates/core/src/training.rs, `RowsVerdict`): each judged rollout's
-- verdict, and in the summary's rows the rows given and, for rollouts that
-- gave none, the reasons why as a key column. Rollouts that ended before
-- this migration were not judged.

-- `reasons`: the bit mask of `NoRowsReason`s, 0 when the rollout gave rows.
CREATE TABLE rollout_rows_verdicts (
    rollout_id TEXT PRIMARY KEY,
    training_rows INTEGER NOT NULL,
    reasons INTEGER NOT NULL
) WITHOUT ROWID;
-- The rollouts without rows (the rollout query's filter).
CREATE INDEX rollout_rows_verdicts_without_rows
    ON rollout_rows_verdicts (reasons) WHERE reasons <> 0;

-- The summary's key gains `reasons` (0 for rollouts that gave rows or were
-- not judged): SQLite changes a primary key by copying the table.
CREATE TABLE training_summary_keyed_by_reasons (
    version TEXT NOT NULL,
    mode TEXT NOT NULL,
    rewarded INTEGER NOT NULL,
    bin INTEGER NOT NULL,
    reasons INTEGER NOT NULL,
    shard INTEGER NOT NULL DEFAULT 0,
    rollouts INTEGER NOT NULL,
    succeeded INTEGER NOT NULL,
    reward_micros INTEGER NOT NULL,
    training_rows INTEGER NOT NULL,
    PRIMARY KEY (version, mode, rewarded, bin, reasons, shard)
) WITHOUT ROWID;
INSERT INTO training_summary_keyed_by_reasons
    SELECT version, mode, rewarded, bin, 0, shard, rollouts, succeeded, reward_micros, 0
    FROM training_summary;
DROP TABLE training_summary;
ALTER TABLE training_summary_keyed_by_reasons RENAME TO training_summary;

ALTER TABLE reward_timeline ADD COLUMN training_rows INTEGER NOT NULL DEFAULT 0;
