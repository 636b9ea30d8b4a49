-- The workers' order claims (src/workers.ts) as functions that plan with sequential scans off, as
-- mps_accept_attempts does (0005). Each claim has a small partial index holding its candidates
-- (orders_expiry, orders_unknown), but without statistics on a table that grew faster than
-- autovacuum analyzed it, PostgreSQL preferred to scan and sort every order on every pass: ~10 ms
-- each with 100,000 orders, tens of passes a second under load (docs/performance.md, "Plans that
-- stay right as tables grow").
CREATE FUNCTION mps_claim_expired_orders(p_limit integer) RETURNS SETOF text LANGUAGE sql AS $$
  UPDATE orders SET worker_lease_until = now() + interval '30 seconds'
   WHERE id IN (SELECT id FROM orders
                 WHERE status IN ('CREATED', 'PAYING') AND expire_at <= now()
                   AND (worker_lease_until IS NULL OR worker_lease_until < now())
                 ORDER BY expire_at LIMIT p_limit FOR UPDATE SKIP LOCKED)
  RETURNING id
$$;
ALTER FUNCTION mps_claim_expired_orders(integer) SET enable_seqscan = off;

CREATE FUNCTION mps_claim_pending_closes(p_limit integer) RETURNS SETOF text LANGUAGE sql AS $$
  UPDATE orders SET worker_lease_until = now() + interval '30 seconds'
   WHERE id IN (SELECT id FROM orders
                 WHERE close_pending IS NOT NULL AND status IN ('CREATED', 'PAYING', 'UNKNOWN')
                   AND (worker_lease_until IS NULL OR worker_lease_until < now())
                 ORDER BY updated_at LIMIT p_limit FOR UPDATE SKIP LOCKED)
  RETURNING id
$$;
ALTER FUNCTION mps_claim_pending_closes(integer) SET enable_seqscan = off;
