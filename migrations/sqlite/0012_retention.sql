-- Pruning past retention reads each kind oldest first: one index per kind, so a pass is a
-- bounded range read, never a scan.
CREATE INDEX slack_events_received ON slack_events (received_at);
CREATE INDEX slack_threads_answered ON slack_threads (answered_at);
CREATE INDEX tool_approvals_closed ON tool_approvals (asked_at) WHERE state <> 'open';
CREATE INDEX schedule_firings_fired ON schedule_firings (fired_at);
CREATE INDEX runs_finished ON runs (finished_at, id) WHERE finished_at IS NOT NULL;
