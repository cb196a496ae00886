-- Tool calls waiting for a person's answer (the broker's `ask`), where every replica can read
-- and answer them: the run page or a Slack click may reach any replica, and the replica whose
-- run asked reads the answer from here. `state`: open, approved, denied, or closed (timed
-- out, or its run ended); only an open row can be answered, once.
CREATE TABLE tool_approvals (
    id          TEXT NOT NULL PRIMARY KEY,
    run_id      TEXT NOT NULL,
    principal   TEXT,
    action      TEXT NOT NULL,
    tool        TEXT NOT NULL,
    arguments   TEXT NOT NULL,
    state       TEXT NOT NULL,
    asked_at    BIGINT NOT NULL,
    answered_by TEXT,
    answered_at BIGINT
);
CREATE INDEX tool_approvals_open ON tool_approvals (run_id) WHERE state = 'open';
