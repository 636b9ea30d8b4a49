-- The X-SVC-Request-Id of the re-create that made an attempt (NULL for an order's first attempt,
-- whose business key is the order number). A re-create whose request id already made an attempt
-- of the order is the retry of a request cut off before its answer was recorded (its request-id
-- lease lapsed): it is answered from that attempt and makes no second one
-- (src/usecases/orders.ts, docs/decisions.md).
ALTER TABLE attempts ADD COLUMN request_id text;
