-- Merchant statements, the merchants' event log, and reconciliation with the providers'
-- statements (docs/statements.md, docs/reconciliation.md).
--
-- Operators: like every migration this runs in one transaction at start-up, so the indexes below
-- are built without CONCURRENTLY: writes to events wait while each build reads the events table
-- once.

-- 1. The events of an app in time order: the merchant's statement of a day (every final state
--    change of the day is an event, written with the change and never changed afterwards) and the
--    merchant's event list, newest first, by keyset (created_at, id).
CREATE INDEX events_app_created ON events(app_id, created_at, id);

-- 2. The ledger's side of a provider reconciliation: the payments and refunds that succeeded in a
--    day, across apps.
CREATE INDEX events_settled_created ON events(created_at) WHERE event_type IN ('PAYMENT_SUCCEEDED', 'REFUND_SUCCEEDED');

-- 3. What a merchant sees of each delivery attempt: the start of the receiver's answer (at most 200
--    characters, printable), and the merchant's requests to deliver an event again (rate-limited
--    per event and per app).
ALTER TABLE event_deliveries ADD COLUMN response_excerpt text;
ALTER TABLE events ADD COLUMN redelivery_requested_at timestamptz, ADD COLUMN redelivery_requests integer NOT NULL DEFAULT 0;
CREATE INDEX events_redelivery_requested ON events(app_id, redelivery_requested_at) WHERE redelivery_requested_at IS NOT NULL;

-- 4. The digest of a closed day's statement file, computed once: its rows never change once the
--    day is closed, so the file is the same bytes every time it is made. Keyed by what makes the
--    bytes: the format version, the compression and its encoder (the zlib version for gzip).
CREATE TABLE statement_files (
  app_id          text NOT NULL,
  day             date NOT NULL,
  format_version  integer NOT NULL,
  compression     text NOT NULL CHECK (compression IN ('NONE', 'GZIP')),
  encoder         text NOT NULL,
  sha256          text NOT NULL,
  size_bytes      bigint NOT NULL,
  row_count       integer NOT NULL,
  totals          json NOT NULL,
  computed_at     timestamptz NOT NULL,
  PRIMARY KEY (app_id, day, format_version, compression, encoder)
);

-- 5. The sandbox provider's statement of a day: when each payment was paid, and the refunds it
--    lost (a programmed fault: settled and notified, then missing from its books).
ALTER TABLE sandbox_payments ADD COLUMN paid_at timestamptz;
UPDATE sandbox_payments SET paid_at = updated_at WHERE state = 'PAID';
CREATE INDEX sandbox_payments_paid ON sandbox_payments(paid_at) WHERE paid_at IS NOT NULL;
ALTER TABLE sandbox_refunds ADD COLUMN lost boolean NOT NULL DEFAULT false;
CREATE INDEX sandbox_refunds_settle ON sandbox_refunds(settle_at);

-- 6. Reconciliation runs: one per provider and day and time it was asked for (the daily run of a
--    day is one row, retried in place), claimed by the workers with a lease.
CREATE TABLE reconciliation_runs (
  id              bigserial PRIMARY KEY,
  provider        text NOT NULL,
  day             date NOT NULL,
  trigger         text NOT NULL CHECK (trigger IN ('SCHEDULED', 'ON_DEMAND')),
  status          text NOT NULL CHECK (status IN ('QUEUED', 'RUNNING', 'COMPLETED', 'FAILED')),
  tries           integer NOT NULL DEFAULT 0,
  due_at          timestamptz NOT NULL,
  lease_until     timestamptz,
  provider_lines  integer,
  ledger_lines    integer,
  matched         integer,
  converged       integer,
  discrepancies   integer,
  error           text,
  created_at      timestamptz NOT NULL,
  started_at      timestamptz,
  finished_at     timestamptz
);
CREATE UNIQUE INDEX reconciliation_runs_scheduled ON reconciliation_runs(provider, day) WHERE trigger = 'SCHEDULED';
CREATE INDEX reconciliation_runs_due ON reconciliation_runs(due_at) WHERE status IN ('QUEUED', 'RUNNING', 'FAILED');
CREATE INDEX reconciliation_runs_day ON reconciliation_runs(provider, day, id);

-- Every line of a run: each line of the provider's statement, and each payment or refund the
-- ledger has for the day that the statement lacks, with what the run made of it (MATCHED,
-- CONVERGED, or a discrepancy kind) and the discrepancy it became (provider_discrepancies, the one
-- place an operator looks). Kept for the latest completed run of a provider and day.
CREATE TABLE reconciliation_lines (
  run_id          bigint NOT NULL REFERENCES reconciliation_runs(id) ON DELETE CASCADE,
  line_no         integer NOT NULL,
  origin          text NOT NULL CHECK (origin IN ('PROVIDER', 'LEDGER')),
  kind            text NOT NULL CHECK (kind IN ('PAYMENT', 'REFUND')),
  subject_id      text NOT NULL,
  provider_ref    text,
  amount_fen      bigint,
  state           text NOT NULL,
  occurred_at     timestamptz,
  outcome         text,
  discrepancy_id  bigint,
  PRIMARY KEY (run_id, line_no)
);
CREATE INDEX reconciliation_lines_subject ON reconciliation_lines(run_id, subject_id);
CREATE INDEX reconciliation_lines_outcome ON reconciliation_lines(run_id, outcome, line_no);
