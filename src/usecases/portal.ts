/**
 * What a merchant user does in the portal (docs/portal.md), always within its own merchant: the
 * merchant's orders, refunds and events (redelivery with the limits of the merchant's event log),
 * statements, settlement accounts, apps (notify URL, IP allowlist) and their keys (added, and
 * retired after an overlap the merchant chooses), and the audit log of what changed in its things.
 *
 * Every function takes the merchant user's actor and answers only what belongs to the actor's
 * merchant: an id of another merchant's order, event, app or key is the neutral NOT_FOUND, the
 * same as an id that does not exist (test/http/portal-isolation.test.ts tries every endpoint).
 * Who may call which function is the surface's check, from the role table of
 * src/domain/merchant-users.ts. Changes are the back office's (usecases/back-office/apps.ts) with the
 * merchant user as actor, audited with the merchant.
 */
import { createHash, createPublicKey } from 'node:crypto';
import type { Readable } from 'node:stream';
import { DomainError } from '../domain/errors.ts';
import { EVENT_ID_RE } from '../domain/event-log.ts';
import { MAX_KEY_OVERLAP_SECONDS, type MerchantActor } from '../domain/merchant-users.ts';
import type { StatementCompression } from '../domain/statements.ts';
import * as reads from '../store/back-office-reads.ts';
import type { OrderSearch } from '../store/back-office-reads.ts';
import * as events from '../store/events.ts';
import * as merchants from '../store/merchants.ts';
import type { AppKeyRow, AppRow } from '../store/merchants.ts';
import * as attemptsStore from '../store/attempts.ts';
import * as orders from '../store/orders.ts';
import * as refunds from '../store/refunds.ts';
import * as trades from '../store/trades.ts';
import * as audit from '../store/audit.ts';
import type { AuditRow } from '../store/audit.ts';
import { audited } from './audit.ts';
import { addAppKey, updateApp } from './back-office/apps.ts';
import type { BackOfficeDeps } from './back-office/common.ts';
import { type Caller, nowOf } from './deps.ts';
import { requestRedelivery } from './event-log.ts';
import { statementFile, statementSummary } from './statements.ts';
import type { StatementSummary } from './results.ts';

const notFound = (entity: string) => new DomainError('NOT_FOUND', undefined, { entity });

// --- the merchant and its apps ---------------------------------------------------------------------

export async function merchantOverview(d: BackOfficeDeps, actor: MerchantActor) {
  const m = await merchants.getMerchant(d.db, actor.merchantId);
  if (!m) throw notFound('merchant');
  return { merchant: m, apps: await merchants.listApps(d.db, m.id) };
}

/** An app of the actor's merchant (another merchant's is NOT_FOUND). */
async function ownApp(d: Pick<BackOfficeDeps, 'db'>, actor: MerchantActor, appId: string): Promise<AppRow> {
  const app = await merchants.getApp(d.db, appId);
  if (!app || app.merchantId !== actor.merchantId) throw notFound('app');
  return app;
}

export async function appWithKeys(d: BackOfficeDeps, actor: MerchantActor, appId: string): Promise<{ app: AppRow; keys: AppKeyRow[] }> {
  const app = await ownApp(d, actor, appId);
  return { app, keys: await merchants.listAppKeys(d.db, app.id) };
}

/** The app fields a merchant changes itself: where its events go, and from where its requests may come. */
export async function changeApp(
  d: BackOfficeDeps,
  actor: MerchantActor,
  appId: string,
  b: { notifyUrl?: string | null; ipAllowlist?: string[] },
): Promise<AppRow> {
  await ownApp(d, actor, appId);
  const patch: { notifyUrl?: string | null; ipAllowlist?: string[] } = {};
  if ('notifyUrl' in b) patch.notifyUrl = b.notifyUrl ?? null;
  if ('ipAllowlist' in b) patch.ipAllowlist = b.ipAllowlist;
  return updateApp(d, actor, appId, patch);
}

// --- key rotation ------------------------------------------------------------------------------------

/** A new public key of the app, valid at once beside the others (the checks of the back office: RSA, 2048 to 4096 bits). */
export async function addKey(d: BackOfficeDeps, actor: MerchantActor, appId: string, keyId: string, publicKeyPem: string) {
  await ownApp(d, actor, appId);
  return addAppKey(d, actor, appId, keyId, publicKeyPem);
}

function fingerprint(pem: string): string {
  const der = createPublicKey(pem).export({ type: 'spki', format: 'der' });
  return `SHA256:${createHash('sha256').update(der).digest('base64')}`;
}

/** A key accepted at `at` (active, and not yet at the end of its validity). */
const validAt = (k: AppKeyRow, at: number) => k.status === 'ACTIVE' && (k.validUntil === null || k.validUntil.getTime() > at);

/**
 * Retires a key after an overlap (`afterSeconds` from now, 0 to 30 days): until then requests
 * signed with it are accepted beside the new key's, from then on refused. Refused unless another
 * key of the app stays valid past that instant (add the new key first: a rotation never leaves the
 * app without a key). `afterSeconds` null takes a retirement back while the key is still valid.
 */
export async function retireKey(
  d: BackOfficeDeps,
  actor: MerchantActor,
  appId: string,
  keyId: string,
  afterSeconds: number | null,
): Promise<AppKeyRow> {
  await ownApp(d, actor, appId);
  if (afterSeconds !== null && (!Number.isInteger(afterSeconds) || afterSeconds < 0 || afterSeconds > MAX_KEY_OVERLAP_SECONDS)) {
    throw new DomainError('VALIDATION_FAILED', `afterSeconds must be 0 to ${MAX_KEY_OVERLAP_SECONDS}`);
  }
  const now = nowOf(d).getTime();
  const k = await audited(d, actor, async (tx, record) => {
    // The app's row locked: two retirements of its keys are judged one after the other.
    await merchants.getApp(tx, appId, true);
    const keys = await merchants.listAppKeys(tx, appId);
    const key = keys.find((x) => x.keyId === keyId);
    if (!key) throw notFound('key');
    if (!validAt(key, now)) throw new DomainError('STATE_INVALID', 'the key is no longer valid');
    const until = afterSeconds === null ? null : new Date(now + afterSeconds * 1000);
    // Another key must stay valid with no end: one whose own retirement is set would leave the app
    // without a key once both have ended.
    if (until !== null && !keys.some((x) => x.keyId !== keyId && validAt(x, Number.POSITIVE_INFINITY))) {
      throw new DomainError(
        'STATE_INVALID',
        'no other key of the app stays valid after that time (a key being retired does not count): add the new key first',
      );
    }
    const row = (await merchants.setAppKeyValidUntil(tx, appId, keyId, until))!;
    await record({
      action: 'appKey.retire',
      entityType: 'appKey',
      entityId: `${appId}/${keyId}`,
      before: { validUntil: key.validUntil },
      after: { validUntil: row.validUntil, fingerprint: fingerprint(row.publicKeyPem) },
    });
    return row;
  });
  d.appChanged(appId);
  return k;
}

// --- orders, refunds, events -------------------------------------------------------------------------

export function searchOrders(d: BackOfficeDeps, actor: MerchantActor, f: Omit<OrderSearch, 'merchantId'>) {
  return reads.searchOrders(d.db, { ...f, merchantId: actor.merchantId });
}

export async function orderDetail(d: BackOfficeDeps, actor: MerchantActor, orderId: string) {
  const order = /^ord_[A-Za-z0-9]{1,60}$/.test(orderId) ? await orders.getOrder(d.db, orderId) : null;
  if (!order || order.merchantId !== actor.merchantId) throw notFound('order');
  const [attempts, tradeRows, refundRows, eventRows, duplicates] = await Promise.all([
    attemptsStore.attemptsOf(d.db, order.id),
    trades.tradesOfOrder(d.db, order.id),
    refunds.refundsOfOrder(d.db, order.id),
    events.eventsOfOrder(d.db, order.id),
    refunds.duplicatesOfOrder(d.db, order.id),
  ]);
  const withDeliveries = await Promise.all(eventRows.map((e) => events.getEventWithDeliveries(d.db, e.eventId)));
  return { order, attempts, trades: tradeRows, refunds: refundRows, events: withDeliveries.filter((e) => e !== null), duplicates };
}

export function listRefunds(d: BackOfficeDeps, actor: MerchantActor, f: { state: string | null; appId: string | null; limit: number }) {
  return reads.listRefunds(d.db, { ...f, merchantId: actor.merchantId });
}

export function listEvents(d: BackOfficeDeps, actor: MerchantActor, f: { status: string | null; appId: string | null; limit: number }) {
  return events.listEvents(d.db, { ...f, merchantId: actor.merchantId });
}

/** An event of one of the merchant's apps, with its delivery log. */
export async function eventDetail(d: BackOfficeDeps, actor: MerchantActor, eventId: string) {
  const e = EVENT_ID_RE.test(eventId) ? await events.getEventWithDeliveries(d.db, eventId) : null;
  if (!e) throw notFound('event');
  await ownApp(d, actor, e.event.appId).catch(() => {
    throw notFound('event');
  });
  return e;
}

/**
 * Delivers an event again, with the limits of the merchant's event log (once a minute per event,
 * 20 a minute per app: RATE_LIMITED with when to retry), audited.
 */
export async function redeliverEvent(d: BackOfficeDeps, actor: MerchantActor, eventId: string): Promise<{ nextAttemptAt: Date }> {
  const e = await eventDetail(d, actor, eventId);
  const r = await audited(d, actor, async (tx, record) => {
    const out = await requestRedelivery(tx, e.event.appId, eventId, nowOf(d));
    if (out.outcome === 'NOT_FOUND') throw notFound('event');
    if (out.outcome === 'TOO_SOON') {
      throw new DomainError('RATE_LIMITED', 'an event can be delivered again once a minute, and 20 events of an app a minute', {
        retryAfterSeconds: Math.max(1, Math.ceil(out.retryAfterMs / 1000)),
      });
    }
    await record({
      action: 'event.redeliver',
      entityType: 'event',
      entityId: eventId,
      before: { status: e.event.status, attempts: e.event.attempts },
      after: { status: 'PENDING' },
    });
    return out;
  });
  d.wakeWorkers();
  return { nextAttemptAt: r.nextAttemptAt };
}

// --- statements and settlement -------------------------------------------------------------------------

/** The caller an app's statement is made for (as the open API's, for the app's own merchant). */
async function appCaller(d: BackOfficeDeps, actor: MerchantActor, appId: string): Promise<Caller> {
  const app = await ownApp(d, actor, appId);
  const m = (await merchants.getMerchant(d.db, app.merchantId))!;
  return { app, merchantEntityType: m.entityType, requestId: actor.requestId, receivedAtMs: d.clock.now() };
}

export async function statement(
  d: BackOfficeDeps,
  actor: MerchantActor,
  appId: string,
  day: string,
  compression: StatementCompression,
): Promise<StatementSummary> {
  return statementSummary(d, await appCaller(d, actor, appId), day, compression);
}

export async function statementDownload(
  d: BackOfficeDeps,
  actor: MerchantActor,
  appId: string,
  day: string,
  compression: StatementCompression,
): Promise<{ summary: StatementSummary; body: Readable }> {
  return statementFile(d, await appCaller(d, actor, appId), day, compression);
}

export async function settlement(d: BackOfficeDeps, actor: MerchantActor) {
  const [accounts, allocation] = await Promise.all([
    merchants.listAccounts(d.db, actor.merchantId),
    merchants.getAllocation(d.db, actor.merchantId),
  ]);
  return { accounts, allocation };
}

// --- the audit log -------------------------------------------------------------------------------------

/** The changes made to the merchant's things, by its users or by the platform's operators, newest first. */
export function auditLog(
  d: BackOfficeDeps,
  actor: MerchantActor,
  f: { action: string | null; from: Date | null; to: Date | null; beforeId: string | null; limit: number },
): Promise<AuditRow[]> {
  return audit.listAuditEntries(d.db, {
    operatorName: null,
    entityType: null,
    entityId: null,
    requestId: null,
    ...f,
    merchantId: actor.merchantId,
  });
}
