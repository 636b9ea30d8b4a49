/**
 * WeChat Pay's notifications (回调通知): verified like an answer (the `Wechatpay-*` headers,
 * timestamp within 5 minutes of our clock, signature under a key we hold), then the `resource`
 * decrypted with AEAD_AES_256_GCM and the APIv3 key, then checked against our merchant number and
 * APPID. Anything that does not pass throws ProviderNotificationError (WeChat Pay sends it again).
 */
import type { KeyObject } from 'node:crypto';
import { type ProviderNotification, ProviderNoticeForOperator, ProviderNotificationError } from '../provider.ts';
import { whyUnverified } from './client.ts';
import type { PlatformKeys } from './platform-keys.ts';
import { decryptAesGcm } from './protocol.ts';

/**
 * A verified REFUND.ABNORMAL notice: the refund could not reach the buyer (a cancelled card) and
 * waits in WeChat Pay's refund account until the merchant redirects it. It is neither settled nor
 * failed (reporting it failed would release the amount for a second refund), so the ledger keeps
 * the refund PENDING; the notice is kept for an operator (kind REFUND_ABNORMAL, the refund id as
 * its subject, WeChat Pay's refund_id as `details.providerRef`) and acknowledged.
 */
function refundAbnormal(refundId: string, providerRef: string): ProviderNoticeForOperator {
  return new ProviderNoticeForOperator(
    'REFUND_ABNORMAL',
    refundId,
    `REFUND.ABNORMAL for ${refundId}: held by WeChat Pay until the merchant redirects it (merchant platform, abnormal refund)`,
    { providerRef },
  );
}

export interface NotificationContext {
  mchId: string;
  appId: string;
  apiV3Key: KeyObject;
  keys: PlatformKeys;
  nowMs: number;
}

function fail(why: string): never {
  throw new ProviderNotificationError(why);
}

function object(v: unknown, what: string): Record<string, unknown> {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) fail(`${what} is not a JSON object`);
  return v as Record<string, unknown>;
}

function text(o: Record<string, unknown>, key: string): string {
  const v = o[key];
  if (typeof v !== 'string' || v === '') fail(`resource.${key} missing`);
  return v;
}

function fen(o: Record<string, unknown>, key: string): number {
  const v = o[key];
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0) fail(`resource.amount.${key} is not an amount in fen`);
  return v;
}

export async function parseWechatPayNotification(
  rawBody: Buffer,
  headers: Record<string, string | string[] | undefined>,
  ctx: NotificationContext,
): Promise<ProviderNotification> {
  for (const [k, v] of Object.entries(headers)) {
    if (Array.isArray(v) && k.toLowerCase().startsWith('wechatpay-')) fail(`${k} given more than once`);
  }
  const why = await whyUnverified(headers, rawBody, ctx.keys, ctx.nowMs);
  if (why !== null) fail(why);

  let body: Record<string, unknown>;
  try {
    body = object(JSON.parse(rawBody.toString('utf8')), 'the body');
  } catch (err) {
    if (err instanceof ProviderNotificationError) throw err;
    fail('the body is not JSON');
  }
  const eventType = body.event_type;
  if (typeof eventType !== 'string') fail('event_type missing');
  const resource = object(body.resource, 'resource');
  if (resource.algorithm !== 'AEAD_AES_256_GCM') fail('resource.algorithm is not AEAD_AES_256_GCM');
  if (typeof resource.ciphertext !== 'string' || typeof resource.nonce !== 'string') fail('resource.ciphertext or nonce missing');
  const ad = typeof resource.associated_data === 'string' ? resource.associated_data : '';
  let plain: Record<string, unknown>;
  try {
    plain = object(JSON.parse(decryptAesGcm(ctx.apiV3Key, resource.nonce, ad, resource.ciphertext).toString('utf8')), 'resource');
  } catch (err) {
    if (err instanceof ProviderNotificationError) throw err;
    fail('resource does not decrypt with the APIv3 key');
  }

  if (text(plain, 'mchid') !== ctx.mchId) fail('resource.mchid is not our merchant number');
  if (eventType === 'TRANSACTION.SUCCESS') {
    if (text(plain, 'appid') !== ctx.appId) fail('resource.appid is not our APPID');
    if (plain.trade_state !== 'SUCCESS') fail('TRANSACTION.SUCCESS with a trade_state other than SUCCESS');
    const amount = object(plain.amount, 'resource.amount');
    return {
      kind: 'PAYMENT',
      attemptId: text(plain, 'out_trade_no'),
      state: 'PAID',
      reason: null,
      amountFen: fen(amount, 'total'),
      currency: text(amount, 'currency'),
      providerRef: text(plain, 'transaction_id'),
    };
  }
  if (eventType === 'REFUND.SUCCESS' || eventType === 'REFUND.CLOSED' || eventType === 'REFUND.ABNORMAL') {
    const status = eventType.slice('REFUND.'.length);
    if (plain.refund_status !== status) fail(`${eventType} with a refund_status other than ${status}`);
    const refundId = text(plain, 'out_refund_no');
    const providerRef = text(plain, 'refund_id');
    const amountFen = fen(object(plain.amount, 'resource.amount'), 'refund');
    if (status === 'ABNORMAL') throw refundAbnormal(refundId, providerRef);
    return status === 'SUCCESS'
      ? { kind: 'REFUND', refundId, state: 'SUCCEEDED', reason: null, amountFen, providerRef }
      : { kind: 'REFUND', refundId, state: 'FAILED', reason: 'REFUND_CLOSED', amountFen, providerRef };
  }
  fail(`unknown event_type ${eventType.slice(0, 64)}`);
}
