/**
 * Repository: decide, then apply (src/domain/payment-decisions.ts). An order's records are read in
 * one statement (the order, every attempt and trade of it, a refund of it, and their fingerprint);
 * the decision's change is written in one statement (`mps_apply_changes`, migrations/0090, 0100, 0102) with
 * its event and follow-up jobs, only if the records are still as read: otherwise nothing is written
 * and the caller reads and decides again. Concurrent changes of one event-loop turn share the
 * statement (src/store/batcher.ts), each decided from its own order's records and applied under
 * its own order's lock.
 */
import { type Change, type PaymentFacts } from '../domain/payment-decisions.ts';
import { eventPayload, type EventRefund } from '../domain/events.ts';
import { newId } from '../domain/ids.ts';
import type { RecordedAnswer } from './attempt-acceptance.ts';
import { TurnBatcher } from './batcher.ts';
import type { Db, Queryable, Tx } from './db.ts';
import { ORDER_COLS, type OrderRow } from './orders.ts';
import { REFUND_COLS, type RefundRow } from './refunds.ts';

/** An order's records as one decision reads them. */
export interface OrderRecords extends PaymentFacts {
  order: OrderRow;
  /** The refund asked for, when read by a refund's id. */
  refund: RefundRow | null;
  /** What mps_apply_changes compares under the order's lock. */
  fingerprint: string;
}

const SELECT_RECORDS = (by: string, lock: boolean) => `
  WITH s AS (${by}), o AS (SELECT ${ORDER_COLS} FROM orders WHERE id = (SELECT order_id FROM s LIMIT 1)${lock ? ' FOR UPDATE' : ''})
  SELECT row_to_json(o) AS o_json, o."expireAt", o."createdAt", o."updatedAt", o."paidAt",
    COALESCE((SELECT json_agg(json_build_object('id', a.id, 'seq', a.seq, 'state', a.state, 'provider', a.provider) ORDER BY a.seq)
                FROM attempts a WHERE a.order_id = o.id), '[]') AS attempts,
    COALESCE((SELECT json_agg(json_build_object('id', t.id, 'attemptId', t.attempt_id, 'state', t.state, 'provider', t.provider,
                                                'providerRef', t.provider_ref) ORDER BY t.created_at, t.id)
                FROM provider_trades t WHERE t.order_id = o.id), '[]') AS trades,
    mps_payment_records(o.id) AS fingerprint
  FROM o`;

const BY_ORDER = `SELECT $1::text AS order_id`;

interface RecordsRow {
  o_json: Record<string, unknown>;
  expireAt: Date;
  createdAt: Date;
  updatedAt: Date;
  paidAt: Date | null;
  attempts: PaymentFacts['attempts'];
  trades: PaymentFacts['trades'];
  fingerprint: string;
}

function toRecords(row: RecordsRow | undefined, refund: RefundRow | null): OrderRecords | null {
  if (!row) return null;
  // The order's timestamps come as the driver parses them, the rest as JSON (same names).
  const order = {
    ...(row.o_json as unknown as OrderRow),
    expireAt: row.expireAt,
    createdAt: row.createdAt,
    updatedAt: row.updatedAt,
    paidAt: row.paidAt,
  };
  return { order, attempts: row.attempts, trades: row.trades, refund, fingerprint: row.fingerprint };
}

/** An order's records, in the caller's transaction with the order's row lock taken (FOR UPDATE) for the rest of it. */
export async function recordsOfOrderLocked(tx: Tx, orderId: string): Promise<OrderRecords | null> {
  const r = await tx.query<RecordsRow>({ name: 'records_of_order_lock', text: SELECT_RECORDS(BY_ORDER, true), values: [orderId] });
  return toRecords(r.rows[0], null);
}

/** Which records to read: an order's (by id), a provider order number's, a refund's. */
export interface RecordsKey {
  by: 'order' | 'tradeNo' | 'refund';
  key: string;
}

/** Several reads of records in one statement; each answer as the single reads above give it. */
export async function readRecords(db: Queryable, keys: RecordsKey[]): Promise<(OrderRecords | null)[]> {
  const r = await db.query<RecordsRow & { i: number; r_json: RefundRow | null; r_created: Date | null; r_updated: Date | null }>({
    name: 'records_batch',
    text: `WITH k AS (SELECT * FROM json_to_recordset($1::json) AS t(i integer, by text, key text)),
      s AS (SELECT k.i, k.by, k.key,
                   CASE k.by WHEN 'order' THEN k.key
                             WHEN 'tradeNo' THEN COALESCE((SELECT a.order_id FROM attempts a WHERE a.id = k.key),
                                                          (SELECT t.order_id FROM provider_trades t WHERE t.id = k.key))
                             ELSE (SELECT f.order_id FROM refunds f WHERE f.id = k.key) END AS order_id
              FROM k)
      SELECT s.i, row_to_json(o) AS o_json, o."expireAt", o."createdAt", o."updatedAt", o."paidAt",
        COALESCE((SELECT json_agg(json_build_object('id', a.id, 'seq', a.seq, 'state', a.state, 'provider', a.provider) ORDER BY a.seq)
                    FROM attempts a WHERE a.order_id = o.id), '[]') AS attempts,
        COALESCE((SELECT json_agg(json_build_object('id', t.id, 'attemptId', t.attempt_id, 'state', t.state, 'provider', t.provider,
                                                    'providerRef', t.provider_ref) ORDER BY t.created_at, t.id)
                    FROM provider_trades t WHERE t.order_id = o.id), '[]') AS trades,
        mps_payment_records(o.id) AS fingerprint,
        row_to_json(rf) AS r_json, rf."createdAt" AS r_created, rf."updatedAt" AS r_updated
      FROM s CROSS JOIN LATERAL (SELECT ${ORDER_COLS} FROM orders WHERE id = s.order_id) o
      LEFT JOIN LATERAL (SELECT ${REFUND_COLS} FROM refunds WHERE s.by = 'refund' AND id = s.key) rf ON true`,
    values: [JSON.stringify(keys.map((k, i) => ({ i, by: k.by, key: k.key })))],
  });
  const out: (OrderRecords | null)[] = keys.map(() => null);
  for (const row of r.rows) {
    const refund = row.r_json ? { ...row.r_json, createdAt: row.r_created!, updatedAt: row.r_updated! } : null;
    out[row.i] = toRecords(row, refund);
  }
  return out;
}

/**
 * Reads of records of concurrent requests, one statement per event-loop turn. Each read sees the
 * database as of its batch's statement, which starts after the read was asked for.
 */
export class RecordsReader {
  readonly #batcher: TurnBatcher<RecordsKey, OrderRecords | null>;
  constructor(db: Db) {
    this.#batcher = new TurnBatcher({
      one: async (k) => (await readRecords(db, [k]))[0]!,
      many: (ks) => readRecords(db, ks),
    });
  }

  read(by: RecordsKey['by'], key: string): Promise<OrderRecords | null> {
    return this.#batcher.run({ by, key });
  }
}

/** A change to apply to the records it was decided from. */
export interface PendingChange {
  records: OrderRecords;
  change: Change;
  /**
   * The request id's answer to record with the change, rendered from the order and refund as the
   * change leaves them (null: none to record).
   */
  answer?: (order: OrderRow, refund: RefundRow | null) => RecordedAnswer | null;
}

export interface Applied {
  /** Written (else the records had changed since they were read: nothing was written). */
  applied: boolean;
  /** The order as the change leaves it (the records' own when not applied). */
  order: OrderRow;
  /** The refund as the change leaves it, when the change moved one. */
  refund: RefundRow | null;
  /** The close this caller marked was withdrawn. */
  withdrawn: boolean;
  /** The request id's answer recorded with the change (its holder still held the id). */
  answer: RecordedAnswer | null;
}

/** The order and refund rows as a change leaves them (what the statement writes, known beforehand: the records are as read). */
function after(p: PendingChange, now: Date): { order: OrderRow; refund: RefundRow | null } {
  const { change: c } = p;
  let order = p.records.order;
  if (c.order) {
    const m = c.order;
    const final = m.to === 'SUCCEEDED' || m.to === 'CLOSED' || m.to === 'FAILED';
    order = {
      ...order,
      status: m.to,
      closedReason: m.closedReason ?? order.closedReason,
      failureReason: m.failureReason ?? order.failureReason,
      paidAttemptId: m.paidAttemptId ?? order.paidAttemptId,
      paidTradeNo: m.paidTradeNo ?? order.paidTradeNo,
      paidAt: m.to === 'SUCCEEDED' ? now : order.paidAt,
      closePending: final ? null : order.closePending,
      stateVersion: order.stateVersion + 1,
      updatedAt: now,
    };
  } else if (c.bump) {
    order = { ...order, stateVersion: order.stateVersion + 1, updatedAt: now };
  }
  if (c.closePending && 'keep' in c.closePending) order = { ...order, closePending: c.closePending.keep };
  let refund = p.records.refund;
  if (c.refund && refund) {
    const m = c.refund;
    refund = {
      ...refund,
      state: m.to,
      providerRef: m.providerRef ?? refund.providerRef,
      failureReason: m.to === 'PENDING' || m.to === 'SUCCEEDED' ? null : (m.failureReason ?? refund.failureReason),
      updatedAt: now,
    };
  }
  return { order, refund };
}

function item(
  p: PendingChange,
  now: Date,
): { json: Record<string, unknown>; order: OrderRow; refund: RefundRow | null; answer: RecordedAnswer | null } {
  const c = p.change;
  const { order, refund } = after(p, now);
  const answer = p.answer?.(order, refund) ?? null;
  let event: Record<string, unknown> | null = null;
  if (c.event) {
    const id = newId.event();
    const ref: EventRefund | undefined = c.refund && refund ? refund : undefined;
    const payload = eventPayload(id, c.event, order, order.stateVersion, now, ref);
    event = {
      id,
      appId: order.appId,
      refundId: ref?.id ?? null,
      type: c.event,
      stateVersion: order.stateVersion,
      payload: JSON.stringify(payload),
    };
  }
  const json = {
    order_id: p.records.order.id,
    fp: p.records.fingerprint,
    order: c.order,
    bump: c.bump,
    attempts: c.attempts.map((m) => ({
      id: m.id,
      from: m.from,
      to: m.to,
      provider_ref: m.providerRef,
      qr_code: m.qrCode ?? null,
      redirect_url: m.redirectUrl ?? null,
      made_at: m.madeAt ?? null,
    })),
    trades: c.trades.map((m) => ({ id: m.id, from: m.from, to: m.to, provider_ref: m.providerRef, material: m.material ?? null })),
    refund: c.refund,
    duplicate: c.duplicate,
    jobs: c.jobs.map((j) => ({ kind: j.kind, subject_id: j.subjectId, at: j.at })),
    event,
    keep: c.closePending && 'keep' in c.closePending ? { reason: c.closePending.keep, until: c.closePending.until } : null,
    withdraw_held: c.closePending && 'withdrawHeld' in c.closePending ? c.closePending.withdrawHeld : null,
    answer,
  };
  return { json, order, refund, answer };
}

/** Applies the changes in one statement, each only if its records are unchanged (see the module's comment). */
export async function applyChanges(db: Queryable, ps: PendingChange[], now: Date): Promise<Applied[]> {
  const items = ps.map((p) => item(p, now));
  const r = await db.query<{ idx: number; applied: boolean; withdrawn: boolean; answered: boolean }>({
    name: 'apply_changes',
    text: 'SELECT idx, applied, withdrawn, answered FROM mps_apply_changes($1::json, $2)',
    values: [JSON.stringify(items.map((i) => i.json)), now],
  });
  const out = new Map(r.rows.map((row) => [row.idx, row]));
  return ps.map((p, i) => {
    const row = out.get(i + 1);
    if (!row?.applied) return { applied: false, order: p.records.order, refund: p.records.refund, withdrawn: false, answer: null };
    const it = items[i]!;
    return { applied: true, order: it.order, refund: it.refund, withdrawn: row.withdrawn, answer: row.answered ? it.answer : null };
  });
}

/** Changes of concurrent requests, one statement per event-loop turn. */
export class ChangeApplier {
  readonly #batcher: TurnBatcher<PendingChange & { now: Date }, Applied>;
  constructor(db: Db) {
    const latest = (ps: { now: Date }[]) => ps.reduce((m, p) => (p.now > m ? p.now : m), ps[0]!.now);
    this.#batcher = new TurnBatcher({
      one: async (p) => (await applyChanges(db, [p], p.now))[0]!,
      many: (ps) => applyChanges(db, ps, latest(ps)),
      key: (p) => p.records.order.id,
    });
  }

  apply(p: PendingChange, now: Date): Promise<Applied> {
    return this.#batcher.run({ ...p, now });
  }
}
