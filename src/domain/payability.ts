/**
 * Whether an order can be paid right now, and through which attempt (seed "Order snapshot":
 * payUrl, nextAction; the cashier page agrees). Pure: decided from the ledger's rows alone.
 */
import type { AttemptState, ClosedReason, OrderStatus } from './states.ts';

export interface PayableOrder {
  status: OrderStatus;
  closePending: ClosedReason | null;
  expireAt: Date;
}

export interface PayableAttempt {
  state: AttemptState;
  expireAt: Date;
}

const PAYABLE = new Set<OrderStatus>(['CREATED', 'PAYING']);

/**
 * The attempt the buyer can pay right now, if any: accepted and not past the order's window, and
 * no close pending on the order (a close in flight, or one kept UNKNOWN_KEPT until the pending-close
 * worker finishes it): no material is offered behind a close. A close the provider rejects
 * withdraws its mark, and the attempt is payable again.
 */
export function validAttempt<A extends PayableAttempt>(o: PayableOrder, a: A | null, nowMs: number): A | null {
  if (!a || a.state !== 'ACCEPTED' || o.status !== 'PAYING' || o.closePending !== null) return null;
  if (a.expireAt.getTime() <= nowMs || o.expireAt.getTime() <= nowMs) return null;
  return a;
}

/** nextAction: a payable order without a valid attempt. An order being closed needs none (a re-create is refused). */
export function needsNewAttempt(o: PayableOrder, a: PayableAttempt | null, nowMs: number): boolean {
  if (!PAYABLE.has(o.status) || o.expireAt.getTime() <= nowMs || o.closePending !== null) return false;
  if (a && (a.state === 'PENDING' || a.state === 'UNKNOWN')) return false;
  return validAttempt(o, a, nowMs) === null;
}

/**
 * Create rule 1 (seed): a replay of a create whose attempt "is final or expired" has an empty
 * payUrl and `nextAction=CREATE_ATTEMPT`, whatever became of the order meanwhile (closed or
 * expired included), except a paid order, which needs nothing. Uncertain attempts are not final.
 */
export function endedAttempt(o: PayableOrder, a: PayableAttempt | null, nowMs: number): boolean {
  if (o.status === 'SUCCEEDED' || !a) return false;
  if (a.state === 'CLOSED' || a.state === 'FAILED') return true;
  return a.state === 'ACCEPTED' && (a.expireAt.getTime() <= nowMs || o.expireAt.getTime() <= nowMs);
}
