/**
 * Follow-up work, run by the workers from the rows a change wrote in its own transaction
 * (src/store/follow-ups.ts), so a crash loses none of it and none of it waits for the reconciler:
 *
 * - CLOSE_STRAY_ATTEMPT: an attempt accepted by the provider for an order that can no longer use
 *   it is closed there. A close that fails (uncertain, refused) is tried again after 2, 4, 8, 16
 *   and 32 s, then handed to the reconciler (the attempt becomes UNKNOWN, checked in 30 s). A
 *   provider that reports it paid: the payment is applied (the order succeeds, or it is a
 *   duplicate, refunded).
 * - REFUND_DUPLICATE: a second payment of an order is refunded automatically; its outcome is
 *   recorded on the duplicate (visible in the back office) and the reconciler follows it.
 */
import { randomBytes } from 'node:crypto';
import { transition } from '../domain/states.ts';
import { ProviderRejectedError } from '../providers/provider.ts';
import { withTx } from '../store/db.ts';
import * as followUps from '../store/follow-ups.ts';
import type { FollowUp } from '../store/follow-ups.ts';
import * as attempts from '../store/attempts.ts';
import * as orders from '../store/orders.ts';
import * as refunds from '../store/refunds.ts';
import { type UseCaseDeps, nowOf } from './deps.ts';
import { applyNotification } from './notifications.ts';
import { reopenIfNoLiveAttempt, setAttempt } from './payment-state.ts';

/** Retries of a stray close before it is handed to the reconciler. */
export const STRAY_CLOSE_RETRIES = 5;
/** A claimed follow-up is leased this long (a provider call is bounded well below it). */
const LEASE_MS = 60_000;

const runner = `fu_${randomBytes(6).toString('hex')}`;
let claims = 0;

/** Runs the due follow-ups (at most `limit`); answers how many were claimed. */
export async function runFollowUps(d: UseCaseDeps, limit: number): Promise<number> {
  const token = `${runner}.${++claims}`;
  const now = nowOf(d);
  const due = await followUps.claimFollowUps(d.db, limit, token, now, new Date(now.getTime() + LEASE_MS));
  for (const f of due) {
    try {
      const done = f.kind === 'CLOSE_STRAY_ATTEMPT' ? await closeStrayAttempt(d, f) : await refundDuplicate(d, f);
      if (done) await followUps.finishFollowUp(d.db, f.id, token);
      else await followUps.retryFollowUp(d.db, f.id, token, new Date(nowOf(d).getTime() + 2000 * 2 ** f.tries), 'provider call failed');
    } catch (err) {
      // The lease runs out and the work is claimed again: at least once, never lost.
      d.log.warn({ err, followUp: f.kind, subject: f.subjectId }, 'follow-up failed; it will be retried');
    }
  }
  return due.length;
}

/** Answers true when the work is over (done, or handed to the reconciler), false to retry it. */
async function closeStrayAttempt(d: UseCaseDeps, f: FollowUp): Promise<boolean> {
  const attempt = await attempts.getAttempt(d.db, f.subjectId);
  if (!attempt) return true;
  let out;
  try {
    out = await d.providers.byName(attempt.provider).closePayment(attempt.id, { background: true });
  } catch (err) {
    if (f.tries < STRAY_CLOSE_RETRIES) return false;
    await handOver(d, attempt.id, err);
    return true;
  }
  if (out.outcome === 'PAID') {
    await applyNotification(d, { kind: 'PAYMENT', attemptId: attempt.id, state: 'PAID', reason: null });
    return true;
  }
  await withTx(d.db, async (tx) => {
    const order = (await orders.getOrderLocked(tx, attempt.orderId))!;
    const fresh = (await attempts.getAttempt(tx, attempt.id))!;
    if (fresh.state !== 'ACCEPTED' && fresh.state !== 'UNKNOWN') return;
    const now = nowOf(d);
    await setAttempt(tx, 'close stray attempt', fresh, 'CLOSED', {}, now);
    // An order left PAYING without any live attempt (a re-create cut off before closing the old
    // ones) is payable again.
    await reopenIfNoLiveAttempt(tx, 'close stray attempt', order, now);
  });
  return true;
}

/**
 * A stray close given up: an attempt still ACCEPTED is marked UNKNOWN, due in 30 s, so the
 * reconciler asks the provider and, finding it open, closes it again.
 */
async function handOver(d: UseCaseDeps, attemptId: string, err: unknown): Promise<void> {
  const handed = await withTx(d.db, async (tx) => {
    const a = (await attempts.getAttempt(tx, attemptId))!;
    await orders.lockOrder(tx, a.orderId);
    const now = nowOf(d);
    return attempts.setAttemptState(
      tx,
      attemptId,
      transition('attempt', 'hand a stray close to the reconciler', 'ACCEPTED', 'UNKNOWN'),
      { nextCheckAt: new Date(now.getTime() + 30_000) },
      now,
    );
  });
  d.log.warn({ err, attemptId, handedToReconciler: handed }, 'stray attempt not closed yet');
}

async function refundDuplicate(d: UseCaseDeps, f: FollowUp): Promise<boolean> {
  const dup = await refunds.getDuplicate(d.db, f.subjectId);
  if (!dup || dup.refundState === 'REFUNDED') return true;
  let state: refunds.DuplicateRefundState;
  let ref: string | null = null;
  try {
    const out = await d.providers.byName(dup.provider).refund(
      {
        refundId: dup.id,
        paidAttemptId: dup.attemptId,
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
  await refunds.setDuplicateRefundState(d.db, dup.id, state, ref, nowOf(d));
  d.log.warn({ duplicateId: dup.id, state }, 'duplicate payment recorded and refunded automatically');
  return true;
}
