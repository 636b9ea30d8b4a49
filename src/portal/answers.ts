/**
 * The portal API's answers: each GET's body, built here from what the use cases read. The portal
 * has no published schema; its pages' rows (src/portal/ui/rows.ts) are checked against these
 * functions' results (test/unit/portal-rows.types.ts, by `npm run typecheck`), as the console's
 * are against the back office's views.
 */
import { MERCHANT_PERMISSIONS, type MerchantActor, merchantCan } from '../domain/merchant-users.ts';
import { actorLabel } from '../domain/operators.ts';
import { accountView, allocationView, appView, tradesView } from '../backoffice-http/views.ts';
import { nextOrderCursor } from '../backoffice-http/query.ts';
import type { AuditRow } from '../store/audit.ts';
import type { AppKeyRow, AppRow } from '../store/merchants.ts';
import type * as portal from '../usecases/portal.ts';

type Read<F extends (...args: never[]) => unknown> = Awaited<ReturnType<F>>;

export function sessionView(a: { actor: MerchantActor; csrfToken: string; expiresAt: Date }, merchantName: string, totpEnabled: boolean) {
  return {
    user: { userId: a.actor.merchantUserId, login: a.actor.merchantUserName, role: a.actor.role, totpEnabled },
    merchant: { merchantId: a.actor.merchantId, name: merchantName },
    permissions: MERCHANT_PERMISSIONS.filter((p) => merchantCan(a.actor.role, p)),
    csrfToken: a.csrfToken,
    expiresAt: a.expiresAt.toISOString(),
  };
}

export function keyView(k: AppKeyRow, nowMs: number) {
  const valid = k.status === 'ACTIVE' && (k.validUntil === null || k.validUntil.getTime() > nowMs);
  return {
    keyId: k.keyId,
    status: k.status,
    valid,
    validUntil: k.validUntil?.toISOString() ?? null,
    publicKeyPem: k.publicKeyPem,
    createdAt: k.createdAt.toISOString(),
  };
}

/** An app with its keys (GET /apps lists them, GET /apps/:appId answers one). */
export function appWithKeysView(a: { app: AppRow; keys: AppKeyRow[] }, nowMs: number) {
  return { ...appView(a.app), keys: a.keys.map((k) => keyView(k, nowMs)) };
}

/** An audit entry as the merchant sees it: its own users by login, the platform's operators as "platform". */
export function auditView(e: AuditRow) {
  const merchantUser = e.actorKind === 'MERCHANT_USER';
  return {
    id: e.id,
    at: e.at.toISOString(),
    actor: merchantUser ? actorLabel({ ...e, kind: e.actorKind }) : 'platform',
    actorKind: merchantUser ? 'MERCHANT_USER' : 'PLATFORM',
    channel: e.channel,
    sourceIp: merchantUser ? e.sourceIp : null,
    requestId: e.requestId,
    action: e.action,
    entityType: e.entityType,
    entityId: e.entityId,
    before: e.before,
    after: e.after,
  };
}

/** A page of the audit log, newest first, and where the next one starts. */
export function auditPageView(rows: AuditRow[], limit: number) {
  return { entries: rows.map(auditView), nextBefore: rows.length === limit ? rows.at(-1)!.id : null };
}

/** A page of the merchant's orders (the merchant's name left out: it is the merchant's own). */
export function ordersPageView(rows: Read<typeof portal.searchOrders>, limit: number) {
  return { orders: rows.map(({ merchantName: _n, ...o }) => o), nextCursor: nextOrderCursor(rows, limit) };
}

/** One order with its attempts (no payment material leaves through the portal either), refunds and events. */
export function orderDetailView(detail: Read<typeof portal.orderDetail>) {
  const { order: o, attempts, trades, refunds, events, duplicates } = detail;
  return {
    openOrderId: o.id,
    appId: o.appId,
    outTradeNo: o.outTradeNo,
    channel: o.channel,
    status: o.status,
    closedReason: o.closedReason,
    amountFen: o.amountFen,
    subject: o.subject,
    stateVersion: o.stateVersion,
    createdAt: o.createdAt.toISOString(),
    paidAt: o.paidAt?.toISOString() ?? null,
    expireAt: o.expireAt.toISOString(),
    attempts: attempts.map((a) => ({
      attemptId: a.id,
      seq: a.seq,
      state: a.state,
      expireAt: a.expireAt,
      createdAt: a.createdAt,
      trades: tradesView(trades, a.id),
    })),
    refunds: refunds.map((r) => ({
      refundAttemptId: r.id,
      outRefundNo: r.outRefundNo,
      amountFen: r.amountFen,
      state: r.state,
      reason: r.reason,
      failureReason: r.failureReason,
      createdAt: r.createdAt,
      updatedAt: r.updatedAt,
    })),
    events: events.map((e) => ({ ...e.event, payload: undefined, deliveries: e.deliveries })),
    // A buyer's second payment of the order (two ways paid at once), refunded automatically.
    duplicatePayments: duplicates.map((x) => ({
      attemptId: x.attemptId,
      tradeNo: x.tradeNo,
      amountFen: x.amountFen,
      refundState: x.refundState,
      createdAt: x.createdAt,
      updatedAt: x.updatedAt,
    })),
  };
}

export function refundsView(refunds: Read<typeof portal.listRefunds>) {
  return { refunds };
}

export function eventsView(events: Read<typeof portal.listEvents>) {
  return { events };
}

/** An event with its delivery log. */
export function eventDetailView(e: Read<typeof portal.eventDetail>) {
  return { ...e.event, deliveries: e.deliveries };
}

/** The merchant's settlement accounts and allocation, as the platform set them. */
export function settlementView(s: Read<typeof portal.settlement>) {
  return { accounts: s.accounts.map(accountView), allocation: s.allocation && allocationView(s.allocation) };
}
