/**
 * The background use cases, safe with several instances (work is claimed with row locks and
 * leases): expiry of orders at expireAt (the provider confirms unpaid first), and the reconciler
 * converging UNKNOWN attempts, refunds, pending closes and duplicate-payment refunds by asking the
 * provider again with backoff.
 */
import { REFUND_NOT_RECEIVED } from '../domain/states.ts';
import { ProviderRejectedError } from '../providers/provider.ts';
import { withTx } from '../store/db.ts';
import { addFollowUp } from '../store/follow-ups.ts';
import * as attempts from '../store/attempts.ts';
import * as orders from '../store/orders.ts';
import * as refunds from '../store/refunds.ts';
import { closeOrderById } from './close-order.ts';
import { type UseCaseDeps, nowOf } from './deps.ts';
import { INSTANCE_GONE_AFTER_MS } from './request-units.ts';
import { applyNotification, keep } from './notifications.ts';
import { closeStrayLater, nextCheckAt, reopenIfNoLiveAttempt, setAttempt, setOrderStatus, setRefundState } from './payment-state.ts';

/** A refund the provider has not known for this long was never received by it (longer than any provider call may take). */
export const REFUND_NOT_RECEIVED_AFTER_MS = 300_000;

export async function expireDueOrders(d: UseCaseDeps, limit: number): Promise<number> {
  const ids = await orders.claimOrders(d.db, 'expired', limit, nowOf(d));
  for (const id of ids) {
    try {
      await closeOrderById(d, id, 'EXPIRED', { background: true });
    } catch (err) {
      d.log.warn({ err, orderId: id }, 'expiry could not close the order yet');
    }
  }
  return ids.length;
}

export async function reconcileCloses(d: UseCaseDeps, limit: number): Promise<number> {
  const ids = await orders.claimOrders(d.db, 'pending-closes', limit, nowOf(d));
  for (const id of ids) {
    const o = await orders.getOrder(d.db, id);
    if (!o?.closePending) continue;
    try {
      await closeOrderById(d, o, o.closePending, { background: true });
    } catch (err) {
      d.log.warn({ err, orderId: id }, 'pending close not converged yet');
    }
  }
  return ids.length;
}

/** UNKNOWN attempts, and PENDING ones whose creating request died, are settled by asking the provider. */
export async function reconcileAttempts(d: UseCaseDeps, limit: number): Promise<number> {
  const due = await attempts.claimAttemptsToCheck(d.db, limit, nowOf(d));
  for (const { id, checks, provider } of due) {
    let q;
    try {
      q = await d.providers.byName(provider).queryPayment(id);
    } catch (err) {
      d.log.warn({ err, attemptId: id }, 'provider query failed; will retry');
      await attempts.rescheduleAttemptCheck(d.db, id, nextCheckAt(nowOf(d), checks));
      continue;
    }
    if (q.state === 'PAID') {
      await applyNotification(
        d,
        { kind: 'PAYMENT', attemptId: id, state: 'PAID', reason: null, amountFen: q.amountFen, providerRef: q.providerRef },
        { provider, source: 'QUERY' },
      );
      continue;
    }
    const strays = await withTx(d.db, async (tx): Promise<number> => {
      const a0 = await attempts.getAttempt(tx, id);
      if (!a0) return 0;
      const o = (await orders.getOrderLocked(tx, a0.orderId))!;
      const a = (await attempts.getAttempt(tx, id))!;
      if (a.state !== 'UNKNOWN' && a.state !== 'PENDING') return 0;
      const flow = 'reconcile attempt';
      const now = nowOf(d);
      const latest = await attempts.latestAttempt(tx, o.id);
      const isLatest = latest?.id === a.id;
      if (q.state === 'OPEN') {
        await setAttempt(
          tx,
          flow,
          a,
          'ACCEPTED',
          { providerRef: q.providerRef, qrCode: q.material?.qrCode ?? null, redirectUrl: q.material?.redirectUrl ?? null },
          now,
        );
        if (isLatest && (o.status === 'UNKNOWN' || o.status === 'CREATED')) {
          await setOrderStatus(tx, flow, o, 'PAYING', {}, now);
          return 0;
        }
        // Open at the provider, but the order can no longer use it: closed there afterwards.
        if (!isLatest || o.status !== 'PAYING') {
          await closeStrayLater(tx, a.id, now);
          return 1;
        }
        return 0;
      }
      if (q.state === 'FAILED') {
        await setAttempt(tx, flow, a, 'FAILED', {}, now);
        if (isLatest && o.status === 'UNKNOWN') await setOrderStatus(tx, flow, o, 'FAILED', { failureReason: 'PAYMENT_FAILED' }, now);
        return 0;
      }
      // NOT_FOUND (never created) or CLOSED: the attempt is over; the order becomes payable again.
      await setAttempt(tx, flow, a, q.state === 'CLOSED' ? 'CLOSED' : 'FAILED', {}, now);
      if (isLatest && o.status === 'UNKNOWN') await setOrderStatus(tx, flow, o, 'CREATED', {}, now);
      else if (isLatest && o.status === 'PAYING') {
        // A re-create cut off (a crash) during the new attempt's provider call. If it had closed
        // the old attempts, none is live: the order is payable again (CREATED) now. If it was cut
        // off before closing them, they are closed now, finishing what the merchant asked for (the
        // order would otherwise read PAYING with no payable attempt while an old link still paid);
        // the stray close then reopens the order the same way (src/usecases/follow-ups.ts).
        await reopenIfNoLiveAttempt(tx, flow, o, now);
        const open = (await attempts.attemptsOf(tx, o.id)).filter((x) => x.state === 'ACCEPTED');
        for (const x of open) await closeStrayLater(tx, x.id, now);
        return open.length;
      }
      return 0;
    });
    if (strays > 0) d.wakeWorkers();
  }
  return due.length;
}

/**
 * Work a gone instance left unfinished (its process crashed or was killed): the attempts its
 * requests were making and the refunds they were requesting are checked at the provider now,
 * rather than after the usual waits (150 s for an attempt, 60 s for a refund), so that a restart
 * settles them within seconds. Answers how many were made due.
 */
export async function recoverWorkOfGoneInstances(d: UseCaseDeps): Promise<number> {
  const now = nowOf(d);
  const aliveSince = new Date(now.getTime() - INSTANCE_GONE_AFTER_MS);
  return (
    (await attempts.dueAttemptsOfGoneInstances(d.db, aliveSince, now)) + (await refunds.dueRefundsOfGoneInstances(d.db, aliveSince, now))
  );
}

export async function reconcileRefunds(d: UseCaseDeps, limit: number): Promise<number> {
  const now0 = nowOf(d);
  const due = await refunds.claimRefundsToCheck(d.db, limit, now0, new Date(now0.getTime() - INSTANCE_GONE_AFTER_MS));
  for (const { id, checks, paidAttemptId, provider, requesterGone } of due) {
    let state;
    try {
      const q = await d.providers.byName(provider).queryRefund({ refundId: id, paidAttemptId });
      state = q.state;
      const r = q.amountFen === null ? null : await refunds.getRefund(d.db, id);
      if (r && q.amountFen !== r.amountFen) {
        await keep(d, { provider, source: 'QUERY' }, 'AMOUNT_MISMATCH', id, { amountFen: r.amountFen }, { amountFen: q.amountFen, state });
        continue;
      }
    } catch (err) {
      d.log.warn({ err, refundId: id }, 'provider refund query failed; will retry');
      continue;
    }
    await withTx(d.db, async (tx) => {
      const r0 = await refunds.getRefund(tx, id);
      if (!r0) return;
      await orders.lockOrder(tx, r0.orderId);
      const rf = (await refunds.getRefund(tx, id))!;
      const now = nowOf(d);
      const flow = 'reconcile refund';
      if (rf.state === 'SUCCEEDED' || rf.state === 'FAILED') return;
      if (state === 'SUCCEEDED' || state === 'FAILED') {
        await setRefundState(tx, flow, rf, state, { failureReason: state === 'FAILED' ? 'PROVIDER_FAILED' : null }, now);
      } else if (state === 'PENDING') {
        if (rf.state !== 'PENDING') await setRefundState(tx, flow, rf, 'PENDING', { nextCheckAt: nextCheckAt(now, checks) }, now);
        else await refunds.rescheduleRefundCheck(tx, id, nextCheckAt(now, checks));
      } else if (now.getTime() - rf.createdAt.getTime() > REFUND_NOT_RECEIVED_AFTER_MS || (rf.state === 'REQUESTED' && requesterGone)) {
        // NOT_FOUND for 5 minutes (longer than any provider call may take), or NOT_FOUND while the
        // request that asked the provider died with its instance: the provider never received it;
        // nothing was refunded, and the amount is released. Should the provider report it after all
        // (a request that reached it as the instance died), the refund takes the provider's state
        // again (reviveLostRefund).
        await setRefundState(tx, flow, rf, 'FAILED', { failureReason: REFUND_NOT_RECEIVED }, now);
      }
    });
  }
  return due.length;
}

export async function reconcileDuplicates(d: UseCaseDeps, limit: number): Promise<number> {
  const due = await refunds.claimDuplicatesToCheck(d.db, limit, nowOf(d));
  let again = false;
  for (const dup of due) {
    try {
      const state = (await d.providers.byName(dup.provider).queryRefund({ refundId: dup.id, paidAttemptId: dup.attemptId })).state;
      if (state === 'SUCCEEDED') await refunds.setDuplicateRefundState(d.db, dup.id, 'REFUNDED', null, nowOf(d));
      else if (state === 'NOT_FOUND' || state === 'FAILED') {
        await addFollowUp(d.db, 'REFUND_DUPLICATE', dup.id, nowOf(d));
        again = true;
      }
    } catch (err) {
      if (!(err instanceof ProviderRejectedError)) d.log.warn({ err, duplicateId: dup.id }, 'duplicate refund check failed');
    }
  }
  if (again) d.wakeWorkers();
  return due.length;
}
