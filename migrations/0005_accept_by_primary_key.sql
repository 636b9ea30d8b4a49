-- mps_accept_attempt (0002) and mps_accept_attempts (0003), same change, same preconditions, same
-- results; only how the rows are found changes (docs/performance.md, "Plans that stay right as
-- tables grow").
--
-- Both tested the state in the WHERE clause of the statement that found the rows
-- (orders.status = 'CREATED', attempts.state = 'PENDING'). Those conditions match the predicates of
-- the partial indexes orders_expiry (every CREATED or PAYING order) and attempts_one_pending /
-- attempts_unknown, and the planner, which expects few CREATED orders and PENDING attempts, chose
-- them over the primary keys: each accepted batch then read every open order (measured with
-- auto_explain: 500-2,000 rows read and filtered out per batch, growing with the number of orders
-- inside their payment window) and the dead entries that PENDING attempts leave in the partial
-- indexes until vacuum. Now every row is looked up by primary key only, and the states are tested
-- on the rows found: the order's row lock is taken first (as before), so the attempt cannot change
-- state under us (every writer of attempts locks the order first).
CREATE OR REPLACE FUNCTION mps_accept_attempt(
  p_order_id text,
  p_attempt_id text,
  p_provider_ref text,
  p_qr_code text,
  p_replay_app_id text,
  p_replay_request_id text,
  p_replay_status integer,
  p_replay_body text
) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
  v_status text;
  v_state text;
BEGIN
  SELECT status INTO v_status FROM orders WHERE id = p_order_id FOR UPDATE;
  IF v_status IS DISTINCT FROM 'CREATED' THEN
    RETURN false;
  END IF;
  SELECT state INTO v_state FROM attempts WHERE id = p_attempt_id AND order_id = p_order_id;
  IF v_state IS DISTINCT FROM 'PENDING' THEN
    RETURN false;
  END IF;
  UPDATE attempts SET state = 'ACCEPTED', provider_ref = COALESCE(p_provider_ref, provider_ref), qr_code = COALESCE(p_qr_code, qr_code),
         next_check_at = NULL, updated_at = now()
   WHERE id = p_attempt_id;
  UPDATE orders SET status = 'PAYING', state_version = state_version + 1, updated_at = now() WHERE id = p_order_id;
  IF p_replay_request_id IS NOT NULL THEN
    UPDATE request_replays SET state = 'DONE', status_code = p_replay_status, response_body = p_replay_body, lease_until = NULL
     WHERE app_id = p_replay_app_id AND request_id = p_replay_request_id;
  END IF;
  RETURN true;
END
$$;

CREATE OR REPLACE FUNCTION mps_accept_attempts(p_items json) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
  v_orders text[];
  v_locked text[];
  v_done text[];
  v_attempts text[];
BEGIN
  SELECT array_agg(order_id ORDER BY order_id) INTO v_orders FROM json_to_recordset(p_items) AS t(order_id text);
  -- Lock the orders by primary key, in id order (concurrent batches cannot deadlock); keep those
  -- still CREATED once locked.
  SELECT array_agg(l.id) FILTER (WHERE l.status = 'CREATED') INTO v_locked
    FROM (SELECT id, status FROM orders WHERE id = ANY(v_orders) ORDER BY id FOR UPDATE) l;
  IF v_locked IS NULL THEN
    RETURN;
  END IF;
  -- In a fresh snapshot, taken with those locks held: their attempts still PENDING.
  SELECT array_agg(a.order_id), array_agg(a.id) INTO v_done, v_attempts
    FROM (SELECT id, order_id, state FROM attempts
           WHERE id = ANY(ARRAY(SELECT attempt_id FROM json_to_recordset(p_items) AS t(order_id text, attempt_id text)
                                 WHERE order_id = ANY(v_locked)))) a
    JOIN json_to_recordset(p_items) AS t(order_id text, attempt_id text)
      ON t.attempt_id = a.id AND t.order_id = a.order_id AND t.order_id = ANY(v_locked)
   WHERE a.state || '' = 'PENDING';  -- tested on the rows found, never through a partial index
  IF v_done IS NULL THEN
    RETURN;
  END IF;
  UPDATE attempts SET state = 'ACCEPTED', provider_ref = COALESCE(t.provider_ref, attempts.provider_ref),
         qr_code = COALESCE(t.qr_code, attempts.qr_code), next_check_at = NULL, updated_at = now()
    FROM json_to_recordset(p_items) AS t(order_id text, attempt_id text, provider_ref text, qr_code text)
   WHERE attempts.id = ANY(v_attempts) AND t.attempt_id = attempts.id AND t.order_id = attempts.order_id AND t.order_id = ANY(v_done);
  UPDATE orders SET status = 'PAYING', state_version = state_version + 1, updated_at = now() WHERE id = ANY(v_done);
  UPDATE request_replays r SET state = 'DONE', status_code = t.replay_status, response_body = t.replay_body, lease_until = NULL
    FROM json_to_recordset(p_items) AS t(order_id text, replay_app_id text, replay_request_id text, replay_status integer, replay_body text)
   WHERE t.replay_request_id IS NOT NULL AND t.order_id = ANY(v_done)
     AND r.app_id = t.replay_app_id AND r.request_id = t.replay_request_id;
  RETURN QUERY SELECT unnest(v_done);
END
$$;

-- Their statements find at most a batch of rows by primary key. PL/pgSQL keeps a statement's
-- generic plan until the table is next analyzed; one made while a table was small (a new
-- database's first minute, before autovacuum's first ANALYZE) would stay a sequential scan while
-- the table grows (measured: a benchmark's first minutes read thousands of rows per batch). With
-- sequential scans priced out, every plan is the primary-key lookup whatever the statistics say.
ALTER FUNCTION mps_accept_attempt(text, text, text, text, text, text, integer, text) SET enable_seqscan = off;
ALTER FUNCTION mps_accept_attempts(json) SET enable_seqscan = off;
