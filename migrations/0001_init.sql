-- Merchant payment service: initial schema. Money is bigint fen everywhere.

CREATE TABLE merchants (
  id            text PRIMARY KEY,
  name          text NOT NULL,
  entity_type   text NOT NULL CHECK (entity_type IN ('INDIVIDUAL', 'CORPORATE')),
  created_at    timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE apps (
  id                        text PRIMARY KEY,
  merchant_id               text NOT NULL REFERENCES merchants(id),
  status                    text NOT NULL DEFAULT 'ACTIVE' CHECK (status IN ('ACTIVE', 'DISABLED')),
  notify_url                text,
  channels                  text[] NOT NULL,
  trade_scopes              text[] NOT NULL,
  voided_links              text[] NOT NULL DEFAULT '{}',
  ip_allowlist              text[] NOT NULL DEFAULT '{}',
  payment_window_seconds    integer NOT NULL CHECK (payment_window_seconds BETWEEN 60 AND 7200),
  daily_amount_ceiling_fen  bigint CHECK (daily_amount_ceiling_fen IS NULL OR daily_amount_ceiling_fen > 0),
  rate_limit_per_second     integer NOT NULL CHECK (rate_limit_per_second > 0),
  created_at                timestamptz NOT NULL DEFAULT now(),
  updated_at                timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX apps_merchant ON apps(merchant_id);

CREATE TABLE app_keys (
  app_id          text NOT NULL REFERENCES apps(id),
  key_id          text NOT NULL,
  public_key_pem  text NOT NULL,
  status          text NOT NULL DEFAULT 'ACTIVE' CHECK (status IN ('ACTIVE', 'DISABLED')),
  created_at      timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (app_id, key_id)
);

-- Only the last four digits of a card are ever stored: the full number cannot leak.
CREATE TABLE settlement_accounts (
  id                  text PRIMARY KEY,
  merchant_id         text NOT NULL REFERENCES merchants(id),
  entity_type         text NOT NULL CHECK (entity_type IN ('INDIVIDUAL', 'CORPORATE')),
  entity_name         text NOT NULL,
  merchant_no         text NOT NULL,
  card_last4          text NOT NULL CHECK (card_last4 ~ '^[0-9]{4}$'),
  agreed_ceiling_fen  bigint CHECK (agreed_ceiling_fen IS NULL OR agreed_ceiling_fen > 0),
  created_at          timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX settlement_accounts_merchant ON settlement_accounts(merchant_id);

CREATE TABLE allocations (
  merchant_id         text PRIMARY KEY REFERENCES merchants(id),
  mode                text NOT NULL CHECK (mode IN ('SINGLE', 'PRIORITY', 'RATIO')),
  participants        text[] NOT NULL,
  ratios              jsonb,
  unavailable_policy  text NOT NULL CHECK (unavailable_policy IN ('FAIL', 'NEXT_AVAILABLE', 'REDISTRIBUTE')),
  updated_at          timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE fee_rules (
  merchant_id        text PRIMARY KEY REFERENCES merchants(id),
  rule_version       integer NOT NULL,
  standard_rate_bps  integer NOT NULL,
  large_rate_bps     integer NOT NULL,
  threshold_fen      bigint NOT NULL,
  merchant_rate_bps  integer NOT NULL,
  updated_at         timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE orders (
  id               text PRIMARY KEY,
  app_id           text NOT NULL REFERENCES apps(id),
  merchant_id      text NOT NULL REFERENCES merchants(id),
  out_trade_no     text NOT NULL,
  channel          text NOT NULL,
  trade_scope      text,
  amount_fen       bigint NOT NULL CHECK (amount_fen > 0),
  currency         text NOT NULL,
  subject          text NOT NULL,
  description      text,
  attach           text,
  return_url       text,
  payer_client_ip  text NOT NULL,
  digest           text NOT NULL,
  links            text[] NOT NULL,
  status           text NOT NULL CHECK (status IN ('CREATED', 'PAYING', 'SUCCEEDED', 'CLOSED', 'FAILED', 'UNKNOWN')),
  closed_reason    text CHECK (closed_reason IN ('EXPIRED', 'CLOSE_REQUESTED', 'PROVIDER_CLOSED', 'MERCHANT_CLOSED')),
  failure_reason   text,
  expire_at        timestamptz NOT NULL,
  fee_projection   json NOT NULL,  -- json keeps the field order it was written in
  state_version    integer NOT NULL DEFAULT 1,
  paid_attempt_id  text,
  paid_at          timestamptz,
  close_pending    text,          -- closedReason wanted by a close whose provider outcome was uncertain
  worker_lease_until timestamptz, -- expiry/reconciliation claim (several instances)
  created_at       timestamptz NOT NULL DEFAULT now(),
  updated_at       timestamptz NOT NULL DEFAULT now(),
  UNIQUE (app_id, out_trade_no)
);
CREATE INDEX orders_expiry ON orders(expire_at) WHERE status IN ('CREATED', 'PAYING');
CREATE INDEX orders_unknown ON orders(updated_at) WHERE status = 'UNKNOWN' OR close_pending IS NOT NULL;

CREATE TABLE attempts (
  id              text PRIMARY KEY,
  order_id        text NOT NULL REFERENCES orders(id),
  seq             integer NOT NULL,
  state           text NOT NULL CHECK (state IN ('PENDING', 'ACCEPTED', 'UNKNOWN', 'PAID', 'CLOSED', 'FAILED')),
  cashier_token   text NOT NULL UNIQUE,
  qr_code         text,
  provider_ref    text,
  expire_at       timestamptz NOT NULL,
  next_check_at   timestamptz,
  check_count     integer NOT NULL DEFAULT 0,
  created_at      timestamptz NOT NULL DEFAULT now(),
  updated_at      timestamptz NOT NULL DEFAULT now(),
  UNIQUE (order_id, seq)
);
-- One attempt being created per order at a time: the winner of concurrent re-creates.
CREATE UNIQUE INDEX attempts_one_pending ON attempts(order_id) WHERE state = 'PENDING';
CREATE INDEX attempts_unknown ON attempts(next_check_at) WHERE state IN ('UNKNOWN', 'PENDING');

CREATE TABLE refunds (
  id              text PRIMARY KEY,
  order_id        text NOT NULL REFERENCES orders(id),
  app_id          text NOT NULL REFERENCES apps(id),
  out_refund_no   text NOT NULL,
  amount_fen      bigint NOT NULL CHECK (amount_fen > 0),
  reason          text,
  digest          text NOT NULL,
  state           text NOT NULL CHECK (state IN ('REQUESTED', 'PENDING', 'SUCCEEDED', 'FAILED', 'UNKNOWN')),
  failure_reason  text,
  provider_ref    text,
  automatic       boolean NOT NULL DEFAULT false,
  next_check_at   timestamptz,
  check_count     integer NOT NULL DEFAULT 0,
  created_at      timestamptz NOT NULL DEFAULT now(),
  updated_at      timestamptz NOT NULL DEFAULT now(),
  UNIQUE (app_id, out_refund_no)
);
CREATE INDEX refunds_order ON refunds(order_id);
CREATE INDEX refunds_unsettled ON refunds(next_check_at) WHERE state IN ('REQUESTED', 'PENDING', 'UNKNOWN');

-- A second payment of an order (an old uncertain attempt that turned out paid too).
CREATE TABLE duplicate_payments (
  id              text PRIMARY KEY,
  order_id        text NOT NULL REFERENCES orders(id),
  attempt_id      text NOT NULL UNIQUE REFERENCES attempts(id),
  amount_fen      bigint NOT NULL,
  refund_state    text NOT NULL CHECK (refund_state IN ('PENDING', 'REFUNDED', 'FAILED', 'UNKNOWN')),
  provider_ref    text,
  created_at      timestamptz NOT NULL DEFAULT now(),
  updated_at      timestamptz NOT NULL DEFAULT now()
);

-- Daily created amount per app (Asia/Shanghai calendar day), reserved atomically.
CREATE TABLE app_daily_amounts (
  app_id      text NOT NULL REFERENCES apps(id),
  day         date NOT NULL,
  amount_fen  bigint NOT NULL,
  PRIMARY KEY (app_id, day)
);

-- Transactional outbox of event notifications.
CREATE TABLE events (
  id               text PRIMARY KEY,
  app_id           text NOT NULL REFERENCES apps(id),
  order_id         text NOT NULL REFERENCES orders(id),
  refund_id        text REFERENCES refunds(id),
  event_type       text NOT NULL,
  state_version    integer NOT NULL,
  payload          json NOT NULL,  -- the exact text delivered and signed
  status           text NOT NULL DEFAULT 'PENDING' CHECK (status IN ('PENDING', 'DELIVERED', 'DEAD')),
  attempts         integer NOT NULL DEFAULT 0,
  next_attempt_at  timestamptz NOT NULL DEFAULT now(),
  locked_by        text,
  locked_until     timestamptz,
  last_error       text,
  created_at       timestamptz NOT NULL DEFAULT now(),
  delivered_at     timestamptz
);
CREATE INDEX events_due ON events(next_attempt_at) WHERE status = 'PENDING';
CREATE INDEX events_order ON events(order_id, state_version);

CREATE TABLE event_deliveries (
  id            bigserial PRIMARY KEY,
  event_id      text NOT NULL REFERENCES events(id),
  attempt_no    integer NOT NULL,
  attempted_at  timestamptz NOT NULL,
  status_code   integer,
  error         text,
  duration_ms   integer NOT NULL
);
CREATE INDEX event_deliveries_event ON event_deliveries(event_id, id);

-- Replay protection: nonces per app, remembered at least 600 s.
CREATE TABLE nonces (
  app_id      text NOT NULL,
  nonce       text NOT NULL,
  expires_at  timestamptz NOT NULL,
  PRIMARY KEY (app_id, nonce)
);
CREATE INDEX nonces_expiry ON nonces(expires_at);

-- X-SVC-Request-Id replay of the POST operations, kept at least 24 h.
CREATE TABLE request_replays (
  app_id        text NOT NULL,
  request_id    text NOT NULL,
  method        text NOT NULL,
  target        text NOT NULL,
  body_sha256   text NOT NULL,
  state         text NOT NULL CHECK (state IN ('IN_PROGRESS', 'DONE')),
  lease_until   timestamptz,
  status_code   integer,
  response_body text,
  created_at    timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (app_id, request_id)
);
CREATE INDEX request_replays_created ON request_replays(created_at);

-- Platform IP policy set at run time from the back office (overrides the environment defaults).
CREATE TABLE platform_settings (
  name        text PRIMARY KEY,
  value       jsonb NOT NULL,
  updated_at  timestamptz NOT NULL DEFAULT now()
);

-- The sandbox provider's own books (it is a separate party: the service never reads these directly).
CREATE TABLE sandbox_payments (
  provider_ref   text PRIMARY KEY,
  attempt_id     text NOT NULL UNIQUE,
  channel        text NOT NULL,
  amount_fen     bigint NOT NULL,
  state          text NOT NULL CHECK (state IN ('OPEN', 'PAID', 'CLOSED', 'FAILED')),
  created_at     timestamptz NOT NULL DEFAULT now(),
  updated_at     timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE sandbox_refunds (
  provider_ref   text PRIMARY KEY,
  refund_key     text NOT NULL UNIQUE,
  payment_ref    text NOT NULL,
  amount_fen     bigint NOT NULL,
  state          text NOT NULL CHECK (state IN ('PENDING', 'SUCCEEDED', 'FAILED')),
  settle_at      timestamptz NOT NULL,
  created_at     timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE sandbox_faults (
  id          bigserial PRIMARY KEY,
  operation   text NOT NULL,
  outcome     text NOT NULL,
  delay_ms    integer,
  remaining   integer NOT NULL CHECK (remaining >= 0),
  created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX sandbox_faults_op ON sandbox_faults(operation, id) WHERE remaining > 0;
