-- The page index carries the columns a list filters on, so walking it newest-first filters
-- without reading table rows (SQLite defers the row read until a row passes).
DROP INDEX runs_page;
CREATE INDEX runs_page ON runs (created_at DESC, id DESC, channel_id, channel_visibility, user_id, repo, status);
