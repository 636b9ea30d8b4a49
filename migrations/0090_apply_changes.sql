-- Decide, then apply (src/domain/payment-decisions.ts, src/store/changes.ts): a payment notice, a
-- refund's outcome and a close's answers are decided in the service from the records as read, and
-- written here in one statement, several changes per call (one per order), each only if its
-- order's records are still as they were read.
--
-- mps_payment_records(order id): the fingerprint of what a decision reads about an order: its
-- stateVersion (every change of the order and its refunds moves it) and the state of each of its
-- attempts and trades (which may change without it). Compared under the order's row lock.
CREATE FUNCTION mps_payment_records(p_order text) RETURNS text LANGUAGE sql STABLE AS $$
  SELECT o.state_version::text
      || '|' || COALESCE((SELECT string_agg(a.id || ':' || a.state, ',' ORDER BY a.id COLLATE "C")
                            FROM attempts a WHERE a.order_id = o.id), '')
      || '|' || COALESCE((SELECT string_agg(t.id || ':' || t.state, ',' ORDER BY t.id COLLATE "C")
                            FROM provider_trades t WHERE t.order_id = o.id), '')
    FROM orders o WHERE o.id = p_order
$$;

-- Each item (a JSON object, field names as in src/store/changes.ts; read as jsonb, parsed once
-- rather than at every field access): the order locked, in order id
-- order (concurrent calls cannot deadlock); nothing written unless its fingerprint is the one the
-- decision read (`applied` false: the caller reads again and decides again). Else, in one go: the
-- order's transition (stateVersion + 1; a final state clears a pending close) or the bare
-- stateVersion bump of a refund's change, each attempt's, trade's and the refund's transition from
-- its source state, a duplicate payment with its REFUND_DUPLICATE job (once per provider order),
-- the follow-up jobs (the sooner time kept; a job being run released from its holder), the event,
-- a close kept pending or withdrawn (`withdrawn`), the request id's answer, fenced by its holder
-- (`answered`), as the create's accepted outcome records it (mps_accept_attempts). The states are the decision's, checked against
-- the transition tables (src/domain/states.ts) before the call.
CREATE FUNCTION mps_apply_changes(p_items json, p_now timestamptz)
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
             updated_at = CASE WHEN x."from" <> x."to" THEN p_now ELSE a.updated_at END
        FROM jsonb_to_recordset(it->'attempts') AS x(id text, "from" text, "to" text, provider_ref text)
       WHERE a.id = x.id AND a.order_id = it->>'order_id' AND a.state = x."from";
    END IF;
    IF jsonb_array_length(it->'trades') > 0 THEN
      UPDATE provider_trades t SET state = x."to", provider_ref = COALESCE(x.provider_ref, t.provider_ref), updated_at = p_now
        FROM jsonb_to_recordset(it->'trades') AS x(id text, "from" text, "to" text, provider_ref text)
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

-- The sandbox provider's books (src/store/sandbox-books.ts): a refund with its programmed fault
-- taken, in one call. Each statement of a function sees what was committed before it started, so
-- the sum is read after the payment's row lock is held: concurrent refunds of one payment cannot
-- together exceed it, as at a real provider. `outcome`: the fault taken (REJECT and DELAY_MS book
-- nothing: the caller refuses, or waits and books); `refused`: why the refund was not booked;
-- `fresh`: booked now (else the refund key's earlier booking is answered).
CREATE FUNCTION mps_sandbox_book_refund(
  p_ref text, p_key text, p_attempt text, p_amount bigint, p_settle_at timestamptz, p_take_fault boolean, p_now timestamptz
) RETURNS TABLE (outcome text, delay_ms integer, refused text, state text, provider_ref text, fresh boolean) LANGUAGE plpgsql AS $$
DECLARE
  pay record;
  total bigint;
BEGIN
  outcome := NULL;
  IF p_take_fault THEN
    UPDATE sandbox_faults SET remaining = remaining - 1
     WHERE id = (SELECT id FROM sandbox_faults WHERE operation = 'REFUND' AND remaining > 0 ORDER BY id LIMIT 1 FOR UPDATE)
    RETURNING sandbox_faults.outcome, sandbox_faults.delay_ms INTO outcome, delay_ms;
    IF outcome IN ('REJECT', 'DELAY_MS') THEN
      RETURN NEXT;
      RETURN;
    END IF;
  END IF;
  SELECT p.provider_ref, p.state, p.amount_fen INTO pay FROM sandbox_payments p WHERE p.attempt_id = p_attempt FOR UPDATE;
  IF NOT FOUND OR pay.state <> 'PAID' THEN
    refused := 'PAYMENT_NOT_PAID';
    RETURN NEXT;
    RETURN;
  END IF;
  SELECT r.state, r.provider_ref INTO state, provider_ref FROM sandbox_refunds r WHERE r.refund_key = p_key;
  IF FOUND THEN
    fresh := false;
    RETURN NEXT;
    RETURN;
  END IF;
  SELECT COALESCE(SUM(r.amount_fen), 0) INTO total FROM sandbox_refunds r WHERE r.payment_ref = pay.provider_ref AND r.state <> 'FAILED';
  IF total + p_amount > pay.amount_fen THEN
    refused := 'REFUND_EXCEEDS_PAYMENT';
    RETURN NEXT;
    RETURN;
  END IF;
  INSERT INTO sandbox_refunds(provider_ref, refund_key, payment_ref, amount_fen, state, settle_at, created_at, notice_sent, lost)
  VALUES (p_ref, p_key, pay.provider_ref, p_amount,
          CASE WHEN outcome = 'PAID' THEN 'SUCCEEDED' ELSE 'PENDING' END,
          CASE WHEN outcome = 'PAID' THEN p_now ELSE p_settle_at END, p_now, outcome IS NOT DISTINCT FROM 'PAID', outcome IS NOT DISTINCT FROM 'LOST')
  RETURNING sandbox_refunds.state, sandbox_refunds.provider_ref INTO state, provider_ref;
  fresh := true;
  RETURN NEXT;
END
$$;
