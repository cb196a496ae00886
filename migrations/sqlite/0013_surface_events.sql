-- Event ids seen and threads answered, keyed by surface: every chat surface dedupes the
-- events it is sent (a retry, on any replica, is seen once) and remembers the threads it
-- answered in these two tables. Slack's rows move over as surface 'slack'.
CREATE TABLE surface_events (
    surface     TEXT NOT NULL,
    event_id    TEXT NOT NULL,
    received_at BIGINT NOT NULL,
    PRIMARY KEY (surface, event_id)
);
INSERT INTO surface_events (surface, event_id, received_at)
    SELECT 'slack', event_id, received_at FROM slack_events;
DROP TABLE slack_events;
CREATE INDEX surface_events_received ON surface_events (received_at);

CREATE TABLE answered_threads (
    surface     TEXT NOT NULL,
    channel     TEXT NOT NULL,
    thread_key  TEXT NOT NULL,
    answered_at BIGINT NOT NULL,
    PRIMARY KEY (surface, channel, thread_key)
);
INSERT INTO answered_threads (surface, channel, thread_key, answered_at)
    SELECT 'slack', channel, thread_ts, answered_at FROM slack_threads;
DROP TABLE slack_threads;
CREATE INDEX answered_threads_answered ON answered_threads (answered_at);
