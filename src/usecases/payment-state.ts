/**
 * Applying decided changes: `decideAndApply` reads an order's records, takes the change from a
 * pure decision (src/domain/payment-decisions.ts, attempt-decisions.ts) and applies it in one
 * statement (src/store/changes.ts). Beside it, the two moves still made under the order's lock in
 * the caller's transaction: a trade's material recorded (the cashier) and a refund judged lost
 * revived. Each checks its change against the transition tables (src/domain/states.ts), writes it
 * with its event and follow-up work, and never calls a provider.
 */
import { type EventRefund, type EventType, eventPayload, refundEventType } from '../domain/events.ts';
import { newId } from '../domain/ids.ts';
import { type Change, writes } from '../domain/payment-decisions.ts';
import { type RefundState, REFUND_COUNTING_STATES, transition } from '../domain/states.ts';
import type { Tx } from '../store/db.ts';
import { type Applied, type OrderRecords, type PendingChange, applyChanges } from '../store/changes.ts';
import type { UseCaseDeps } from './deps.ts';
import { insertEvent } from '../store/events.ts';
import * as jobs from '../store/jobs.ts';
import * as orders from '../store/orders.ts';
import type { OrderRow } from '../store/orders.ts';
import * as refunds from '../store/refunds.ts';
import type { RefundChange, RefundRow } from '../store/refunds.ts';
import * as trades from '../store/trades.ts';

/** Moves a trade to `to` under its order's lock (nothing when it is there already); false when it changed meanwhile. */
export async function setTrade(
  tx: Tx,
  flow: string,
  t: trades.TradeRow,
  to: trades.TradeRow['state'],
  change: trades.TradeChange,
  now: Date,
): Promise<boolean> {
  if (t.state === to) return true;
  const ok = await trades.setTradeState(tx, t.id, transition('trade', flow, t.state, to), change, now);
  if (ok) t.state = to;
  return ok;
}

/**
 * Moves the refund to `to` (its order locked), bumps the order's stateVersion, writes
 * REFUND_SUCCEEDED / REFUND_FAILED. `checkAt`: the provider is asked about it then (CHECK_REFUND).
 */
export async function setRefundState(
  tx: Tx,
  flow: string,
  r: RefundRow,
  to: RefundState,
  change: RefundChange & { checkAt?: Date },
  now: Date,
): Promise<RefundRow> {
  if (r.state === to) return r;
  const fresh = await refunds.setRefundState(tx, r.id, transition('refund', flow, r.state, to), change, now);
  if (change.checkAt) await jobs.schedule(tx, 'CHECK_REFUND', r.id, change.checkAt);
  const order = await orders.bumpStateVersion(tx, r.orderId, now);
  const type = refundEventType(to);
  if (type) await writeEvent(tx, type, order, now, fresh);
  return fresh;
}

/** The event of a change of `order` (or of its `refund`), at the order's fresh stateVersion. */
async function writeEvent(tx: Tx, type: EventType, order: OrderRow, now: Date, refund?: EventRefund): Promise<void> {
  const id = newId.event();
  const payload = eventPayload(id, type, order, order.stateVersion, now, refund);
  await insertEvent(tx, { id, appId: order.appId, orderId: order.id, refundId: refund?.id ?? null, type, payload }, now);
}

/** The refunds of an order that hold refundable amount (decisions.md section 6), in fen. */
export function countedRefundsFen(tx: Tx, orderId: string): Promise<number> {
  return refunds.sumRefundsFen(tx, orderId, REFUND_COUNTING_STATES);
}

/** Decisions of one change at most (each further one follows a change of the order committed meanwhile). */
const MAX_DECISIONS = 100;

/** What a decision answers: its change, and what the caller makes of it (its verdict). */
export interface Decided<T> {
  change: Change;
  verdict: T;
  /** The request's answer to record with the change, from the order and refund it leaves (src/store/changes.ts). */
  answer?: PendingChange['answer'];
}

/**
 * Decide, then apply: reads the records, decides from them (a pure function of
 * src/domain/payment-decisions.ts), and applies the change in one statement (batched with the
 * changes of concurrent requests) only if the records are still as read; else reads and decides
 * again. Answers null when `read` finds nothing, else the verdict and what the change left
 * (`applied` false when there was nothing to write). `tx`: inside the caller's transaction, the
 * records read with the order's lock (applied at once, not batched).
 */
export async function decideAndApply<T>(
  d: UseCaseDeps,
  read: () => Promise<OrderRecords | null>,
  decide: (records: OrderRecords, now: Date) => Decided<T>,
  tx?: Tx,
): Promise<{ records: OrderRecords; verdict: T; result: Applied } | null> {
  for (let tries = 1; ; tries++) {
    // Each retry follows a change of the order committed meanwhile: many in a row is a fault.
    if (tries > MAX_DECISIONS) throw new Error(`decide, then apply: the records kept changing (${MAX_DECISIONS} decisions)`);
    const records = await read();
    if (!records) return null;
    const now = new Date(d.clock.now());
    const { change, verdict, answer } = decide(records, now);
    for (const note of change.notes) d.log.warn({ orderId: records.order.id }, note);
    if (!writes(change)) {
      return { records, verdict, result: { applied: false, order: records.order, refund: records.refund, withdrawn: false, answer: null } };
    }
    const pending = { records, change, answer };
    const result = tx ? (await applyChanges(tx, [pending], now))[0]! : await d.changes.apply(pending, now);
    if (result.applied) {
      // Its event is delivered now rather than at the next worker pass; follow-ups run at once.
      if (change.event || change.duplicate || change.jobs.some((j) => j.at <= now)) d.wakeWorkers();
      return { records, verdict, result };
    }
    if (tx) throw new Error(`order ${records.order.id} changed under its lock`);
  }
}
