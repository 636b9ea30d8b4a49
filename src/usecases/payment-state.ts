/**
 * Applying state changes to attempts, orders and refunds. Each function runs inside one
 * transaction with the order row locked, checks the change against the transition tables
 * (src/domain/states.ts), writes it together with its event and any follow-up work it needs, and
 * never calls a provider (a transaction is never held across a provider call).
 */
import { type EventRefund, type EventType, eventPayload, orderEventType, refundEventType } from '../domain/events.ts';
import { newId } from '../domain/ids.ts';
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
import { insertEvent } from '../store/events.ts';
import * as jobs from '../store/jobs.ts';
import * as attempts from '../store/attempts.ts';
import type { AttemptChange, AttemptRow } from '../store/attempts.ts';
import * as orders from '../store/orders.ts';
import type { OrderChange, OrderRow } from '../store/orders.ts';
import * as refunds from '../store/refunds.ts';
import type { RefundChange, RefundRow } from '../store/refunds.ts';

/**
 * Moves the attempt to `to` (nothing when it is there already); `a` is updated in place (state, and
 * the time it was made). `checkAt`: the provider is asked about it then (CHECK_ATTEMPT).
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
 * A payment of `attempt` is confirmed. If the order can still succeed, it does, and its other
 * accepted attempts are closed at the provider afterwards (follow-ups). If it already succeeded
 * through another attempt or was closed, this is a second payment: recorded as a duplicate and
 * refunded automatically (a follow-up). Returns the duplicate id when one was recorded.
 */
export async function confirmPaid(
  tx: Tx,
  flow: string,
  order: OrderRow,
  attempt: AttemptRow,
  now: Date,
): Promise<{ order: OrderRow; duplicateId: string | null }> {
  if (attempt.state === 'PAID' && order.paidAttemptId === attempt.id) return { order, duplicateId: null };
  if (attempt.state !== 'PAID') await setAttempt(tx, flow, attempt, 'PAID', {}, now);
  if (canTransition('order', order.status, 'SUCCEEDED')) {
    const fresh = await setOrderStatus(tx, flow, order, 'SUCCEEDED', { paidAttemptId: attempt.id }, now);
    for (const sibling of await attempts.attemptsOf(tx, order.id)) {
      if (sibling.id !== attempt.id && sibling.state === 'ACCEPTED') await closeStrayLater(tx, sibling.id, now);
    }
    return { order: fresh, duplicateId: null };
  }
  const id = `dup_${attempt.id.slice(4)}`;
  const added = await refunds.insertDuplicate(
    tx,
    { id, orderId: order.id, attemptId: attempt.id, amountFen: order.amountFen, provider: attempt.provider },
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

/** An uncertain outcome is first asked about again this soon (then with the job's backoff). */
export const FIRST_CHECK_MS = 2_000;

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
