/**
 * Provider notices (payment paid / failed / closed, refund settled / failed): verified by the
 * provider's adapter, applied idempotently (the same notice twice changes nothing). The sandbox's
 * buyer actions arrive here too, and so do the reconciler's findings.
 *
 * A notice is applied only when it matches the ledger: it comes from the provider that holds the
 * payment, and the amount and currency it carries (when it carries them) are the order's or the
 * refund's. Anything else is never applied: it is logged and kept for the operator
 * (provider_discrepancies, counted in the metrics).
 */
import {
  type PaymentProvider,
  type ProviderNotification,
  ProviderNoticeForOperator,
  ProviderNotificationError,
} from '../providers/provider.ts';
import { withTx } from '../store/db.ts';
import { type DiscrepancySource, recordDiscrepancy } from '../store/discrepancies.ts';
import * as attempts from '../store/attempts.ts';
import * as orders from '../store/orders.ts';
import type { AttemptRow } from '../store/attempts.ts';
import * as refunds from '../store/refunds.ts';
import * as trades from '../store/trades.ts';
import type { TradeRow } from '../store/trades.ts';
import type { Queryable } from '../store/db.ts';
import { type UseCaseDeps, nowOf } from './deps.ts';
import { reviveLostRefund } from './refunds.ts';
import { confirmPaid, setAttempt, setOrderStatus, setRefundState, setTrade } from './payment-state.ts';

/** What became of a notice: applied (or already applied), about nothing of ours, or kept for the operator. */
export type NoticeOutcome = 'APPLIED' | 'UNKNOWN_SUBJECT' | 'KEPT_FOR_OPERATOR';

/** Where a provider's word came from, for the discrepancy it may become. */
export interface NoticeOrigin {
  provider: string;
  source: DiscrepancySource;
}

/** Verifies a notice with the provider that sent it, then applies it. Throws ProviderNotificationError for a notice that does not verify. */
export async function handleProviderNotification(
  d: UseCaseDeps,
  provider: PaymentProvider,
  rawBody: Buffer,
  headers: Record<string, string | string[] | undefined>,
): Promise<NoticeOutcome> {
  let n: ProviderNotification;
  try {
    n = await provider.parseNotification(rawBody, headers);
  } catch (err) {
    if (!(err instanceof ProviderNoticeForOperator)) throw err;
    await keep(d, { provider: provider.name, source: 'NOTICE' }, err.kind, err.subjectId, null, { message: err.message, ...err.details });
    return 'KEPT_FOR_OPERATOR';
  }
  // Whatever the provider: an id PostgreSQL cannot hold (U+0000) names nothing of ours, so it is
  // refused as a bad notification rather than looked up (a database error, a 503).
  if ((n.kind === 'PAYMENT' ? n.attemptId : n.refundId).includes('\u0000')) throw new ProviderNotificationError('unknown notification');
  return applyNotification(d, n, { provider: provider.name, source: 'NOTICE' });
}

/** Keeps a provider's word that is not applied for the operator (once per provider, source, kind and subject). */
export async function keep(
  d: UseCaseDeps,
  from: NoticeOrigin,
  kind: string,
  subjectId: string,
  expected: unknown,
  reported: unknown,
): Promise<void> {
  const fresh = await recordDiscrepancy(d.db, { ...from, kind, subjectId, expected, reported }, nowOf(d));
  if (fresh) d.log.error({ ...from, kind, subjectId, expected, reported }, 'provider report kept for the operator: not applied');
}

/**
 * The attempt a provider order number belongs to: the attempt itself (its own order), or the
 * attempt of a trade (with the trade's row).
 */
export async function ownerOfTradeNo(db: Queryable, no: string): Promise<{ attempt: AttemptRow; trade: TradeRow | null } | null> {
  const attempt = await attempts.getAttempt(db, no);
  if (attempt) return { attempt, trade: null };
  const trade = await trades.getTrade(db, no);
  const owner = trade ? await attempts.getAttempt(db, trade.attemptId) : null;
  return owner ? { attempt: owner, trade } : null;
}

/**
 * The provider's word about a payment or refund, applied if it matches the ledger. `from`: who
 * said it (a notice, or the reconciler's query); the service's own findings pass none. A payment
 * names the provider order (`attemptId`): an attempt's own, or one of its trades.
 */
export async function applyNotification(d: UseCaseDeps, n: ProviderNotification, from?: NoticeOrigin): Promise<NoticeOutcome> {
  if (n.kind === 'PAYMENT') {
    const flow = `provider notice ${n.state}`;
    const owner = await ownerOfTradeNo(d.db, n.attemptId);
    if (!owner) return 'UNKNOWN_SUBJECT';
    const attempt0 = owner.attempt;
    const holder = owner.trade?.provider ?? attempt0.provider;
    if (from) {
      const order = (await orders.getOrder(d.db, attempt0.orderId))!;
      if (from.provider !== holder) {
        await keep(d, from, 'PROVIDER_MISMATCH', n.attemptId, { provider: holder }, { provider: from.provider, state: n.state });
        return 'KEPT_FOR_OPERATOR';
      }
      if (n.amountFen != null && n.amountFen !== order.amountFen) {
        await keep(d, from, 'AMOUNT_MISMATCH', n.attemptId, { amountFen: order.amountFen }, { amountFen: n.amountFen, state: n.state });
        return 'KEPT_FOR_OPERATOR';
      }
      if (n.currency != null && n.currency !== order.currency) {
        await keep(d, from, 'CURRENCY_MISMATCH', n.attemptId, { currency: order.currency }, { currency: n.currency, state: n.state });
        return 'KEPT_FOR_OPERATOR';
      }
    }
    await withTx(d.db, async (tx) => {
      const o = (await orders.getOrderLocked(tx, attempt0.orderId))!;
      const a = (await attempts.getAttempt(tx, attempt0.id))!;
      const trade = owner.trade && (await trades.getTrade(tx, owner.trade.id))!;
      const now = nowOf(d);
      if (trade) {
        // A trade of the attempt: paid, the attempt is paid through it; failed or closed, only that
        // way to pay ended (the attempt's other orders may still be paid).
        if (n.state === 'PAID') {
          if (a.state === 'PENDING') await setAttempt(tx, flow, a, 'ACCEPTED', {}, now);
          // The provider's reference of the payment (WeChat Pay's transaction_id) is recorded on the trade.
          await confirmPaid(tx, flow, o, a, now, { ...trade, providerRef: n.providerRef ?? trade.providerRef });
        } else if (trade.state === 'NEW' || trade.state === 'OPEN') {
          await setTrade(tx, flow, trade, 'CLOSED', {}, now);
        }
        return;
      }
      if (n.state === 'PAID') {
        if (a.state === 'PENDING') await setAttempt(tx, flow, a, 'ACCEPTED', {}, now);
        if (n.providerRef) await attempts.noteAttemptProviderRef(tx, a.id, n.providerRef);
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
      const latest = await attempts.latestAttempt(tx, o.id);
      if (latest?.id === a.id && (o.status === 'PAYING' || o.status === 'UNKNOWN')) {
        if (n.state === 'FAILED') await setOrderStatus(tx, flow, o, 'FAILED', { failureReason: n.reason ?? 'PAYMENT_FAILED' }, now);
        else await setOrderStatus(tx, flow, o, 'CLOSED', { closedReason: 'PROVIDER_CLOSED' }, now);
      }
    });
    // Its event is delivered now rather than at the next worker pass; a payment may also have left
    // follow-ups (closing the order's other attempts, refunding a duplicate).
    d.wakeWorkers();
    return 'APPLIED';
  }
  const r0 = await refunds.getRefund(d.db, n.refundId);
  if (!r0) return 'UNKNOWN_SUBJECT';
  if (from) {
    if (from.provider !== r0.provider) {
      await keep(d, from, 'PROVIDER_MISMATCH', r0.id, { provider: r0.provider }, { provider: from.provider, state: n.state });
      return 'KEPT_FOR_OPERATOR';
    }
    if (n.amountFen != null && n.amountFen !== r0.amountFen) {
      await keep(d, from, 'AMOUNT_MISMATCH', r0.id, { amountFen: r0.amountFen }, { amountFen: n.amountFen, state: n.state });
      return 'KEPT_FOR_OPERATOR';
    }
  }
  await withTx(d.db, async (tx) => {
    await orders.lockOrder(tx, r0.orderId);
    const r = (await refunds.getRefund(tx, n.refundId))!;
    const now = nowOf(d);
    if (r.state === 'FAILED' && n.state === 'SUCCEEDED') {
      await reviveLostRefund(d.log, tx, r, 'SUCCEEDED', n.providerRef ?? null, now);
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
    await setRefundState(
      tx,
      `provider refund notice ${n.state}`,
      r,
      n.state,
      { failureReason: n.reason, providerRef: n.providerRef ?? null },
      now,
    );
  });
  // Its event is delivered now rather than at the next worker pass.
  d.wakeWorkers();
  return 'APPLIED';
}
