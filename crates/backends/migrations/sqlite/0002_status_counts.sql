-- Per-status counts for statistics and metrics, and the time each queued
-- rollout entered the queue (for the age of the oldest queued rollout).

-- Rows queued before this migration keep NULL: they count from the
-- rollout's creation.
ALTER TABLE queue ADD COLUMN enqueue_time INTEGER;

WITH statuses (status) AS (
    VALUES ('queuing'), ('preparing'), ('running'), ('failed'), ('succeeded'),
        ('cancelled'), ('requeuing')
)
INSERT INTO counters (name, value)
SELECT 'rollouts.' || s.status, (SELECT COUNT(*) FROM rollouts r WHERE r.status = s.status)
FROM statuses s;

WITH statuses (status) AS (
    VALUES ('preparing'), ('running'), ('failed'), ('succeeded'), ('unresponsive'),
        ('timeout')
)
INSERT INTO counters (name, value)
SELECT 'attempts.' || s.status, (SELECT COUNT(*) FROM attempts a WHERE a.status = s.status)
FROM statuses s;

CREATE TRIGGER rollout_status_counted AFTER INSERT ON rollouts BEGIN
    UPDATE counters SET value = value + 1 WHERE name = 'rollouts.' || NEW.status;
END;
CREATE TRIGGER rollout_status_changed AFTER UPDATE OF status ON rollouts
WHEN OLD.status <> NEW.status BEGIN
    UPDATE counters SET value = value - 1 WHERE name = 'rollouts.' || OLD.status;
    UPDATE counters SET value = value + 1 WHERE name = 'rollouts.' || NEW.status;
END;
CREATE TRIGGER attempt_status_counted AFTER INSERT ON attempts BEGIN
    UPDATE counters SET value = value + 1 WHERE name = 'attempts.' || NEW.status;
END;
CREATE TRIGGER attempt_status_changed AFTER UPDATE OF status ON attempts
WHEN OLD.status <> NEW.status BEGIN
    UPDATE counters SET value = value - 1 WHERE name = 'attempts.' || OLD.status;
    UPDATE counters SET value = value + 1 WHERE name = 'attempts.' || NEW.status;
END;
