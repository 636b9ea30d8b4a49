/** Repository: merchants, apps, keys, settlement accounts, allocation, fee rules. */
import type { Allocation, EntityType, FeeRule } from '../domain/money.ts';
import type { Queryable } from './db.ts';

export interface AppRow {
  id: string;
  merchantId: string;
  status: 'ACTIVE' | 'DISABLED';
  notifyUrl: string | null;
  channels: string[];
  tradeScopes: string[];
  voidedLinks: string[];
  ipAllowlist: string[];
  paymentWindowSeconds: number;
  dailyAmountCeilingFen: number | null;
  rateLimitPerSecond: number;
  /** Statement files of the app made at once across instances; null: STATEMENT_DOWNLOADS_PER_APP. */
  statementDownloadsAtOnce: number | null;
  createdAt: Date;
  updatedAt: Date;
}

const APP_COLS = `id, merchant_id AS "merchantId", status, notify_url AS "notifyUrl", channels, trade_scopes AS "tradeScopes",
  voided_links AS "voidedLinks", ip_allowlist AS "ipAllowlist", payment_window_seconds AS "paymentWindowSeconds",
  daily_amount_ceiling_fen AS "dailyAmountCeilingFen", rate_limit_per_second AS "rateLimitPerSecond",
  statement_downloads_at_once AS "statementDownloadsAtOnce", created_at AS "createdAt", updated_at AS "updatedAt"`;

/** `lock`: FOR UPDATE, for a change that records the row as it was (the audit log's before). */
export async function getApp(db: Queryable, appId: string, lock = false): Promise<AppRow | null> {
  const r = await db.query<AppRow>(`SELECT ${APP_COLS} FROM apps WHERE id = $1${lock ? ' FOR UPDATE' : ''}`, [appId]);
  return r.rows[0] ?? null;
}

export async function listApps(db: Queryable, merchantId: string): Promise<AppRow[]> {
  return (await db.query<AppRow>(`SELECT ${APP_COLS} FROM apps WHERE merchant_id = $1 ORDER BY created_at`, [merchantId])).rows;
}

export interface MerchantRow {
  id: string;
  name: string;
  entityType: EntityType;
  createdAt: Date;
}

/** `lock`: FOR UPDATE, serializing changes of the merchant's configuration (accounts, allocation, fee rule). */
export async function getMerchant(db: Queryable, id: string, lock = false): Promise<MerchantRow | null> {
  const r = await db.query<MerchantRow>(
    `SELECT id, name, entity_type AS "entityType", created_at AS "createdAt" FROM merchants WHERE id = $1${lock ? ' FOR UPDATE' : ''}`,
    [id],
  );
  return r.rows[0] ?? null;
}

export interface AppKeyRow {
  appId: string;
  keyId: string;
  publicKeyPem: string;
  status: 'ACTIVE' | 'DISABLED';
  /** From this instant the key is no longer accepted (the end of a rotation's overlap); null: until disabled. */
  validUntil: Date | null;
  createdAt: Date;
}

const KEY_COLS = `app_id AS "appId", key_id AS "keyId", public_key_pem AS "publicKeyPem", status, valid_until AS "validUntil", created_at AS "createdAt"`;

export async function getAppKey(db: Queryable, appId: string, keyId: string, lock = false): Promise<AppKeyRow | null> {
  const r = await db.query<AppKeyRow>(`SELECT ${KEY_COLS} FROM app_keys WHERE app_id = $1 AND key_id = $2${lock ? ' FOR UPDATE' : ''}`, [
    appId,
    keyId,
  ]);
  return r.rows[0] ?? null;
}

export interface AccountRow {
  accountId: string;
  merchantId: string;
  entityType: EntityType;
  entityName: string;
  merchantNo: string;
  cardLast4: string;
  agreedCeilingFen: number | null;
  createdAt: Date;
}

export async function listAccounts(db: Queryable, merchantId: string): Promise<AccountRow[]> {
  const r = await db.query<AccountRow>(
    `SELECT id AS "accountId", merchant_id AS "merchantId", entity_type AS "entityType", entity_name AS "entityName",
            merchant_no AS "merchantNo", card_last4 AS "cardLast4", agreed_ceiling_fen AS "agreedCeilingFen", created_at AS "createdAt"
       FROM settlement_accounts WHERE merchant_id = $1 ORDER BY created_at, id`,
    [merchantId],
  );
  return r.rows;
}

export async function getAllocation(db: Queryable, merchantId: string): Promise<(Allocation & { updatedAt: Date }) | null> {
  const r = await db.query<Allocation & { updatedAt: Date }>(
    `SELECT mode, participants, ratios, unavailable_policy AS "unavailablePolicy", updated_at AS "updatedAt"
       FROM allocations WHERE merchant_id = $1`,
    [merchantId],
  );
  return r.rows[0] ?? null;
}

export async function getFeeRule(db: Queryable, merchantId: string): Promise<FeeRule | null> {
  const r = await db.query<FeeRule>(
    `SELECT rule_version AS "ruleVersion", standard_rate_bps AS "standardRateBps", large_rate_bps AS "largeRateBps",
            threshold_fen AS "thresholdFen", merchant_rate_bps AS "merchantRateBps"
       FROM fee_rules WHERE merchant_id = $1`,
    [merchantId],
  );
  return r.rows[0] ?? null;
}

// --- back-office writes ------------------------------------------------------------------------

export async function insertMerchant(
  db: Queryable,
  m: { id: string; name: string; entityType: EntityType },
  now: Date,
): Promise<MerchantRow> {
  const r = await db.query<MerchantRow>(
    'INSERT INTO merchants(id, name, entity_type, created_at) VALUES ($1, $2, $3, $4) RETURNING id, name, entity_type AS "entityType", created_at AS "createdAt"',
    [m.id, m.name, m.entityType, now],
  );
  return r.rows[0]!;
}

export async function listMerchants(db: Queryable, limit: number): Promise<MerchantRow[]> {
  const r = await db.query<MerchantRow>(
    'SELECT id, name, entity_type AS "entityType", created_at AS "createdAt" FROM merchants ORDER BY created_at DESC LIMIT $1',
    [limit],
  );
  return r.rows;
}

export interface NewApp {
  id: string;
  merchantId: string;
  notifyUrl: string | null;
  channels: string[];
  tradeScopes: string[];
  voidedLinks: string[];
  ipAllowlist: string[];
  paymentWindowSeconds: number;
  dailyAmountCeilingFen: number | null;
  rateLimitPerSecond: number;
  statementDownloadsAtOnce: number | null;
}

export async function insertApp(db: Queryable, a: NewApp, now: Date): Promise<AppRow> {
  const r = await db.query<AppRow>(
    `INSERT INTO apps(id, merchant_id, notify_url, channels, trade_scopes, voided_links, ip_allowlist, payment_window_seconds,
                      daily_amount_ceiling_fen, rate_limit_per_second, statement_downloads_at_once, created_at, updated_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $12) RETURNING ${APP_COLS}`,
    [
      a.id,
      a.merchantId,
      a.notifyUrl,
      a.channels,
      a.tradeScopes,
      a.voidedLinks,
      a.ipAllowlist,
      a.paymentWindowSeconds,
      a.dailyAmountCeilingFen,
      a.rateLimitPerSecond,
      a.statementDownloadsAtOnce,
      now,
    ],
  );
  return r.rows[0]!;
}

/** The app fields the back office may change, by their row names. */
export type AppPatch = Partial<Omit<NewApp, 'id' | 'merchantId'> & { status: 'ACTIVE' | 'DISABLED' }>;

const APP_PATCH_COLUMNS: Record<keyof AppPatch, string> = {
  notifyUrl: 'notify_url',
  channels: 'channels',
  tradeScopes: 'trade_scopes',
  voidedLinks: 'voided_links',
  ipAllowlist: 'ip_allowlist',
  paymentWindowSeconds: 'payment_window_seconds',
  dailyAmountCeilingFen: 'daily_amount_ceiling_fen',
  rateLimitPerSecond: 'rate_limit_per_second',
  statementDownloadsAtOnce: 'statement_downloads_at_once',
  status: 'status',
};

/** Changes the given fields; answers the fresh row, or null when the app does not exist. */
export async function updateApp(db: Queryable, appId: string, patch: AppPatch, now: Date): Promise<AppRow | null> {
  const names = (Object.keys(patch) as (keyof AppPatch)[]).filter((k) => patch[k] !== undefined);
  const sets = names.map((n, i) => `${APP_PATCH_COLUMNS[n]} = $${i + 3}`);
  const r = await db.query<AppRow>(`UPDATE apps SET ${[...sets, 'updated_at = $2'].join(', ')} WHERE id = $1 RETURNING ${APP_COLS}`, [
    appId,
    now,
    ...names.map((n) => patch[n]),
  ]);
  return r.rows[0] ?? null;
}

/** Registers a key; answers null when the app already has one with this id. */
export async function insertAppKey(
  db: Queryable,
  k: { appId: string; keyId: string; publicKeyPem: string },
  now: Date,
): Promise<AppKeyRow | null> {
  const r = await db.query<AppKeyRow>(
    `INSERT INTO app_keys(app_id, key_id, public_key_pem, created_at) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING
     RETURNING ${KEY_COLS}`,
    [k.appId, k.keyId, k.publicKeyPem, now],
  );
  return r.rows[0] ?? null;
}

export async function listAppKeys(db: Queryable, appId: string): Promise<AppKeyRow[]> {
  const r = await db.query<AppKeyRow>(`SELECT ${KEY_COLS} FROM app_keys WHERE app_id = $1 ORDER BY created_at, key_id`, [appId]);
  return r.rows;
}

/** Answers the fresh row, or null when there is no such key. */
export async function setAppKeyStatus(
  db: Queryable,
  appId: string,
  keyId: string,
  status: 'ACTIVE' | 'DISABLED',
): Promise<AppKeyRow | null> {
  const r = await db.query<AppKeyRow>(`UPDATE app_keys SET status = $3 WHERE app_id = $1 AND key_id = $2 RETURNING ${KEY_COLS}`, [
    appId,
    keyId,
    status,
  ]);
  return r.rows[0] ?? null;
}

/** Sets when a key stops being accepted (null: no end); answers the fresh row, or null when there is no such key. */
export async function setAppKeyValidUntil(db: Queryable, appId: string, keyId: string, validUntil: Date | null): Promise<AppKeyRow | null> {
  const r = await db.query<AppKeyRow>(`UPDATE app_keys SET valid_until = $3 WHERE app_id = $1 AND key_id = $2 RETURNING ${KEY_COLS}`, [
    appId,
    keyId,
    validUntil,
  ]);
  return r.rows[0] ?? null;
}

export async function insertAccount(
  db: Queryable,
  a: {
    id: string;
    merchantId: string;
    entityType: EntityType;
    entityName: string;
    merchantNo: string;
    cardLast4: string;
    agreedCeilingFen: number | null;
  },
  now: Date,
): Promise<void> {
  await db.query(
    `INSERT INTO settlement_accounts(id, merchant_id, entity_type, entity_name, merchant_no, card_last4, agreed_ceiling_fen, created_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
    [a.id, a.merchantId, a.entityType, a.entityName, a.merchantNo, a.cardLast4, a.agreedCeilingFen, now],
  );
}

export async function upsertAllocation(db: Queryable, merchantId: string, a: Allocation, now: Date): Promise<void> {
  await db.query(
    `INSERT INTO allocations(merchant_id, mode, participants, ratios, unavailable_policy, updated_at) VALUES ($1, $2, $3, $4, $5, $6)
     ON CONFLICT (merchant_id) DO UPDATE SET mode = $2, participants = $3, ratios = $4, unavailable_policy = $5, updated_at = $6`,
    [merchantId, a.mode, a.participants, a.ratios === null ? null : JSON.stringify(a.ratios), a.unavailablePolicy, now],
  );
}

export async function upsertFeeRule(db: Queryable, merchantId: string, f: FeeRule, now: Date): Promise<void> {
  await db.query(
    `INSERT INTO fee_rules(merchant_id, rule_version, standard_rate_bps, large_rate_bps, threshold_fen, merchant_rate_bps, updated_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7)
     ON CONFLICT (merchant_id) DO UPDATE SET rule_version = $2, standard_rate_bps = $3, large_rate_bps = $4,
       threshold_fen = $5, merchant_rate_bps = $6, updated_at = $7`,
    [merchantId, f.ruleVersion, f.standardRateBps, f.largeRateBps, f.thresholdFen, f.merchantRateBps, now],
  );
}
