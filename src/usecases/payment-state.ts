/**
 * Applying decided changes: `decideAndApply` reads an order's records, takes the change from a
 * pure decision (src/domain/payment-decisions.ts, attempt-decisions.ts) and applies it in one
 * statement (src/store/changes.ts), only if the records are still as read. Every change of an
 * order, its attempts, trades and refunds that follows what happened is made this way.
 */
import { type Change, writes } from '../domain/payment-decisions.ts';
import { REFUND_COUNTING_STATES } from '../domain/states.ts';
import type { Queryable, Tx } from '../store/db.ts';
import { type Applied, type OrderRecords, type PendingChange, applyChanges } from '../store/changes.ts';
import type { UseCaseDeps } from './deps.ts';
import * as refunds from '../store/refunds.ts';

/** The refunds of an order that hold refundable amount (decisions.md section 6), in fen. */
export function countedRefundsFen(db: Queryable, orderId: string): Promise<number> {
  return refunds.sumRefundsFen(db, orderId, REFUND_COUNTING_STATES);
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
