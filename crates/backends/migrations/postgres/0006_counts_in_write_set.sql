-- The status counts and the queue length are kept by the statements that
-- change them (src/store/sql/apply.rs: one counter upsert per write set,
-- from the rows' statuses before and after; the claim and the deletes count
-- the queue entries they remove), not by statement triggers: those ran as
-- four to six more statements per transaction, a third of all statements.
-- The counts already stored stay as they are: they were exact, and every
-- change from now on is counted by the statement that makes it. Deleting
-- rollouts and attempts keeps its row triggers (rare, see 0003), and so do
-- the first inserts of workers and resources (0001).
DROP TRIGGER rollouts_inserted ON rollouts;
DROP TRIGGER rollouts_updated ON rollouts;
DROP TRIGGER attempts_inserted ON attempts;
DROP TRIGGER attempts_updated ON attempts;
DROP TRIGGER queue_entered ON queue;
DROP TRIGGER queue_left ON queue;
DROP FUNCTION statuses_inserted();
DROP FUNCTION statuses_updated();
DROP FUNCTION rows_counted();
