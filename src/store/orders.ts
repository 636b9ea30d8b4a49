/**
 * Repository: orders and their attempts (and the re-create requests and daily amounts that belong
 * to them). Every state change takes a Transition checked against the tables of
 * src/domain/states.ts and applies it only from its source state; time is the caller's clock,
 * passed in. The hot lookups are named prepared statements (parsed and planned once per
 * connection), and the hot writes are batched per event-loop turn (src/store/batcher.ts).
 */
import { orderEventType } from '../domain/events.ts';
import type { AttemptState, ClosedReason, OrderStatus, Transition } from '../domain/states.ts';
import type { FeeProjection } from '../domain/money.ts';
import { TurnBatcher } from './batcher.ts';
import type { Db, Queryable, Tx } from './db.ts';

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

const ORDER_COLS = `id, app_id AS "appId", merchant_id AS "merchantId", out_trade_no AS "outTradeNo", channel,
  trade_scope AS "tradeScope", amount_fen AS "amountFen", currency, subject, description, attach, return_url AS "returnUrl",
  payer_client_ip AS "payerClientIp", digest, links, status, closed_reason AS "closedReason", failure_reason AS "failureReason",
  expire_at AS "expireAt", fee_projection AS "feeProjection", state_version AS "stateVersion", paid_attempt_id AS "paidAttemptId",
  paid_trade_no AS "paidTradeNo", paid_at AS "paidAt", close_pending AS "closePending", created_at AS "createdAt", updated_at AS "updatedAt"`;

export interface AttemptRow {
  id: string;
  orderId: string;
  seq: number;
  state: AttemptState;
  cashierToken: string;
  qrCode: string | null;
  /** The provider's own payment page the cashier sends the buyer to (null for the sandbox). */
  redirectUrl: string | null;
  providerRef: string | null;
  /** The provider that holds the payment (src/providers/router.ts). */
  provider: string;
  expireAt: Date;
  /** When the request that created it recorded its outcome; null while being made or if the reconciler settled it. */
  madeAt: Date | null;
  createdAt: Date;
  updatedAt: Date;
}

const ATTEMPT_COLS = `id, order_id AS "orderId", seq, state, cashier_token AS "cashierToken", qr_code AS "qrCode", redirect_url AS "redirectUrl",
  provider_ref AS "providerRef", provider, expire_at AS "expireAt", made_at AS "madeAt", created_at AS "createdAt", updated_at AS "updatedAt"`;

/** When the provider is asked again about an attempt still PENDING (its creation never finished). */
export const PENDING_RECHECK_MS = 150_000;

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

/** Takes the order's row lock (the lock every change of the order, its attempts and its refunds is made under). */
export async function lockOrder(tx: Tx, id: string): Promise<void> {
  await tx.query({ name: 'order_lock', text: 'SELECT 1 FROM orders WHERE id = $1 FOR UPDATE', values: [id] });
}

export async function attemptsOf(db: Queryable, orderId: string): Promise<AttemptRow[]> {
  const r = await db.query<AttemptRow>({
    name: 'attempts_of_order',
    text: `SELECT ${ATTEMPT_COLS} FROM attempts WHERE order_id = $1 ORDER BY seq`,
    values: [orderId],
  });
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

export async function getAttempt(db: Queryable, id: string): Promise<AttemptRow | null> {
  const r = await db.query<AttemptRow>({ name: 'attempt_by_id', text: `SELECT ${ATTEMPT_COLS} FROM attempts WHERE id = $1`, values: [id] });
  return r.rows[0] ?? null;
}

/** The attempt behind a cashier token, with the highest attempt number of its order. */
export async function findAttemptByCashierToken(db: Queryable, token: string): Promise<{ attempt: AttemptRow; latestSeq: number } | null> {
  const r = await db.query<AttemptRow & { latestSeq: number }>({
    name: 'attempt_by_cashier_token',
    text: `SELECT ${ATTEMPT_COLS}, (SELECT max(l.seq) FROM attempts l WHERE l.order_id = attempts.order_id) AS "latestSeq"
       FROM attempts WHERE cashier_token = $1`,
    values: [token],
  });
  const row = r.rows[0];
  if (!row) return null;
  const { latestSeq, ...attempt } = row;
  return { attempt, latestSeq };
}

/** The attempt columns of a joined row, prefixed `la_`, with the mapping back to an AttemptRow. */
const LATEST_COLS = `la.id AS la_id, la.order_id AS la_order_id, la.seq AS la_seq, la.state AS la_state,
  la.cashier_token AS la_cashier_token, la.qr_code AS la_qr_code, la.redirect_url AS la_redirect_url, la.provider_ref AS la_provider_ref, la.provider AS la_provider,
  la.expire_at AS la_expire_at, la.made_at AS la_made_at, la.created_at AS la_created_at, la.updated_at AS la_updated_at`;

interface LatestCols {
  la_id: string | null;
  la_order_id: string;
  la_seq: number;
  la_state: AttemptState;
  la_cashier_token: string;
  la_qr_code: string | null;
  la_redirect_url: string | null;
  la_provider_ref: string | null;
  la_provider: string;
  la_expire_at: Date;
  la_made_at: Date | null;
  la_created_at: Date;
  la_updated_at: Date;
}

export interface OrderWithLatest {
  order: OrderRow;
  attempt: AttemptRow | null;
}

function splitLatest(row: OrderRow & LatestCols): OrderWithLatest {
  const {
    la_id,
    la_order_id,
    la_seq,
    la_state,
    la_cashier_token,
    la_qr_code,
    la_redirect_url,
    la_provider_ref,
    la_provider,
    la_expire_at,
    la_made_at,
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
          redirectUrl: la_redirect_url,
          providerRef: la_provider_ref,
          provider: la_provider,
          expireAt: la_expire_at,
          madeAt: la_made_at,
          createdAt: la_created_at,
          updatedAt: la_updated_at,
        };
  return { order, attempt };
}

/** An order by merchant number with its latest attempt, in one statement (the query-order read). */
export async function findOrderWithLatest(db: Queryable, appId: string, outTradeNo: string): Promise<OrderWithLatest | null> {
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
): Promise<(OrderWithLatest | null)[]> {
  const r = await db.query<OrderRow & LatestCols & { idx: string }>({
    name: 'orders_by_no_with_latest_batch',
    text: `SELECT i.idx, o.*, ${LATEST_COLS}
      FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS i(app_id, out_trade_no, idx)
      JOIN LATERAL (SELECT ${ORDER_COLS} FROM orders WHERE app_id = i.app_id AND out_trade_no = i.out_trade_no) o ON true
      LEFT JOIN LATERAL (SELECT * FROM attempts WHERE order_id = o.id ORDER BY seq DESC LIMIT 1) la ON true`,
    values: [keys.map((k) => k.appId), keys.map((k) => k.outTradeNo)],
  });
  const out: (OrderWithLatest | null)[] = new Array(keys.length).fill(null);
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
  readonly #batcher: TurnBatcher<{ appId: string; outTradeNo: string }, OrderWithLatest | null>;
  constructor(db: Db) {
    this.#batcher = new TurnBatcher({
      one: (k) => findOrderWithLatest(db, k.appId, k.outTradeNo),
      many: (ks) => findOrdersWithLatest(db, ks),
    });
  }

  withLatest(appId: string, outTradeNo: string): Promise<OrderWithLatest | null> {
    return this.#batcher.run({ appId, outTradeNo });
  }
}

/** What a new order is written with; the rest of its row is set by the database or later changes. */
export type NewOrder = Omit<
  OrderRow,
  'status' | 'closedReason' | 'failureReason' | 'stateVersion' | 'paidAttemptId' | 'paidTradeNo' | 'paidAt' | 'closePending' | 'updatedAt'
>;

/**
 * A request-id claim (the IN_PROGRESS record of src/store/replays.ts) made inside the statement
 * that writes the order: the id is claimed, and the order written, together or not at all.
 */
export interface InlineClaim {
  appId: string;
  requestId: string;
  method: string;
  target: string;
  bodySha256: string;
  holder: string;
  holderInstance: string;
  leaseUntil: Date;
}

export interface OrderInsert {
  order: NewOrder;
  attempt: NewAttempt;
  claim: InlineClaim | null;
  /** The app's daily amount ceiling, when it has one: the order is kept only within it. */
  quota?: DailyQuota | null;
}

/**
 * An order under its app's daily amount ceiling: `day` is the order's Asia/Shanghai day;
 * `singleExceeded` when the amount is above every receiving account's single-order ceiling (the
 * order is refused, and the daily ceiling is still judged so that both scopes are reported).
 */
export interface DailyQuota {
  day: string;
  ceilingFen: number;
  singleExceeded: boolean;
}

/** Why an order under a ceiling was not kept. */
export type QuotaScope = 'SINGLE_AMOUNT' | 'DAILY_AMOUNT';

/** A new attempt's identifiers, the provider it goes to, and the instance whose request makes it. */
export interface NewAttempt {
  id: string;
  cashierToken: string;
  provider: string;
  createdBy: string;
}

export interface OrderInsertResult {
  /** False only when a claim was asked for and the id was already taken (nothing written). */
  claimed: boolean;
  /** Null when nothing was written, or the app already has an order with this number. */
  created: { order: OrderRow; attempt: AttemptRow } | null;
  /**
   * An order under a ceiling that was refused (nothing of it kept; its request-id claim stands):
   * the scopes it exceeded. Null otherwise.
   */
  refused?: QuotaScope[] | null;
  /** Under a ceiling whose counter for the day does not exist yet: nothing written (insertOrders starts it and writes the item again). */
  missingCounter?: boolean;
}

/** The extra result columns of the insert within ceilings. */
interface QuotaCols {
  /** Its (app, day) has no counter yet: nothing of the item was written. */
  q_missing?: boolean;
  /** Refused by the ceiling (its claim was written, its order not). */
  q_refused?: boolean;
  q_single?: boolean | null;
  q_over?: boolean | null;
}

/**
 * The insert of a batch of new orders with their first attempts (and request-id claims), one
 * statement; `withinCeilings`: with the daily ceilings of the items that have a quota, judged in the
 * same statement. Then the counters of the batch's (app, day) pairs are locked first, in key order,
 * before anything is written (the `locked` count gates every insert), the items walked in batch
 * order per counter, each kept if it fits what is left (a larger one that does not fit never blocks
 * a smaller one behind it), and the counters advanced by the orders actually written. An item whose
 * counter does not exist yet writes nothing (not even its claim) and is reported missing.
 */
function insertSql(withinCeilings: boolean): string {
  const gate = withinCeilings ? '(SELECT n FROM locked) >= 0 AND ' : '';
  return `WITH ${withinCeilings ? 'RECURSIVE ' : ''}i AS (
        SELECT * FROM json_to_recordset($1::json) AS t(idx integer, id text, app_id text, merchant_id text, out_trade_no text,
          channel text, trade_scope text, amount_fen bigint, currency text, subject text, description text, attach text,
          return_url text, payer_client_ip text, digest text, links json, expire_at timestamptz, fee_projection text,
          created_at timestamptz, next_check_at timestamptz, attempt_id text, cashier_token text, provider text, created_by text,
          r_app text, r_req text, r_method text, r_target text, r_sha text, r_holder text, r_instance text, r_lease timestamptz${
            withinCeilings ? ', q_day date, q_ceiling bigint, q_single boolean' : ''
          })),${
            withinCeilings
              ? `
      c AS (
        SELECT a.app_id, a.day, a.amount_fen FROM app_daily_amounts a
         WHERE (a.app_id, a.day) IN (SELECT app_id, q_day FROM i WHERE q_day IS NOT NULL)
         ORDER BY a.app_id, a.day FOR UPDATE),
      locked AS (SELECT count(*) AS n FROM c),
      q AS (
        SELECT idx, app_id, q_day, amount_fen, q_ceiling, q_single,
               row_number() OVER (PARTITION BY app_id, q_day ORDER BY idx) AS k
          FROM i WHERE q_day IS NOT NULL),
      w AS (
        SELECT q.idx, q.app_id, q.q_day, q.k,
               NOT q.q_single AND c.amount_fen + q.amount_fen <= q.q_ceiling AS fits,
               c.amount_fen + q.amount_fen > q.q_ceiling AS over,
               c.amount_fen + CASE WHEN NOT q.q_single AND c.amount_fen + q.amount_fen <= q.q_ceiling THEN q.amount_fen ELSE 0 END AS used
          FROM q JOIN c ON c.app_id = q.app_id AND c.day = q.q_day
         WHERE q.k = 1
        UNION ALL
        SELECT q.idx, q.app_id, q.q_day, q.k,
               NOT q.q_single AND w.used + q.amount_fen <= q.q_ceiling,
               w.used + q.amount_fen > q.q_ceiling,
               w.used + CASE WHEN NOT q.q_single AND w.used + q.amount_fen <= q.q_ceiling THEN q.amount_fen ELSE 0 END
          FROM w JOIN q ON q.app_id = w.app_id AND q.q_day = w.q_day AND q.k = w.k + 1),`
              : ''
          }
      r AS (
        INSERT INTO request_replays(app_id, request_id, method, target, body_sha256, state, lease_until, holder, holder_instance, created_at)
        SELECT r_app, r_req, r_method, r_target, r_sha, 'IN_PROGRESS', r_lease, r_holder, r_instance, created_at FROM i
         WHERE ${gate}r_req IS NOT NULL${withinCeilings ? ' AND (q_day IS NULL OR EXISTS (SELECT 1 FROM w WHERE w.idx = i.idx))' : ''}
        ON CONFLICT (app_id, request_id) DO NOTHING RETURNING app_id, request_id),
      o AS (
        INSERT INTO orders(id, app_id, merchant_id, out_trade_no, channel, trade_scope, amount_fen, currency, subject, description,
                           attach, return_url, payer_client_ip, digest, links, status, expire_at, fee_projection, created_at, updated_at)
        SELECT id, app_id, merchant_id, out_trade_no, channel, trade_scope, amount_fen, currency, subject, description,
               attach, return_url, payer_client_ip, digest, ARRAY(SELECT json_array_elements_text(links)), 'CREATED',
               expire_at, fee_projection::json, created_at, created_at
          FROM i
         WHERE ${gate}(r_req IS NULL OR EXISTS (SELECT 1 FROM r WHERE r.app_id = i.r_app AND r.request_id = i.r_req))${
           withinCeilings ? '\n           AND (q_day IS NULL OR EXISTS (SELECT 1 FROM w WHERE w.idx = i.idx AND w.fits))' : ''
         }
        ON CONFLICT (app_id, out_trade_no) DO NOTHING RETURNING *),
      la AS (
        INSERT INTO attempts(id, order_id, seq, state, cashier_token, provider, created_by, expire_at, next_check_at, created_at, updated_at)
        SELECT i.attempt_id, o.id, 1, 'PENDING', i.cashier_token, i.provider, i.created_by, o.expire_at, i.next_check_at, i.created_at, i.created_at
          FROM o JOIN i ON i.id = o.id RETURNING *)${
            withinCeilings
              ? `,
      u AS (
        UPDATE app_daily_amounts a SET amount_fen = a.amount_fen + s.add
          FROM (SELECT i.app_id, i.q_day, sum(o.amount_fen) AS add FROM o JOIN i ON i.id = o.id
                 WHERE i.q_day IS NOT NULL GROUP BY i.app_id, i.q_day) s
         WHERE a.app_id = s.app_id AND a.day = s.q_day)`
              : ''
          }
      SELECT i.idx, (i.r_req IS NULL OR r.request_id IS NOT NULL) AS claimed, o2.*, ${LATEST_COLS}${
        withinCeilings
          ? `,
             (i.q_day IS NOT NULL AND w.idx IS NULL) AS q_missing, (w.idx IS NOT NULL AND NOT w.fits) AS q_refused,
             i.q_single, w.over AS q_over`
          : ''
      }
        FROM i LEFT JOIN r ON r.app_id = i.r_app AND r.request_id = i.r_req${withinCeilings ? '\n        LEFT JOIN w ON w.idx = i.idx' : ''}
        LEFT JOIN ((SELECT ${ORDER_COLS} FROM o) o2 JOIN la ON la.order_id = o2.id) ON o2.id = i.id`;
}
const INSERT_SQL = insertSql(false);
const INSERT_WITHIN_CEILINGS_SQL = insertSql(true);

/**
 * New CREATED orders with their first PENDING attempt, several in one statement, item by item as
 * if each were alone: its request id is claimed first (when asked), its order written only if
 * that claim succeeded and its number is free, then its first attempt. Two items with one number:
 * one of them gets the number. Answers in the items' order. (A single item is the same statement
 * with one element.)
 */
export async function insertOrdersWithFirstAttempts(db: Queryable, items: OrderInsert[]): Promise<OrderInsertResult[]> {
  // The batch travels as one JSON text (serialized natively; cheaper than escaping 28 arrays).
  const quotas = items.some((it) => it.quota);
  const rows = items.map(({ order: o, attempt: a, claim: c, quota: q }, n) => ({
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
    next_check_at: new Date(o.createdAt.getTime() + PENDING_RECHECK_MS),
    attempt_id: a.id,
    cashier_token: a.cashierToken,
    provider: a.provider,
    created_by: a.createdBy,
    r_app: c?.appId ?? null,
    r_req: c?.requestId ?? null,
    r_method: c?.method ?? null,
    r_target: c?.target ?? null,
    r_sha: c?.bodySha256 ?? null,
    r_holder: c?.holder ?? null,
    r_instance: c?.holderInstance ?? null,
    r_lease: c?.leaseUntil ?? null,
    q_day: q?.day ?? null,
    q_ceiling: q?.ceilingFen ?? null,
    q_single: q?.singleExceeded ?? null,
  }));
  const r = await db.query<(OrderRow & LatestCols) & QuotaCols & { idx: number; claimed: boolean }>({
    name: quotas ? 'order_insert_with_attempt_batch_quota' : 'order_insert_with_attempt_batch',
    text: quotas ? INSERT_WITHIN_CEILINGS_SQL : INSERT_SQL,
    values: [JSON.stringify(rows)],
  });
  const out: OrderInsertResult[] = new Array(items.length);
  for (const row of r.rows) {
    const { idx, claimed, q_missing, q_refused, q_single, q_over, ...rest } = row;
    if (q_missing) {
      out[idx] = { claimed: false, created: null, missingCounter: true };
    } else if (q_refused) {
      const refused: QuotaScope[] = [...(q_single ? ['SINGLE_AMOUNT' as const] : []), ...(q_over ? ['DAILY_AMOUNT' as const] : [])];
      out[idx] = { claimed, created: null, refused };
    } else if (rest.id === null) {
      out[idx] = { claimed, created: null };
    } else {
      const { order, attempt } = splitLatest(rest);
      out[idx] = { claimed, created: { order, attempt: attempt! } };
    }
  }
  return out;
}

/**
 * New orders, kept within their apps' daily amount ceilings: one statement either way
 * (insertOrdersWithFirstAttempts). A counter missing for a day (the day's first order under a
 * ceiling, or the ceiling just changed) is started from the day's orders on its own, then the items
 * that met it are written again. A counter row is locked once per batch, for one statement: creates
 * of one app are not serialised one by one on it.
 */
export async function insertOrders(db: Db, items: OrderInsert[]): Promise<OrderInsertResult[]> {
  const out = await insertOrdersWithFirstAttempts(db, items);
  for (let tries = 0; ; tries++) {
    const again = out.flatMap((r, n) => (r.missingCounter ? [n] : []));
    if (again.length === 0) return out;
    if (tries === 5) throw new Error('daily amount counters keep disappearing (the ceiling changing again and again?)');
    const keys = new Map<string, DayKey>();
    for (const n of again) {
      const it = items[n]!;
      keys.set(`${it.order.appId} ${it.quota!.day}`, { appId: it.order.appId, day: it.quota!.day });
    }
    await startDailyCounters(db, [...keys.values()]);
    const redone = await insertOrdersWithFirstAttempts(
      db,
      again.map((n) => items[n]!),
    );
    again.forEach((n, k) => (out[n] = redone[k]!));
  }
}

type DayKey = { appId: string; day: string };

/**
 * Starts the daily counters of `keys` that are missing from the orders of each day (committed on
 * their own: the orders of later batches add to them).
 */
async function startDailyCounters(db: Queryable, keys: DayKey[]): Promise<void> {
  await db.query(
    `INSERT INTO app_daily_amounts(app_id, day, amount_fen)
     SELECT k.app_id, k.day, COALESCE((SELECT SUM(o.amount_fen) FROM orders o
              WHERE o.app_id = k.app_id
                AND o.created_at >= (k.day::timestamp - interval '8 hours') AT TIME ZONE 'UTC'
                AND o.created_at < (k.day::timestamp + interval '16 hours') AT TIME ZONE 'UTC'), 0)::bigint
       FROM unnest($1::text[], $2::date[]) AS k(app_id, day)
     ON CONFLICT (app_id, day) DO NOTHING`,
    [keys.map((k) => k.appId), keys.map((k) => k.day)],
  );
}

/**
 * New orders of concurrent creates, batched per event-loop turn (src/store/batcher.ts). A request
 * id claimed twice in one turn: the first item is batched, the other is sent after it on its own
 * (and finds the id taken, as it would have without batching).
 */
export class OrderInserter {
  readonly #batcher: TurnBatcher<OrderInsert, OrderInsertResult>;
  constructor(db: Db) {
    this.#batcher = new TurnBatcher({
      one: async (it) => (await insertOrders(db, [it]))[0]!,
      many: (items) => insertOrders(db, items),
      key: (it) => (it.claim ? `${it.claim.appId} ${it.claim.requestId}` : null),
      // Concurrent batches take the order numbers' index entries in one order.
      compare: (a, b) => cmp(a.order.appId, b.order.appId) || cmp(a.order.outTradeNo, b.order.outTradeNo),
    });
  }

  insert(it: OrderInsert): Promise<OrderInsertResult> {
    return this.#batcher.run(it);
  }
}

/** The answer recorded for a request id in the same transaction as the change it reports. */
export interface RecordedAnswer {
  appId: string;
  requestId: string;
  holder: string;
  status: number;
  body: string;
}

/** The provider accepted a PENDING attempt of a CREATED order (see acceptAttempts). */
export interface AttemptAcceptance {
  orderId: string;
  attemptId: string;
  providerRef: string | null;
  qrCode: string | null;
  redirectUrl: string | null;
  answer: RecordedAnswer | null;
}

export interface AcceptanceResult {
  /** The attempt and the order moved (if not, nothing changed). */
  applied: boolean;
  /** The answer was recorded (its holder still held the request id). */
  answerRecorded: boolean;
}

/**
 * The common outcome of creating an order, for several orders in one statement: each order still
 * in `order.from` with no close pending is locked (in id order, so concurrent batches cannot
 * deadlock), its attempt moves `attempt.from -> attempt.to` with its provider reference and
 * material, the order `order.from -> order.to` (stateVersion + 1; no event: the target state has
 * none), and its request id's answer is recorded, fenced by its holder. An item whose order or
 * attempt is no longer in the source state changes nothing (the caller takes the general path).
 * Every row is re-checked as it is updated, so a change committed by another transaction while
 * this one waited for a lock is seen.
 */
export async function acceptAttempts(
  db: Queryable,
  items: AttemptAcceptance[],
  t: { attempt: Transition<'attempt'>; order: Transition<'order'> },
  now: Date,
): Promise<AcceptanceResult[]> {
  // The statement writes no event: only a transition into a state that reports none may take it.
  if (orderEventType(t.order.to) !== null) throw new Error(`acceptAttempts: ${t.order.to} reports an event`);
  const r = await db.query<{ order_id: string; answered: boolean }>({
    name: 'accept_attempts',
    // The statement is mps_accept_attempts (migrations/0012): a function only so that it plans with
    // sequential scans off; the transition is this call's.
    text: 'SELECT order_id, answered FROM mps_accept_attempts($1::json, $7::text[], $8::text[], $2, $3, $4, $5, $6)',
    values: [
      JSON.stringify(
        items.map((a) => ({
          order_id: a.orderId,
          attempt_id: a.attemptId,
          provider_ref: a.providerRef,
          qr_code: a.qrCode,
          redirect_url: a.redirectUrl,
          r_app: a.answer?.appId ?? null,
          r_req: a.answer?.requestId ?? null,
          r_holder: a.answer?.holder ?? null,
          r_status: a.answer?.status ?? null,
          r_body: a.answer?.body ?? null,
        })),
      ),
      t.order.from,
      t.order.to,
      t.attempt.from,
      t.attempt.to,
      now,
      items.map((a) => a.orderId),
      items.map((a) => a.attemptId),
    ],
  });
  const done = new Map(r.rows.map((row) => [row.order_id, row.answered]));
  return items.map((a) => ({ applied: done.has(a.orderId), answerRecorded: done.get(a.orderId) === true }));
}

/** Accepted outcomes of concurrent creates, one statement per event-loop turn. */
export class AttemptAcceptor {
  readonly #batcher: TurnBatcher<AttemptAcceptance & { now: Date }, AcceptanceResult>;
  constructor(db: Db, t: { attempt: Transition<'attempt'>; order: Transition<'order'> }) {
    // The batch's time is its latest item's: the clock only moves forward.
    const latest = (as: { now: Date }[]) => as.reduce((m, a) => (a.now > m ? a.now : m), as[0]!.now);
    this.#batcher = new TurnBatcher({
      one: async (a) => (await acceptAttempts(db, [a], t, a.now))[0]!,
      many: (as) => acceptAttempts(db, as, t, latest(as)),
      key: (a) => a.orderId,
    });
  }

  accept(a: AttemptAcceptance, now: Date): Promise<AcceptanceResult> {
    return this.#batcher.run({ ...a, now });
  }
}

const cmp = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

/** A new PENDING attempt of the order (the next number). */
export async function insertAttempt(tx: Tx, order: OrderRow, a: NewAttempt, now: Date): Promise<AttemptRow> {
  const r = await tx.query<AttemptRow>({
    name: 'attempt_insert',
    text: `INSERT INTO attempts(id, order_id, seq, state, cashier_token, provider, created_by, expire_at, next_check_at, created_at, updated_at)
     VALUES ($1, $2, (SELECT COALESCE(MAX(seq), 0) + 1 FROM attempts WHERE order_id = $2), 'PENDING', $3, $4, $8, $5, $6, $7, $7)
     RETURNING ${ATTEMPT_COLS}`,
    values: [a.id, order.id, a.cashierToken, a.provider, order.expireAt, new Date(now.getTime() + PENDING_RECHECK_MS), now, a.createdBy],
  });
  return r.rows[0]!;
}

/**
 * A PENDING attempt that never reached the provider (a re-create refused before its provider
 * call): removed, so the order is left exactly as it was. Not a change of state: the attempt
 * never existed for anyone but the request that made it.
 */
export async function withdrawPendingAttempt(tx: Tx, id: string): Promise<void> {
  await tx.query(`DELETE FROM attempts WHERE id = $1 AND state = 'PENDING'`, [id]);
}

export interface AttemptChange {
  providerRef?: string | null;
  qrCode?: string | null;
  redirectUrl?: string | null;
  nextCheckAt?: Date | null;
  /** Set by the request that created the attempt when it records the provider's outcome. */
  madeAt?: Date | null;
}

/** Applies `t` to the attempt if it is still in `t.from`; answers whether it did. */
export async function setAttemptState(tx: Queryable, id: string, t: Transition<'attempt'>, c: AttemptChange, now: Date): Promise<boolean> {
  const r = await tx.query({
    name: 'attempt_set_state',
    text: `UPDATE attempts SET state = $3, provider_ref = COALESCE($4, provider_ref), qr_code = COALESCE($5, qr_code),
            redirect_url = COALESCE($9, redirect_url), next_check_at = $6, made_at = COALESCE($7, made_at), updated_at = $8
      WHERE id = $1 AND state = $2`,
    values: [
      id,
      t.from,
      t.to,
      c.providerRef ?? null,
      c.qrCode ?? null,
      c.nextCheckAt ?? null,
      c.madeAt ?? null,
      now,
      c.redirectUrl ?? null,
    ],
  });
  return r.rowCount === 1;
}

/**
 * Records the provider's reference of an attempt as its payment report gives it (a provider may
 * assign its own trade number only when the buyer pays: Alipay's trade_no, WeChat Pay's
 * transaction_id).
 */
export async function noteAttemptProviderRef(tx: Tx, id: string, providerRef: string): Promise<void> {
  await tx.query('UPDATE attempts SET provider_ref = $2 WHERE id = $1 AND provider_ref IS DISTINCT FROM $2', [id, providerRef]);
}

/**
 * A fresh address of the provider's own page for an attempt still ACCEPTED (the identical order
 * asked again: WeChat Pay's h5_url lives 5 minutes). Its updated_at tells the page's age.
 */
export async function noteAttemptPage(db: Queryable, id: string, redirectUrl: string, now: Date): Promise<void> {
  await db.query(`UPDATE attempts SET redirect_url = $2, updated_at = $3 WHERE id = $1 AND state = 'ACCEPTED'`, [id, redirectUrl, now]);
}

export interface OrderChange {
  closedReason?: ClosedReason;
  failureReason?: string;
  paidAttemptId?: string;
  /** With paidAttemptId: the trade of it that was paid, when not its own provider order. */
  paidTradeNo?: string;
}

/**
 * Applies `t` to the order (it must be in `t.from`, the caller holding its lock), bumps its
 * shared stateVersion, and answers the fresh row. A final state clears a pending close.
 */
export async function setOrderStatus(tx: Tx, id: string, t: Transition<'order'>, c: OrderChange, now: Date): Promise<OrderRow> {
  const r = await tx.query<OrderRow>({
    name: 'order_set_status',
    text: `UPDATE orders SET status = $3, closed_reason = COALESCE($4, closed_reason), failure_reason = COALESCE($5, failure_reason),
            paid_attempt_id = COALESCE($6, paid_attempt_id), paid_trade_no = COALESCE($8, paid_trade_no),
            paid_at = CASE WHEN $3 = 'SUCCEEDED' THEN $7 ELSE paid_at END,
            close_pending = CASE WHEN $3 IN ('SUCCEEDED', 'CLOSED', 'FAILED') THEN NULL ELSE close_pending END,
            state_version = state_version + 1, updated_at = $7
      WHERE id = $1 AND status = $2 RETURNING ${ORDER_COLS}`,
    values: [id, t.from, t.to, c.closedReason ?? null, c.failureReason ?? null, c.paidAttemptId ?? null, now, c.paidTradeNo ?? null],
  });
  const fresh = r.rows[0];
  if (!fresh) throw new Error(`order ${id} is not ${t.from}: the caller must hold its lock`);
  return fresh;
}

/** Bumps the order's shared state counter (orders and their refunds); returns the fresh row. */
export async function bumpStateVersion(tx: Tx, orderId: string, now: Date): Promise<OrderRow> {
  const r = await tx.query<OrderRow>({
    name: 'order_bump_version_row',
    text: `UPDATE orders SET state_version = state_version + 1, updated_at = $2 WHERE id = $1 RETURNING ${ORDER_COLS}`,
    values: [orderId, now],
  });
  return r.rows[0]!;
}

// --- closes ------------------------------------------------------------------------------------

/** How long a close holds the order's worker lease while it asks the provider. */
export const CLOSE_LEASE_MS = 30_000;
/** When the pending-close worker finishes a close kept UNKNOWN_KEPT. */
export const KEPT_CLOSE_RETRY_MS = 2_000;

/**
 * Records a close under the order's lock (close_pending, with a worker lease so the pending-close
 * worker does not run it at the same time) while the order is open. Answers the close that was
 * pending before (if any) and the lease written, or null when the order is not open.
 */
export async function markClosePending(
  db: Queryable,
  orderId: string,
  reason: ClosedReason,
  now: Date,
): Promise<{ before: ClosedReason | null; lease: Date } | null> {
  const r = await db.query<{ before: ClosedReason | null; lease: Date }>(
    `UPDATE orders o SET close_pending = COALESCE(b.before, $2), worker_lease_until = $3
       FROM (SELECT id, close_pending AS before FROM orders WHERE id = $1 FOR UPDATE) b
      WHERE o.id = b.id AND o.status IN ('CREATED', 'PAYING', 'UNKNOWN')
      RETURNING b.before, o.worker_lease_until AS lease`,
    [orderId, reason, new Date(now.getTime() + CLOSE_LEASE_MS)],
  );
  return r.rows[0] ?? null;
}

/**
 * Withdraws the close this caller marked, if no other close marked or kept the order since (its
 * lease is still the one it wrote). `keepLease`: background work keeps the worker lease, so an
 * expiry the provider keeps refusing is tried again only when it runs out.
 */
export async function withdrawClosePending(tx: Tx, orderId: string, markedLease: Date, keepLease: boolean): Promise<boolean> {
  const r = await tx.query(
    `UPDATE orders SET close_pending = NULL, worker_lease_until = CASE WHEN $3 THEN worker_lease_until END
      WHERE id = $1 AND worker_lease_until = $2`,
    [orderId, markedLease, keepLease],
  );
  return r.rowCount === 1;
}

/** A close whose outcome is uncertain: kept pending, finished by the pending-close worker shortly. */
export async function keepClosePending(tx: Tx, orderId: string, reason: ClosedReason, now: Date): Promise<void> {
  await tx.query(`UPDATE orders SET close_pending = $2, worker_lease_until = $3 WHERE id = $1`, [
    orderId,
    reason,
    new Date(now.getTime() + KEPT_CLOSE_RETRY_MS),
  ]);
}

// --- workers' claims ---------------------------------------------------------------------------

/**
 * Claims due orders by setting a lease; two instances never work on the same order at once. Each
 * claim walks the small partial index of its candidates whatever the statistics say
 * (migrations/0011, 0012).
 */
export async function claimOrders(db: Queryable, what: 'expired' | 'pending-closes', limit: number, now: Date): Promise<string[]> {
  const fn = what === 'expired' ? 'mps_claim_expired_orders' : 'mps_claim_pending_closes';
  const r = await db.query<{ id: string }>({ name: fn, text: `SELECT id FROM ${fn}($1, $2) AS id`, values: [limit, now] });
  return r.rows.map((x) => x.id);
}

/** UNKNOWN attempts and PENDING ones whose check is due, claimed for 30 s; with how often each was checked. */
export async function claimAttemptsToCheck(
  db: Queryable,
  limit: number,
  now: Date,
): Promise<{ id: string; checks: number; provider: string }[]> {
  const r = await db.query<{ id: string; checks: number; provider: string }>(
    `UPDATE attempts SET next_check_at = $2, check_count = check_count + 1
      WHERE id IN (SELECT id FROM attempts WHERE state IN ('UNKNOWN', 'PENDING') AND next_check_at <= $3
                    ORDER BY next_check_at LIMIT $1 FOR UPDATE SKIP LOCKED)
      RETURNING id, check_count AS checks, provider`,
    [limit, new Date(now.getTime() + 30_000), now],
  );
  return r.rows;
}

/**
 * Attempts still being made by an instance that is gone (no beat since `aliveSince`): their
 * request died with it, so they are checked at the provider now instead of after the usual wait.
 * Answers how many were made due.
 */
export async function dueAttemptsOfGoneInstances(db: Queryable, aliveSince: Date, now: Date): Promise<number> {
  const r = await db.query(
    `UPDATE attempts SET next_check_at = $2
      WHERE state = 'PENDING' AND next_check_at > $2 AND created_by IS NOT NULL
        AND created_by NOT IN (SELECT id FROM service_instances WHERE heartbeat_at > $1)`,
    [aliveSince, now],
  );
  return r.rowCount ?? 0;
}

export async function rescheduleAttemptCheck(db: Queryable, id: string, at: Date): Promise<void> {
  await db.query('UPDATE attempts SET next_check_at = $2 WHERE id = $1', [id, at]);
}

// --- re-create requests ------------------------------------------------------------------------

/** Whether this request id was already a re-create of the order (migrations/0008). */
export async function recreateRequestSeen(tx: Tx, orderId: string, requestId: string): Promise<boolean> {
  const r = await tx.query({
    name: 'recreate_request_seen',
    text: 'SELECT 1 FROM recreate_requests WHERE order_id = $1 AND request_id = $2',
    values: [orderId, requestId],
  });
  return r.rowCount !== 0;
}

export async function recordRecreateRequest(
  tx: Tx,
  orderId: string,
  requestId: string,
  attemptId: string | null,
  now: Date,
): Promise<void> {
  await tx.query({
    name: 'recreate_request_record',
    text: 'INSERT INTO recreate_requests(order_id, request_id, attempt_id, created_at) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING',
    values: [orderId, requestId, attemptId, now],
  });
}

export async function purgeRecreateRequests(db: Queryable, before: Date, limit: number): Promise<number> {
  const r = await db.query(
    `DELETE FROM recreate_requests WHERE ctid IN (SELECT ctid FROM recreate_requests WHERE created_at < $1 LIMIT $2)`,
    [before, limit],
  );
  return r.rowCount ?? 0;
}

// --- daily created amount per app (Asia/Shanghai day) -------------------------------------------

/**
 * Counters of days before `before` (a date, YYYY-MM-DD): no order is created on them any more, and
 * the insert's lock finds today's counters by primary key among few rows.
 */
export async function purgeDailyAmounts(db: Queryable, before: string): Promise<number> {
  const r = await db.query('DELETE FROM app_daily_amounts WHERE day < $1::date', [before]);
  return r.rowCount ?? 0;
}

/** The counters are kept only while a ceiling is set: recounted from the orders when it changes. */
export async function forgetDailyAmounts(db: Queryable, appId: string): Promise<void> {
  await db.query('DELETE FROM app_daily_amounts WHERE app_id = $1', [appId]);
}

// --- back office and sandbox -------------------------------------------------------------------

/**
 * Ends an open order's payment window now (the sandbox's test lever; the expiry worker then
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
