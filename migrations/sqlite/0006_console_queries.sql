-- Indexes for the rollout filters of QueryRollouts (and the console's
-- Rollouts page) and for the aggregate reads of its Overview, so that
-- neither reads every rollout (src/store/sql/reads.rs, src/store/sql/overview.rs).
-- Every index ends with the rowid (`pos`, creation order): an equality on
-- its first column reads the matches in the default order.

CREATE INDEX rollouts_by_status ON rollouts (status);
CREATE INDEX rollouts_by_mode ON rollouts (mode);
CREATE INDEX rollouts_by_start ON rollouts (start_time);
CREATE INDEX rollouts_by_resources ON rollouts (resources_id);

-- Ended rollouts by status and end time (ties by id): rollouts ended per
-- minute, the latest failures. Rollouts that have not ended take no room.
CREATE INDEX rollouts_ended ON rollouts (status, end_time, rollout_id) WHERE end_time IS NOT NULL;

-- Attempts by their id alone (the console's search box).
CREATE INDEX attempts_by_id ON attempts (attempt_id);

-- The rollouts a worker ran (the `worker_id` filter).
CREATE INDEX attempts_by_worker ON attempts (worker_id, rollout_id) WHERE worker_id IS NOT NULL;
