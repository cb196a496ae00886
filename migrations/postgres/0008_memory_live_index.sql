-- The memory context block reads each of a request's scopes newest first, live records only,
-- and leaves out a record some live record supersedes. One partial index per question: the
-- live records of a scope in recency order (a scope's top rows are read, never all of it),
-- and the records that supersede a given one.
-- `supersedes` holds record ids, compared with `id` (COLLATE "C"): in the same collation, so
-- the probe `supersedes = id` can use its index.
DROP INDEX memory_scope;
ALTER TABLE memory_records ALTER COLUMN supersedes TYPE TEXT COLLATE "C";
CREATE INDEX memory_live_scope ON memory_records (scope_key, created_at DESC, id DESC)
    WHERE forgotten_at IS NULL;
CREATE INDEX memory_supersedes ON memory_records (supersedes)
    WHERE supersedes IS NOT NULL;
