-- A replica that is a `serve` says so, with its version and when it started, so `status` from
-- any process can tell whether a server holds the store (a CLI process's lease row has none).
ALTER TABLE replicas ADD COLUMN server_version TEXT;
ALTER TABLE replicas ADD COLUMN started_at BIGINT;
