-- Live runs are few (the dispatcher's concurrency limits bound them), but a live list over a
-- large table would otherwise walk the page index past every finished run. This partial index
-- holds only live runs, in page order: a live list reads it and filters each row.
CREATE INDEX runs_live_page ON runs (created_at DESC, id DESC) WHERE status IN ('queued', 'running');
