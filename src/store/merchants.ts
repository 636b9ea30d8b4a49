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
  createdAt: Date;
  updatedAt: Date;
}

const APP_COLS = `id, merchant_id AS "merchantId", status, notify_url AS "notifyUrl", channels, trade_scopes AS "tradeScopes",
  voided_links AS "voidedLinks", ip_allowlist AS "ipAllowlist", payment_window_seconds AS "paymentWindowSeconds",
  daily_amount_ceiling_fen AS "dailyAmountCeilingFen", rate_limit_per_second AS "rateLimitPerSecond",
  created_at AS "createdAt", updated_at AS "updatedAt"`;

export async function getApp(db: Queryable, appId: string): Promise<AppRow | null> {
  const r = await db.query<AppRow>(`SELECT ${APP_COLS} FROM apps WHERE id = $1`, [appId]);
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

export async function getMerchant(db: Queryable, id: string): Promise<MerchantRow | null> {
  const r = await db.query<MerchantRow>(
    'SELECT id, name, entity_type AS "entityType", created_at AS "createdAt" FROM merchants WHERE id = $1',
    [id],
  );
  return r.rows[0] ?? null;
}

export interface AppKeyRow {
  appId: string;
  keyId: string;
  publicKeyPem: string;
  status: 'ACTIVE' | 'DISABLED';
  createdAt: Date;
}

export async function getAppKey(db: Queryable, appId: string, keyId: string): Promise<AppKeyRow | null> {
  const r = await db.query<AppKeyRow>(
    `SELECT app_id AS "appId", key_id AS "keyId", public_key_pem AS "publicKeyPem", status, created_at AS "createdAt"
       FROM app_keys WHERE app_id = $1 AND key_id = $2`,
    [appId, keyId],
  );
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
