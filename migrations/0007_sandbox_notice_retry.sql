-- The sandbox's payment notices are retried until the service acknowledges them, as a real
-- provider's are (src/providers/sandbox/sandbox.ts, docs/decisions.md "Sandbox").
--
-- A buyer's payment and the notice it owes are recorded together: the row's state changes and
-- notice_due_at is set in one statement. The notice is sent at once; when the service has applied
-- it, notice_due_at is cleared. If the service was cut off in between (a crash, a failed
-- transaction), the sandbox sends the notice again when it falls due, with a growing interval
-- (notice_tries), until it is acknowledged.
ALTER TABLE sandbox_payments ADD COLUMN notice_due_at timestamptz, ADD COLUMN notice_tries integer NOT NULL DEFAULT 0;
CREATE INDEX sandbox_payments_notice_due ON sandbox_payments(notice_due_at) WHERE notice_due_at IS NOT NULL;
