/**
 * Provider notifications (payment paid / failed / closed, refund settled / failed), verified by
 * the provider adapter, applied idempotently. The sandbox's buyer actions arrive here too.
 */
import { type ProviderNotification, ProviderNotificationError } from '../providers/provider.ts';
import type { Services } from '../services.ts';
import { withTx } from '../store/db.ts';
import { getAttempt, getOrder, getRefund, latestAttempt } from '../store/orders.ts';
import { confirmPaid, setAttempt, setOrderStatus } from './payment-state.ts';
import { reviveLostRefund, setRefundState } from './refunds.ts';

export async function handleProviderNotification(
  svc: Services,
  rawBody: Buffer,
  headers: Record<string, string | string[] | undefined>,
): Promise<void> {
  const n = await svc.provider.parseNotification(rawBody, headers);
  // Whatever the provider: an id PostgreSQL cannot hold (U+0000) names nothing of ours, so it is
  // refused as a bad notification rather than looked up (a database error, a 503).
  if ((n.kind === 'PAYMENT' ? n.attemptId : n.refundId).includes('\u0000')) throw new ProviderNotificationError('unknown notification');
  await applyNotification(svc, n);
}

export async function applyNotification(svc: Services, n: ProviderNotification): Promise<void> {
  if (n.kind === 'PAYMENT') {
    const flow = `provider notice ${n.state}`;
    const attempt0 = await getAttempt(svc.db, n.attemptId);
    if (!attempt0) return;
    const dup = await withTx(svc.db, async (tx) => {
      const o = (await getOrder(tx, attempt0.orderId, true))!;
      const a = (await getAttempt(tx, n.attemptId))!;
      const now = new Date(svc.clock.now());
      if (n.state === 'PAID') {
        if (a.state === 'PENDING') await setAttempt(tx, flow, a, 'ACCEPTED');
        if (a.state === 'CLOSED' || a.state === 'FAILED') {
          // The provider took the money although the attempt was recorded as ended (its close
          // crossed the payment): the money is real. The order succeeds if it still can, else
          // the payment is a duplicate, refunded automatically.
          svc.log.warn({ attemptId: a.id, state: a.state }, 'provider reports a payment of an attempt recorded as ended; applied');
        }
        return (await confirmPaid(tx, flow, o, a, now)).duplicateId;
      }
      if (a.state === 'PAID' || a.state === 'CLOSED' || a.state === 'FAILED') return null;
      await setAttempt(tx, flow, a, n.state === 'FAILED' ? 'FAILED' : 'CLOSED');
      const latest = await latestAttempt(tx, o.id);
      if (latest?.id === a.id && (o.status === 'PAYING' || o.status === 'UNKNOWN')) {
        if (n.state === 'FAILED') await setOrderStatus(tx, flow, o, 'FAILED', { failureReason: n.reason ?? 'PAYMENT_FAILED' }, now);
        else await setOrderStatus(tx, flow, o, 'CLOSED', { closedReason: 'PROVIDER_CLOSED' }, now);
      }
      return null;
    });
    if (dup) svc.tasks.refundDuplicate(dup);
    if (n.state === 'PAID') svc.tasks.closeSiblingAttempts(attempt0.orderId, n.attemptId);
    return;
  }
  const r0 = await getRefund(svc.db, n.refundId);
  if (!r0) return;
  await withTx(svc.db, async (tx) => {
    await tx.query('SELECT 1 FROM orders WHERE id = $1 FOR UPDATE', [r0.orderId]);
    const r = (await getRefund(tx, n.refundId))!;
    if (r.state === 'FAILED' && n.state === 'SUCCEEDED') {
      await reviveLostRefund(svc, tx, r, 'SUCCEEDED', null, new Date(svc.clock.now()));
      return;
    }
    if (r.state === 'SUCCEEDED' || r.state === 'FAILED') {
      if (r.state !== n.state) {
        svc.log.error(
          { refundId: r.id, recorded: r.state, provider: n.state },
          'provider reports a refund outcome that contradicts the ledger; needs manual reconciliation',
        );
      }
      return;
    }
    const now = new Date(svc.clock.now());
    await setRefundState(tx, `provider refund notice ${n.state}`, r, n.state, { failureReason: n.reason }, now);
  });
}
