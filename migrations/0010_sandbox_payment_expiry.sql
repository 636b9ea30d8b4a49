-- The sandbox provider keeps the payment's own expiry, as a real provider keeps the time_expire it
-- was opened with: after it, the buyer can no longer pay or fail the payment (the service's expiry
-- worker then closes it). Rows opened before this migration have none and keep today's behaviour.
ALTER TABLE sandbox_payments ADD COLUMN expire_at timestamptz;
