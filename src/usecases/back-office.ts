/**
 * Back-office use cases: merchants, apps and their keys, settlement accounts, allocation and fee
 * rules, the platform's IP policy and signing keys, and the operations on orders and events.
 * Input is already parsed by the surface (its schema); the rules that span fields and rows are
 * checked here. Refusals are DomainErrors that the admin surface maps to its `{code, message}`
 * answers. Every change takes the actor who makes it (built by the surface: the admin API, the
 * console, the CLI) and writes its audit entry in the change's own transaction (usecases/audit.ts);
 * who may make it was decided by the surface from the role table (src/domain/operators.ts).
 */
import { createHash, createPublicKey } from 'node:crypto';
import { DomainError } from '../domain/errors.ts';
import { newId } from '../domain/ids.ts';
import type { Allocation, EntityType, FeeRule } from '../domain/money.ts';
import type { IpPolicyView } from '../domain/ip-policy.ts';
import type { Actor, AuditActor } from '../domain/operators.ts';
import { checkNotifyUrl, type NotifyUrlPolicy } from '../events/notify-url.ts';
import { CidrList } from '../net/ip.ts';
import type { Tx } from '../store/db.ts';
import * as discrepancies from '../store/discrepancies.ts';
import * as events from '../store/events.ts';
import * as merchants from '../store/merchants.ts';
import type { AppPatch, AppRow } from '../store/merchants.ts';
import * as attempts from '../store/attempts.ts';
import * as orderInserts from '../store/order-inserts.ts';
import * as orders from '../store/orders.ts';
import * as refunds from '../store/refunds.ts';
import * as trades from '../store/trades.ts';
import { audited, recorder } from './audit.ts';
import { closeOrderById } from './close-order.ts';
import { type UseCaseDeps, nowOf } from './deps.ts';
import type { CloseState } from './results.ts';

export interface BackOfficeDeps extends UseCaseDeps {
  notifyUrlPolicy: NotifyUrlPolicy;
  ipPolicy: {
    view(): IpPolicyView;
    update(patch: Partial<IpPolicyView>, after?: (tx: Tx, before: IpPolicyView, next: IpPolicyView) => Promise<void>): Promise<void>;
  };
  /** The platform signing keys (src/platform/keys.ts): a rotation writes a key file. */
  keys: { rotate(activateAfterMs?: number): Promise<{ keyId: string; publicKeyPem: string; activatesAt: Date }> };
  /** An app, its keys or its allowlist changed: caches drop it. */
  appChanged(appId: string): void;
  /** A merchant's receiving configuration (accounts, allocation, fee rule) changed. */
  merchantConfigChanged(merchantId: string): void;
}

const notFound = (entity: string) => new DomainError('NOT_FOUND', undefined, { entity });

async function merchantOf(d: BackOfficeDeps, merchantId: string, tx?: Tx) {
  // In a change's transaction the merchant's row is locked: its configuration changes one at a time.
  const m = await merchants.getMerchant(tx ?? d.db, merchantId, tx !== undefined);
  if (!m) throw notFound('merchant');
  return m;
}

/** What an audit entry keeps of a public key: its SHA-256 fingerprint (of the SPKI DER), not the PEM. */
function keyFingerprint(pem: string): string {
  const der = createPublicKey(pem).export({ type: 'spki', format: 'der' });
  return `SHA256:${createHash('sha256').update(der).digest('base64')}`;
}

function appFields(a: AppRow) {
  const { createdAt: _c, updatedAt: _u, ...rest } = a;
  return rest;
}

/** A PEM public key only (a pasted private key is refused, never "derived from"), RSA 2048-4096; answers its SPKI PEM. */
export function checkPublicKeyPem(pem: string): string {
  const t = pem.trim();
  if (/PRIVATE KEY/.test(t)) throw new DomainError('VALIDATION_FAILED', 'publicKeyPem holds a private key; register only the public key');
  if (!/^-----BEGIN (RSA )?PUBLIC KEY-----[\s\S]+-----END (RSA )?PUBLIC KEY-----$/.test(t) || t.split('-----BEGIN ').length !== 2) {
    throw new DomainError('VALIDATION_FAILED', 'publicKeyPem must be one PEM public key (-----BEGIN PUBLIC KEY-----)');
  }
  let key: ReturnType<typeof createPublicKey>;
  try {
    key = createPublicKey(t);
  } catch {
    throw new DomainError('VALIDATION_FAILED', 'publicKeyPem cannot be parsed');
  }
  const bits = key.asymmetricKeyDetails?.modulusLength ?? 0;
  if (key.asymmetricKeyType !== 'rsa' || bits < 2048 || bits > 4096) {
    throw new DomainError('VALIDATION_FAILED', `publicKeyPem must be an RSA key of 2048 to 4096 bits`);
  }
  return key.export({ type: 'spki', format: 'pem' }).toString();
}

/** CIDR entries in their canonical form; refused with the field's name. */
export function checkCidrs(field: string, entries: string[]): string[] {
  try {
    return CidrList.parse(entries).toJSON();
  } catch (err) {
    throw new DomainError('VALIDATION_FAILED', `${field}: ${(err as Error).message}`);
  }
}

function checkNotify(d: BackOfficeDeps, url: string): string {
  const problem = checkNotifyUrl(url, d.notifyUrlPolicy);
  if (problem) throw new DomainError('VALIDATION_FAILED', `notifyUrl: ${problem}`);
  return url;
}

// --- merchants and apps ------------------------------------------------------------------------

export function createMerchant(d: BackOfficeDeps, actor: Actor, m: { name: string; entityType: EntityType }) {
  return audited(d, actor, async (tx, record) => {
    const row = await merchants.insertMerchant(tx, { id: newId.merchant(), ...m }, nowOf(d));
    await record({ action: 'merchant.create', entityType: 'merchant', entityId: row.id, before: null, after: row, merchantId: row.id });
    return row;
  });
}

export function listMerchants(d: BackOfficeDeps) {
  return merchants.listMerchants(d.db, 500);
}

export async function merchantDetail(d: BackOfficeDeps, merchantId: string) {
  const m = await merchantOf(d, merchantId);
  const [apps, accounts, allocation, feeRule] = await Promise.all([
    merchants.listApps(d.db, m.id),
    merchants.listAccounts(d.db, m.id),
    merchants.getAllocation(d.db, m.id),
    merchants.getFeeRule(d.db, m.id),
  ]);
  return { merchant: m, apps, accounts, allocation, feeRule };
}

export interface AppInput {
  notifyUrl?: string | null;
  channels?: string[];
  tradeScopes?: string[];
  voidedLinks?: string[];
  ipAllowlist?: string[];
  paymentWindowSeconds?: number;
  dailyAmountCeilingFen?: number | null;
  rateLimitPerSecond?: number;
}

export async function createApp(d: BackOfficeDeps, actor: Actor, merchantId: string, b: AppInput): Promise<AppRow> {
  await merchantOf(d, merchantId);
  const input = {
    id: newId.app(),
    merchantId,
    notifyUrl: b.notifyUrl == null ? null : checkNotify(d, b.notifyUrl),
    channels: b.channels ?? ['ALIPAY_H5', 'WECHAT_H5'],
    tradeScopes: b.tradeScopes ?? ['PHYSICAL_FACE_TO_FACE', 'CARD_VIRTUAL'],
    voidedLinks: b.voidedLinks ?? [],
    ipAllowlist: b.ipAllowlist === undefined ? [] : checkCidrs('ipAllowlist', b.ipAllowlist),
    paymentWindowSeconds: b.paymentWindowSeconds ?? 900,
    dailyAmountCeilingFen: b.dailyAmountCeilingFen ?? null,
    rateLimitPerSecond: b.rateLimitPerSecond ?? 1000,
  };
  return audited(d, actor, async (tx, record) => {
    const app = await merchants.insertApp(tx, input, nowOf(d));
    await record({ action: 'app.create', entityType: 'app', entityId: app.id, before: null, after: appFields(app), merchantId });
    return app;
  });
}

export async function getApp(d: BackOfficeDeps, appId: string): Promise<AppRow> {
  const a = await merchants.getApp(d.db, appId);
  if (!a) throw notFound('app');
  return a;
}

export async function updateApp(
  d: BackOfficeDeps,
  actor: AuditActor,
  appId: string,
  b: AppInput & { status?: 'ACTIVE' | 'DISABLED' },
): Promise<AppRow> {
  const patch: AppPatch = {};
  if ('notifyUrl' in b) patch.notifyUrl = b.notifyUrl == null ? null : checkNotify(d, b.notifyUrl);
  if ('channels' in b) patch.channels = b.channels;
  if ('tradeScopes' in b) patch.tradeScopes = b.tradeScopes;
  if ('voidedLinks' in b) patch.voidedLinks = b.voidedLinks;
  if ('ipAllowlist' in b) patch.ipAllowlist = checkCidrs('ipAllowlist', b.ipAllowlist!);
  if ('paymentWindowSeconds' in b) patch.paymentWindowSeconds = b.paymentWindowSeconds;
  if ('dailyAmountCeilingFen' in b) patch.dailyAmountCeilingFen = b.dailyAmountCeilingFen;
  if ('rateLimitPerSecond' in b) patch.rateLimitPerSecond = b.rateLimitPerSecond;
  if ('status' in b) patch.status = b.status;
  const now = nowOf(d);
  const app = await audited(d, actor, async (tx, record) => {
    const before = await merchants.getApp(tx, appId, true);
    if (!before) throw notFound('app');
    const after = (await merchants.updateApp(tx, appId, patch, now))!;
    await record({
      action: 'app.update',
      entityType: 'app',
      entityId: appId,
      before: appFields(before),
      after: appFields(after),
      merchantId: before.merchantId,
    });
    // The daily counter is kept only while a ceiling is set: recount from the orders when it changes.
    if ('dailyAmountCeilingFen' in b) await orderInserts.forgetDailyAmounts(tx, appId);
    return after;
  });
  d.appChanged(appId);
  if (typeof patch.notifyUrl === 'string') {
    // Events that waited for a notify URL go out now rather than at their next retry.
    await events.rescheduleAppEvents(d.db, appId, now);
    d.wakeWorkers();
  }
  return app;
}

export async function addAppKey(d: BackOfficeDeps, actor: AuditActor, appId: string, keyId: string, publicKeyPem: string) {
  const pem = checkPublicKeyPem(publicKeyPem);
  const app = await getApp(d, appId);
  const k = await audited(d, actor, async (tx, record) => {
    const row = await merchants.insertAppKey(tx, { appId, keyId, publicKeyPem: pem }, nowOf(d));
    if (!row) throw new DomainError('CONFLICT', `key ${keyId} already exists for this app`);
    await record({
      action: 'appKey.add',
      entityType: 'appKey',
      entityId: `${appId}/${keyId}`,
      before: null,
      after: { appId, keyId, status: row.status, fingerprint: keyFingerprint(pem) },
      merchantId: app.merchantId,
    });
    return row;
  });
  d.appChanged(appId);
  return k;
}

export async function listAppKeys(d: BackOfficeDeps, appId: string) {
  await getApp(d, appId);
  return merchants.listAppKeys(d.db, appId);
}

export async function setAppKeyStatus(d: BackOfficeDeps, actor: Actor, appId: string, keyId: string, status: 'ACTIVE' | 'DISABLED') {
  const k = await audited(d, actor, async (tx, record) => {
    const before = await merchants.getAppKey(tx, appId, keyId, true);
    if (!before) throw notFound('key');
    const row = (await merchants.setAppKeyStatus(tx, appId, keyId, status))!;
    await record({
      action: 'appKey.setStatus',
      entityType: 'appKey',
      entityId: `${appId}/${keyId}`,
      before: { status: before.status },
      after: { status: row.status },
      merchantId: (await merchants.getApp(tx, appId))?.merchantId ?? null,
    });
    return row;
  });
  d.appChanged(appId);
  return k;
}

// --- settlement accounts, allocation, fee rule -------------------------------------------------

export async function addSettlementAccount(
  d: BackOfficeDeps,
  actor: Actor,
  merchantId: string,
  b: { entityType: EntityType; entityName: string; merchantNo: string; cardNumber: string; agreedCeilingFen?: number | null },
) {
  const id = newId.account();
  const account = await audited(d, actor, async (tx, record) => {
    await merchantOf(d, merchantId, tx);
    // Only the last four digits are kept; the full number is never stored, logged or audited.
    await merchants.insertAccount(
      tx,
      {
        id,
        merchantId,
        entityType: b.entityType,
        entityName: b.entityName,
        merchantNo: b.merchantNo,
        cardLast4: b.cardNumber.slice(-4),
        agreedCeilingFen: b.agreedCeilingFen ?? null,
      },
      nowOf(d),
    );
    const row = (await merchants.listAccounts(tx, merchantId)).find((a) => a.accountId === id)!;
    await record({
      action: 'settlementAccount.create',
      entityType: 'settlementAccount',
      entityId: id,
      before: null,
      after: row,
      merchantId,
    });
    return row;
  });
  d.merchantConfigChanged(merchantId);
  return account;
}

export async function listSettlementAccounts(d: BackOfficeDeps, merchantId: string) {
  await merchantOf(d, merchantId);
  return merchants.listAccounts(d.db, merchantId);
}

export async function setAllocation(
  d: BackOfficeDeps,
  actor: Actor,
  merchantId: string,
  b: {
    mode: Allocation['mode'];
    participants: string[];
    ratios?: { accountId: string; shareBps: number }[];
    unavailablePolicy: Allocation['unavailablePolicy'];
  },
) {
  await merchantOf(d, merchantId);
  const { mode, participants } = b;
  const ratios = b.ratios ?? null;
  const owned = new Set((await merchants.listAccounts(d.db, merchantId)).map((a) => a.accountId));
  for (const p of participants) {
    if (!owned.has(p)) throw new DomainError('VALIDATION_FAILED', `participants: ${p} is not a settlement account of this merchant`);
  }
  if (mode === 'SINGLE' && participants.length !== 1) throw new DomainError('VALIDATION_FAILED', 'SINGLE takes exactly one participant');
  if (mode === 'RATIO') {
    if (ratios === null) throw new DomainError('VALIDATION_FAILED', 'RATIO requires ratios');
    if (participants.length < 2) throw new DomainError('VALIDATION_FAILED', 'RATIO takes 2 to 4 participants');
    const ids = ratios.map((r) => r.accountId);
    if (new Set(ids).size !== ids.length || ids.length !== participants.length || !ids.every((id) => participants.includes(id))) {
      throw new DomainError('VALIDATION_FAILED', 'ratios must name each participant exactly once');
    }
    const sum = ratios.reduce((s, r) => s + r.shareBps, 0);
    if (sum !== 10000) throw new DomainError('VALIDATION_FAILED', `ratios shareBps must sum to 10000 (got ${sum})`);
  } else if (ratios !== null) {
    throw new DomainError('VALIDATION_FAILED', 'ratios are allowed only with mode RATIO');
  }
  // Ratios are stored in participant order.
  const ordered =
    ratios === null ? null : participants.map((p) => ({ accountId: p, shareBps: ratios.find((r) => r.accountId === p)!.shareBps }));
  const allocation = await audited(d, actor, async (tx, record) => {
    await merchantOf(d, merchantId, tx);
    const before = await merchants.getAllocation(tx, merchantId);
    await merchants.upsertAllocation(
      tx,
      merchantId,
      { mode, participants, ratios: ordered, unavailablePolicy: b.unavailablePolicy },
      nowOf(d),
    );
    const after = (await merchants.getAllocation(tx, merchantId))!;
    await record({ action: 'allocation.set', entityType: 'allocation', entityId: merchantId, before, after, merchantId });
    return after;
  });
  d.merchantConfigChanged(merchantId);
  return allocation;
}

export async function getAllocation(d: BackOfficeDeps, merchantId: string) {
  await merchantOf(d, merchantId);
  const a = await merchants.getAllocation(d.db, merchantId);
  if (!a) throw notFound('allocation');
  return a;
}

export async function setFeeRule(d: BackOfficeDeps, actor: Actor, merchantId: string, rule: FeeRule) {
  const fee = await audited(d, actor, async (tx, record) => {
    await merchantOf(d, merchantId, tx);
    const before = await merchants.getFeeRule(tx, merchantId);
    await merchants.upsertFeeRule(tx, merchantId, rule, nowOf(d));
    const after = await merchants.getFeeRule(tx, merchantId);
    await record({ action: 'feeRule.set', entityType: 'feeRule', entityId: merchantId, before, after: { ...after }, merchantId });
    return after;
  });
  d.merchantConfigChanged(merchantId);
  return fee;
}

export async function getFeeRule(d: BackOfficeDeps, merchantId: string) {
  await merchantOf(d, merchantId);
  const r = await merchants.getFeeRule(d.db, merchantId);
  if (!r) throw notFound('fee rule');
  return r;
}

// --- orders, events, duplicate payments --------------------------------------------------------

export async function orderDetail(d: BackOfficeDeps, orderId: string) {
  const order = await orders.getOrder(d.db, orderId);
  if (!order) throw notFound('order');
  const [attemptRows, refundRows, eventRows, duplicates, tradeRows] = await Promise.all([
    attempts.attemptsOf(d.db, order.id),
    refunds.refundsOfOrder(d.db, order.id),
    events.eventsOfOrder(d.db, order.id),
    refunds.duplicatesOfOrder(d.db, order.id),
    trades.tradesOfOrder(d.db, order.id),
  ]);
  return { order, attempts: attemptRows, refunds: refundRows, events: eventRows, duplicates, trades: tradeRows };
}

/** Back-office close: closedReason MERCHANT_CLOSED, same provider confirmation as the API close. */
export async function closeOrderByOperator(
  d: BackOfficeDeps,
  actor: Actor,
  orderId: string,
): Promise<{ closeState: CloseState; order: orders.OrderRow }> {
  const now = nowOf(d);
  try {
    return await closeOrderById(d, orderId, 'MERCHANT_CLOSED', {}, (tx, c) =>
      recorder(
        tx,
        actor,
        now,
      )({
        action: 'order.close',
        entityType: 'order',
        entityId: orderId,
        before: { status: c.before.status, closedReason: c.before.closedReason, closePending: null },
        after: { status: c.after.status, closedReason: c.after.closedReason, closePending: c.after.closePending },
        merchantId: c.before.merchantId,
      }),
    );
  } catch (err) {
    if (err instanceof DomainError && err.code === 'PROVIDER_REJECTED') {
      throw new DomainError('PROVIDER_REJECTED', 'the provider rejected the close; the order is unchanged');
    }
    throw err;
  }
}

export function listEvents(d: BackOfficeDeps, f: { status: string | null; appId: string | null; limit: number }) {
  return events.listEvents(d.db, f);
}

export async function eventDetail(d: BackOfficeDeps, eventId: string) {
  const e = await events.getEventWithDeliveries(d.db, eventId);
  if (!e) throw notFound('event');
  return e;
}

/** Redelivery of a dead or delivered event: it goes back to the queue, due now by the dispatcher's clock. */
export async function redeliverEvent(d: BackOfficeDeps, actor: Actor, eventId: string): Promise<void> {
  await audited(d, actor, async (tx, record) => {
    const before = await events.getEventWithDeliveries(tx, eventId);
    const r = await events.requeueEvent(tx, eventId, nowOf(d));
    if (r === 'NOT_FOUND') throw notFound('event');
    if (r === 'ALREADY_QUEUED') throw new DomainError('STATE_INVALID', 'the event is already queued for delivery');
    await record({
      action: 'event.redeliver',
      entityType: 'event',
      entityId: eventId,
      before: { status: before!.event.status, attempts: before!.event.attempts },
      after: { status: 'PENDING', attempts: 0 },
      merchantId: (await merchants.getApp(tx, before!.event.appId))?.merchantId ?? null,
    });
  });
  d.wakeWorkers();
}

export function listDuplicates(d: BackOfficeDeps) {
  return refunds.listDuplicates(d.db, 500);
}

// --- provider discrepancies ----------------------------------------------------------------------

export function listDiscrepancies(
  d: BackOfficeDeps,
  f: { status: 'OPEN' | 'RESOLVED' | null; source: discrepancies.DiscrepancySource | null; provider: string | null; limit: number },
) {
  return discrepancies.listDiscrepancies(d.db, f);
}

/** An operator has dealt with it (with the provider, or by hand in the ledger). */
export async function resolveDiscrepancy(d: BackOfficeDeps, actor: Actor, id: string) {
  return audited(d, actor, async (tx, record) => {
    const r = await discrepancies.resolveDiscrepancy(tx, id, nowOf(d));
    if (!r) throw new DomainError('NOT_FOUND', undefined, { entity: 'open discrepancy' });
    await record({
      action: 'discrepancy.resolve',
      entityType: 'discrepancy',
      entityId: id,
      before: { status: 'OPEN' },
      after: { status: r.status },
    });
    return r;
  });
}

// --- the platform: IP policy, signing keys ------------------------------------------------------

/** A partial change of the platform source-IP policy; the fields given replace the stored ones. */
export async function setIpPolicy(
  d: BackOfficeDeps,
  actor: Actor,
  b: { trustedProxies?: string[]; allowlist?: string[] | null; denylist?: string[]; allowIpv4?: boolean; allowIpv6?: boolean },
): Promise<IpPolicyView> {
  const now = nowOf(d);
  await d.ipPolicy.update(
    {
      trustedProxies: b.trustedProxies === undefined ? undefined : checkCidrs('trustedProxies', b.trustedProxies),
      allowlist: b.allowlist === undefined ? undefined : b.allowlist === null ? null : checkCidrs('allowlist', b.allowlist),
      denylist: b.denylist === undefined ? undefined : checkCidrs('denylist', b.denylist),
      allowIpv4: b.allowIpv4,
      allowIpv6: b.allowIpv6,
    },
    (tx, before, after) =>
      recorder(
        tx,
        actor,
        now,
      )({ action: 'ipPolicy.set', entityType: 'ipPolicy', entityId: 'platform', before: { ...before }, after: { ...after } }),
  );
  return d.ipPolicy.view();
}

/**
 * A new platform signing key, published now and signing `activateAfterMs` later. The key is a
 * file (src/platform/keys.ts), not a row: it is written inside the audit entry's transaction, so
 * a rotation that fails leaves no entry; the one case left is a commit that fails after the file
 * was written (the database lost mid-rotation), where the key exists without its entry.
 */
export function rotatePlatformKey(d: BackOfficeDeps, actor: Actor, activateAfterMs: number) {
  return audited(d, actor, async (_tx, record) => {
    let k: { keyId: string; publicKeyPem: string; activatesAt: Date };
    try {
      k = await d.keys.rotate(activateAfterMs);
    } catch (err) {
      throw new DomainError('STATE_INVALID', (err as Error).message);
    }
    await record({
      action: 'platformKey.rotate',
      entityType: 'platformKey',
      entityId: k.keyId,
      before: null,
      after: { keyId: k.keyId, activatesAt: k.activatesAt, fingerprint: keyFingerprint(k.publicKeyPem) },
    });
    return k;
  });
}
