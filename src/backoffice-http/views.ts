/** Merchants' apps, settlement accounts and allocation as the admin API and the portal answer them. */
import type { Allocation } from '../domain/money.ts';
import type { AccountRow, AppRow } from '../store/merchants.ts';

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
