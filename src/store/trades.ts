/**
 * Repository: the provider trades of an attempt beyond its own (migrations/0020), and the cashier's
 * OAuth states. A trade's id is the provider's out_trade_no; its state changes (and the material
 * the provider gives it) are decided changes of its order, applied by src/store/changes.ts.
 */
import type { TradeState } from '../domain/states.ts';
import { type Db, type Queryable, withTx } from './db.ts';

export type TradeProduct = 'JSAPI' | 'NATIVE';

export interface TradeRow {
  id: string;
  attemptId: string;
  orderId: string;
  provider: string;
  product: TradeProduct;
  /** JSAPI: the buyer's openid (never shown or logged); '' otherwise. */
  payer: string;
  /** JSAPI: the handle the page's URL names; null otherwise. */
  handle: string | null;
  state: TradeState;
  /** The provider's material: a prepay_id (JSAPI), a code_url (NATIVE); null until OPEN. */
  material: string | null;
  providerRef: string | null;
  createdAt: Date;
  updatedAt: Date;
}

const TRADE_COLS = `id, attempt_id AS "attemptId", order_id AS "orderId", provider, product, payer, handle, state, material,
  provider_ref AS "providerRef", created_at AS "createdAt", updated_at AS "updatedAt"`;

export async function getTrade(db: Queryable, id: string): Promise<TradeRow | null> {
  const r = await db.query<TradeRow>({
    name: 'trade_by_id',
    text: `SELECT ${TRADE_COLS} FROM provider_trades WHERE id = $1`,
    values: [id],
  });
  return r.rows[0] ?? null;
}

/** The attempt's trade of a product (and payer, for JSAPI). */
export async function findTrade(db: Queryable, attemptId: string, product: TradeProduct, payer: string): Promise<TradeRow | null> {
  const r = await db.query<TradeRow>(`SELECT ${TRADE_COLS} FROM provider_trades WHERE attempt_id = $1 AND product = $2 AND payer = $3`, [
    attemptId,
    product,
    payer,
  ]);
  return r.rows[0] ?? null;
}

/** The attempt's JSAPI trade the page's handle names. */
export async function tradeByHandle(db: Queryable, attemptId: string, handle: string): Promise<TradeRow | null> {
  const r = await db.query<TradeRow>(`SELECT ${TRADE_COLS} FROM provider_trades WHERE handle = $1 AND attempt_id = $2`, [
    handle,
    attemptId,
  ]);
  return r.rows[0] ?? null;
}

export type NewTrade = Pick<TradeRow, 'id' | 'attemptId' | 'orderId' | 'provider' | 'product' | 'payer' | 'handle'>;

/**
 * The attempt's trade of (product, payer): the existing one, or a NEW one recorded now, unless the
 * attempt already has `cap` trades of that product (then null: a JSAPI trade is made per WeChat
 * user who opens the link, and a link passed around must not make orders without end).
 *
 * The cap holds under concurrency: a new trade is counted and recorded in one transaction with the
 * attempt's row locked (FOR NO KEY UPDATE, which a foreign key's check does not wait for), so the
 * new trades of one attempt are recorded one at a time and each count sees those recorded before
 * it (two WeChat users authorized at once cannot both take the last place).
 */
export async function ensureTradeRow(db: Db, t: NewTrade, cap: number, now: Date): Promise<TradeRow | null> {
  const existing = await findTrade(db, t.attemptId, t.product, t.payer);
  if (existing) return existing;
  return withTx(db, async (tx) => {
    await tx.query({
      name: 'attempt_lock_for_trades',
      text: 'SELECT 1 FROM attempts WHERE id = $1 FOR NO KEY UPDATE',
      values: [t.attemptId],
    });
    const r = await tx.query<TradeRow>(
      `INSERT INTO provider_trades(id, attempt_id, order_id, provider, product, payer, handle, state, created_at, updated_at)
       SELECT $1, $2, $3, $4, $5, $6, $7, 'NEW', $8, $8
        WHERE (SELECT count(*) FROM provider_trades WHERE attempt_id = $2 AND product = $5) < $9
       ON CONFLICT (attempt_id, product, payer) DO NOTHING RETURNING ${TRADE_COLS}`,
      [t.id, t.attemptId, t.orderId, t.provider, t.product, t.payer, t.handle, now, cap],
    );
    // None: at the cap, or recorded by a concurrent request before the lock was had (then it is found).
    return r.rows[0] ?? findTrade(tx, t.attemptId, t.product, t.payer);
  });
}

/** Every trade of an order, oldest first (the back office's order view). */
export async function tradesOfOrder(db: Queryable, orderId: string): Promise<TradeRow[]> {
  const r = await db.query<TradeRow>(`SELECT ${TRADE_COLS} FROM provider_trades WHERE order_id = $1 ORDER BY created_at, id`, [orderId]);
  return r.rows;
}

/** The trades of an order still live at the provider (NEW or OPEN), of any of its attempts. */
export async function liveTradesOfOrder(db: Queryable, orderId: string): Promise<TradeRow[]> {
  const r = await db.query<TradeRow>(
    `SELECT ${TRADE_COLS} FROM provider_trades WHERE order_id = $1 AND state IN ('NEW', 'OPEN') ORDER BY created_at, id`,
    [orderId],
  );
  return r.rows;
}

/** The trades of an attempt still live at the provider, but `except`. */
export async function liveTradesOfAttempt(db: Queryable, attemptId: string, except: string | null): Promise<TradeRow[]> {
  const r = await db.query<TradeRow>(
    `SELECT ${TRADE_COLS} FROM provider_trades WHERE attempt_id = $1 AND state IN ('NEW', 'OPEN') AND id IS DISTINCT FROM $2
      ORDER BY created_at, id`,
    [attemptId, except],
  );
  return r.rows;
}

/** The numbers of an order's trades (the sandbox's lever that ends a payment window ends theirs too). */
export async function tradeNosOfOrder(db: Queryable, orderId: string): Promise<string[]> {
  const r = await db.query<{ id: string }>('SELECT id FROM provider_trades WHERE order_id = $1', [orderId]);
  return r.rows.map((x) => x.id);
}

// --- the cashier's OAuth states ------------------------------------------------------------------

/** How long a state sent to WeChat's authorization stays usable. */
export const OAUTH_STATE_TTL_MS = 10 * 60_000;

export async function insertOAuthState(db: Queryable, state: string, attemptId: string, now: Date): Promise<void> {
  await db.query('INSERT INTO cashier_oauth_states(state, attempt_id, expires_at) VALUES ($1, $2, $3)', [
    state,
    attemptId,
    new Date(now.getTime() + OAUTH_STATE_TTL_MS),
  ]);
}

/** Uses the state once: true only for a state of this attempt, not used before and not expired. */
export async function consumeOAuthState(db: Queryable, state: string, attemptId: string, now: Date): Promise<boolean> {
  const r = await db.query(
    `UPDATE cashier_oauth_states SET used_at = $3 WHERE state = $1 AND attempt_id = $2 AND used_at IS NULL AND expires_at > $3`,
    [state, attemptId, now],
  );
  return r.rowCount === 1;
}

/** States that ended before `before` (used or not). */
export async function purgeOAuthStates(db: Queryable, before: Date, limit: number): Promise<number> {
  const r = await db.query(
    `DELETE FROM cashier_oauth_states WHERE state IN (SELECT state FROM cashier_oauth_states WHERE expires_at < $1 LIMIT $2)`,
    [before, limit],
  );
  return r.rowCount ?? 0;
}
