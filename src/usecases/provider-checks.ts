/**
 * The background use cases that converge what a request left uncertain, each a job kind
 * (src/domain/jobs.ts) run by the job runner: expiry of orders at expireAt (the provider confirms
 * unpaid first), closes left pending, and asking the provider about attempts and refunds whose
 * outcome is uncertain or whose request stalled; FIND_DUE_WORK finds the jobs that rows imply.
 */
import { DomainError } from '../domain/errors.ts';
import { type AttemptCheck, decideAttemptCheck, decideRefundCheck } from '../domain/attempt-decisions.ts';
import { isLiveAttempt } from '../domain/states.ts';
import * as attempts from '../store/attempts.ts';
import { PENDING_RECHECK_MS } from '../store/attempts.ts';
import * as jobs from '../store/jobs.ts';
import * as orders from '../store/orders.ts';
import * as refunds from '../store/refunds.ts';
import { REQUESTED_RECHECK_MS } from '../store/refunds.ts';
import { type CreateOutcome, callProvider } from './attempts.ts';
import { closeOrderById } from './close-order.ts';
import { type UseCaseDeps, nowOf } from './deps.ts';
import type { Job, JobOutcome } from './jobs.ts';
import { INSTANCE_GONE_AFTER_MS } from './request-units.ts';
import { applyNotification, keep } from './notifications.ts';
import { decideAndApply } from './payment-state.ts';

export { REFUND_NOT_RECEIVED_AFTER_MS } from '../domain/attempt-decisions.ts';
/** FIND_DUE_WORK adds at most this many jobs of each kind per run. */
const FIND_LIMIT = 200;

/** FIND_DUE_WORK: the jobs that rows imply, due now (src/store/jobs.ts findDueWork). */
export async function findDueWork(d: UseCaseDeps): Promise<JobOutcome> {
  const now = nowOf(d);
  const found = await jobs.findDueWork(d.db, {
    now,
    aliveSince: new Date(now.getTime() - INSTANCE_GONE_AFTER_MS),
    attemptStalledBefore: new Date(now.getTime() - PENDING_RECHECK_MS),
    refundStalledBefore: new Date(now.getTime() - REQUESTED_RECHECK_MS),
    limit: FIND_LIMIT,
    kinds: { expire: 'EXPIRE_ORDER', close: 'FINISH_CLOSE', attempt: 'CHECK_ATTEMPT', refund: 'CHECK_REFUND' },
  });
  if (found > 0) d.wakeWorkers();
  return 'done';
}

/** EXPIRE_ORDER: an open order past its window is closed (EXPIRED); a close the provider refuses is tried again later. */
export async function expireOrder(d: UseCaseDeps, job: Job): Promise<JobOutcome> {
  const o = await orders.getOrder(d.db, job.subjectId);
  if (!o || (o.status !== 'CREATED' && o.status !== 'PAYING') || o.closePending !== null) return 'done';
  if (o.expireAt.getTime() > d.clock.now()) return 'done';
  try {
    await closeOrderById(d, o, 'EXPIRED', { background: true });
  } catch (err) {
    if (err instanceof DomainError && err.code === 'PROVIDER_REJECTED') return 'retry';
    if (err instanceof DomainError) return 'done';
    throw err;
  }
  return 'done';
}

/**
 * FINISH_CLOSE: a close left pending (its request ended, or the provider answered uncertainly) is
 * run again; while the provider's answer stays uncertain, again after the job's backoff.
 */
export async function finishClose(d: UseCaseDeps, job: Job): Promise<JobOutcome> {
  const o = await orders.getOrder(d.db, job.subjectId);
  if (!o?.closePending) return 'done';
  try {
    const r = await closeOrderById(d, o, o.closePending, { background: true });
    return r.closeState === 'UNKNOWN_KEPT' ? 'retry' : 'done';
  } catch (err) {
    if (err instanceof DomainError) return 'done';
    throw err;
  }
}

/** CHECK_ATTEMPT: an UNKNOWN attempt, or a PENDING one whose creating request stalled or died, is settled by asking the provider. */
export async function checkAttempt(d: UseCaseDeps, job: Job): Promise<JobOutcome> {
  const id = job.subjectId;
  const a0 = await attempts.getAttempt(d.db, id);
  if (!a0 || (a0.state !== 'UNKNOWN' && a0.state !== 'PENDING')) return 'done';
  const provider = a0.provider;
  let q;
  try {
    q = await d.providers.byName(provider).queryPayment(id);
  } catch (err) {
    d.log.warn({ err, attemptId: id }, 'provider query failed; will retry');
    return 'retry';
  }
  if (q.state === 'PAID') {
    await applyNotification(
      d,
      { kind: 'PAYMENT', attemptId: id, state: 'PAID', reason: null, amountFen: q.amountFen, providerRef: q.providerRef },
      { provider, source: 'QUERY' },
    );
    return 'done';
  }
  // Open at the provider, but its material (the code, the provider's page) was in the answer that
  // was lost, and a query does not give it: the identical order is sent again, which answers the
  // same material (docs/decisions.md, "A create whose answer was lost"). Never PAYING without it.
  let material = q.material;
  let unrecoverable = false;
  if (q.state === 'OPEN' && material === null) {
    const again = await askAgain(d, id);
    if (again === 'UNCERTAIN') return 'retry';
    if (again !== 'REJECTED' && again !== null && again.outcome === 'PAID') {
      await applyNotification(d, { kind: 'PAYMENT', attemptId: id, state: 'PAID', reason: null, providerRef: again.providerRef });
      return 'done';
    }
    if (again !== 'REJECTED' && again !== null) material = again.material;
    else unrecoverable = true;
  }
  const check: AttemptCheck =
    q.state === 'OPEN'
      ? {
          state: 'OPEN',
          providerRef: q.providerRef,
          qrCode: material?.qrCode ?? null,
          redirectUrl: material?.redirectUrl ?? null,
          unrecoverable,
        }
      : { state: q.state };
  await decideAndApply(
    d,
    () => d.records.read('order', a0.orderId),
    (rec, now) => ({ change: decideAttemptCheck(rec, id, check, now), verdict: null }),
  );
  return 'done';
}

/**
 * The identical order of an attempt sent again (its material); null, without asking, when the
 * attempt was settled meanwhile or its order can no longer be paid (then it is only closed).
 */
async function askAgain(d: UseCaseDeps, attemptId: string): Promise<CreateOutcome | null> {
  const a = await attempts.getAttempt(d.db, attemptId);
  const o = a ? await orders.getOrder(d.db, a.orderId) : null;
  if (!a || !o || !isLiveAttempt(a) || a.state === 'ACCEPTED' || !['CREATED', 'PAYING', 'UNKNOWN'].includes(o.status)) return null;
  return callProvider(d, o, a);
}

/**
 * CHECK_REFUND: a refund not settled yet is asked about at the provider, again after the job's
 * backoff while the provider has it pending.
 */
export async function checkRefund(d: UseCaseDeps, job: Job): Promise<JobOutcome> {
  const now0 = nowOf(d);
  const c = await refunds.refundToCheck(d.db, job.subjectId, new Date(now0.getTime() - INSTANCE_GONE_AFTER_MS));
  if (!c || (c.state !== 'REQUESTED' && c.state !== 'PENDING' && c.state !== 'UNKNOWN')) return 'done';
  const { id, paidAttemptId, provider, requesterGone } = c;
  let state;
  try {
    const q = await d.providers.byName(provider).queryRefund({ refundId: id, paidAttemptId });
    state = q.state;
    const r = q.amountFen === null ? null : await refunds.getRefund(d.db, id);
    if (r && q.amountFen !== r.amountFen) {
      await keep(d, { provider, source: 'QUERY' }, 'AMOUNT_MISMATCH', id, { amountFen: r.amountFen }, { amountFen: q.amountFen, state });
      return 'retry';
    }
  } catch (err) {
    d.log.warn({ err, refundId: id }, 'provider refund query failed; will retry');
    return 'retry';
  }
  const out = await decideAndApply(
    d,
    () => d.records.read('refund', id),
    (rec, now) => {
      const { change, again } = decideRefundCheck(rec.refund!, state, requesterGone, now);
      return { change, verdict: again };
    },
  );
  return out?.verdict ? 'retry' : 'done';
}
