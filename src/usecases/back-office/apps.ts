/** The back office's apps: an app of a merchant, its settings and its public keys. */
import { DomainError } from '../../domain/errors.ts';
import { newId } from '../../domain/ids.ts';
import type { Actor, AuditActor } from '../../domain/operators.ts';
import * as events from '../../store/events.ts';
import * as merchants from '../../store/merchants.ts';
import type { AppPatch, AppRow } from '../../store/merchants.ts';
import * as orderInserts from '../../store/order-inserts.ts';
import { audited } from '../audit.ts';
import { nowOf } from '../deps.ts';
import { type BackOfficeDeps, checkCidrs, checkNotify, checkPublicKeyPem, keyFingerprint, merchantOf, notFound } from './common.ts';

function appFields(a: AppRow) {
  const { createdAt: _c, updatedAt: _u, ...rest } = a;
  return rest;
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
  /** null: the instances' default (STATEMENT_DOWNLOADS_PER_APP). */
  statementDownloadsAtOnce?: number | null;
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
    statementDownloadsAtOnce: b.statementDownloadsAtOnce ?? null,
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
  if ('statementDownloadsAtOnce' in b) patch.statementDownloadsAtOnce = b.statementDownloadsAtOnce;
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
