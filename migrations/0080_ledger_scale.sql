-- A ledger of tens of millions of orders (docs/performance.md, "A year of data"; docs/configuration.md,
-- "What is kept, for how long").
--
-- Reads that must stay proportional to what they return at any ledger size:
-- the console's refund list, newest first (was a sort of every refund);
CREATE INDEX IF NOT EXISTS refunds_created ON refunds (created_at DESC, id DESC);
-- the dashboard's counts of uncertain attempts and refunds and of dead events (were scans of the tables);
CREATE INDEX IF NOT EXISTS attempts_unknown ON attempts (order_id) WHERE state = 'UNKNOWN';
CREATE INDEX IF NOT EXISTS refunds_unknown ON refunds (order_id) WHERE state = 'UNKNOWN';
CREATE INDEX IF NOT EXISTS events_dead ON events (app_id, created_at) WHERE status = 'DEAD';
-- retention of the delivery log: the failed attempts, oldest first (PURGE_HISTORY).
CREATE INDEX IF NOT EXISTS event_deliveries_failed ON event_deliveries (attempted_at)
  WHERE status_code IS NULL OR status_code NOT BETWEEN 200 AND 299;

-- Autovacuum of the large tables: by default a table is vacuumed after 20% of it changed and analyzed
-- after 10%, which at 20 million orders is millions of dead rows and statistics days behind. These
-- tables are vacuumed and analyzed after 1-2% (still minutes apart at the peak rate).
ALTER TABLE orders SET (autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_insert_scale_factor = 0.02, autovacuum_analyze_scale_factor = 0.02);
ALTER TABLE attempts SET (autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_insert_scale_factor = 0.02, autovacuum_analyze_scale_factor = 0.02);
ALTER TABLE events SET (autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_insert_scale_factor = 0.02, autovacuum_analyze_scale_factor = 0.02);
ALTER TABLE event_deliveries SET (autovacuum_vacuum_scale_factor = 0.02, autovacuum_vacuum_insert_scale_factor = 0.02, autovacuum_analyze_scale_factor = 0.02);
ALTER TABLE refunds SET (autovacuum_vacuum_scale_factor = 0.02, autovacuum_vacuum_insert_scale_factor = 0.02, autovacuum_analyze_scale_factor = 0.02);
ALTER TABLE sandbox_payments SET (autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_insert_scale_factor = 0.02, autovacuum_analyze_scale_factor = 0.02);
-- Queues that are written and purged all the time: vacuumed after 5% turned over.
ALTER TABLE nonces SET (autovacuum_vacuum_scale_factor = 0.05, autovacuum_analyze_scale_factor = 0.05);
ALTER TABLE request_replays SET (autovacuum_vacuum_scale_factor = 0.05, autovacuum_analyze_scale_factor = 0.05);
