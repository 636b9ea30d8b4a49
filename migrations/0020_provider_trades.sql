-- One attempt, several provider trades (docs/cashier.md, docs/providers.md "Provider trades").
--
-- An attempt's own provider order (out_trade_no = the attempt id) is made when the attempt is
-- created: WeChat Pay's H5 order, Alipay's collection code. The cashier makes further orders of the
-- same attempt when the page is opened where that one cannot be paid (inside WeChat: a JSAPI order
-- for the buyer's openid; on a computer: a Native order, a code to scan). WeChat Pay refuses an
-- out_trade_no used again with another product ("商户订单号重复"), so each has a number of its own:
-- a row here, whose id is that number. All of them belong to the attempt: one paid makes the
-- attempt paid; the others are closed; a second one paid is a duplicate payment, refunded.
CREATE TABLE provider_trades (
  id            text PRIMARY KEY,          -- the provider's merchant order number (out_trade_no)
  attempt_id    text NOT NULL REFERENCES attempts(id),
  order_id      text NOT NULL,
  provider      text NOT NULL,
  product       text NOT NULL CHECK (product IN ('JSAPI', 'NATIVE')),
  -- JSAPI: the buyer's openid the order is made for (never shown or logged); '' otherwise.
  payer         text NOT NULL DEFAULT '',
  -- The page's handle of a JSAPI trade (its URL names this, never the openid); null otherwise.
  handle        text UNIQUE,
  state         text NOT NULL CHECK (state IN ('NEW', 'OPEN', 'PAID', 'CLOSED')),
  -- The material the provider answered (prepay_id, code_url); null until OPEN.
  material      text,
  provider_ref  text,
  created_at    timestamptz NOT NULL,
  updated_at    timestamptz NOT NULL,
  UNIQUE (attempt_id, product, payer)
);
CREATE INDEX provider_trades_order ON provider_trades(order_id);

-- The provider order that paid the order, when it is not the paid attempt's own (a trade above).
ALTER TABLE orders ADD COLUMN paid_trade_no text;

-- A duplicate payment is one provider order paid after another: keyed by that order's number (an
-- attempt can now be paid twice, through two of its trades), which is also what is refunded.
ALTER TABLE duplicate_payments ADD COLUMN trade_no text;
UPDATE duplicate_payments SET trade_no = attempt_id;
ALTER TABLE duplicate_payments ALTER COLUMN trade_no SET NOT NULL;
ALTER TABLE duplicate_payments DROP CONSTRAINT duplicate_payments_attempt_id_key;
CREATE UNIQUE INDEX duplicate_payments_trade_no ON duplicate_payments(trade_no);
CREATE INDEX duplicate_payments_attempt ON duplicate_payments(attempt_id);

-- Closing one provider trade that can no longer be used (a follow-up of its own kind).
ALTER TABLE follow_ups DROP CONSTRAINT follow_ups_kind_check;
ALTER TABLE follow_ups ADD CONSTRAINT follow_ups_kind_check CHECK (kind IN ('CLOSE_STRAY_ATTEMPT', 'REFUND_DUPLICATE', 'CLOSE_TRADE'));

-- WeChat's web authorization (OAuth 2.0 snsapi_base) from the cashier: each `state` sent to WeChat
-- is bound to the attempt whose page asked for it, valid 10 minutes, used once.
CREATE TABLE cashier_oauth_states (
  state       text PRIMARY KEY,
  attempt_id  text NOT NULL,
  expires_at  timestamptz NOT NULL,
  used_at     timestamptz
);
CREATE INDEX cashier_oauth_states_expiry ON cashier_oauth_states(expires_at);
