/**
 * Repository: the create's insert (new orders with their first attempts and request-id claims, one
 * statement for a batch, within the apps' daily amount ceilings), batched per event-loop turn
 * (src/store/batcher.ts), and the daily amount counters it keeps.
 */
import type { AttemptRow, NewAttempt } from './attempts.ts';
import { TurnBatcher } from './batcher.ts';
import type { Db, Queryable } from './db.ts';
import { LATEST_COLS, type LatestCols, splitLatest } from './order-reads.ts';
import { ORDER_COLS, type OrderRow } from './orders.ts';

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
          created_at timestamptz, attempt_id text, cashier_token text, provider text, created_by text,
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
        INSERT INTO attempts(id, order_id, seq, state, cashier_token, provider, created_by, expire_at, created_at, updated_at)
        SELECT i.attempt_id, o.id, 1, 'PENDING', i.cashier_token, i.provider, i.created_by, o.expire_at, i.created_at, i.created_at
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

const cmp = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

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
