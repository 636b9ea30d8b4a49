-- One durable job queue for every kind of background work (src/domain/jobs.ts lists the kinds,
-- src/store/jobs.ts claims, completes and fails them; docs/architecture.md, "Background work").
-- It replaces the follow_ups table, the check times of attempts and refunds, the workers' lease on
-- orders and the lease of reconciliation runs: the work those described is carried over as jobs.

CREATE TABLE jobs (
  id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  kind             text NOT NULL,
  -- What the job is about (an attempt, a refund, an order, a duplicate payment, a run); '' for a
  -- recurring kind's one job. At most one job per kind and subject.
  subject_id       text NOT NULL,
  -- When it runs next, on the service's clock; while a holder runs it, when its lease ends.
  run_at           timestamptz NOT NULL,
  -- How many times a holder started it (the backoff after a failure counts from it).
  runs             integer NOT NULL DEFAULT 0,
  -- The holder of the claim (a claim token, unique per claim) and its instance (service_instances):
  -- completing, failing or renewing is fenced by the token; an instance that stops beating
  -- loses its jobs at once.
  locked_by        text,
  holder_instance  text,
  last_error       text,
  created_at       timestamptz NOT NULL,
  UNIQUE (kind, subject_id)
);
CREATE INDEX jobs_due ON jobs(run_at, id);
CREATE INDEX jobs_held ON jobs(holder_instance) WHERE locked_by IS NOT NULL;

-- The work in flight, carried over.
-- Follow-ups (closing a stray attempt, refunding a duplicate): their tries are the runs that failed.
INSERT INTO jobs(kind, subject_id, run_at, runs, last_error, created_at)
  SELECT kind, subject_id, due_at, tries, last_error, created_at FROM follow_ups
  ON CONFLICT (kind, subject_id) DO NOTHING;
-- Attempts whose outcome is uncertain or being made, and unsettled refunds: checked when they were due.
INSERT INTO jobs(kind, subject_id, run_at, runs, created_at)
  SELECT 'CHECK_ATTEMPT', id, COALESCE(next_check_at, now()), check_count, now() FROM attempts WHERE state IN ('UNKNOWN', 'PENDING');
INSERT INTO jobs(kind, subject_id, run_at, runs, created_at)
  SELECT 'CHECK_REFUND', id, COALESCE(next_check_at, now()), check_count, now() FROM refunds
   WHERE state IN ('REQUESTED', 'PENDING', 'UNKNOWN');
-- Duplicate payments whose refund is not settled.
INSERT INTO jobs(kind, subject_id, run_at, created_at)
  SELECT 'CHECK_DUPLICATE_REFUND', id, now(), now() FROM duplicate_payments WHERE refund_state IN ('PENDING', 'UNKNOWN')
  ON CONFLICT (kind, subject_id) DO NOTHING;
-- Reconciliation runs queued, running (due when their lease ends) or failed with tries left.
INSERT INTO jobs(kind, subject_id, run_at, runs, created_at)
  SELECT 'RECONCILE_STATEMENT', id::text, CASE WHEN status = 'RUNNING' THEN COALESCE(lease_until, now()) ELSE due_at END, tries, created_at
    FROM reconciliation_runs WHERE status IN ('QUEUED', 'RUNNING') OR (status = 'FAILED' AND tries < 6);
-- Orders past their window and closes left pending are found by FIND_DUE_WORK, as are attempts
-- and refunds that stall.

DROP TABLE follow_ups;
DROP FUNCTION mps_claim_expired_orders(integer, timestamptz);
DROP FUNCTION mps_claim_pending_closes(integer, timestamptz);
DROP INDEX reconciliation_runs_due;
ALTER TABLE reconciliation_runs DROP COLUMN lease_until;

-- The time a close holds an order (no FINISH_CLOSE runs before it), and the mark by which the close
-- that wrote it withdraws only its own (src/store/orders.ts markClosePending).
ALTER TABLE orders RENAME COLUMN worker_lease_until TO close_held_until;
CREATE INDEX orders_close_held ON orders(close_held_until) WHERE close_pending IS NOT NULL;

-- Attempts being made and refunds being requested are found by their age (FIND_DUE_WORK): the
-- check times go, with their indexes.
DROP INDEX attempts_unknown;
DROP INDEX refunds_unsettled;
ALTER TABLE attempts DROP COLUMN next_check_at, DROP COLUMN check_count;
ALTER TABLE refunds DROP COLUMN next_check_at, DROP COLUMN check_count;
CREATE INDEX attempts_pending ON attempts(created_at) WHERE state = 'PENDING';
CREATE INDEX refunds_requested ON refunds(created_at) WHERE state = 'REQUESTED';

-- The accepted outcome of a create (0012), without the check time it cleared.
CREATE OR REPLACE FUNCTION mps_accept_attempts(
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
           made_at = p_now, updated_at = p_now
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

-- FIND_DUE_WORK (src/store/jobs.ts findDueWork): the jobs that rows imply, at most p_limit of each,
-- each due since the moment its work came due: open orders past their window with no close pending
-- (EXPIRE_ORDER, due at expire_at), open orders whose pending close was let go (FINISH_CLOSE, due at
-- close_held_until: the close that held it ended, or answered uncertainly), attempts PENDING since before p_attempt_stall (due when they
-- stalled) or made by an instance that stopped beating (due since they were created: their request
-- died) (CHECK_ATTEMPT), refunds REQUESTED likewise (CHECK_REFUND). A subject whose job is due,
-- running or has run is left to it (its backoff stands); one whose job has never run is made due. The kinds are parameters (src/domain/jobs.ts names them). A function so that
-- it plans with sequential scans off, as the claims of 0011 did: each part walks a small partial
-- index whatever the statistics say (test/integration/worker-claim-plan.test.ts).
CREATE FUNCTION mps_find_due_work(
  p_now timestamptz, p_alive_since timestamptz, p_attempt_stall timestamptz, p_refund_stall timestamptz, p_limit integer,
  p_expire_kind text, p_attempt_kind text, p_refund_kind text, p_close_kind text
) RETURNS integer LANGUAGE sql AS $$
  WITH expired AS (
    INSERT INTO jobs(kind, subject_id, run_at, created_at)
    SELECT p_expire_kind, o.id, o.expire_at, p_now FROM orders o
     WHERE o.status IN ('CREATED', 'PAYING') AND o.expire_at <= p_now AND o.close_pending IS NULL
       AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.kind = p_expire_kind AND j.subject_id = o.id)
     ORDER BY o.expire_at LIMIT p_limit
    ON CONFLICT (kind, subject_id) DO NOTHING
    RETURNING 1
  ), closes AS (
    INSERT INTO jobs(kind, subject_id, run_at, created_at)
    SELECT p_close_kind, o.id, o.close_held_until, p_now FROM orders o
     WHERE o.close_pending IS NOT NULL AND o.close_held_until <= p_now AND o.status IN ('CREATED', 'PAYING', 'UNKNOWN')
       AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.kind = p_close_kind AND j.subject_id = o.id)
     ORDER BY o.close_held_until LIMIT p_limit
    ON CONFLICT (kind, subject_id) DO NOTHING
    RETURNING 1
  ), attempts_due AS (
    INSERT INTO jobs(kind, subject_id, run_at, created_at)
    SELECT p_attempt_kind, a.id,
           CASE WHEN a.created_at <= p_attempt_stall THEN a.created_at + (p_now - p_attempt_stall) ELSE a.created_at END, p_now
      FROM attempts a
     WHERE a.state = 'PENDING'
       AND (a.created_at <= p_attempt_stall
            OR (a.created_by IS NOT NULL
                AND NOT EXISTS (SELECT 1 FROM service_instances s WHERE s.id = a.created_by AND s.heartbeat_at > p_alive_since)))
       AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.kind = p_attempt_kind AND j.subject_id = a.id
                          AND (j.runs > 0 OR j.run_at <= p_now OR j.locked_by IS NOT NULL))
     ORDER BY a.created_at LIMIT p_limit
    ON CONFLICT (kind, subject_id) DO UPDATE SET run_at = LEAST(jobs.run_at, EXCLUDED.run_at) WHERE jobs.runs = 0 AND jobs.locked_by IS NULL
    RETURNING 1
  ), refunds_due AS (
    INSERT INTO jobs(kind, subject_id, run_at, created_at)
    SELECT p_refund_kind, r.id,
           CASE WHEN r.created_at <= p_refund_stall THEN r.created_at + (p_now - p_refund_stall) ELSE r.created_at END, p_now
      FROM refunds r
     WHERE r.state = 'REQUESTED'
       AND (r.created_at <= p_refund_stall
            OR (r.created_by IS NOT NULL
                AND NOT EXISTS (SELECT 1 FROM service_instances s WHERE s.id = r.created_by AND s.heartbeat_at > p_alive_since)))
       AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.kind = p_refund_kind AND j.subject_id = r.id
                          AND (j.runs > 0 OR j.run_at <= p_now OR j.locked_by IS NOT NULL))
     ORDER BY r.created_at LIMIT p_limit
    ON CONFLICT (kind, subject_id) DO UPDATE SET run_at = LEAST(jobs.run_at, EXCLUDED.run_at) WHERE jobs.runs = 0 AND jobs.locked_by IS NULL
    RETURNING 1
  )
  SELECT ((SELECT count(*) FROM expired) + (SELECT count(*) FROM closes) + (SELECT count(*) FROM attempts_due)
          + (SELECT count(*) FROM refunds_due))::integer
$$;
-- No JIT: a plan whose cost counts a disabled scan would be compiled on every call (seconds).
ALTER FUNCTION mps_find_due_work(timestamptz, timestamptz, timestamptz, timestamptz, integer, text, text, text, text)
  SET enable_seqscan = off SET jit = off;
