-- mps_accept_attempt (0002) for several attempts in one call: the accepted outcomes of concurrent
-- creates, batched per event-loop turn (src/store/batcher.ts; docs/performance.md).
--
-- Item by item the same change under the same preconditions, in one transaction and four
-- set-wise statements: the orders still CREATED are locked (in id order, so concurrent batches
-- cannot deadlock); then, in a fresh snapshot taken after those locks are held, their attempts
-- still PENDING become ACCEPTED; those orders become PAYING (stateVersion + 1, no event); their
-- replay records get their answers. Returns the order ids whose change was applied; for the others
-- nothing changed and the caller takes the general path.
CREATE FUNCTION mps_accept_attempts(
  p_order_ids text[],
  p_attempt_ids text[],
  p_provider_refs text[],
  p_qr_codes text[],
  p_replay_app_ids text[],
  p_replay_request_ids text[],
  p_replay_statuses integer[],
  p_replay_bodies text[]
) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
  v_locked text[];
  v_done text[];
BEGIN
  SELECT array_agg(id) INTO v_locked
    FROM (SELECT id FROM orders WHERE id = ANY(p_order_ids) AND status = 'CREATED' ORDER BY id FOR UPDATE) l;
  IF v_locked IS NULL THEN
    RETURN;
  END IF;
  WITH u AS (
    UPDATE attempts SET state = 'ACCEPTED', provider_ref = COALESCE(t.ref, attempts.provider_ref), qr_code = COALESCE(t.qr, attempts.qr_code),
           next_check_at = NULL, updated_at = now()
      FROM unnest(p_order_ids, p_attempt_ids, p_provider_refs, p_qr_codes) AS t(o, a, ref, qr)
     WHERE attempts.id = t.a AND attempts.order_id = t.o AND attempts.state = 'PENDING' AND t.o = ANY(v_locked)
    RETURNING attempts.order_id)
  SELECT array_agg(order_id) INTO v_done FROM u;
  IF v_done IS NULL THEN
    RETURN;
  END IF;
  UPDATE orders SET status = 'PAYING', state_version = state_version + 1, updated_at = now() WHERE id = ANY(v_done);
  UPDATE request_replays r SET state = 'DONE', status_code = t.st, response_body = t.body, lease_until = NULL
    FROM unnest(p_order_ids, p_replay_app_ids, p_replay_request_ids, p_replay_statuses, p_replay_bodies) AS t(o, app, req, st, body)
   WHERE t.req IS NOT NULL AND t.o = ANY(v_done) AND r.app_id = t.app AND r.request_id = t.req;
  RETURN QUERY SELECT unnest(v_done);
END
$$;
