/**
 * Repository: the reads of the console that span aggregates or search them: the dashboard's
 * figures, the order search and the refund list. Every list is bounded by its caller's limit and
 * ordered newest first on an index (orders_created, migrations/0013).
 */
import type { Queryable } from './db.ts';

export interface DashboardFigures {
  ordersToday: number;
  amountTodayFen: number;
  paidToday: number;
  paidAmountTodayFen: number;
  attemptsUnknown: number;
  refundsUnknown: number;
  eventsPending: number;
  eventsDead: number;
  duplicatePayments: number;
  duplicatePaymentsOpen: number;
}

export async function dashboardFigures(db: Queryable, dayStart: Date): Promise<DashboardFigures> {
  const r = await db.query<DashboardFigures>(
    `SELECT t."ordersToday", t."amountTodayFen", t."paidToday", t."paidAmountTodayFen",
            (SELECT count(*)::int FROM attempts WHERE state = 'UNKNOWN') AS "attemptsUnknown",
            (SELECT count(*)::int FROM refunds WHERE state = 'UNKNOWN') AS "refundsUnknown",
            (SELECT count(*)::int FROM events WHERE status = 'PENDING') AS "eventsPending",
            (SELECT count(*)::int FROM events WHERE status = 'DEAD') AS "eventsDead",
            (SELECT count(*)::int FROM duplicate_payments) AS "duplicatePayments",
            (SELECT count(*)::int FROM duplicate_payments WHERE refund_state <> 'REFUNDED') AS "duplicatePaymentsOpen"
       FROM (SELECT count(*)::int AS "ordersToday", coalesce(sum(amount_fen), 0)::bigint AS "amountTodayFen",
                    (count(*) FILTER (WHERE status = 'SUCCEEDED'))::int AS "paidToday",
                    coalesce(sum(amount_fen) FILTER (WHERE status = 'SUCCEEDED'), 0)::bigint AS "paidAmountTodayFen"
               FROM orders WHERE created_at >= $1) t`,
    [dayStart],
  );
  return r.rows[0]!;
}

export interface HourFigures {
  hour: Date;
  orders: number;
  paid: number;
  paidAmountFen: number;
}

/** Orders created in each of the 24 hours before `now` (the current hour last), and how many of them are paid. */
export async function hourlyOrders(db: Queryable, now: Date): Promise<HourFigures[]> {
  const r = await db.query<HourFigures>(
    `SELECT h.hour, count(o.id)::int AS orders, (count(o.id) FILTER (WHERE o.status = 'SUCCEEDED'))::int AS paid,
            coalesce(sum(o.amount_fen) FILTER (WHERE o.status = 'SUCCEEDED'), 0)::bigint AS "paidAmountFen"
       FROM generate_series(date_trunc('hour', $1::timestamptz) - interval '23 hours', date_trunc('hour', $1::timestamptz), interval '1 hour') AS h(hour)
       LEFT JOIN orders o ON o.created_at >= h.hour AND o.created_at < h.hour + interval '1 hour'
      GROUP BY h.hour ORDER BY h.hour`,
    [now],
  );
  return r.rows;
}

export interface OrderSearch {
  /** Only this merchant's orders (the portal), or every merchant's (null). */
  merchantId?: string | null;
  openOrderId: string | null;
  outTradeNo: string | null;
  appId: string | null;
  status: string | null;
  channel: string | null;
  from: Date | null;
  to: Date | null;
  /** The next page: orders created before this one (its createdAt and id). */
  before: { createdAt: Date; id: string } | null;
  limit: number;
}

export interface OrderListRow {
  openOrderId: string;
  appId: string;
  merchantId: string;
  merchantName: string;
  outTradeNo: string;
  channel: string;
  amountFen: number;
  status: string;
  closedReason: string | null;
  createdAt: Date;
  paidAt: Date | null;
}

/**
 * The orders of a search, newest first, a page at a time. Each filter reads by an index, so a page
 * costs what it returns at any ledger size (test/integration/ledger.test.ts checks the plans): an
 * order number is looked up in each app's (app_id, out_trade_no) (an app's numbers are its own); an
 * app's orders are read from their merchant's (merchant_id, created_at), the merchant found first.
 */
export async function searchOrders(db: Queryable, f: OrderSearch): Promise<OrderListRow[]> {
  let merchantId = f.merchantId ?? null;
  if (f.appId !== null && merchantId === null) {
    const a = await db.query<{ m: string }>('SELECT merchant_id AS m FROM apps WHERE id = $1', [f.appId]);
    if (!a.rows[0]) return [];
    merchantId = a.rows[0].m;
  }
  const r = await db.query<OrderListRow>(
    `SELECT o.id AS "openOrderId", o.app_id AS "appId", o.merchant_id AS "merchantId", m.name AS "merchantName",
            o.out_trade_no AS "outTradeNo", o.channel, o.amount_fen AS "amountFen", o.status, o.closed_reason AS "closedReason",
            o.created_at AS "createdAt", o.paid_at AS "paidAt"
       FROM (SELECT * FROM orders
      WHERE ($1::text IS NULL OR id = $1)
        AND ($2::text IS NULL OR (out_trade_no = $2 AND app_id = ANY(ARRAY(SELECT a.id FROM apps a WHERE $3::text IS NULL OR a.id = $3))))
        AND ($3::text IS NULL OR app_id = $3)
        AND ($4::text IS NULL OR status = $4)
        AND ($5::text IS NULL OR channel = $5)
        AND ($6::timestamptz IS NULL OR created_at >= $6)
        AND ($7::timestamptz IS NULL OR created_at < $7)
        AND ($8::timestamptz IS NULL OR (created_at, id) < ($8, $9::text))
        AND ($11::text IS NULL OR merchant_id = $11)
      ORDER BY created_at DESC, id DESC
      LIMIT $10) o JOIN merchants m ON m.id = o.merchant_id
      ORDER BY o.created_at DESC, o.id DESC`,
    [
      f.openOrderId,
      f.outTradeNo,
      f.appId,
      f.status,
      f.channel,
      f.from,
      f.to,
      f.before?.createdAt ?? null,
      f.before?.id ?? null,
      f.limit,
      merchantId,
    ],
  );
  return r.rows;
}

export interface RefundListRow {
  refundAttemptId: string;
  openOrderId: string;
  appId: string;
  outRefundNo: string;
  amountFen: number;
  state: string;
  automatic: boolean;
  failureReason: string | null;
  createdAt: Date;
  updatedAt: Date;
}

export async function listRefunds(
  db: Queryable,
  f: { state: string | null; appId: string | null; limit: number; merchantId?: string | null },
): Promise<RefundListRow[]> {
  const r = await db.query<RefundListRow>(
    `SELECT id AS "refundAttemptId", order_id AS "openOrderId", app_id AS "appId", out_refund_no AS "outRefundNo", amount_fen AS "amountFen",
            state, automatic, failure_reason AS "failureReason", created_at AS "createdAt", updated_at AS "updatedAt"
       FROM refunds WHERE ($1::text IS NULL OR state = $1) AND ($2::text IS NULL OR app_id = $2)
        AND ($4::text IS NULL OR app_id IN (SELECT id FROM apps WHERE merchant_id = $4))
      ORDER BY created_at DESC, id DESC LIMIT $3`,
    [f.state, f.appId, f.limit, f.merchantId ?? null],
  );
  return r.rows;
}
