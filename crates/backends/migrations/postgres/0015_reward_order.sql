-- Rollouts filter and sort by their final reward (`reward_min`,
-- `reward_max`, `sort_by` `reward`): `rollout_rewards.value` becomes a key
-- that orders as the rewards do, the f64 bits with the 63 bits after the
-- sign flipped for a negative reward (`reward_key` in sql/training.rs),
-- indexed.
UPDATE rollout_rewards
SET value = value # 9223372036854775807
WHERE value < 0;

CREATE INDEX rollout_rewards_by_value ON rollout_rewards (value);
