-- `runs stop` from any process: the request is written here, and the process that owns the
-- live run (its `owner`) sees it and cancels the run. NULL: nobody asked.
ALTER TABLE runs ADD COLUMN stop_requested_at INTEGER;
