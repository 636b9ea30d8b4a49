-- A close records the instance that holds it (close_held_by), so that a close cut off by a crash is
-- finished as soon as that instance is known gone (its heartbeat stopped, or a restart on the
-- embedded database removed it), the same way the attempts and refunds it was asking about are,
-- instead of when its 30 s hold lapses. Nullable, no default: adding it rewrites nothing.
ALTER TABLE orders ADD COLUMN close_held_by text;

-- FIND_DUE_WORK (src/store/jobs.ts findDueWork) as in 0030, but a pending close is also due when the
-- instance holding it stopped beating (due now). The part still walks orders_close_held, the
-- partial index of the orders whose close is pending (a handful).
CREATE OR REPLACE FUNCTION mps_find_due_work(
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
    SELECT p_close_kind, o.id, LEAST(o.close_held_until, p_now), p_now FROM orders o
     WHERE o.close_pending IS NOT NULL AND o.status IN ('CREATED', 'PAYING', 'UNKNOWN')
       AND (o.close_held_until <= p_now
            OR (o.close_held_by IS NOT NULL
                AND NOT EXISTS (SELECT 1 FROM service_instances s WHERE s.id = o.close_held_by AND s.heartbeat_at > p_alive_since)))
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
ALTER FUNCTION mps_find_due_work(timestamptz, timestamptz, timestamptz, timestamptz, integer, text, text, text, text)
  SET enable_seqscan = off SET jit = off;
