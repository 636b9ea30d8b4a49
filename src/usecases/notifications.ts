/**
 * Provider notices (payment paid / failed / closed, refund settled / failed): verified by the
 * provider's adapter, applied idempotently (the same notice twice changes nothing). The sandbox's
 * buyer actions arrive here too, and so do the reconciler's findings.
 */
import { type PaymentProvider, type ProviderNotification, ProviderNotificationError } from '../providers/provider.ts';
import { withTx } from '../store/db.ts';
import * as orders from '../store/orders.ts';
import * as refunds from '../store/refunds.ts';
import { type UseCaseDeps, nowOf } from './deps.ts';
import { reviveLostRefund } from './refunds.ts';
import { confirmPaid, setAttempt, setOrderStatus, setRefundState } from './payment-state.ts';

/** What became of a notice. */
export type NoticeOutcome = 'APPLIED' | 'UNKNOWN_SUBJECT';

/** Verifies a notice with the provider that sent it, then applies it. Throws ProviderNotificationError for a notice that does not verify. */
export async function handleProviderNotification(
  d: UseCaseDeps,
  provider: PaymentProvider,
  rawBody: Buffer,
  headers: Record<string, string | string[] | undefined>,
): Promise<NoticeOutcome> {
  const n = await provider.parseNotification(rawBody, headers);
  // Whatever the provider: an id PostgreSQL cannot hold (U+0000) names nothing of ours, so it is
  // refused as a bad notification rather than looked up (a database error, a 503).
  if ((n.kind === 'PAYMENT' ? n.attemptId : n.refundId).includes('\u0000')) throw new ProviderNotificationError('unknown notification');
  return applyNotification(d, n);
}

export async function applyNotification(d: UseCaseDeps, n: ProviderNotification): Promise<NoticeOutcome> {
  if (n.kind === 'PAYMENT') {
    const flow = `provider notice ${n.state}`;
    const attempt0 = await orders.getAttempt(d.db, n.attemptId);
    if (!attempt0) return 'UNKNOWN_SUBJECT';
    await withTx(d.db, async (tx) => {
      const o = (await orders.getOrder(tx, attempt0.orderId, true))!;
      const a = (await orders.getAttempt(tx, n.attemptId))!;
      const now = nowOf(d);
      if (n.state === 'PAID') {
        if (a.state === 'PENDING') await setAttempt(tx, flow, a, 'ACCEPTED', {}, now);
        if (a.state === 'CLOSED' || a.state === 'FAILED') {
          // The provider took the money although the attempt was recorded as ended (its close
          // crossed the payment): the money is real. The order succeeds if it still can, else
          // the payment is a duplicate, refunded automatically.
          d.log.warn({ attemptId: a.id, state: a.state }, 'provider reports a payment of an attempt recorded as ended; applied');
        }
        await confirmPaid(tx, flow, o, a, now);
        return;
      }
      if (a.state === 'PAID' || a.state === 'CLOSED' || a.state === 'FAILED') return;
      await setAttempt(tx, flow, a, n.state === 'FAILED' ? 'FAILED' : 'CLOSED', {}, now);
      const latest = await orders.latestAttempt(tx, o.id);
      if (latest?.id === a.id && (o.status === 'PAYING' || o.status === 'UNKNOWN')) {
        if (n.state === 'FAILED') await setOrderStatus(tx, flow, o, 'FAILED', { failureReason: n.reason ?? 'PAYMENT_FAILED' }, now);
        else await setOrderStatus(tx, flow, o, 'CLOSED', { closedReason: 'PROVIDER_CLOSED' }, now);
      }
    });
    // A payment may have left follow-ups (closing the order's other attempts, refunding a duplicate).
    if (n.state === 'PAID') d.wakeWorkers();
    return 'APPLIED';
  }
  const r0 = await refunds.getRefund(d.db, n.refundId);
  if (!r0) return 'UNKNOWN_SUBJECT';
  await withTx(d.db, async (tx) => {
    await orders.lockOrder(tx, r0.orderId);
    const r = (await refunds.getRefund(tx, n.refundId))!;
    const now = nowOf(d);
    if (r.state === 'FAILED' && n.state === 'SUCCEEDED') {
      await reviveLostRefund(d.log, tx, r, 'SUCCEEDED', null, now);
      return;
    }
    if (r.state === 'SUCCEEDED' || r.state === 'FAILED') {
      if (r.state !== n.state) {
        d.log.error(
          { refundId: r.id, recorded: r.state, provider: n.state },
          'provider reports a refund outcome that contradicts the ledger; needs manual reconciliation',
        );
      }
      return;
    }
    await setRefundState(tx, `provider refund notice ${n.state}`, r, n.state, { failureReason: n.reason }, now);
  });
  return 'APPLIED';
}
