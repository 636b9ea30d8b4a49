-- The dispatcher's claim numbers an event's next attempt from its last attempt's number rather than
-- from a count of its logged attempts: retention drops the failed attempts of long-delivered events
-- (PURGE_HISTORY, docs/configuration.md "What is kept, for how long"), and a redelivery asked for
-- later goes on from the number it had reached. One row read by event_deliveries_event instead of
-- all of them. The text is src/store/events.ts's CLAIM_SQL (test/integration/event-claim.test.ts).
CREATE OR REPLACE FUNCTION mps_claim_events(timestamptz, integer, integer, text[], text, timestamptz, text[], integer[], integer)
RETURNS TABLE(id text, "appId" text, attempts integer, body text, "notifyUrl" text, deliveries integer)
LANGUAGE sql AS $claim$
WITH RECURSIVE due_sample AS (
  -- The oldest due events, at most 256: when there are fewer, their apps are exactly the
  -- apps with a due event, read from events_due at the cost of the due events alone.
  SELECT app_id FROM events WHERE status = 'PENDING' AND next_attempt_at <= $1 ORDER BY next_attempt_at LIMIT 256
), pending_apps AS (
  -- Otherwise (a backlog of due events): each app with a PENDING event and its earliest
  -- next_attempt_at, one index probe per such app (a loose scan of events_app_due). Not run at all
  -- when the sample sufficed.
  (SELECT app_id, next_attempt_at FROM events WHERE status = 'PENDING' ORDER BY app_id, next_attempt_at LIMIT 1)
  UNION ALL
  SELECT n.app_id, n.next_attempt_at FROM pending_apps pa
   CROSS JOIN LATERAL (SELECT e.app_id, e.next_attempt_at FROM events e
                        WHERE e.status = 'PENDING' AND e.app_id > pa.app_id
                        ORDER BY e.app_id, e.next_attempt_at LIMIT 1) n
), due_apps AS (
  SELECT DISTINCT app_id FROM due_sample WHERE (SELECT count(*) FROM due_sample) < 256
  UNION
  SELECT app_id FROM pending_apps WHERE next_attempt_at <= $1 AND (SELECT count(*) FROM due_sample) >= 256
), busy AS (
  SELECT app_id, count(*)::int AS n FROM events
   WHERE status = 'PENDING' AND locked_until IS NOT NULL AND locked_until > $1 GROUP BY app_id
), ready AS (
  SELECT c.id, c.app_id, c.next_attempt_at, lim.n AS lim,
         row_number() OVER (PARTITION BY c.app_id ORDER BY c.next_attempt_at, c.id) AS rn
    FROM due_apps d
    -- The app's own limit when it has one, else the default.
    CROSS JOIN LATERAL (SELECT coalesce((SELECT l.n FROM unnest($7::text[], $8::int[]) AS l(app_id, n) WHERE l.app_id = d.app_id LIMIT 1), $2) AS n) lim
    LEFT JOIN busy b ON b.app_id = d.app_id
    CROSS JOIN LATERAL (
      SELECT e.id, e.app_id, e.next_attempt_at FROM events e
       WHERE e.app_id = d.app_id AND e.status = 'PENDING' AND e.next_attempt_at <= $1
         AND (e.locked_until IS NULL OR e.locked_until <= $1)
         AND e.id <> ALL($4::text[])
         -- The order's earlier events through events_order alone: a status test the partial
         -- indexes cannot answer (|| ''), else a young table's plan ANDs in all of the app's
         -- PENDING events (events_app_due) for every event read.
         AND NOT EXISTS (SELECT 1 FROM events p
                          WHERE p.order_id = e.order_id AND p.state_version < e.state_version AND (p.status || '') = 'PENDING')
       ORDER BY e.next_attempt_at, e.id
       LIMIT $9) c
   WHERE coalesce(b.n, 0) < lim.n  -- an app at its limit reads nothing
), picked AS (
  SELECT r.id FROM ready r LEFT JOIN busy b ON b.app_id = r.app_id
   WHERE r.rn <= r.lim - coalesce(b.n, 0)
   ORDER BY r.rn, r.next_attempt_at, r.id
   LIMIT $3
), locked AS (
  SELECT e.id FROM events e JOIN picked USING (id)
   WHERE e.status = 'PENDING' AND (e.locked_until IS NULL OR e.locked_until <= $1)
   FOR UPDATE OF e SKIP LOCKED
)
UPDATE events e SET locked_by = $5, locked_until = $6
  FROM locked, apps a
 WHERE e.id = locked.id AND a.id = e.app_id
RETURNING e.id, e.app_id AS "appId", e.attempts, e.payload::text AS body, a.notify_url AS "notifyUrl",
          coalesce((SELECT d.attempt_no FROM event_deliveries d WHERE d.event_id = e.id ORDER BY d.id DESC LIMIT 1), 0) AS deliveries
$claim$;
ALTER FUNCTION mps_claim_events(timestamptz, integer, integer, text[], text, timestamptz, text[], integer[], integer) SET enable_seqscan = off;
