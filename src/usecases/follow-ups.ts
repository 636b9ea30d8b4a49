/**
 * Follow-up work, jobs written by a change in its own transaction (src/store/jobs.ts), so a crash
 * loses none of it and none of it waits for the provider check:
 *
 * - CLOSE_STRAY_ATTEMPT: an attempt accepted by the provider for an order that can no longer use
 *   it is closed there. A close that fails (uncertain, refused) is tried again after 2, 4, 8, 16
 *   and 32 s (the job's backoff), then handed to CHECK_ATTEMPT (the attempt becomes UNKNOWN,
 *   checked in 30 s). A provider that reports it paid: the payment is applied (the order succeeds,
 *   or it is a duplicate, refunded).
 * - REFUND_DUPLICATE: a second payment of an order is refunded automatically; its outcome is
 *   recorded on the duplicate (visible in the back office), and one not settled at once is
 *   followed by CHECK_DUPLICATE_REFUND until it is.
 * - CLOSE_TRADE: one provider order of an attempt that can no longer be used is closed there: a
 *   trade of an attempt that ended or was paid another way, or the attempt's own order when one of
 *   its trades paid. Tried again (the job's backoff, 2 s doubling, at most 1 h) until the provider
 *   answers; given up after CLOSE_TRADE_RETRIES runs once the order's window is over (nobody can
 *   pay it any more; a payment made before would be in the provider's statement, which
 *   reconciliation applies). A provider that reports it paid: the payment is applied (a duplicate,
 *   refunded).
 */
import { decideStrayClosed, decideStrayHandOver, decideTradeClosed } from '../domain/attempt-decisions.ts';
import { type DuplicateRefundState, transition } from '../domain/states.ts';
import { ProviderRejectedError } from '../providers/provider.ts';
import { type Queryable, withTx } from '../store/db.ts';
import * as jobs from '../store/jobs.ts';
import * as attempts from '../store/attempts.ts';
import * as orders from '../store/orders.ts';
import * as refunds from '../store/refunds.ts';
import { type UseCaseDeps, nowOf } from './deps.ts';
import type { Job, JobOutcome } from './jobs.ts';
import { applyNotification, ownerOfTradeNo } from './notifications.ts';
import { decideAndApply } from './payment-state.ts';
import { moveInto } from './state-moves.ts';

/** Retries of a stray close before it is handed to CHECK_ATTEMPT. */
export const STRAY_CLOSE_RETRIES = 5;
/** Runs of a trade's close after which, the order's window being over, it is given up. */
export const CLOSE_TRADE_RETRIES = 10;
/** How soon a duplicate's refund that is not settled at once is asked about. */
const DUPLICATE_CHECK_MS = 3_000;

/** CLOSE_STRAY_ATTEMPT: done when the attempt is closed (or handed over, or paid after all). */
export async function closeStrayAttempt(d: UseCaseDeps, job: Job): Promise<JobOutcome> {
  const attempt = await attempts.getAttempt(d.db, job.subjectId);
  if (!attempt) return 'done';
  let out;
  try {
    out = await d.providers.byName(attempt.provider).closePayment(attempt.id, { background: true });
  } catch (err) {
    // The runs before this one that failed.
    if (job.runs - 1 < STRAY_CLOSE_RETRIES) return 'retry';
    await handOver(d, attempt.id, attempt.orderId, err);
    return 'done';
  }
  if (out.outcome === 'PAID') {
    await applyNotification(d, { kind: 'PAYMENT', attemptId: attempt.id, state: 'PAID', reason: null });
    return 'done';
  }
  // An order left PAYING without any live attempt (a re-create cut off before closing the old
  // ones) is payable again.
  await decideAndApply(
    d,
    () => d.records.read('order', attempt.orderId),
    (rec, now) => ({ change: decideStrayClosed(rec, attempt.id, now), verdict: null }),
  );
  return 'done';
}

/**
 * A stray close given up: an attempt still ACCEPTED is marked UNKNOWN and checked in 30 s
 * (CHECK_ATTEMPT), which asks the provider and, finding it open, closes it again.
 */
async function handOver(d: UseCaseDeps, attemptId: string, orderId: string, err: unknown): Promise<void> {
  const out = await decideAndApply(
    d,
    () => d.records.read('order', orderId),
    (rec, now) => ({ change: decideStrayHandOver(rec, attemptId, now), verdict: null }),
  );
  d.log.warn({ err, attemptId, handedToProviderCheck: out?.result.applied ?? false }, 'stray attempt not closed yet');
}

/** CLOSE_TRADE: done when the provider order is closed (or found paid, and applied), or given up. */
export async function closeTrade(d: UseCaseDeps, job: Job): Promise<JobOutcome> {
  const owner = await ownerOfTradeNo(d.db, job.subjectId);
  if (!owner) return 'done';
  const { attempt, trade } = owner;
  if (trade && trade.state !== 'NEW' && trade.state !== 'OPEN') return 'done';
  let out;
  try {
    out = await d.providers.byName(trade?.provider ?? attempt.provider).closePayment(job.subjectId, { background: true });
  } catch (err) {
    const order = await orders.getOrder(d.db, attempt.orderId);
    if (job.runs < CLOSE_TRADE_RETRIES || (order && order.expireAt.getTime() > nowOf(d).getTime())) return 'retry';
    d.log.warn(
      { err, tradeNo: job.subjectId },
      'provider order not closed; given up after the payment window (the statement shows any payment)',
    );
    return 'done';
  }
  if (out.outcome === 'PAID') {
    await applyNotification(d, { kind: 'PAYMENT', attemptId: job.subjectId, state: 'PAID', reason: null });
    return 'done';
  }
  if (trade) {
    await decideAndApply(
      d,
      () => d.records.read('order', trade.orderId),
      (rec, now) => ({ change: decideTradeClosed(rec, trade.id, now), verdict: null }),
    );
  }
  return 'done';
}

/**
 * REFUND_DUPLICATE: asks the provider to refund the duplicate payment, and records the outcome:
 * REFUNDED from whichever state leads there, any other answer only over the state read before the
 * call (a check that found it refunded meanwhile wins).
 */
export async function refundDuplicate(d: UseCaseDeps, job: Job): Promise<JobOutcome> {
  const dup = await refunds.getDuplicate(d.db, job.subjectId);
  if (!dup || (dup.refundState !== 'PENDING' && dup.refundState !== 'UNKNOWN')) return 'done';
  let state: DuplicateRefundState;
  let ref: string | null = null;
  try {
    const out = await d.providers.byName(dup.provider).refund(
      {
        refundId: dup.id,
        paidAttemptId: dup.tradeNo,
        amountFen: dup.amountFen,
        paymentAmountFen: dup.amountFen,
        reason: 'DUPLICATE_PAYMENT',
      },
      { background: true },
    );
    ref = out.providerRef;
    state = out.outcome === 'SUCCEEDED' ? 'REFUNDED' : 'PENDING';
  } catch (err) {
    state = err instanceof ProviderRejectedError ? 'FAILED' : 'UNKNOWN';
  }
  const applied = await withTx(d.db, async (tx) => {
    const now = nowOf(d);
    // Refunded is the truth whatever was recorded meanwhile (markRefunded); any other answer only over what was read.
    const ok =
      state === 'REFUNDED'
        ? await markRefunded(tx, dup, ref, now)
        : state === dup.refundState
          ? await refunds.noteDuplicateProviderRef(tx, dup.id, state, ref, now)
          : await refunds.setDuplicateRefundState(
              tx,
              dup.id,
              transition('duplicateRefund', 'refund duplicate', dup.refundState, state),
              ref,
              now,
            );
    if (ok && (state === 'PENDING' || state === 'UNKNOWN')) {
      await jobs.schedule(tx, 'CHECK_DUPLICATE_REFUND', dup.id, new Date(now.getTime() + DUPLICATE_CHECK_MS));
    }
    return ok;
  });
  if (applied) d.log.warn({ duplicateId: dup.id, state }, 'duplicate payment recorded and refunded automatically');
  return 'done';
}

/**
 * CHECK_DUPLICATE_REFUND: a duplicate's refund not settled yet is asked about (again after the
 * job's backoff while the provider has it pending); one the provider lost or failed is requested
 * again (REFUND_DUPLICATE).
 */
export async function checkDuplicateRefund(d: UseCaseDeps, job: Job): Promise<JobOutcome> {
  const dup = await refunds.getDuplicate(d.db, job.subjectId);
  if (!dup || (dup.refundState !== 'PENDING' && dup.refundState !== 'UNKNOWN')) return 'done';
  let state;
  try {
    state = (await d.providers.byName(dup.provider).queryRefund({ refundId: dup.id, paidAttemptId: dup.tradeNo })).state;
  } catch (err) {
    if (!(err instanceof ProviderRejectedError)) d.log.warn({ err, duplicateId: dup.id }, 'duplicate refund check failed');
    return 'retry';
  }
  if (state === 'SUCCEEDED') {
    await markRefunded(d.db, dup, null, nowOf(d));
    return 'done';
  }
  if (state === 'NOT_FOUND' || state === 'FAILED') {
    await jobs.schedule(d.db, 'REFUND_DUPLICATE', dup.id, nowOf(d));
    d.wakeWorkers();
    return 'done';
  }
  return 'retry';
}

/**
 * The provider reports a duplicate's refund settled: REFUNDED, a transition from the state read
 * (PENDING or UNKNOWN), applied only over that state, else from the state read again (the money is
 * back, whatever was recorded meanwhile); a FAILED one stays FAILED. Answers whether it moved.
 */
async function markRefunded(db: Queryable, dup: refunds.DuplicateRow, providerRef: string | null, now: Date): Promise<boolean> {
  const out = await moveInto(
    'duplicateRefund',
    'duplicate refund settled',
    'REFUNDED',
    dup.refundState,
    async () => (await refunds.getDuplicate(db, dup.id))?.refundState ?? null,
    (t) => refunds.setDuplicateRefundState(db, dup.id, t, providerRef, now),
  );
  return out.outcome === 'MOVED';
}
