-- mps_accept_attempt and mps_accept_attempts (0005), one more precondition: no close pending on the
-- order. A close that found the order's attempt still PENDING (being created at the provider) and
-- answered UNKNOWN_KEPT leaves close_pending set; the create that then gets the provider's answer
-- must not hand out payment material behind that close (docs/state-machines.md). Declining here
-- sends the create to its general path, which reads the order afresh under its lock: the attempt is
-- recorded ACCEPTED and the order PAYING as before, but the answer and the cashier page show no
-- material while the close is pending (validAttempt), and the pending-close worker finishes the
-- close. CREATE OR REPLACE resets a function's SET options, so they are set again below.
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
  v_close_pending text;
  v_state text;
BEGIN
  SELECT status, close_pending INTO v_status, v_close_pending FROM orders WHERE id = p_order_id FOR UPDATE;
  IF v_status IS DISTINCT FROM 'CREATED' OR v_close_pending IS NOT NULL THEN
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
  -- still CREATED, with no close pending, once locked.
  SELECT array_agg(l.id) FILTER (WHERE l.status = 'CREATED' AND l.close_pending IS NULL) INTO v_locked
    FROM (SELECT id, status, close_pending FROM orders WHERE id = ANY(v_orders) ORDER BY id FOR UPDATE) l;
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

ALTER FUNCTION mps_accept_attempt(text, text, text, text, text, text, integer, text) SET enable_seqscan = off;
ALTER FUNCTION mps_accept_attempts(json) SET enable_seqscan = off;
