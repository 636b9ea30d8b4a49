/** Order snapshot and refund projection (seed "Resources and their fields"; decisions.md section 6). */
import type { OrderRow, AttemptRow, RefundRow } from '../store/orders.ts';

export type SnapshotView = 'create' | 'query' | 'close';

export interface SnapshotOptions {
  view: SnapshotView;
  nowMs: number;
  publicBaseUrl: string;
  voidedLinks: readonly string[];
  replayed?: boolean;
}

const PAYABLE = new Set(['CREATED', 'PAYING']);

/**
 * The attempt the buyer can pay right now, if any: accepted and not past the order's window, and
 * no close pending on the order (a close in flight, or one kept UNKNOWN_KEPT until the pending-close
 * worker finishes it): no material is offered behind a close. A close the provider rejects
 * withdraws its mark, and the attempt is payable again.
 */
export function validAttempt(o: OrderRow, a: AttemptRow | null, nowMs: number): AttemptRow | null {
  if (!a || a.state !== 'ACCEPTED' || o.status !== 'PAYING' || o.closePending !== null) return null;
  if (a.expireAt.getTime() <= nowMs || o.expireAt.getTime() <= nowMs) return null;
  return a;
}

/** nextAction: a payable order without a valid attempt. An order being closed needs none (a re-create is refused). */
export function needsNewAttempt(o: OrderRow, a: AttemptRow | null, nowMs: number): boolean {
  if (!PAYABLE.has(o.status) || o.expireAt.getTime() <= nowMs || o.closePending !== null) return false;
  if (a && (a.state === 'PENDING' || a.state === 'UNKNOWN')) return false;
  return validAttempt(o, a, nowMs) === null;
}

/**
 * Create rule 1 (seed): a replay of a create whose attempt "is final or expired" has an empty
 * payUrl and `nextAction=CREATE_ATTEMPT`, whatever became of the order meanwhile (closed or
 * expired included), except a paid order, which needs nothing. Uncertain attempts are not final.
 */
function endedAttempt(o: OrderRow, a: AttemptRow | null, nowMs: number): boolean {
  if (o.status === 'SUCCEEDED' || !a) return false;
  if (a.state === 'CLOSED' || a.state === 'FAILED') return true;
  return a.state === 'ACCEPTED' && (a.expireAt.getTime() <= nowMs || o.expireAt.getTime() <= nowMs);
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
  const p: Record<string, unknown> = {
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
  return p;
}
