-- The training rows agent-lightning 1.x rollouts give their trainer
-- (crates/core/src/training.rs, `RowsVerdict`): each judged rollout's
-- verdict, and in the summary's rows the rows given and, for rollouts that
-- gave none, the reasons why as a key column. Rollouts that ended before
-- this migration were not judged.

-- `reasons`: the bit mask of `NoRowsReason`s, 0 when the rollout gave rows.
CREATE TABLE rollout_rows_verdicts (
    rollout_id TEXT COLLATE "C" PRIMARY KEY,
    training_rows BIGINT NOT NULL,
    reasons BIGINT NOT NULL
);
-- The rollouts without rows (the rollout query's filter).
CREATE INDEX rollout_rows_verdicts_without_rows
    ON rollout_rows_verdicts (reasons) WHERE reasons <> 0;

-- The summary's key gains `reasons` (0 for rollouts that gave rows or were
-- not judged).
ALTER TABLE training_summary ADD COLUMN reasons BIGINT NOT NULL DEFAULT 0;
ALTER TABLE training_summary ALTER COLUMN reasons DROP DEFAULT;
ALTER TABLE training_summary ADD COLUMN training_rows BIGINT NOT NULL DEFAULT 0;
ALTER TABLE training_summary DROP CONSTRAINT training_summary_pkey;
ALTER TABLE training_summary ADD PRIMARY KEY (version, mode, rewarded, bin, reasons, shard);

ALTER TABLE reward_timeline ADD COLUMN training_rows BIGINT NOT NULL DEFAULT 0;
