-- The visibility stamp written on a run when it starts. Rows from before it read 'unknown',
-- which is never public and never a member.
ALTER TABLE runs ADD COLUMN channel_visibility TEXT NOT NULL DEFAULT 'unknown'
    CHECK (channel_visibility IN ('public', 'private', 'dm', 'machine', 'unknown'));
CREATE INDEX runs_visibility_page ON runs (channel_visibility, created_at DESC, id DESC);
