-- The merchant portal (docs/portal.md): merchant users and their sessions, keys with a validity
-- end the merchant chooses, and audit entries that name the merchant they concern.

-- 1. Merchant users: each belongs to one merchant, with a role (src/domain/merchant-users.ts).
--    Invited (a one-time link, stored as its SHA-256) before they have a password; disabled, never
--    deleted (the audit log names them). The TOTP secret is kept to check codes (never answered
--    after it was set up); totp_last_step refuses a code used twice.
CREATE TABLE merchant_users (
  id                     text PRIMARY KEY,
  merchant_id            text NOT NULL REFERENCES merchants(id),
  login                  text NOT NULL UNIQUE,
  role                   text NOT NULL CHECK (role IN ('owner', 'developer', 'finance', 'readonly')),
  status                 text NOT NULL CHECK (status IN ('INVITED', 'ACTIVE', 'DISABLED')),
  password_hash          text,
  password_changed_at    timestamptz,
  invitation_sha256      text UNIQUE,
  invitation_expires_at  timestamptz,
  totp_secret            text,
  totp_pending_secret    text,
  totp_enabled_at        timestamptz,
  totp_last_step         bigint,
  created_at             timestamptz NOT NULL,
  updated_at             timestamptz NOT NULL
);
CREATE INDEX merchant_users_merchant ON merchant_users(merchant_id);

-- 2. Portal sessions, as the console's (operator_sessions): the cookie's id stored as its SHA-256.
CREATE TABLE merchant_user_sessions (
  id_sha256     text PRIMARY KEY,
  user_id       text NOT NULL REFERENCES merchant_users(id),
  csrf_token    text NOT NULL,
  source_ip     text,
  user_agent    text,
  created_at    timestamptz NOT NULL,
  last_seen_at  timestamptz NOT NULL,
  expires_at    timestamptz NOT NULL,
  revoked_at    timestamptz
);
CREATE INDEX merchant_user_sessions_user ON merchant_user_sessions(user_id);
CREATE INDEX merchant_user_sessions_expiry ON merchant_user_sessions(expires_at);

-- 3. A merchant key stops being accepted at valid_until (null: until it is disabled): the overlap
--    of a rotation the merchant chooses.
ALTER TABLE app_keys ADD COLUMN valid_until timestamptz;

-- 4. Audit entries of merchant users (portal), and the merchant each entry concerns, so that a
--    merchant reads the changes made to its own things, by its users or by operators.
ALTER TABLE audit_log DROP CONSTRAINT audit_log_actor_kind_check;
ALTER TABLE audit_log ADD CONSTRAINT audit_log_actor_kind_check CHECK (actor_kind IN ('SESSION', 'TOKEN', 'ADMIN_TOKEN', 'MERCHANT_USER'));
ALTER TABLE audit_log DROP CONSTRAINT audit_log_channel_check;
ALTER TABLE audit_log ADD CONSTRAINT audit_log_channel_check CHECK (channel IN ('console', 'api', 'cli', 'portal'));
ALTER TABLE audit_log ADD COLUMN merchant_id text;
ALTER TABLE audit_log ADD COLUMN merchant_user_id text;
ALTER TABLE audit_log ADD COLUMN merchant_user_name text;
CREATE INDEX audit_log_merchant ON audit_log(merchant_id, id DESC) WHERE merchant_id IS NOT NULL;

-- 5. The portal lists a merchant's orders newest first.
CREATE INDEX orders_merchant_created ON orders(merchant_id, created_at DESC, id DESC);
