/** Merchants' apps, settlement accounts and allocation, and an attempt's provider trades, as the admin API and the portal answer them. */
import type { Allocation } from '../domain/money.ts';
import type { AccountRow, AppRow } from '../store/merchants.ts';
import type { TradeRow } from '../store/trades.ts';

export function appView(a: AppRow) {
  return {
    appId: a.id,
    merchantId: a.merchantId,
    status: a.status,
    notifyUrl: a.notifyUrl,
    channels: a.channels,
    tradeScopes: a.tradeScopes,
    voidedLinks: a.voidedLinks,
    ipAllowlist: a.ipAllowlist,
    paymentWindowSeconds: a.paymentWindowSeconds,
    dailyAmountCeilingFen: a.dailyAmountCeilingFen,
    rateLimitPerSecond: a.rateLimitPerSecond,
    statementDownloadsAtOnce: a.statementDownloadsAtOnce,
    createdAt: a.createdAt.toISOString(),
    updatedAt: a.updatedAt.toISOString(),
  };
}

export function accountView(a: AccountRow) {
  return {
    accountId: a.accountId,
    entityType: a.entityType,
    entityName: a.entityName,
    merchantNo: a.merchantNo,
    cardLast4: a.cardLast4,
    agreedCeilingFen: a.agreedCeilingFen,
    createdAt: a.createdAt.toISOString(),
  };
}

export function allocationView(a: Allocation & { updatedAt: Date }) {
  return {
    mode: a.mode,
    participants: a.participants,
    ...(a.mode === 'RATIO' ? { ratios: (a.ratios ?? []).map((r) => ({ accountId: r.accountId, shareBps: r.shareBps })) } : {}),
    unavailablePolicy: a.unavailablePolicy,
    updatedAt: a.updatedAt.toISOString(),
  };
}

/**
 * An attempt's provider trades beyond its own order (JSAPI, Native), as the back office and the
 * portal show them: number, product, state, when made and when paid (a paid trade changes no more:
 * its last change is its payment); never the payer's openid or the payment material.
 */
export function tradesView(trades: TradeRow[], attemptId: string) {
  return trades
    .filter((t) => t.attemptId === attemptId)
    .map((t) => ({
      tradeNo: t.id,
      product: t.product,
      state: t.state,
      createdAt: t.createdAt.toISOString(),
      paidAt: t.state === 'PAID' ? t.updatedAt.toISOString() : null,
    }));
}
