/**
 * Applying state changes to attempts, orders and refunds. Each function runs inside one
 * transaction with the order row locked, checks the change against the transition tables
 * (src/domain/states.ts), writes it together with its event and any follow-up work it needs, and
 * never calls a provider (a transaction is never held across a provider call).
 */
import { type EventRefund, type EventType, eventPayload, orderEventType, refundEventType } from '../domain/events.ts';
import { newId } from '../domain/ids.ts';
import { type Change, FIRST_CHECK_MS, writes } from '../domain/payment-decisions.ts';
import {
  type AttemptState,
  type OrderStatus,
  type RefundState,
  REFUND_COUNTING_STATES,
  canTransition,
  isLiveAttempt,
  transition,
} from '../domain/states.ts';
import type { Tx } from '../store/db.ts';
import { type Applied, type OrderRecords, type PendingChange, applyChanges } from '../store/changes.ts';
import type { UseCaseDeps } from './deps.ts';
import { insertEvent } from '../store/events.ts';
import * as jobs from '../store/jobs.ts';
import * as attempts from '../store/attempts.ts';
import type { AttemptChange, AttemptRow } from '../store/attempts.ts';
import * as orders from '../store/orders.ts';
import type { OrderChange, OrderRow } from '../store/orders.ts';
import * as refunds from '../store/refunds.ts';
import type { RefundChange, RefundRow } from '../store/refunds.ts';
import * as trades from '../store/trades.ts';

/**
 * Moves the attempt to `to` (nothing when it is there already); `a` is updated in place (state, and
 * the time it was made). `checkAt`: the provider is asked about it then (CHECK_ATTEMPT). An attempt
 * that ends (CLOSED, FAILED) has its trades still live at the provider closed there afterwards
 * (CLOSE_TRADE jobs).
 */
export async function setAttempt(
  tx: Tx,
  flow: string,
  a: AttemptRow,
  to: AttemptState,
  change: AttemptChange & { checkAt?: Date },
  now: Date,
): Promise<void> {
  if (a.state === to) return;
  const t = transition('attempt', flow, a.state, to);
  if (!(await attempts.setAttemptState(tx, a.id, t, change, now))) {
    throw new Error(`${flow}: attempt ${a.id} changed under the order's lock`);
  }
  if (change.checkAt) await jobs.schedule(tx, 'CHECK_ATTEMPT', a.id, change.checkAt);
  a.state = to;
  if (change.madeAt) a.madeAt = change.madeAt;
  if (to === 'CLOSED' || to === 'FAILED') await closeTradesLater(tx, a.id, null, now);
}

/** Closes at the provider, afterwards (CLOSE_TRADE jobs), the attempt's trades still live there, but `except`. */
export async function closeTradesLater(tx: Tx, attemptId: string, except: string | null, now: Date): Promise<void> {
  for (const t of await trades.liveTradesOfAttempt(tx, attemptId, except)) await jobs.schedule(tx, 'CLOSE_TRADE', t.id, now);
}

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

/** Moves the order to `to`, bumps stateVersion, writes the matching event; returns the fresh row. */
export async function setOrderStatus(
  tx: Tx,
  flow: string,
  o: OrderRow,
  to: OrderStatus,
  change: OrderChange,
  now: Date,
): Promise<OrderRow> {
  if (o.status === to) return o;
  const fresh = await orders.setOrderStatus(tx, o.id, transition('order', flow, o.status, to), change, now);
  const type = orderEventType(to);
  if (type) await writeEvent(tx, type, fresh, now);
  return fresh;
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

/**
 * A payment of `attempt` is confirmed, through its own provider order or through one of its trades
 * (`trade`, the row of that trade). If the order can still succeed, it does, and its other accepted
 * attempts and the attempt's other provider orders are closed at the provider afterwards
 * (follow-ups). If it already succeeded through another attempt or another of this attempt's
 * orders, or was closed, this is a second payment: recorded as a duplicate and refunded
 * automatically (a follow-up). Returns the duplicate id when one was recorded.
 */
export async function confirmPaid(
  tx: Tx,
  flow: string,
  order: OrderRow,
  attempt: AttemptRow,
  now: Date,
  trade: trades.TradeRow | null = null,
): Promise<{ order: OrderRow; duplicateId: string | null }> {
  const tradeNo = trade?.id ?? attempt.id;
  if (trade && trade.state !== 'PAID') await setTrade(tx, flow, trade, 'PAID', { providerRef: trade.providerRef }, now);
  const paidHere = order.paidAttemptId === attempt.id && (order.paidTradeNo ?? attempt.id) === tradeNo;
  if (attempt.state === 'PAID' && paidHere) return { order, duplicateId: null };
  if (attempt.state !== 'PAID') await setAttempt(tx, flow, attempt, 'PAID', {}, now);
  if (canTransition('order', order.status, 'SUCCEEDED')) {
    const change = trade ? { paidAttemptId: attempt.id, paidTradeNo: trade.id } : { paidAttemptId: attempt.id };
    const fresh = await setOrderStatus(tx, flow, order, 'SUCCEEDED', change, now);
    for (const sibling of await attempts.attemptsOf(tx, order.id)) {
      if (sibling.id !== attempt.id && sibling.state === 'ACCEPTED') await closeStrayLater(tx, sibling.id, now);
    }
    // The attempt's other ways to pay: its other trades, and its own order when a trade paid.
    await closeTradesLater(tx, attempt.id, tradeNo, now);
    if (trade) await jobs.schedule(tx, 'CLOSE_TRADE', attempt.id, now);
    return { order: fresh, duplicateId: null };
  }
  const id = `dup_${tradeNo.slice(4)}`;
  const added = await refunds.insertDuplicate(
    tx,
    { id, orderId: order.id, attemptId: attempt.id, tradeNo, amountFen: order.amountFen, provider: trade?.provider ?? attempt.provider },
    now,
  );
  if (added) await jobs.schedule(tx, 'REFUND_DUPLICATE', id, now);
  return { order, duplicateId: added ? id : null };
}

/**
 * The provider holds (or may hold) a payment for an attempt this order can no longer use: it is
 * closed there by a follow-up job (src/usecases/follow-ups.ts), written with the change that needs it.
 */
export function closeStrayLater(tx: Tx, attemptId: string, now: Date): Promise<void> {
  return jobs.schedule(tx, 'CLOSE_STRAY_ATTEMPT', attemptId, now);
}

export { FIRST_CHECK_MS } from '../domain/payment-decisions.ts';

/** When an uncertain outcome recorded at `now` is first asked about again. */
export function firstCheckAt(now: Date): Date {
  return new Date(now.getTime() + FIRST_CHECK_MS);
}

/**
 * A PAYING order none of whose attempts is live any more (each closed, failed or never created) is
 * payable again: CREATED, so it answers `nextAction: CREATE_ATTEMPT` rather than read PAYING with
 * nothing to pay. Run, under the order's lock, after an attempt of it ended.
 */
export async function reopenIfNoLiveAttempt(tx: Tx, flow: string, o: OrderRow, now: Date): Promise<void> {
  if (o.status !== 'PAYING') return;
  if ((await attempts.attemptsOf(tx, o.id)).some(isLiveAttempt)) return;
  await setOrderStatus(tx, flow, o, 'CREATED', {}, now);
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
