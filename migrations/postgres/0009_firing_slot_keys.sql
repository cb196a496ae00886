-- A firing's slot becomes a key: `timer:<micros>` for a cron slot, `manual:<id>` for a firing
-- asked for by `schedule fire`, so a manual firing can never collide with a timer slot. The
-- slot's instant stays in `slot_at` (a manual firing's is when it fired), read by the
-- missed-slot check ("the latest timer slot of a schedule") and by `schedule list`.
ALTER TABLE schedule_firings ADD COLUMN slot_at BIGINT;
UPDATE schedule_firings SET slot_at = slot;
ALTER TABLE schedule_firings ALTER COLUMN slot_at SET NOT NULL;
ALTER TABLE schedule_firings ALTER COLUMN slot TYPE TEXT COLLATE "C" USING 'timer:' || slot::text;
CREATE INDEX schedule_firings_recent ON schedule_firings (name, fired_at DESC);
CREATE INDEX schedule_firings_timer ON schedule_firings (name, slot_at DESC) WHERE slot LIKE 'timer:%';
