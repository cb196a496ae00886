-- The page index carries the columns a list filters on, so walking it newest-first can filter
-- from the index.
DROP INDEX runs_page;
CREATE INDEX runs_page ON runs (created_at DESC, id DESC) INCLUDE (channel_id, channel_visibility, user_id, repo, status);
