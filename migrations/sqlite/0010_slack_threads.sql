-- Threads the Slack bot has answered, so a follow-up without a mention is taken on every
-- replica, not only the one that answered.
CREATE TABLE slack_threads (
    channel     TEXT NOT NULL,
    thread_ts   TEXT NOT NULL,
    answered_at BIGINT NOT NULL,
    PRIMARY KEY (channel, thread_ts)
);
