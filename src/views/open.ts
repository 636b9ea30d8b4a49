/**
 * The open API's projections: order snapshot, refund projection, settlement view (seed "Resources
 * and their fields"; decisions.md section 6); statement summaries and the event log.
 */
import type { PublishedPlatformKey } from '../domain/platform-keys.ts';
import { endedAttempt, needsNewAttempt, validAttempt } from '../domain/payability.ts';
import type { AttemptRow } from '../store/attempts.ts';
import type { OrderRow } from '../store/orders.ts';
import type { RefundRow } from '../store/refunds.ts';
import type { EventDetail, EventPage, SettlementView, StatementSummary } from '../usecases/results.ts';
import { encodeCursor } from '../domain/event-log.ts';
import { STATEMENT_TIME_ZONE, type StatementCompression, statementFileName } from '../domain/statements.ts';
import type { AppEventRow, DeliveryRow } from '../store/events.ts';

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

/** The path of a statement's file, as it is signed (docs/statements.md). */
export function statementFilePath(day: string, compression: StatementCompression): string {
  return `/api/open/v1/statements/${day}/file${compression === 'GZIP' ? '?compression=gzip' : ''}`;
}

/** The Content-Type of a statement file in its compression. */
export function statementContentType(compression: StatementCompression): string {
  return compression === 'GZIP' ? 'application/gzip' : 'text/csv; charset=utf-8';
}

/** A statement's summary: the day, the file's form, digest and size, its rows' totals, and where to fetch it. */
export function statementBody(s: StatementSummary): Record<string, unknown> {
  return {
    appId: s.appId,
    settlementDate: s.day.day,
    timeZone: STATEMENT_TIME_ZONE,
    periodStart: s.day.start.toISOString(),
    periodEnd: s.day.end.toISOString(),
    format: 'CSV',
    formatVersion: s.formatVersion,
    compression: s.compression,
    contentType: statementContentType(s.compression),
    fileName: statementFileName(s.appId, s.day.day, s.compression),
    rowCount: s.digest.rowCount,
    sizeBytes: s.digest.sizeBytes,
    sha256: s.digest.sha256,
    totals: s.digest.totals,
    filePath: statementFilePath(s.day.day, s.compression),
  };
}

function iso(d: Date | null): string | null {
  return d === null ? null : d.toISOString();
}

function attemptView(a: DeliveryRow): Record<string, unknown> {
  return {
    attemptNo: a.attemptNo,
    attemptedAt: a.attemptedAt.toISOString(),
    httpStatus: a.statusCode,
    error: a.error,
    durationMs: a.durationMs,
    responseExcerpt: a.responseExcerpt,
  };
}

/** An event of the app's log: what it says (the payload as delivered) and how its delivery went. */
function eventView(e: AppEventRow): Record<string, unknown> {
  return {
    eventId: e.eventId,
    eventType: e.eventType,
    occurredAt: e.createdAt.toISOString(),
    stateVersion: e.stateVersion,
    status: e.status,
    deliveryAttempts: e.deliveryAttempts,
    lastAttempt: e.lastAttempt === null ? null : attemptView(e.lastAttempt),
    nextAttemptAt: e.status === 'PENDING' ? e.nextAttemptAt.toISOString() : null,
    deliveredAt: iso(e.deliveredAt),
    payload: JSON.parse(e.payload) as unknown,
  };
}

export function eventPageBody(p: EventPage): Record<string, unknown> {
  return { events: p.events.map(eventView), nextCursor: p.next === null ? null : encodeCursor(p.next) };
}

export function eventDetailBody(e: EventDetail): Record<string, unknown> {
  return { ...eventView(e.event), deliveries: e.deliveries.map(attemptView) };
}

/**
 * The platform-keys read: every published key in the order they sign, with its state and validity
 * and its endorsement by the key before it; `currentKeyId` and `nextKeyId` name the key that signs
 * now and the one staged to sign next (null when none).
 */
export function platformKeysBody(keys: readonly PublishedPlatformKey[]) {
  return {
    currentKeyId: keys.find((k) => k.state === 'CURRENT')?.keyId ?? null,
    nextKeyId: keys.find((k) => k.state === 'NEXT')?.keyId ?? null,
    keys: keys.map((k) => ({
      keyId: k.keyId,
      publicKeyPem: k.publicKeyPem,
      state: k.state,
      signsFrom: k.signsFrom?.toISOString() ?? null,
      signsUntil: k.signsUntil?.toISOString() ?? null,
      endorsement: k.endorsement,
    })),
  };
}
