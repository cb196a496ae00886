-- What keeping a run's changes left in its repo's repository, written once by the server when
-- the run ends: the commit the run started from, the last commit kept (NULL when nothing was
-- kept: then no branch was made), how many, and the names of the changes not kept (a JSON
-- list, at most 50, with their count). `runs diff` reads the run's changes between these two
-- commits, never through the branch, which a person may move or delete.
CREATE TABLE run_changes (
    run_id         TEXT NOT NULL PRIMARY KEY,
    repo           TEXT NOT NULL,
    start_commit   TEXT NOT NULL,
    tip_commit     TEXT,
    commits        BIGINT NOT NULL,
    not_kept       TEXT NOT NULL,
    not_kept_count BIGINT NOT NULL,
    kept_at        BIGINT NOT NULL
);
