-- A firing's slot becomes a key: `timer:<micros>` for a cron slot, `manual:<id>` for a firing
-- asked for by `schedule fire`, so a manual firing can never collide with a timer slot. The
-- slot's instant stays in `slot_at` (a manual firing's is when it fired), read by the
-- missed-slot check ("the latest timer slot of a schedule") and by `schedule list`.
CREATE TABLE schedule_firings_keyed (
    name     TEXT NOT NULL,
    slot     TEXT NOT NULL,
    slot_at  INTEGER NOT NULL,
    fired_at INTEGER NOT NULL,
    status   TEXT NOT NULL,
    run_id   TEXT,
    detail   TEXT,
    UNIQUE (name, slot)
);
INSERT INTO schedule_firings_keyed (name, slot, slot_at, fired_at, status, run_id, detail)
    SELECT name, 'timer:' || slot, slot, fired_at, status, run_id, detail FROM schedule_firings;
DROP TABLE schedule_firings;
ALTER TABLE schedule_firings_keyed RENAME TO schedule_firings;
CREATE INDEX schedule_firings_recent ON schedule_firings (name, fired_at DESC);
CREATE INDEX schedule_firings_timer ON schedule_firings (name, slot_at DESC) WHERE slot LIKE 'timer:%';
