-- Span bodies are compressed with lz4 instead of pglz, where this
-- PostgreSQL has lz4 (built `--with-lz4`, version 14 or later; Debian's,
-- the official images and the managed services do); elsewhere nothing
-- changes.
--
-- A body larger than about 2 KB (the row no longer fits a quarter page) is
-- compressed when stored; LLM spans (prompts, completions, tool results)
-- are often that large. pglz spent most of the database's CPU on such
-- spans: with 4 KB spans, lz4 took the database's CPU per span from 36-43
-- to 23-31 us and ingest 1.23-1.24x higher on a 2-core machine
-- (docs/performance.md, "Span ingest on PostgreSQL"). Smaller bodies are
-- stored uncompressed either way. Only values written from now on use
-- lz4 (no rewrite); PostgreSQL reads both. An operator can make lz4 the
-- default for every column with `default_toast_compression = lz4`.
DO $$
BEGIN
    EXECUTE 'ALTER TABLE spans ALTER COLUMN body SET COMPRESSION lz4';
EXCEPTION WHEN feature_not_supported OR syntax_error THEN
    RAISE NOTICE 'lz4 is not available: span bodies keep the default compression';
END;
$$;
