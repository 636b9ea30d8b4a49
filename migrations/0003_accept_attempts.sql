-- mps_accept_attempt (0002) for several attempts in one call: the accepted outcomes of concurrent
-- creates, batched per event-loop turn (src/store/batcher.ts; docs/performance.md).
--
-- p_items: a JSON array of {order_id, attempt_id, provider_ref, qr_code, replay_app_id,
-- replay_request_id, replay_status, replay_body}, at most one item per order.
--
-- Item by item the same change under the same preconditions, in one transaction and four
-- set-wise statements: the orders still CREATED are locked (in id order, so concurrent batches
-- cannot deadlock); then, in a fresh snapshot taken after those locks are held, their attempts
-- still PENDING become ACCEPTED; those orders become PAYING (stateVersion + 1, no event); their
-- replay records get their answers. Returns the order ids whose change was applied; for the others
-- nothing changed and the caller takes the general path.
CREATE FUNCTION mps_accept_attempts(p_items json) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
  v_locked text[];
  v_done text[];
BEGIN
  SELECT array_agg(id) INTO v_locked
    FROM (SELECT id FROM orders
           WHERE id IN (SELECT order_id FROM json_to_recordset(p_items) AS t(order_id text)) AND status = 'CREATED'
           ORDER BY id FOR UPDATE) l;
  IF v_locked IS NULL THEN
    RETURN;
  END IF;
  WITH u AS (
    UPDATE attempts SET state = 'ACCEPTED', provider_ref = COALESCE(t.provider_ref, attempts.provider_ref),
           qr_code = COALESCE(t.qr_code, attempts.qr_code), next_check_at = NULL, updated_at = now()
      FROM json_to_recordset(p_items) AS t(order_id text, attempt_id text, provider_ref text, qr_code text)
     WHERE attempts.id = t.attempt_id AND attempts.order_id = t.order_id AND attempts.state = 'PENDING' AND t.order_id = ANY(v_locked)
    RETURNING attempts.order_id)
  SELECT array_agg(order_id) INTO v_done FROM u;
  IF v_done IS NULL THEN
    RETURN;
  END IF;
  UPDATE orders SET status = 'PAYING', state_version = state_version + 1, updated_at = now() WHERE id = ANY(v_done);
  UPDATE request_replays r SET state = 'DONE', status_code = t.replay_status, response_body = t.replay_body, lease_until = NULL
    FROM json_to_recordset(p_items) AS t(order_id text, replay_app_id text, replay_request_id text, replay_status integer, replay_body text)
   WHERE t.replay_request_id IS NOT NULL AND t.order_id = ANY(v_done)
     AND r.app_id = t.replay_app_id AND r.request_id = t.replay_request_id;
  RETURN QUERY SELECT unnest(v_done);
END
$$;
