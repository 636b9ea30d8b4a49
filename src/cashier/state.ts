/**
 * What the cashier page behind one cashier token shows: the buyer-facing state of that attempt,
 * derived from the ledger only (no provider call). Pure, so the page, the status endpoint and the
 * sandbox actions always agree.
 */
import type { AttemptRow } from '../store/attempts.ts';
import type { OrderRow } from '../store/orders.ts';
import { validAttempt } from '../domain/payability.ts';

export const CASHIER_STATES = ['PAYABLE', 'PROCESSING', 'PAID', 'EXPIRED', 'CLOSED', 'SUPERSEDED', 'FAILED'] as const;
export type CashierState = (typeof CASHIER_STATES)[number];

/** States after which the page never changes again (the client stops polling). */
export const FINAL_CASHIER_STATES: ReadonlySet<CashierState> = new Set(['PAID', 'EXPIRED', 'CLOSED', 'SUPERSEDED', 'FAILED']);

/**
 * Order-level outcomes win (a paid, closed or failed order is what the buyer needs to know, whichever
 * link they hold); then an older link is superseded by the newest attempt; then the attempt's own
 * end; PAYABLE exactly when the open API would hand out this attempt's payUrl (validAttempt).
 */
export function cashierState(o: OrderRow, a: AttemptRow, latestSeq: number, nowMs: number): CashierState {
  if (o.status === 'SUCCEEDED') return 'PAID';
  if (o.status === 'CLOSED') return o.closedReason === 'EXPIRED' ? 'EXPIRED' : 'CLOSED';
  if (o.status === 'FAILED') return 'FAILED';
  if (a.seq < latestSeq) return 'SUPERSEDED';
  if (a.state === 'FAILED') return 'FAILED';
  if (a.state === 'CLOSED') return 'CLOSED';
  if (windowEnd(o, a) <= nowMs) return 'EXPIRED';
  if (validAttempt(o, a, nowMs)) return 'PAYABLE';
  // PENDING or UNKNOWN attempt, an UNKNOWN order, or a close pending: the outcome is being settled.
  return 'PROCESSING';
}

/** End of this attempt's payment window in epoch ms (the material never outlives the order). */
export function windowEnd(o: OrderRow, a: AttemptRow): number {
  return Math.min(o.expireAt.getTime(), a.expireAt.getTime());
}

export interface CashierStatus {
  state: CashierState;
  expireAt: string;
  secondsLeft: number;
}

/** The polling body: no material, no identifiers. */
export function cashierStatus(state: CashierState, o: OrderRow, a: AttemptRow, nowMs: number): CashierStatus {
  const end = windowEnd(o, a);
  const live = state === 'PAYABLE' || state === 'PROCESSING';
  return {
    state,
    expireAt: new Date(end).toISOString(),
    secondsLeft: live ? Math.max(0, Math.ceil((end - nowMs) / 1000)) : 0,
  };
}
