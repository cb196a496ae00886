CREATE TABLE memory_records (
    id           TEXT COLLATE "C" PRIMARY KEY NOT NULL,
    scope_kind   TEXT NOT NULL CHECK (scope_kind IN ('org', 'user', 'channel', 'repo')),
    scope_key    TEXT NOT NULL,
    text         TEXT NOT NULL,
    supersedes   TEXT REFERENCES memory_records (id),
    source_run   TEXT,
    created_at   BIGINT NOT NULL,
    forgotten_at BIGINT
);
CREATE INDEX memory_scope ON memory_records (scope_key, created_at DESC);

CREATE TABLE config_values (
    tier       TEXT NOT NULL CHECK (tier IN ('org', 'channel', 'user')),
    tier_id    TEXT NOT NULL,
    key        TEXT NOT NULL,
    value      TEXT NOT NULL,
    updated_by TEXT NOT NULL,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (tier, tier_id, key)
);

CREATE TABLE schedule_firings (
    name     TEXT NOT NULL,
    slot     BIGINT NOT NULL,
    fired_at BIGINT NOT NULL,
    status   TEXT NOT NULL,
    run_id   TEXT,
    detail   TEXT,
    UNIQUE (name, slot)
);

CREATE TABLE slack_events (
    event_id    TEXT PRIMARY KEY NOT NULL,
    received_at BIGINT NOT NULL
);

-- Each replica's heartbeat lease: runs owned by a replica whose lease expired are tombstoned.
CREATE TABLE replicas (
    id           TEXT COLLATE "C" PRIMARY KEY NOT NULL,
    heartbeat_at BIGINT NOT NULL
);
