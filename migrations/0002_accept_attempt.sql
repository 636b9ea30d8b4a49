-- The common outcome of creating an order, in one round trip (docs/performance.md).
--
-- The provider accepted the PENDING attempt of a CREATED order: the attempt becomes ACCEPTED with
-- its provider reference and QR code, the order PAYING (stateVersion + 1; no event: PAYING has
-- none), and, when given, the request-id replay record gets its final answer, all in one
-- transaction. It is the same change as the general path in src/usecases/orders.ts (runAttempt),
-- taken only when its preconditions hold exactly; otherwise it changes nothing and returns false,
-- and the caller takes the general path.
--
-- Each statement of a PL/pgSQL function takes a fresh snapshot, so the attempt is read after the
-- order's row lock is held, as every writer of attempts does (order first, then attempt).
CREATE FUNCTION mps_accept_attempt(
  p_order_id text,
  p_attempt_id text,
  p_provider_ref text,
  p_qr_code text,
  p_replay_app_id text,
  p_replay_request_id text,
  p_replay_status integer,
  p_replay_body text
) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
  PERFORM 1 FROM orders WHERE id = p_order_id AND status = 'CREATED' FOR UPDATE;
  IF NOT FOUND THEN
    RETURN false;
  END IF;
  UPDATE attempts SET state = 'ACCEPTED', provider_ref = COALESCE(p_provider_ref, provider_ref), qr_code = COALESCE(p_qr_code, qr_code),
         next_check_at = NULL, updated_at = now()
   WHERE id = p_attempt_id AND order_id = p_order_id AND state = 'PENDING';
  IF NOT FOUND THEN
    RETURN false;
  END IF;
  UPDATE orders SET status = 'PAYING', state_version = state_version + 1, updated_at = now() WHERE id = p_order_id;
  IF p_replay_request_id IS NOT NULL THEN
    UPDATE request_replays SET state = 'DONE', status_code = p_replay_status, response_body = p_replay_body, lease_until = NULL
     WHERE app_id = p_replay_app_id AND request_id = p_replay_request_id;
  END IF;
  RETURN true;
END
$$;
