/**
 * Repository: orders (their reads, the locked reads every change is made under, their state changes
 * and pending closes). Every state change takes a Transition checked against the tables of
 * src/domain/states.ts and applies it only from its source state; time is the caller's clock,
 * passed in. The hot lookups are named prepared statements (parsed and planned once per
 * connection). Attempts are in attempts.ts; the create's batched insert in order-inserts.ts, the
 * query's batched read in order-reads.ts, the accepted outcome's batched write in
 * attempt-acceptance.ts.
 */
import type { FeeProjection } from '../domain/money.ts';
import type { ClosedReason, OrderStatus } from '../domain/states.ts';
import type { Queryable, Tx } from './db.ts';

export interface OrderRow {
  id: string;
  appId: string;
  merchantId: string;
  outTradeNo: string;
  channel: 'ALIPAY_H5' | 'WECHAT_H5';
  tradeScope: string | null;
  amountFen: number;
  currency: string;
  subject: string;
  description: string | null;
  attach: string | null;
  returnUrl: string | null;
  payerClientIp: string;
  digest: string;
  links: string[];
  status: OrderStatus;
  closedReason: ClosedReason | null;
  failureReason: string | null;
  expireAt: Date;
  feeProjection: FeeProjection;
  stateVersion: number;
  paidAttemptId: string | null;
  /** The provider order that paid, when it is a trade of the paid attempt rather than its own (migrations/0020). */
  paidTradeNo: string | null;
  paidAt: Date | null;
  closePending: ClosedReason | null;
  createdAt: Date;
  updatedAt: Date;
}

export const ORDER_COLS = `id, app_id AS "appId", merchant_id AS "merchantId", out_trade_no AS "outTradeNo", channel,
  trade_scope AS "tradeScope", amount_fen AS "amountFen", currency, subject, description, attach, return_url AS "returnUrl",
  payer_client_ip AS "payerClientIp", digest, links, status, closed_reason AS "closedReason", failure_reason AS "failureReason",
  expire_at AS "expireAt", fee_projection AS "feeProjection", state_version AS "stateVersion", paid_attempt_id AS "paidAttemptId",
  paid_trade_no AS "paidTradeNo", paid_at AS "paidAt", close_pending AS "closePending", created_at AS "createdAt", updated_at AS "updatedAt"`;

export async function findOrder(db: Queryable, appId: string, outTradeNo: string): Promise<OrderRow | null> {
  const r = await db.query<OrderRow>({
    name: 'order_by_no',
    text: `SELECT ${ORDER_COLS} FROM orders WHERE app_id = $1 AND out_trade_no = $2`,
    values: [appId, outTradeNo],
  });
  return r.rows[0] ?? null;
}

/** findOrder taking the order's row lock (FOR UPDATE) for the rest of the transaction. */
export async function findOrderLocked(tx: Tx, appId: string, outTradeNo: string): Promise<OrderRow | null> {
  const r = await tx.query<OrderRow>({
    name: 'order_by_no_lock',
    text: `SELECT ${ORDER_COLS} FROM orders WHERE app_id = $1 AND out_trade_no = $2 FOR UPDATE`,
    values: [appId, outTradeNo],
  });
  return r.rows[0] ?? null;
}

export async function getOrder(db: Queryable, id: string): Promise<OrderRow | null> {
  const r = await db.query<OrderRow>({ name: 'order_by_id', text: `SELECT ${ORDER_COLS} FROM orders WHERE id = $1`, values: [id] });
  return r.rows[0] ?? null;
}

/** getOrder taking the order's row lock (FOR UPDATE) for the rest of the transaction. */
export async function getOrderLocked(tx: Tx, id: string): Promise<OrderRow | null> {
  const r = await tx.query<OrderRow>({
    name: 'order_by_id_lock',
    text: `SELECT ${ORDER_COLS} FROM orders WHERE id = $1 FOR UPDATE`,
    values: [id],
  });
  return r.rows[0] ?? null;
}

/** Takes the order's row lock (the lock every change of the order, its attempts and its refunds is made under). */
export async function lockOrder(tx: Tx, id: string): Promise<void> {
  await tx.query({ name: 'order_lock', text: 'SELECT 1 FROM orders WHERE id = $1 FOR UPDATE', values: [id] });
}

/** A request id's claim made inside a write (as InlineClaim of order-inserts.ts). */
export interface JoinedClaim {
  appId: string;
  requestId: string;
  method: string;
  target: string;
  bodySha256: string;
  holder: string;
  holderInstance: string;
  leaseUntil: Date;
}

/** How long a close holds the order while it asks the provider (FINISH_CLOSE runs only after it). */
export const CLOSE_HOLD_MS = 30_000;

/**
 * Records a close under the order's lock (close_pending, held until now + CLOSE_HOLD_MS by
 * `instance`: a hold that lapses, or whose instance stops beating, while the close is still pending
 * is found by FIND_DUE_WORK) while the order is open.
 * Answers the close that was pending before (if any) and the hold written (the mark by which this
 * close withdraws only its own), or null when the order is not open; and whether `claim` claimed
 * the request id.
 */
export async function markClosePending(
  db: Queryable,
  orderId: string,
  reason: ClosedReason,
  now: Date,
  instance: string,
  claim: JoinedClaim | null = null,
): Promise<{ mark: { before: ClosedReason | null; heldUntil: Date } | null; claimed: boolean }> {
  // With `claim`: the request id is claimed first, in the same statement, and the close marked
  // only if it was (else nothing is written: the caller's unit decides).
  const r = await db.query<{ before: ClosedReason | null; heldUntil: Date | null; marked: boolean; claimed: boolean }>({
    name: 'order_mark_close',
    text: `WITH c AS (
        INSERT INTO request_replays(app_id, request_id, method, target, body_sha256, state, lease_until, holder, holder_instance, created_at)
        SELECT $4, $5, $6, $7, $8, 'IN_PROGRESS', $9, $10, $11, $12 WHERE $5::text IS NOT NULL
        ON CONFLICT (app_id, request_id) DO NOTHING RETURNING 1),
      b AS (SELECT id, close_pending AS before FROM orders WHERE id = $1 AND ($5::text IS NULL OR EXISTS (SELECT 1 FROM c)) FOR UPDATE),
      u AS (UPDATE orders o SET close_pending = COALESCE(b.before, $2), close_held_until = $3, close_held_by = $13
              FROM b WHERE o.id = b.id AND o.status IN ('CREATED', 'PAYING', 'UNKNOWN')
            RETURNING b.before, o.close_held_until)
      SELECT (SELECT before FROM u) AS before, (SELECT close_held_until FROM u) AS "heldUntil",
             EXISTS (SELECT 1 FROM u) AS marked, EXISTS (SELECT 1 FROM c) AS claimed`,
    values: [
      orderId,
      reason,
      new Date(now.getTime() + CLOSE_HOLD_MS),
      claim?.appId ?? null,
      claim?.requestId ?? null,
      claim?.method ?? null,
      claim?.target ?? null,
      claim?.bodySha256 ?? null,
      claim?.leaseUntil ?? null,
      claim?.holder ?? null,
      claim?.holderInstance ?? null,
      now,
      instance,
    ],
  });
  const row = r.rows[0]!;
  return { mark: row.marked ? { before: row.before, heldUntil: row.heldUntil! } : null, claimed: row.claimed };
}

/**
 * Ends an open order's payment window now (the sandbox's test lever; EXPIRE_ORDER then
 * closes it): the order's and its attempts' expiry, in one statement. Answers the attempts whose
 * material ended, or null when the order is not open.
 */
export async function endPaymentWindow(
  db: Queryable,
  orderId: string,
  now: Date,
): Promise<{ attemptIds: string[]; expireAt: Date } | null> {
  const end = new Date(now.getTime() - 1);
  const r = await db.query<{ id: string; attempt_ids: string[] }>(
    `WITH o AS (
       UPDATE orders SET expire_at = $2, updated_at = $3
        WHERE id = $1 AND status IN ('CREATED', 'PAYING', 'UNKNOWN') RETURNING id, expire_at),
     a AS (UPDATE attempts SET expire_at = LEAST(attempts.expire_at, o.expire_at) FROM o WHERE attempts.order_id = o.id
            RETURNING attempts.id)
     SELECT o.id, ARRAY(SELECT id FROM a) AS attempt_ids FROM o`,
    [orderId, end, now],
  );
  const row = r.rows[0];
  return row ? { attemptIds: row.attempt_ids, expireAt: end } : null;
}
