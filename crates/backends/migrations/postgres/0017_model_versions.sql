-- The model version that served each agent-lightning 1.x rollout's first
-- model call (crates/core/src/training.rs, `PolicyVersion`): a rollout
-- without a resources id counts under it in the training summary, whose
-- `version` column then holds it after the control character U+0001 (no
-- resources id holds one). The first version written stays.
CREATE TABLE rollout_model_versions (
    rollout_id TEXT COLLATE "C" PRIMARY KEY,
    model_version BIGINT NOT NULL
);
-- The rollouts of a model version (the rollout query's filter).
CREATE INDEX rollout_model_versions_by_version
    ON rollout_model_versions (model_version, rollout_id);
