-- The X-SVC-Request-Ids of the re-creates an order has seen: the one that made an attempt (the
-- winner) and those that overlapped it (the losers). A re-create whose request id is already
-- recorded for the order is the retry of one of them: of a request cut off before its answer was
-- recorded (its request-id lease lapsed), or of a loser answered 503 while the winner's attempt was
-- still being created. It is answered from the order as it is now and makes no attempt
-- (src/usecases/orders.ts, docs/state-machines.md). Kept as long as request-id answers (24 h): the
-- purge worker deletes older rows by created_at.
CREATE TABLE recreate_requests (
  order_id   text NOT NULL,
  request_id text NOT NULL,
  attempt_id text,
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (order_id, request_id)
);
CREATE INDEX recreate_requests_created ON recreate_requests(created_at);
