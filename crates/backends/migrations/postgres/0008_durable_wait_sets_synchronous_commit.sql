-- The servers' connections commit asynchronously for their whole session
-- (`synchronous_commit = off` among the connection options), no longer per
-- transaction (`SET LOCAL` in every BEGIN: one statement less per
-- transaction). The durability wait therefore sets its own level: its
-- commit is flushed to disk (and to the synchronous standbys, when
-- `synchronous_standby_names` names any) before it returns, and with it
-- every record logged before (src/store/postgres/conn.rs). Before, it
-- inherited the database's setting, so a database configured with
-- `synchronous_commit = off` or `local` acknowledged writes that were not
-- durable (or not on the standbys). Binaries of migration 0007 call it
-- the same way.
CREATE OR REPLACE PROCEDURE wait_durable() LANGUAGE plpgsql AS $$
BEGIN
    -- Until the end of the caller's transaction, i.e. through its commit.
    SET LOCAL synchronous_commit TO on;
    INSERT INTO commit_barrier (pid, commits) VALUES (pg_backend_pid(), 1)
    ON CONFLICT (pid) DO UPDATE SET commits = commit_barrier.commits + 1;
END;
$$;
