-- Decide, then apply for the cashier's trades (src/domain/attempt-decisions.ts, decideTradeMade):
-- a trade's move now also carries the material the provider's answer gave it (a prepay_id, a
-- code_url), kept as it was when the move gives none. A trade answered again while OPEN is a move
-- from OPEN to OPEN with its new material (applied only if it is still OPEN).
CREATE OR REPLACE FUNCTION mps_apply_changes(p_items json, p_now timestamptz)
RETURNS TABLE (idx integer, applied boolean, withdrawn boolean, answered boolean) LANGUAGE plpgsql AS $$
DECLARE
  it jsonb;
  n integer;
BEGIN
  FOR it, idx IN
    SELECT e.value, e.ordinality::integer FROM jsonb_array_elements(p_items::jsonb) WITH ORDINALITY e
     ORDER BY e.value->>'order_id' COLLATE "C", e.ordinality
  LOOP
    withdrawn := false;
    answered := false;
    PERFORM 1 FROM orders WHERE id = it->>'order_id' FOR UPDATE;
    IF mps_payment_records(it->>'order_id') IS DISTINCT FROM it->>'fp' THEN
      applied := false;
      RETURN NEXT;
      CONTINUE;
    END IF;
    applied := true;
    IF jsonb_typeof(it->'order') = 'object' THEN
      UPDATE orders SET status = it->'order'->>'to',
             closed_reason = COALESCE(it->'order'->>'closedReason', closed_reason),
             failure_reason = COALESCE(it->'order'->>'failureReason', failure_reason),
             paid_attempt_id = COALESCE(it->'order'->>'paidAttemptId', paid_attempt_id),
             paid_trade_no = COALESCE(it->'order'->>'paidTradeNo', paid_trade_no),
             paid_at = CASE WHEN it->'order'->>'to' = 'SUCCEEDED' THEN p_now ELSE paid_at END,
             close_pending = CASE WHEN it->'order'->>'to' IN ('SUCCEEDED', 'CLOSED', 'FAILED') THEN NULL ELSE close_pending END,
             state_version = state_version + 1, updated_at = p_now
       WHERE id = it->>'order_id' AND status = it->'order'->>'from';
    ELSIF (it->>'bump')::boolean THEN
      UPDATE orders SET state_version = state_version + 1, updated_at = p_now WHERE id = it->>'order_id';
    END IF;
    IF jsonb_array_length(it->'attempts') > 0 THEN
      UPDATE attempts a SET state = x."to", provider_ref = COALESCE(x.provider_ref, a.provider_ref),
             qr_code = COALESCE(x.qr_code, a.qr_code), redirect_url = COALESCE(x.redirect_url, a.redirect_url),
             made_at = COALESCE(x.made_at, a.made_at),
             updated_at = CASE WHEN x."from" <> x."to" THEN p_now ELSE a.updated_at END
        FROM jsonb_to_recordset(it->'attempts')
          AS x(id text, "from" text, "to" text, provider_ref text, qr_code text, redirect_url text, made_at timestamptz)
       WHERE a.id = x.id AND a.order_id = it->>'order_id' AND a.state = x."from";
    END IF;
    IF jsonb_array_length(it->'trades') > 0 THEN
      UPDATE provider_trades t SET state = x."to", provider_ref = COALESCE(x.provider_ref, t.provider_ref),
             material = COALESCE(x.material, t.material), updated_at = p_now
        FROM jsonb_to_recordset(it->'trades') AS x(id text, "from" text, "to" text, provider_ref text, material text)
       WHERE t.id = x.id AND t.order_id = it->>'order_id' AND t.state = x."from";
    END IF;
    IF jsonb_typeof(it->'refund') = 'object' THEN
      UPDATE refunds SET state = it->'refund'->>'to', provider_ref = COALESCE(it->'refund'->>'providerRef', provider_ref),
             failure_reason = CASE WHEN it->'refund'->>'to' IN ('PENDING', 'SUCCEEDED') THEN NULL
                                   ELSE COALESCE(it->'refund'->>'failureReason', failure_reason) END,
             updated_at = p_now
       WHERE id = it->'refund'->>'id' AND order_id = it->>'order_id' AND state = it->'refund'->>'from';
    END IF;
    IF jsonb_typeof(it->'duplicate') = 'object' THEN
      INSERT INTO duplicate_payments(id, order_id, attempt_id, trade_no, amount_fen, refund_state, provider, created_at, updated_at)
      VALUES (it->'duplicate'->>'id', it->>'order_id', it->'duplicate'->>'attemptId', it->'duplicate'->>'tradeNo',
              (it->'duplicate'->>'amountFen')::bigint, 'PENDING', it->'duplicate'->>'provider', p_now, p_now)
      ON CONFLICT (trade_no) DO NOTHING;
      GET DIAGNOSTICS n = ROW_COUNT;
      IF n = 1 THEN
        INSERT INTO jobs(kind, subject_id, run_at, created_at) VALUES ('REFUND_DUPLICATE', it->'duplicate'->>'id', p_now, p_now)
        ON CONFLICT (kind, subject_id) DO UPDATE
          SET run_at = CASE WHEN jobs.locked_by IS NULL THEN LEAST(jobs.run_at, EXCLUDED.run_at) ELSE EXCLUDED.run_at END,
              locked_by = NULL, holder_instance = NULL;
      END IF;
    END IF;
    IF jsonb_array_length(it->'jobs') > 0 THEN
      INSERT INTO jobs(kind, subject_id, run_at, created_at)
      SELECT x.kind, x.subject_id, x.at, x.at FROM jsonb_to_recordset(it->'jobs') AS x(kind text, subject_id text, at timestamptz)
      ON CONFLICT (kind, subject_id) DO UPDATE
        SET run_at = CASE WHEN jobs.locked_by IS NULL THEN LEAST(jobs.run_at, EXCLUDED.run_at) ELSE EXCLUDED.run_at END,
            locked_by = NULL, holder_instance = NULL;
    END IF;
    IF jsonb_typeof(it->'event') = 'object' THEN
      INSERT INTO events(id, app_id, order_id, refund_id, event_type, state_version, payload, next_attempt_at, created_at)
      VALUES (it->'event'->>'id', it->'event'->>'appId', it->>'order_id', it->'event'->>'refundId', it->'event'->>'type',
              (it->'event'->>'stateVersion')::integer, (it->'event'->>'payload')::json, p_now, p_now);
    END IF;
    IF jsonb_typeof(it->'keep') = 'object' THEN
      UPDATE orders SET close_pending = it->'keep'->>'reason', close_held_until = (it->'keep'->>'until')::timestamptz
       WHERE id = it->>'order_id';
    ELSIF it->>'withdraw_held' IS NOT NULL THEN
      UPDATE orders SET close_pending = NULL, close_held_until = NULL
       WHERE id = it->>'order_id' AND close_held_until = (it->>'withdraw_held')::timestamptz;
      GET DIAGNOSTICS n = ROW_COUNT;
      withdrawn := n = 1;
    END IF;
    IF jsonb_typeof(it->'answer') = 'object' THEN
      UPDATE request_replays SET state = 'DONE', status_code = (it->'answer'->>'status')::integer,
             response_body = it->'answer'->>'body', lease_until = NULL
       WHERE app_id = it->'answer'->>'appId' AND request_id = it->'answer'->>'requestId'
         AND holder = it->'answer'->>'holder' AND state = 'IN_PROGRESS';
      GET DIAGNOSTICS n = ROW_COUNT;
      answered := n = 1;
    END IF;
    RETURN NEXT;
  END LOOP;
END
$$;
ALTER FUNCTION mps_apply_changes(json, timestamptz) SET enable_seqscan = off SET jit = off;
