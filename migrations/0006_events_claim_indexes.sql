-- The event dispatcher's claim, bounded per app (src/events/dispatcher.ts; docs/performance.md).
--
-- The claim counted the leased events of every app and ranked every due event on each poll: its
-- cost grew with the backlog of undelivered events (an app without a notify URL, a merchant
-- endpoint down for hours: every event stays PENDING for up to ~48 h of retries). Measured: 1.6 ms
-- per poll with ~23,000 pending events. With these two indexes a poll finds the apps with a due
-- event (from the due events, or by one probe per app with a PENDING event when many are due),
-- reads per app at most the few events it can take (the app's oldest due ones, in order), and
-- counts the leased events from the handful that hold a lease (cleared after every attempt).
--
-- Operators: like every migration this runs in one transaction at start-up, so the two indexes are
-- built without CONCURRENTLY: writes to events wait while each build reads the events table once
-- (only PENDING events are indexed, so the indexes stay small).
CREATE INDEX events_app_due ON events(app_id, next_attempt_at, id) WHERE status = 'PENDING';
CREATE INDEX events_leased ON events(app_id) WHERE status = 'PENDING' AND locked_until IS NOT NULL;
