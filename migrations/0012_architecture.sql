-- One authority for state changes, one clock, durable follow-up work, fenced request-id units.
--

-- 1. An attempt records when the request that created it recorded its outcome (the service's
--    clock): a re-create that arrived before that overlapped it (src/usecases/recreate-attempt.ts).
--    NULL while the attempt is being made, and for attempts settled by the reconciler.
ALTER TABLE attempts ADD COLUMN made_at timestamptz;

-- 2. Request-id units: each claim names its holder (an instance id and a claim number); only the
--    holder completes or abandons it, and a claim whose holder's instance has stopped beating is
--    taken over at once (docs/decisions.md, "Who holds a request id, and when").
ALTER TABLE request_replays ADD COLUMN holder text, ADD COLUMN holder_instance text;
-- The instance whose request recorded an attempt being made or a refund being requested: when that
-- instance is gone (a crash), its unfinished work is settled by asking the provider at once, not
-- after the usual waits (src/usecases/reconcile.ts, recoverWorkOfGoneInstances).
ALTER TABLE attempts ADD COLUMN created_by text;
ALTER TABLE refunds ADD COLUMN created_by text;

CREATE TABLE service_instances (
  id            text PRIMARY KEY,
  started_at    timestamptz NOT NULL,
  heartbeat_at  timestamptz NOT NULL
);

-- 3. Follow-up work a change needs after it (closing an attempt the order can no longer use,
--    refunding a duplicate payment), written in the same transaction as that change and claimed by
--    the workers with a lease: a crash loses none of it.
CREATE TABLE follow_ups (
  id            bigserial PRIMARY KEY,
  kind          text NOT NULL CHECK (kind IN ('CLOSE_STRAY_ATTEMPT', 'REFUND_DUPLICATE')),
  subject_id    text NOT NULL,
  due_at        timestamptz NOT NULL,
  tries         integer NOT NULL DEFAULT 0,
  locked_by     text,
  locked_until  timestamptz,
  last_error    text,
  created_at    timestamptz NOT NULL,
  UNIQUE (kind, subject_id)
);
CREATE INDEX follow_ups_due ON follow_ups(due_at);

-- 4. Every attempt, refund and duplicate payment records which provider holds it, so that a change
--    of configuration never sends a query, close or refund to another provider than the one that
--    has the payment (docs/providers.md). Rows written before this are the sandbox's.
ALTER TABLE attempts ADD COLUMN provider text NOT NULL DEFAULT 'sandbox';
ALTER TABLE refunds ADD COLUMN provider text NOT NULL DEFAULT 'sandbox';
ALTER TABLE duplicate_payments ADD COLUMN provider text NOT NULL DEFAULT 'sandbox';
-- The provider's own payment page for the attempt (Alipay's mobile-web page, WeChat Pay's h5_url),
-- where the cashier sends the buyer; the sandbox has none.
ALTER TABLE attempts ADD COLUMN redirect_url text;

-- What a provider said that does not match the ledger (an amount, a currency), or that needs an
-- operator (a refund WeChat Pay holds as ABNORMAL): never applied, kept here for the operator,
-- counted in the metrics (docs/providers.md).
CREATE TABLE provider_discrepancies (
  id           bigserial PRIMARY KEY,
  provider     text NOT NULL,
  source       text NOT NULL CHECK (source IN ('NOTICE', 'QUERY', 'ANSWER', 'STATEMENT')),
  kind         text NOT NULL,
  subject_id   text NOT NULL,
  expected     jsonb,
  reported     jsonb,
  status       text NOT NULL DEFAULT 'OPEN' CHECK (status IN ('OPEN', 'RESOLVED')),
  created_at   timestamptz NOT NULL,
  resolved_at  timestamptz,
  UNIQUE (provider, source, kind, subject_id)
);
CREATE INDEX provider_discrepancies_open ON provider_discrepancies(created_at) WHERE status = 'OPEN';

-- 5. The accepted outcome of a create: one statement whose states are parameters, given by the
--    store from the transition tables (src/store/orders.ts acceptAttempts, with the transitions
--    checked against src/domain/states.ts when the service loads). It replaces the PL/pgSQL
--    functions that applied their own copy of those transitions. A function only so that it
--    plans with sequential scans off, as the claims of 0011 do: a plan cached while the tables
--    were small must stay a primary-key lookup when they grow (test/integration/accept-plan.test.ts).
--    Each order still in p_order_from with no close pending is locked (in id order: concurrent
--    batches cannot deadlock), its attempt moves p_attempt_from -> p_attempt_to with its provider
--    reference and collection code, the order p_order_from -> p_order_to (stateVersion + 1), and
--    the request id's answer is recorded, fenced by its holder. Rows are found by primary key and
--    their states tested on the rows found (`|| ''`), never through a partial index naming the
--    state (those hold the dead entries of every row that went through it). Every row is
--    re-checked as it is updated, so a change committed while this waited for a lock is seen.
DROP FUNCTION IF EXISTS mps_accept_attempt(text, text, text, text, text, text, integer, text);
DROP FUNCTION IF EXISTS mps_accept_attempts(json);
CREATE FUNCTION mps_accept_attempts(
  p_items json, p_order_ids text[], p_attempt_ids text[],
  p_order_from text, p_order_to text, p_attempt_from text, p_attempt_to text, p_now timestamptz
) RETURNS TABLE (order_id text, answered boolean) LANGUAGE sql AS $$
  WITH i AS (
    SELECT * FROM json_to_recordset(p_items)
      AS t(order_id text, attempt_id text, provider_ref text, qr_code text, redirect_url text,
           r_app text, r_req text, r_holder text, r_status integer, r_body text)
  ), lk AS MATERIALIZED (
    SELECT o.id FROM orders o WHERE o.id = ANY(p_order_ids) AND o.status || '' = p_order_from AND o.close_pending IS NULL
     ORDER BY o.id FOR UPDATE
  ), a AS (
    UPDATE attempts SET state = p_attempt_to, provider_ref = COALESCE(i.provider_ref, attempts.provider_ref),
           qr_code = COALESCE(i.qr_code, attempts.qr_code), redirect_url = COALESCE(i.redirect_url, attempts.redirect_url),
           next_check_at = NULL, made_at = p_now, updated_at = p_now
      FROM i JOIN lk ON lk.id = i.order_id
     WHERE attempts.id = ANY(p_attempt_ids) AND attempts.id = i.attempt_id AND attempts.order_id = i.order_id
       AND attempts.state || '' = p_attempt_from
    RETURNING attempts.order_id
  ), o AS (
    UPDATE orders SET status = p_order_to, state_version = state_version + 1, updated_at = p_now
      FROM a WHERE orders.id = a.order_id AND orders.status || '' = p_order_from
    RETURNING orders.id
  ), rr AS (
    UPDATE request_replays SET state = 'DONE', status_code = i.r_status, response_body = i.r_body, lease_until = NULL
      FROM i JOIN o ON o.id = i.order_id
     WHERE i.r_req IS NOT NULL AND request_replays.app_id = i.r_app AND request_replays.request_id = i.r_req
       AND request_replays.holder = i.r_holder AND request_replays.state = 'IN_PROGRESS'
    RETURNING i.order_id
  )
  SELECT o.id, EXISTS (SELECT 1 FROM rr WHERE rr.order_id = o.id) FROM o
$$;
ALTER FUNCTION mps_accept_attempts(json, text[], text[], text, text, text, text, timestamptz) SET enable_seqscan = off;

-- 6. Time comes from the service's clock, passed in: the workers' order claims take it as a
--    parameter (they keep planning with sequential scans off, see 0011).
DROP FUNCTION IF EXISTS mps_claim_expired_orders(integer);
DROP FUNCTION IF EXISTS mps_claim_pending_closes(integer);
CREATE FUNCTION mps_claim_expired_orders(p_limit integer, p_now timestamptz) RETURNS SETOF text LANGUAGE sql AS $$
  UPDATE orders SET worker_lease_until = p_now + interval '30 seconds'
   WHERE id IN (SELECT id FROM orders
                 WHERE status IN ('CREATED', 'PAYING') AND expire_at <= p_now
                   AND (worker_lease_until IS NULL OR worker_lease_until < p_now)
                 ORDER BY expire_at LIMIT p_limit FOR UPDATE SKIP LOCKED)
  RETURNING id
$$;
ALTER FUNCTION mps_claim_expired_orders(integer, timestamptz) SET enable_seqscan = off;

CREATE FUNCTION mps_claim_pending_closes(p_limit integer, p_now timestamptz) RETURNS SETOF text LANGUAGE sql AS $$
  UPDATE orders SET worker_lease_until = p_now + interval '30 seconds'
   WHERE id IN (SELECT id FROM orders
                 WHERE close_pending IS NOT NULL AND status IN ('CREATED', 'PAYING', 'UNKNOWN')
                   AND (worker_lease_until IS NULL OR worker_lease_until < p_now)
                 ORDER BY updated_at LIMIT p_limit FOR UPDATE SKIP LOCKED)
  RETURNING id
$$;
ALTER FUNCTION mps_claim_pending_closes(integer, timestamptz) SET enable_seqscan = off;

-- The sandbox's refund settlement notices are sent by the service's workers once a refund's
-- settle_at has passed on the service's clock (one notice per refund). Refunds booked before this
-- were notified by a timer already.
ALTER TABLE sandbox_refunds ADD COLUMN notice_sent boolean NOT NULL DEFAULT true;
ALTER TABLE sandbox_refunds ALTER COLUMN notice_sent SET DEFAULT false;
CREATE INDEX sandbox_refunds_notice_due ON sandbox_refunds(settle_at) WHERE NOT notice_sent;

-- The event dispatcher's claim (src/store/events.ts, CLAIM_SQL, where it is explained; the two
-- texts are kept equal by test/integration/event-claim.test.ts), as a function planned with
-- sequential scans off like the other claims: on a young database, before autovacuum's first
-- ANALYZE of events, the planner took the table for empty and scanned it, ~8 ms a claim with a
-- backlog of a few thousand events.
CREATE FUNCTION mps_claim_events(timestamptz, integer, integer, text[], text, timestamptz, text[], integer[], integer)
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
         AND NOT EXISTS (SELECT 1 FROM events p
                          WHERE p.order_id = e.order_id AND p.status = 'PENDING' AND p.state_version < e.state_version)
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
          (SELECT count(*) FROM event_deliveries d WHERE d.event_id = e.id)::int AS deliveries
$claim$;
ALTER FUNCTION mps_claim_events(timestamptz, integer, integer, text[], text, timestamptz, text[], integer[], integer) SET enable_seqscan = off;
