/** The open API's projections: order snapshot, refund projection, settlement view (seed "Resources and their fields"; decisions.md section 6). */
import { endedAttempt, needsNewAttempt, validAttempt } from '../domain/payability.ts';
import type { AttemptRow, OrderRow } from '../store/orders.ts';
import type { RefundRow } from '../store/refunds.ts';
import type { SettlementView } from '../usecases/results.ts';

export type SnapshotView = 'create' | 'query' | 'close';

export interface SnapshotOptions {
  view: SnapshotView;
  nowMs: number;
  publicBaseUrl: string;
  voidedLinks: readonly string[];
  replayed?: boolean;
}

export function cashierUrl(publicBaseUrl: string, token: string): string {
  return `${publicBaseUrl}/cashier/${token}`;
}

export function orderSnapshot(o: OrderRow, latest: AttemptRow | null, opt: SnapshotOptions): Record<string, unknown> {
  const valid = opt.view === 'create' ? validAttempt(o, latest, opt.nowMs) : null;
  const s: Record<string, unknown> = {
    openOrderId: o.id,
    outTradeNo: o.outTradeNo,
    status: o.status,
    closedReason: o.closedReason,
    channel: o.channel,
    tradeScope: o.tradeScope,
    links: o.links.filter((l) => !opt.voidedLinks.includes(l)),
    amountFen: o.amountFen,
    currency: o.currency,
    attach: o.attach,
    expireAt: o.expireAt.toISOString(),
    payUrl: valid ? cashierUrl(opt.publicBaseUrl, valid.cashierToken) : null,
  };
  if (opt.view !== 'create') s.qrCode = null;
  else if (o.channel === 'ALIPAY_H5') s.qrCode = valid ? valid.qrCode : null;
  s.payUrlExpireHint = Math.floor(o.expireAt.getTime() / 1000);
  if (needsNewAttempt(o, latest, opt.nowMs) || (opt.view === 'create' && opt.replayed === true && endedAttempt(o, latest, opt.nowMs))) {
    s.nextAction = 'CREATE_ATTEMPT';
  }
  if (opt.view === 'query') s.latestAttempt = latest ? { state: latest.state, expireAt: latest.expireAt.toISOString() } : null;
  if (opt.view === 'close') s.latestAttempt = null;
  s.feeProjection = o.feeProjection;
  if (opt.view === 'create') {
    s.replayed = opt.replayed === true;
    if (o.status === 'UNKNOWN' || latest?.state === 'UNKNOWN') s.unknown = true;
  }
  return s;
}

export function refundProjection(r: RefundRow, o: OrderRow, replayed: boolean): Record<string, unknown> {
  return {
    refundAttemptId: r.id,
    outRefundNo: r.outRefundNo,
    outTradeNo: o.outTradeNo,
    openOrderId: o.id,
    amountFen: r.amountFen,
    state: r.state,
    reason: r.reason,
    createdAt: r.createdAt.toISOString(),
    updatedAt: r.updatedAt.toISOString(),
    replayed,
    // The RefundProjection lists `unknown` among its fields (the order snapshot's "only when
    // true" rule is the order's, as its replayed rule is): always present here, a boolean.
    unknown: r.state === 'UNKNOWN',
  };
}

/** decisions.md section 6: only the last 4 card digits ever leave the database. */
export function settlementBody(v: SettlementView): Record<string, unknown> {
  const allocation = v.allocation;
  const body: Record<string, unknown> = {
    accounts: v.accounts.map((a) => ({
      accountId: a.accountId,
      entityType: a.entityType,
      entityName: a.entityName,
      merchantNo: a.merchantNo,
      cardLast4: a.cardLast4,
    })),
    mode: allocation?.mode ?? null,
    participants: allocation?.participants ?? [],
  };
  // Ratios are a configuration snapshot in participant order; jsonb does not keep key order, so
  // each entry is rebuilt as {accountId, shareBps}.
  if (allocation?.mode === 'RATIO') body.ratios = (allocation.ratios ?? []).map((r) => ({ accountId: r.accountId, shareBps: r.shareBps }));
  body.unavailablePolicy = allocation?.unavailablePolicy ?? null;
  return body;
}
