-- The sandbox provider's refund booking (mps_sandbox_book_refund, migration 0090) sums the refunds
-- of the payment (sandbox_refunds.payment_ref), which no index led to: every refund read all the
-- sandbox's refunds. With a year of the sandbox's books (docs/performance.md, "A year of data") that
-- made a refund's booking 7x dearer (0.8 -> 5.7 ms) and the realistic mix's PostgreSQL CPU per
-- request more than double.
CREATE INDEX IF NOT EXISTS sandbox_refunds_payment ON sandbox_refunds (payment_ref);
