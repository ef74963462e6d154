-- Rollouts by resources version and mode: a version's rollouts (the
-- Rollouts page's resources filter, the Training page's links,
-- `CompareVersions`) are read from the index rather than found among
-- every rollout of their status. Status is left out of the key, so that a
-- rollout's transitions do not move its entry: only a new rollout (or a
-- change of its version or mode) writes it.
CREATE INDEX rollouts_by_version ON rollouts (resources_id, mode);
