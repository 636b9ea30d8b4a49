/**
 * Repository: orders, attempts and refunds rows. The hot lookups are named prepared statements
 * (parsed and planned once per connection; docs/performance.md).
 */
import type { AttemptState, ClosedReason, OrderStatus, RefundState } from '../domain/states.ts';
import type { FeeProjection } from '../domain/money.ts';
import { TurnBatcher } from './batcher.ts';
import type { Db, Queryable } from './db.ts';

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
  paidAt: Date | null;
  closePending: ClosedReason | null;
  createdAt: Date;
  updatedAt: Date;
}

export const ORDER_COLS = `id, app_id AS "appId", merchant_id AS "merchantId", out_trade_no AS "outTradeNo", channel,
  trade_scope AS "tradeScope", amount_fen AS "amountFen", currency, subject, description, attach, return_url AS "returnUrl",
  payer_client_ip AS "payerClientIp", digest, links, status, closed_reason AS "closedReason", failure_reason AS "failureReason",
  expire_at AS "expireAt", fee_projection AS "feeProjection", state_version AS "stateVersion", paid_attempt_id AS "paidAttemptId",
  paid_at AS "paidAt", close_pending AS "closePending", created_at AS "createdAt", updated_at AS "updatedAt"`;

export interface AttemptRow {
  id: string;
  orderId: string;
  seq: number;
  state: AttemptState;
  cashierToken: string;
  qrCode: string | null;
  providerRef: string | null;
  expireAt: Date;
  createdAt: Date;
  updatedAt: Date;
}

export const ATTEMPT_COLS = `id, order_id AS "orderId", seq, state, cashier_token AS "cashierToken", qr_code AS "qrCode",
  provider_ref AS "providerRef", expire_at AS "expireAt", created_at AS "createdAt", updated_at AS "updatedAt"`;

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
  createdAt: Date;
  updatedAt: Date;
}

export const REFUND_COLS = `id, order_id AS "orderId", app_id AS "appId", out_refund_no AS "outRefundNo", amount_fen AS "amountFen",
  reason, digest, state, failure_reason AS "failureReason", provider_ref AS "providerRef", created_at AS "createdAt", updated_at AS "updatedAt"`;

export async function findOrder(db: Queryable, appId: string, outTradeNo: string, lock = false): Promise<OrderRow | null> {
  const r = await db.query<OrderRow>({
    name: lock ? 'order_by_no_lock' : 'order_by_no',
    text: `SELECT ${ORDER_COLS} FROM orders WHERE app_id = $1 AND out_trade_no = $2${lock ? ' FOR UPDATE' : ''}`,
    values: [appId, outTradeNo],
  });
  return r.rows[0] ?? null;
}

export async function getOrder(db: Queryable, id: string, lock = false): Promise<OrderRow | null> {
  const r = await db.query<OrderRow>({
    name: lock ? 'order_by_id_lock' : 'order_by_id',
    text: `SELECT ${ORDER_COLS} FROM orders WHERE id = $1${lock ? ' FOR UPDATE' : ''}`,
    values: [id],
  });
  return r.rows[0] ?? null;
}

export async function attemptsOf(db: Queryable, orderId: string): Promise<AttemptRow[]> {
  const r = await db.query<AttemptRow>(`SELECT ${ATTEMPT_COLS} FROM attempts WHERE order_id = $1 ORDER BY seq`, [orderId]);
  return r.rows;
}

export async function latestAttempt(db: Queryable, orderId: string): Promise<AttemptRow | null> {
  const r = await db.query<AttemptRow>({
    name: 'attempt_latest',
    text: `SELECT ${ATTEMPT_COLS} FROM attempts WHERE order_id = $1 ORDER BY seq DESC LIMIT 1`,
    values: [orderId],
  });
  return r.rows[0] ?? null;
}

/** The attempt columns of a joined row, prefixed `la_`, with the mapping back to an AttemptRow. */
const LATEST_COLS = `la.id AS la_id, la.order_id AS la_order_id, la.seq AS la_seq, la.state AS la_state,
  la.cashier_token AS la_cashier_token, la.qr_code AS la_qr_code, la.provider_ref AS la_provider_ref,
  la.expire_at AS la_expire_at, la.created_at AS la_created_at, la.updated_at AS la_updated_at`;

interface LatestCols {
  la_id: string | null;
  la_order_id: string;
  la_seq: number;
  la_state: AttemptState;
  la_cashier_token: string;
  la_qr_code: string | null;
  la_provider_ref: string | null;
  la_expire_at: Date;
  la_created_at: Date;
  la_updated_at: Date;
}

function splitLatest(row: OrderRow & LatestCols): { order: OrderRow; attempt: AttemptRow | null } {
  const {
    la_id,
    la_order_id,
    la_seq,
    la_state,
    la_cashier_token,
    la_qr_code,
    la_provider_ref,
    la_expire_at,
    la_created_at,
    la_updated_at,
    ...order
  } = row;
  const attempt =
    la_id === null
      ? null
      : {
          id: la_id,
          orderId: la_order_id,
          seq: la_seq,
          state: la_state,
          cashierToken: la_cashier_token,
          qrCode: la_qr_code,
          providerRef: la_provider_ref,
          expireAt: la_expire_at,
          createdAt: la_created_at,
          updatedAt: la_updated_at,
        };
  return { order, attempt };
}

/** An order by merchant number with its latest attempt, in one statement (the query-order read). */
export async function findOrderWithLatest(
  db: Queryable,
  appId: string,
  outTradeNo: string,
): Promise<{ order: OrderRow; attempt: AttemptRow | null } | null> {
  const r = await db.query<OrderRow & LatestCols>({
    name: 'order_by_no_with_latest',
    text: `SELECT o.*, ${LATEST_COLS} FROM (SELECT ${ORDER_COLS} FROM orders WHERE app_id = $1 AND out_trade_no = $2) o
      LEFT JOIN LATERAL (SELECT * FROM attempts WHERE order_id = o.id ORDER BY seq DESC LIMIT 1) la ON true`,
    values: [appId, outTradeNo],
  });
  const row = r.rows[0];
  return row ? splitLatest(row) : null;
}

/** findOrderWithLatest for several (app, number) pairs in one statement; answers in their order. */
export async function findOrdersWithLatest(
  db: Queryable,
  keys: { appId: string; outTradeNo: string }[],
): Promise<({ order: OrderRow; attempt: AttemptRow | null } | null)[]> {
  const r = await db.query<OrderRow & LatestCols & { idx: string }>({
    name: 'orders_by_no_with_latest_batch',
    text: `SELECT i.idx, o.*, ${LATEST_COLS}
      FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS i(app_id, out_trade_no, idx)
      JOIN LATERAL (SELECT ${ORDER_COLS} FROM orders WHERE app_id = i.app_id AND out_trade_no = i.out_trade_no) o ON true
      LEFT JOIN LATERAL (SELECT * FROM attempts WHERE order_id = o.id ORDER BY seq DESC LIMIT 1) la ON true`,
    values: [keys.map((k) => k.appId), keys.map((k) => k.outTradeNo)],
  });
  const out: ({ order: OrderRow; attempt: AttemptRow | null } | null)[] = new Array(keys.length).fill(null);
  for (const row of r.rows) {
    const { idx, ...rest } = row;
    out[Number(idx) - 1] = splitLatest(rest);
  }
  return out;
}

/**
 * The query-order read, batched per event-loop turn (src/store/batcher.ts). Each read sees the
 * database as of its batch's statement, which starts after the read was asked for: every write
 * answered before the read is visible to it, as with a statement of its own.
 */
export class OrderReader {
  readonly #batcher: TurnBatcher<{ appId: string; outTradeNo: string }, { order: OrderRow; attempt: AttemptRow | null } | null>;
  constructor(db: Db) {
    this.#batcher = new TurnBatcher({
      one: (k) => findOrderWithLatest(db, k.appId, k.outTradeNo),
      many: (ks) => findOrdersWithLatest(db, ks),
    });
  }

  withLatest(appId: string, outTradeNo: string): Promise<{ order: OrderRow; attempt: AttemptRow | null } | null> {
    return this.#batcher.run({ appId, outTradeNo });
  }
}

/** When the provider is asked again about an attempt still PENDING (its creation never finished). */
export const PENDING_RECHECK = "interval '150 seconds'";

/** What a new order is written with; the rest of its row is set by the database or later changes. */
export type NewOrder = Omit<
  OrderRow,
  'status' | 'closedReason' | 'failureReason' | 'stateVersion' | 'paidAttemptId' | 'paidAt' | 'closePending' | 'updatedAt'
>;

/** A request-id claim (the IN_PROGRESS replay record, src/gate/replay.ts) made inside another statement. */
export interface InlineReplayClaim {
  appId: string;
  requestId: string;
  method: string;
  target: string;
  bodySha256: string;
  leaseSeconds: number;
}

/**
 * A new CREATED order and its first PENDING attempt, in one statement (atomic on its own, or part
 * of the caller's transaction). With `claim`, the same statement first claims the request id for
 * replay, and writes the order only if that claim succeeded.
 * `claimed`: false only when a claim was asked for and the id was already taken (nothing written).
 * `created`: null when nothing was written, or the app already has an order with this number.
 */
export async function insertOrderWithFirstAttempt(
  db: Queryable,
  o: NewOrder,
  attempt: { id: string; cashierToken: string },
  claim: InlineReplayClaim | null = null,
): Promise<{ claimed: boolean; created: { order: OrderRow; attempt: AttemptRow } | null }> {
  const r = await db.query<(OrderRow & LatestCols) | { claimed: number; id: null }>({
    name: 'order_insert_with_attempt',
    text: `WITH r AS (
        INSERT INTO request_replays(app_id, request_id, method, target, body_sha256, state, lease_until)
        SELECT $21, $22, $23, $24, $25, 'IN_PROGRESS', now() + make_interval(secs => $26::integer) WHERE $22::text IS NOT NULL
        ON CONFLICT (app_id, request_id) DO NOTHING RETURNING 1),
      o AS (
        INSERT INTO orders(id, app_id, merchant_id, out_trade_no, channel, trade_scope, amount_fen, currency, subject, description,
                           attach, return_url, payer_client_ip, digest, links, status, expire_at, fee_projection, created_at, updated_at)
        SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, 'CREATED', $16, $17, $18, $18
         WHERE $22::text IS NULL OR EXISTS (SELECT 1 FROM r)
        ON CONFLICT (app_id, out_trade_no) DO NOTHING RETURNING *),
      la AS (
        INSERT INTO attempts(id, order_id, seq, state, cashier_token, expire_at, next_check_at)
        SELECT $19, o.id, 1, 'PENDING', $20, o.expire_at, now() + ${PENDING_RECHECK} FROM o RETURNING *)
      SELECT (SELECT count(*) FROM r)::integer AS claimed, o2.*, ${LATEST_COLS}
        FROM (SELECT 1) one LEFT JOIN ((SELECT ${ORDER_COLS} FROM o) o2 JOIN la ON la.order_id = o2.id) ON true`,
    values: [
      o.id,
      o.appId,
      o.merchantId,
      o.outTradeNo,
      o.channel,
      o.tradeScope,
      o.amountFen,
      o.currency,
      o.subject,
      o.description,
      o.attach,
      o.returnUrl,
      o.payerClientIp,
      o.digest,
      o.links,
      o.expireAt,
      JSON.stringify(o.feeProjection),
      o.createdAt,
      attempt.id,
      attempt.cashierToken,
      claim?.appId ?? null,
      claim?.requestId ?? null,
      claim?.method ?? null,
      claim?.target ?? null,
      claim?.bodySha256 ?? null,
      claim?.leaseSeconds ?? null,
    ],
  });
  const { claimed, ...row } = r.rows[0] as (OrderRow & LatestCols) & { claimed: number };
  const ok = claim === null || claimed === 1;
  if (row.id === null) return { claimed: ok, created: null };
  const { order, attempt: a } = splitLatest(row);
  return { claimed: ok, created: { order, attempt: a! } };
}

export interface OrderInsert {
  order: NewOrder;
  attempt: { id: string; cashierToken: string };
  claim: InlineReplayClaim | null;
}

export interface OrderInsertResult {
  claimed: boolean;
  created: { order: OrderRow; attempt: AttemptRow } | null;
}

/**
 * insertOrderWithFirstAttempt for several orders in one statement (src/store/batcher.ts), with
 * the same meaning item by item: each item's request id is claimed first (when asked), its order
 * written only if that claim succeeded and its number is free, then its first attempt. Two items
 * with one number: one of them gets the number. Answers in the items' order.
 */
export async function insertOrdersWithFirstAttempts(db: Queryable, items: OrderInsert[]): Promise<OrderInsertResult[]> {
  // The batch travels as one JSON text (serialized natively; cheaper than escaping 26 arrays).
  const rows = items.map(({ order: o, attempt: a, claim: c }, n) => ({
    idx: n,
    id: o.id,
    app_id: o.appId,
    merchant_id: o.merchantId,
    out_trade_no: o.outTradeNo,
    channel: o.channel,
    trade_scope: o.tradeScope,
    amount_fen: o.amountFen,
    currency: o.currency,
    subject: o.subject,
    description: o.description,
    attach: o.attach,
    return_url: o.returnUrl,
    payer_client_ip: o.payerClientIp,
    digest: o.digest,
    links: o.links,
    expire_at: o.expireAt,
    // A JSON text inside the JSON: the json column keeps the field order it is written in.
    fee_projection: JSON.stringify(o.feeProjection),
    created_at: o.createdAt,
    attempt_id: a.id,
    cashier_token: a.cashierToken,
    r_app: c?.appId ?? null,
    r_req: c?.requestId ?? null,
    r_method: c?.method ?? null,
    r_target: c?.target ?? null,
    r_sha: c?.bodySha256 ?? null,
    r_lease: c?.leaseSeconds ?? null,
  }));
  const r = await db.query<(OrderRow & LatestCols) & { idx: number; claimed: boolean }>({
    name: 'order_insert_with_attempt_batch',
    text: `WITH i AS (
        SELECT * FROM json_to_recordset($1::json) AS t(idx integer, id text, app_id text, merchant_id text, out_trade_no text,
          channel text, trade_scope text, amount_fen bigint, currency text, subject text, description text, attach text,
          return_url text, payer_client_ip text, digest text, links json, expire_at timestamptz, fee_projection text,
          created_at timestamptz, attempt_id text, cashier_token text,
          r_app text, r_req text, r_method text, r_target text, r_sha text, r_lease integer)),
      r AS (
        INSERT INTO request_replays(app_id, request_id, method, target, body_sha256, state, lease_until)
        SELECT r_app, r_req, r_method, r_target, r_sha, 'IN_PROGRESS', now() + make_interval(secs => r_lease) FROM i
         WHERE r_req IS NOT NULL
        ON CONFLICT (app_id, request_id) DO NOTHING RETURNING app_id, request_id),
      o AS (
        INSERT INTO orders(id, app_id, merchant_id, out_trade_no, channel, trade_scope, amount_fen, currency, subject, description,
                           attach, return_url, payer_client_ip, digest, links, status, expire_at, fee_projection, created_at, updated_at)
        SELECT id, app_id, merchant_id, out_trade_no, channel, trade_scope, amount_fen, currency, subject, description,
               attach, return_url, payer_client_ip, digest, ARRAY(SELECT json_array_elements_text(links)), 'CREATED',
               expire_at, fee_projection::json, created_at, created_at
          FROM i
         WHERE r_req IS NULL OR EXISTS (SELECT 1 FROM r WHERE r.app_id = i.r_app AND r.request_id = i.r_req)
        ON CONFLICT (app_id, out_trade_no) DO NOTHING RETURNING *),
      la AS (
        INSERT INTO attempts(id, order_id, seq, state, cashier_token, expire_at, next_check_at)
        SELECT i.attempt_id, o.id, 1, 'PENDING', i.cashier_token, o.expire_at, now() + ${PENDING_RECHECK}
          FROM o JOIN i ON i.id = o.id RETURNING *)
      SELECT i.idx, (i.r_req IS NULL OR r.request_id IS NOT NULL) AS claimed, o2.*, ${LATEST_COLS}
        FROM i LEFT JOIN r ON r.app_id = i.r_app AND r.request_id = i.r_req
        LEFT JOIN ((SELECT ${ORDER_COLS} FROM o) o2 JOIN la ON la.order_id = o2.id) ON o2.id = i.id`,
    values: [JSON.stringify(rows)],
  });
  const out: OrderInsertResult[] = new Array(items.length);
  for (const row of r.rows) {
    const { idx, claimed, ...rest } = row;
    if (rest.id === null) {
      out[idx] = { claimed, created: null };
    } else {
      const { order, attempt } = splitLatest(rest);
      out[idx] = { claimed, created: { order, attempt: attempt! } };
    }
  }
  return out;
}

/**
 * New orders of concurrent creates, batched per event-loop turn (src/store/batcher.ts). A request
 * id claimed twice in one turn: the first item is batched, the other is sent after it on its own
 * (and finds the id taken, as it would have without batching).
 */
export class OrderInserter {
  readonly #batcher: TurnBatcher<OrderInsert, OrderInsertResult>;
  constructor(db: Db) {
    const one = (it: OrderInsert) => insertOrderWithFirstAttempt(db, it.order, it.attempt, it.claim);
    this.#batcher = new TurnBatcher({
      one,
      many: (items) => insertOrdersWithFirstAttempts(db, items),
      key: (it) => (it.claim ? `${it.claim.appId} ${it.claim.requestId}` : null),
      // Concurrent batches take the order numbers' index entries in one order.
      compare: (a, b) => cmp(a.order.appId, b.order.appId) || cmp(a.order.outTradeNo, b.order.outTradeNo),
    });
  }

  insert(it: OrderInsert): Promise<OrderInsertResult> {
    return this.#batcher.run(it);
  }
}

/** The provider accepted a PENDING attempt of a CREATED order (migrations/0002 and 0003). */
export interface AttemptAcceptance {
  orderId: string;
  attemptId: string;
  providerRef: string | null;
  qrCode: string | null;
  /** The answer recorded for request-id replay in the same transaction. */
  replay: { appId: string; requestId: string; status: number; body: string } | null;
}

/**
 * Applies accepted outcomes, batched per event-loop turn: attempt ACCEPTED, order PAYING and the
 * replay answer in one transaction, only while the order is still CREATED and the attempt still
 * PENDING. Answers whether the change was applied (if not, nothing changed).
 */
export class AttemptAcceptor {
  readonly #batcher: TurnBatcher<AttemptAcceptance, boolean>;
  constructor(db: Db) {
    this.#batcher = new TurnBatcher({
      one: async (a) => {
        const r = await db.query<{ ok: boolean }>({
          name: 'accept_attempt',
          text: 'SELECT mps_accept_attempt($1, $2, $3, $4, $5, $6, $7, $8) AS ok',
          values: [a.orderId, a.attemptId, a.providerRef, a.qrCode, a.replay?.appId, a.replay?.requestId, a.replay?.status, a.replay?.body],
        });
        return r.rows[0]!.ok;
      },
      many: async (as) => {
        const r = await db.query<{ id: string }>({
          name: 'accept_attempts',
          text: 'SELECT id FROM mps_accept_attempts($1::json) AS id',
          values: [
            JSON.stringify(
              as.map((a) => ({
                order_id: a.orderId,
                attempt_id: a.attemptId,
                provider_ref: a.providerRef,
                qr_code: a.qrCode,
                replay_app_id: a.replay?.appId ?? null,
                replay_request_id: a.replay?.requestId ?? null,
                replay_status: a.replay?.status ?? null,
                replay_body: a.replay?.body ?? null,
              })),
            ),
          ],
        });
        const done = new Set(r.rows.map((row) => row.id));
        return as.map((a) => done.has(a.orderId));
      },
      key: (a) => a.orderId,
    });
  }

  accept(a: AttemptAcceptance): Promise<boolean> {
    return this.#batcher.run(a);
  }
}

const cmp = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

export async function getAttempt(db: Queryable, id: string): Promise<AttemptRow | null> {
  const r = await db.query<AttemptRow>({ name: 'attempt_by_id', text: `SELECT ${ATTEMPT_COLS} FROM attempts WHERE id = $1`, values: [id] });
  return r.rows[0] ?? null;
}

export async function findRefund(db: Queryable, appId: string, outRefundNo: string): Promise<RefundRow | null> {
  const r = await db.query<RefundRow>(`SELECT ${REFUND_COLS} FROM refunds WHERE app_id = $1 AND out_refund_no = $2`, [appId, outRefundNo]);
  return r.rows[0] ?? null;
}

export async function getRefund(db: Queryable, id: string): Promise<RefundRow | null> {
  const r = await db.query<RefundRow>(`SELECT ${REFUND_COLS} FROM refunds WHERE id = $1`, [id]);
  return r.rows[0] ?? null;
}
