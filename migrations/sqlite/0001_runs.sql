-- Runs, their events and friction. The channel visibility stamp arrives in 0002, so a database
-- created before the stamp is a real, testable state.
-- Times are microseconds since the Unix epoch (UTC). Repo slugs are stored lower-cased.
CREATE TABLE runs (
    id                    TEXT PRIMARY KEY NOT NULL,
    surface               TEXT NOT NULL,
    channel_id            TEXT NOT NULL,
    thread_key            TEXT,
    user_id               TEXT NOT NULL,
    agent                 TEXT NOT NULL,
    repo                  TEXT,
    status                TEXT NOT NULL,
    request               TEXT NOT NULL,
    answer                TEXT,
    error                 TEXT,
    created_at            INTEGER NOT NULL,
    finished_at           INTEGER,
    capability_token_hash TEXT,
    agent_token_hash      TEXT,
    owner                 TEXT,
    event_seq             INTEGER NOT NULL DEFAULT 0
);

-- Every list branch reads one of these newest-first, like the page.
CREATE INDEX runs_page         ON runs (created_at DESC, id DESC);
CREATE INDEX runs_channel_page ON runs (channel_id, created_at DESC, id DESC);
CREATE INDEX runs_user_page    ON runs (user_id, created_at DESC, id DESC);
CREATE INDEX runs_repo_page    ON runs (repo, created_at DESC, id DESC);
-- Recovery finds the live runs without a scan.
CREATE INDEX runs_live ON runs (owner) WHERE status IN ('queued', 'running');

CREATE TABLE run_events (
    run_id TEXT NOT NULL REFERENCES runs (id),
    seq    INTEGER NOT NULL,
    at     INTEGER NOT NULL,
    kind   TEXT NOT NULL,
    body   TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
);

CREATE TABLE friction (
    id     INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id TEXT NOT NULL REFERENCES runs (id),
    at     INTEGER NOT NULL,
    kind   TEXT NOT NULL,
    detail TEXT NOT NULL
);
CREATE INDEX friction_at  ON friction (at);
CREATE INDEX friction_run ON friction (run_id, at);
