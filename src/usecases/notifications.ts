/**
 * Provider notices (payment paid / failed / closed, refund settled / failed): verified by the
 * provider's adapter, applied idempotently (the same notice twice changes nothing). The sandbox's
 * buyer actions arrive here too, and so do the provider check's findings.
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
import { type DiscrepancySource, recordDiscrepancy } from '../store/discrepancies.ts';
import * as attempts from '../store/attempts.ts';
import * as changes from '../store/changes.ts';
import { changeOf, decidePaymentNotice, decideRefund, emptyChange } from '../domain/payment-decisions.ts';
import type { AttemptRow } from '../store/attempts.ts';
import * as trades from '../store/trades.ts';
import type { TradeRow } from '../store/trades.ts';
import type { Queryable } from '../store/db.ts';
import { type UseCaseDeps, nowOf } from './deps.ts';
import { logContradiction, warnIfRefundedAbovePaid } from './refunds.ts';
import { decideAndApply } from './payment-state.ts';

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
 * said it (a notice, or the provider check's query); the service's own findings pass none. A payment
 * names the provider order (`attemptId`): an attempt's own, or one of its trades.
 */
export async function applyNotification(d: UseCaseDeps, n: ProviderNotification, from?: NoticeOrigin): Promise<NoticeOutcome> {
  return n.kind === 'PAYMENT' ? applyPaymentWord(d, n, from) : applyRefundWord(d, n, from);
}

/** A payment's word: decided from the order's records (decidePaymentNotice), unless it does not match the ledger (kept). */
async function applyPaymentWord(
  d: UseCaseDeps,
  n: Extract<ProviderNotification, { kind: 'PAYMENT' }>,
  from?: NoticeOrigin,
): Promise<NoticeOutcome> {
  let checked = !from;
  let kept = false;
  const word = { tradeNo: n.attemptId, state: n.state, providerRef: n.providerRef ?? null, reason: n.reason ?? null };
  const out = await decideAndApply(
    d,
    () => d.records.read('tradeNo', n.attemptId),
    (rec, now) => {
      if (!checked) {
        checked = true;
        kept = mismatch(rec, n) !== null;
        if (kept) return { change: emptyChange(), verdict: null };
      }
      return { change: decidePaymentNotice(rec, word, now), verdict: null };
    },
  );
  if (!out) return 'UNKNOWN_SUBJECT';
  if (kept) {
    const m = mismatch(out.records, n)!;
    await keep(d, from!, m.kind, n.attemptId, m.expected, { ...m.reported, state: n.state });
    return 'KEPT_FOR_OPERATOR';
  }
  return 'APPLIED';

  function mismatch(rec: changes.OrderRecords, p: Extract<ProviderNotification, { kind: 'PAYMENT' }>) {
    const trade = rec.trades.find((t) => t.id === p.attemptId);
    const attempt = rec.attempts.find((a) => a.id === (trade ? trade.attemptId : p.attemptId))!;
    const holder = trade?.provider ?? attempt.provider;
    if (from!.provider !== holder)
      return { kind: 'PROVIDER_MISMATCH', expected: { provider: holder }, reported: { provider: from!.provider } };
    if (p.amountFen != null && p.amountFen !== rec.order.amountFen) {
      return { kind: 'AMOUNT_MISMATCH', expected: { amountFen: rec.order.amountFen }, reported: { amountFen: p.amountFen } };
    }
    if (p.currency != null && p.currency !== rec.order.currency) {
      return { kind: 'CURRENCY_MISMATCH', expected: { currency: rec.order.currency }, reported: { currency: p.currency } };
    }
    return null;
  }
}

/** A refund's word: decided from the refund's records (decideRefund), unless it does not match the ledger (kept). */
async function applyRefundWord(
  d: UseCaseDeps,
  n: Extract<ProviderNotification, { kind: 'REFUND' }>,
  from?: NoticeOrigin,
): Promise<NoticeOutcome> {
  const rec0 = await d.records.read('refund', n.refundId);
  if (!rec0) return 'UNKNOWN_SUBJECT';
  const r0 = rec0.refund!;
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
  let first: changes.OrderRecords | null = rec0;
  const out = await decideAndApply(
    d,
    async () => {
      const rec = first ?? (await d.records.read('refund', n.refundId));
      first = null;
      return rec;
    },
    (rec, now) => {
      const decision = decideRefund(
        rec.refund!,
        { kind: 'NOTICE', state: n.state, reason: n.reason, providerRef: n.providerRef ?? null },
        now,
      );
      return { change: changeOf(decision), verdict: decision };
    },
  );
  const decision = out!.verdict;
  if (decision.kind === 'REVIVE') await warnIfRefundedAbovePaid(d, out!.result.order);
  else if (decision.kind === 'CONTRADICTION') logContradiction(d.log, r0.id, decision);
  return 'APPLIED';
}
