-- Named operators of the back office, their console sessions and API tokens, the sign-in
-- throttle, and the append-only audit log of every back-office change (docs/console.md).

-- 1. Operators: a login name, a role (src/domain/operators.ts), a scrypt password hash
--    (`scrypt$N$r$p$salt$hash`, never the password). Disabled, never deleted: the audit log names them.
CREATE TABLE operators (
  id                   text PRIMARY KEY,
  name                 text NOT NULL UNIQUE,
  role                 text NOT NULL CHECK (role IN ('admin', 'operations', 'finance', 'support')),
  status               text NOT NULL DEFAULT 'ACTIVE' CHECK (status IN ('ACTIVE', 'DISABLED')),
  password_hash        text NOT NULL,
  password_changed_at  timestamptz NOT NULL,
  created_at           timestamptz NOT NULL,
  updated_at           timestamptz NOT NULL
);

-- 2. Console sessions. The cookie carries a random id; only its SHA-256 is stored, so a read of
--    this table gives no usable cookie. Idle and absolute timeouts are checked against the
--    service's clock; a revoked or expired row is refused and purged later.
CREATE TABLE operator_sessions (
  id_sha256     text PRIMARY KEY,
  operator_id   text NOT NULL REFERENCES operators(id),
  csrf_token    text NOT NULL,
  source_ip     text,
  user_agent    text,
  created_at    timestamptz NOT NULL,
  last_seen_at  timestamptz NOT NULL,
  expires_at    timestamptz NOT NULL,
  revoked_at    timestamptz
);
CREATE INDEX operator_sessions_operator ON operator_sessions(operator_id);
CREATE INDEX operator_sessions_expiry ON operator_sessions(expires_at);

-- 3. Per-operator API tokens for the admin API: shown once, stored as their SHA-256 (a token is
--    256 random bits, so a fast hash is enough), with the operator's role at the time of use.
CREATE TABLE operator_tokens (
  id            text PRIMARY KEY,
  operator_id   text NOT NULL REFERENCES operators(id),
  label         text NOT NULL,
  token_sha256  text NOT NULL UNIQUE,
  prefix        text NOT NULL,
  created_at    timestamptz NOT NULL,
  last_used_at  timestamptz,
  revoked_at    timestamptz
);
CREATE INDEX operator_tokens_operator ON operator_tokens(operator_id);

-- 4. Failed sign-ins, counted per login name and per source address over a sliding window.
--    Shared by every instance (the database is), purged once out of the window.
CREATE TABLE sign_in_failures (
  id         bigserial PRIMARY KEY,
  name       text NOT NULL,
  source_ip  text NOT NULL,
  at         timestamptz NOT NULL
);
CREATE INDEX sign_in_failures_name ON sign_in_failures(name, at);
CREATE INDEX sign_in_failures_source ON sign_in_failures(source_ip, at);

-- 5. The audit log: one row per back-office change, written in the same transaction as the
--    change. Who (an operator through a session or a token, or the ADMIN_TOKEN), through which
--    channel, from which address, with which request id; what (an action on an entity, and the
--    changed fields before and after, secrets never included).
CREATE TABLE audit_log (
  id             bigserial PRIMARY KEY,
  at             timestamptz NOT NULL,
  actor_kind     text NOT NULL CHECK (actor_kind IN ('SESSION', 'TOKEN', 'ADMIN_TOKEN')),
  operator_id    text,
  operator_name  text,
  token_id       text,
  channel        text NOT NULL CHECK (channel IN ('console', 'api', 'cli')),
  source_ip      text,
  request_id     text NOT NULL,
  action         text NOT NULL,
  entity_type    text NOT NULL,
  entity_id      text NOT NULL,
  before         jsonb,
  after          jsonb
);
CREATE INDEX audit_log_at ON audit_log(at DESC, id DESC);
CREATE INDEX audit_log_entity ON audit_log(entity_id, id DESC);
CREATE INDEX audit_log_operator ON audit_log(operator_name, id DESC);

-- Append-only: no statement of the service updates or deletes an entry, and the database refuses
-- one that tries (the triggers are dropped only with the table).
CREATE FUNCTION audit_log_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'audit_log is append-only: % refused', TG_OP;
END
$$;
CREATE TRIGGER audit_log_no_update_delete BEFORE UPDATE OR DELETE ON audit_log
  FOR EACH ROW EXECUTE FUNCTION audit_log_append_only();
CREATE TRIGGER audit_log_no_truncate BEFORE TRUNCATE ON audit_log
  FOR EACH STATEMENT EXECUTE FUNCTION audit_log_append_only();

-- 6. The console lists and searches orders newest first (src/store/back-office-reads.ts), and the
--    dashboard counts today's and the last 24 hours' orders: by creation time.
CREATE INDEX orders_created ON orders(created_at DESC, id DESC);
