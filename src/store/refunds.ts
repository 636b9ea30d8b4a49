/**
 * Repository: refunds and duplicate payments. A refund is reserved with the order's row locked
 * (the row that owns the cumulative limit); its state changes are decided changes of its order,
 * applied by src/store/changes.ts. A duplicate's refund takes a Transition checked against the
 * tables of src/domain/states.ts.
 */
import type { DuplicateRefundState, RefundState, Transition } from '../domain/states.ts';
import type { Queryable, Tx } from './db.ts';
import { type JoinedClaim, ORDER_COLS, type OrderRow } from './orders.ts';
import { RefundNumberTaken, isUniqueViolation } from './errors.ts';

export interface RefundRow {
  id: string;
  orderId: string;
  appId: string;
  outRefundNo: string;
  amountFen: number;
  reason: string | null;
  digest: string;
  state: RefundState;
  failureReason: string | null;
  providerRef: string | null;
  /** The provider that holds the payment refunded. */
  provider: string;
  createdAt: Date;
  updatedAt: Date;
}

export const REFUND_COLS = `id, order_id AS "orderId", app_id AS "appId", out_refund_no AS "outRefundNo", amount_fen AS "amountFen",
  reason, digest, state, failure_reason AS "failureReason", provider_ref AS "providerRef", provider, created_at AS "createdAt", updated_at AS "updatedAt"`;

/** A refund still REQUESTED (its provider call not answered) this long after it was created is asked about at the provider (FIND_DUE_WORK). */
export const REQUESTED_RECHECK_MS = 60_000;

export async function findRefund(db: Queryable, appId: string, outRefundNo: string): Promise<RefundRow | null> {
  const r = await db.query<RefundRow>({
    name: 'refund_by_no',
    text: `SELECT ${REFUND_COLS} FROM refunds WHERE app_id = $1 AND out_refund_no = $2`,
    values: [appId, outRefundNo],
  });
  return r.rows[0] ?? null;
}

export async function getRefund(db: Queryable, id: string): Promise<RefundRow | null> {
  const r = await db.query<RefundRow>({ name: 'refund_by_id', text: `SELECT ${REFUND_COLS} FROM refunds WHERE id = $1`, values: [id] });
  return r.rows[0] ?? null;
}

export async function refundsOfOrder(db: Queryable, orderId: string): Promise<RefundRow[]> {
  const r = await db.query<RefundRow>(`SELECT ${REFUND_COLS} FROM refunds WHERE order_id = $1 ORDER BY created_at, id`, [orderId]);
  return r.rows;
}

export interface NewRefund {
  id: string;
  orderId: string;
  appId: string;
  outRefundNo: string;
  amountFen: number;
  reason: string | null;
  digest: string;
  provider: string;
  /** The instance whose request asks the provider. */
  createdBy: string;
}

/**
 * A REQUESTED refund (it holds its amount from now on); answers the row. RefundNumberTaken when
 * the app's refund number was taken meanwhile by a refund of another order.
 */
export async function insertRefund(tx: Tx, r: NewRefund, now: Date): Promise<RefundRow> {
  const res = await tx
    .query<RefundRow>(
      `INSERT INTO refunds(id, order_id, app_id, out_refund_no, amount_fen, reason, digest, state, provider, created_by, created_at, updated_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, 'REQUESTED', $8, $9, $10, $10) RETURNING ${REFUND_COLS}`,
      [r.id, r.orderId, r.appId, r.outRefundNo, r.amountFen, r.reason, r.digest, r.provider, r.createdBy, now],
    )
    .catch((err: unknown) => {
      throw isUniqueViolation(err, 'refunds', 'refunds_pkey') ? new RefundNumberTaken({ cause: err }) : err;
    });
  return res.rows[0]!;
}

/** What a refund request reads, in one statement (src/domain/payment-decisions.ts, decideRefundRequest). */
export interface RefundRequestRecords {
  existing: RefundRow | null;
  order: OrderRow | null;
  countedFen: number;
  /** The provider that holds the order's payment. */
  provider: string | null;
}

/** The refund under this number, the order under this number, its counted refunds and the provider of its payment. */
export async function refundRequestRecords(
  db: Queryable,
  appId: string,
  outRefundNo: string,
  outTradeNo: string,
  counting: readonly RefundState[],
): Promise<RefundRequestRecords> {
  const r = await db.query<{
    e_json: RefundRow | null;
    e_created: Date | null;
    e_updated: Date | null;
    o_json: OrderRow | null;
    expireAt: Date;
    createdAt: Date;
    updatedAt: Date;
    paidAt: Date | null;
    counted: number;
    provider: string | null;
  }>({
    name: 'refund_request_records',
    // The order: the refund's when the number is used (a replay answers it), else the request's.
    text: `WITH e AS (SELECT ${REFUND_COLS} FROM refunds WHERE app_id = $1 AND out_refund_no = $2),
      o AS (SELECT ${ORDER_COLS} FROM orders
             WHERE id = COALESCE((SELECT "orderId" FROM e), (SELECT id FROM orders WHERE app_id = $1 AND out_trade_no = $3)))
      SELECT (SELECT row_to_json(e) FROM e) AS e_json, (SELECT "createdAt" FROM e) AS e_created, (SELECT "updatedAt" FROM e) AS e_updated,
             (SELECT row_to_json(o) FROM o) AS o_json, (SELECT "expireAt" FROM o) AS "expireAt", (SELECT "createdAt" FROM o) AS "createdAt",
             (SELECT "updatedAt" FROM o) AS "updatedAt", (SELECT "paidAt" FROM o) AS "paidAt",
             (SELECT COALESCE(SUM(amount_fen), 0)::bigint FROM refunds WHERE order_id = (SELECT id FROM o) AND state = ANY($4)) AS counted,
             (SELECT provider FROM attempts WHERE id = (SELECT "paidAttemptId" FROM o)) AS provider`,
    values: [appId, outRefundNo, outTradeNo, counting],
  });
  const row = r.rows[0]!;
  const existing = row.e_json ? { ...row.e_json, createdAt: row.e_created!, updatedAt: row.e_updated! } : null;
  const order = row.o_json
    ? { ...row.o_json, expireAt: row.expireAt, createdAt: row.createdAt, updatedAt: row.updatedAt, paidAt: row.paidAt }
    : null;
  return { existing, order, countedFen: row.counted, provider: row.provider };
}

/**
 * A REQUESTED refund with its order's stateVersion moved, in one statement, only if the order's
 * stateVersion is still `version` (the decision's records are current): `refund` null when it is
 * not; `claimed`: `claim` claimed the request id.
 * RefundNumberTaken when the app's refund number was taken meanwhile by a refund of another order.
 */
export async function reserveRefund(
  db: Queryable,
  r: NewRefund,
  version: number,
  now: Date,
  claim: JoinedClaim | null = null,
): Promise<{ refund: RefundRow | null; claimed: boolean }> {
  // With `claim`: the request id is claimed first, in the same statement, and the refund written
  // only if it was (else nothing is written: the caller's unit decides).
  const res = await db
    .query<RefundRow & { claimed: boolean }>({
      name: 'refund_reserve',
      text: `WITH c AS (
          INSERT INTO request_replays(app_id, request_id, method, target, body_sha256, state, lease_until, holder, holder_instance, created_at)
          SELECT $3, $12, $13, $14, $15, 'IN_PROGRESS', $16, $17, $18, $10 WHERE $12::text IS NOT NULL
          ON CONFLICT (app_id, request_id) DO NOTHING RETURNING 1),
        lk AS (SELECT id FROM orders WHERE id = $2 AND state_version = $11 AND ($12::text IS NULL OR EXISTS (SELECT 1 FROM c)) FOR UPDATE),
        b AS (UPDATE orders SET state_version = state_version + 1, updated_at = $10 FROM lk WHERE orders.id = lk.id RETURNING orders.id),
        ins AS (
          INSERT INTO refunds(id, order_id, app_id, out_refund_no, amount_fen, reason, digest, state, provider, created_by, created_at, updated_at)
          SELECT $1, $2, $3, $4, $5, $6, $7, 'REQUESTED', $8, $9, $10, $10 FROM b RETURNING ${REFUND_COLS})
        SELECT ins.*, EXISTS (SELECT 1 FROM c) AS claimed FROM (SELECT 1) one LEFT JOIN ins ON true`,
      values: [
        r.id,
        r.orderId,
        r.appId,
        r.outRefundNo,
        r.amountFen,
        r.reason,
        r.digest,
        r.provider,
        r.createdBy,
        now,
        version,
        claim?.requestId ?? null,
        claim?.method ?? null,
        claim?.target ?? null,
        claim?.bodySha256 ?? null,
        claim?.leaseUntil ?? null,
        claim?.holder ?? null,
        claim?.holderInstance ?? null,
      ],
    })
    .catch((err: unknown) => {
      throw isUniqueViolation(err, 'refunds', 'refunds_pkey') ? new RefundNumberTaken({ cause: err }) : err;
    });
  const { claimed, ...row } = res.rows[0]!;
  return { refund: row.id ? row : null, claimed };
}

/** The refunds of an order in `states`, summed, in fen. */
export async function sumRefundsFen(tx: Queryable, orderId: string, states: readonly RefundState[]): Promise<number> {
  const r = await tx.query<{ total: number }>(
    'SELECT COALESCE(SUM(amount_fen), 0)::bigint AS total FROM refunds WHERE order_id = $1 AND state = ANY($2)',
    [orderId, states],
  );
  return r.rows[0]!.total;
}

/**
 * A refund to ask the provider about (CHECK_REFUND): its provider, the provider order that paid its
 * order (`paidAttemptId`: the paid attempt's own number, or the trade of it that was paid), and
 * whether the instance whose request asked the provider is gone (no beat since `aliveSince`).
 */
export async function refundToCheck(
  db: Queryable,
  id: string,
  aliveSince: Date,
): Promise<{ id: string; state: RefundState; paidAttemptId: string; provider: string; requesterGone: boolean } | null> {
  const r = await db.query<{ id: string; state: RefundState; paidAttemptId: string; provider: string; requesterGone: boolean }>(
    `SELECT id, state, provider,
            (created_by IS NOT NULL AND created_by NOT IN (SELECT id FROM service_instances WHERE heartbeat_at > $2)) AS "requesterGone",
            (SELECT coalesce(paid_trade_no, paid_attempt_id) FROM orders WHERE orders.id = refunds.order_id) AS "paidAttemptId"
       FROM refunds WHERE id = $1`,
    [id, aliveSince],
  );
  return r.rows[0] ?? null;
}

// --- duplicate payments ------------------------------------------------------------------------

export interface DuplicateRow {
  id: string;
  orderId: string;
  attemptId: string;
  /** The provider order paid a second time, and refunded: the attempt's own (its id) or one of its trades. */
  tradeNo: string;
  amountFen: number;
  refundState: DuplicateRefundState;
  provider: string;
  createdAt: Date;
  updatedAt: Date;
}

const DUPLICATE_COLS = `id, order_id AS "orderId", attempt_id AS "attemptId", trade_no AS "tradeNo", amount_fen AS "amountFen", refund_state AS "refundState",
  provider, created_at AS "createdAt", updated_at AS "updatedAt"`;

/** A second payment of an order, to be refunded; answers false when this provider order's was already recorded. */
export async function insertDuplicate(
  tx: Tx,
  d: { id: string; orderId: string; attemptId: string; tradeNo: string; amountFen: number; provider: string },
  now: Date,
): Promise<boolean> {
  const r = await tx.query(
    `INSERT INTO duplicate_payments(id, order_id, attempt_id, trade_no, amount_fen, refund_state, provider, created_at, updated_at)
     VALUES ($1, $2, $3, $7, $4, 'PENDING', $5, $6, $6) ON CONFLICT (trade_no) DO NOTHING RETURNING id`,
    [d.id, d.orderId, d.attemptId, d.amountFen, d.provider, now, d.tradeNo],
  );
  return r.rowCount === 1;
}

export async function getDuplicate(db: Queryable, id: string): Promise<DuplicateRow | null> {
  const r = await db.query<DuplicateRow>(`SELECT ${DUPLICATE_COLS} FROM duplicate_payments WHERE id = $1`, [id]);
  return r.rows[0] ?? null;
}

/**
 * A duplicate's refund changes state, only from the transition's source state (a REFUNDED
 * duplicate is never overwritten by an answer that was in flight); answers whether it did.
 */
export async function setDuplicateRefundState(
  db: Queryable,
  id: string,
  t: Transition<'duplicateRefund'>,
  providerRef: string | null,
  now: Date,
): Promise<boolean> {
  const r = await db.query(
    `UPDATE duplicate_payments SET refund_state = $3, provider_ref = COALESCE($4, provider_ref), updated_at = $5
      WHERE id = $1 AND refund_state = $2`,
    [id, t.from, t.to, providerRef, now],
  );
  return r.rowCount === 1;
}

/** The provider's reference of a duplicate's refund whose state stays `state` (accepted again, still settling); answers whether it did. */
export async function noteDuplicateProviderRef(
  db: Queryable,
  id: string,
  state: DuplicateRefundState,
  providerRef: string | null,
  now: Date,
): Promise<boolean> {
  const r = await db.query(
    'UPDATE duplicate_payments SET provider_ref = COALESCE($3, provider_ref), updated_at = $4 WHERE id = $1 AND refund_state = $2',
    [id, state, providerRef, now],
  );
  return r.rowCount === 1;
}

export async function duplicatesOfOrder(db: Queryable, orderId: string): Promise<DuplicateRow[]> {
  const r = await db.query<DuplicateRow>(`SELECT ${DUPLICATE_COLS} FROM duplicate_payments WHERE order_id = $1 ORDER BY created_at`, [
    orderId,
  ]);
  return r.rows;
}

export async function listDuplicates(db: Queryable, limit: number): Promise<(DuplicateRow & { outTradeNo: string; appId: string })[]> {
  const r = await db.query<DuplicateRow & { outTradeNo: string; appId: string }>(
    `SELECT d.id, d.order_id AS "orderId", o.out_trade_no AS "outTradeNo", o.app_id AS "appId", d.attempt_id AS "attemptId",
            d.trade_no AS "tradeNo", d.amount_fen AS "amountFen", d.refund_state AS "refundState", d.provider, d.created_at AS "createdAt", d.updated_at AS "updatedAt"
       FROM duplicate_payments d JOIN orders o ON o.id = d.order_id ORDER BY d.created_at DESC LIMIT $1`,
    [limit],
  );
  return r.rows;
}
