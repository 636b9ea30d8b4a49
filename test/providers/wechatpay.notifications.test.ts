/**
 * parseNotification of the WeChat Pay adapter: what is accepted (TRANSACTION.SUCCESS,
 * REFUND.SUCCESS, REFUND.CLOSED) and everything that is refused with ProviderNotificationError.
 */
import assert from 'node:assert/strict';
import { createCipheriv, randomBytes } from 'node:crypto';
import { describe, test } from 'node:test';
import { ProviderNoticeForOperator, ProviderNotificationError } from '../../src/providers/provider.ts';
import { WechatPayProvider } from '../../src/providers/wechatpay/wechatpay.ts';
import { APIV3_KEY, APP_ID, MCH_ID, signedHeaders, stubConfig } from './wechatpay-stub.ts';

function encrypt(plain: unknown, key = APIV3_KEY, ad = 'transaction') {
  const nonce = randomBytes(6).toString('hex');
  const c = createCipheriv('aes-256-gcm', Buffer.from(key), Buffer.from(nonce));
  c.setAAD(Buffer.from(ad));
  const ciphertext = Buffer.concat([c.update(JSON.stringify(plain)), c.final(), c.getAuthTag()]).toString('base64');
  return { original_type: ad, algorithm: 'AEAD_AES_256_GCM', ciphertext, associated_data: ad, nonce };
}

function notice(eventType: string, resource: unknown, o: { ad?: string; key?: string } = {}) {
  return Buffer.from(
    JSON.stringify({
      id: 'EV-2018022511223320873',
      create_time: '2025-05-20T13:29:35+08:00',
      resource_type: 'encrypt-resource',
      event_type: eventType,
      summary: 'x',
      resource: encrypt(resource, o.key, o.ad ?? (eventType.startsWith('REFUND') ? 'refund' : 'transaction')),
    }),
  );
}

const transaction = (o: Record<string, unknown> = {}) => ({
  appid: APP_ID,
  mchid: MCH_ID,
  out_trade_no: 'att_1',
  transaction_id: '4200000000000000000000000001',
  trade_type: 'MWEB',
  trade_state: 'SUCCESS',
  success_time: '2025-05-20T13:29:35+08:00',
  amount: { total: 1234, payer_total: 1234, currency: 'CNY', payer_currency: 'CNY' },
  ...o,
});
const refundResource = (status: string, o: Record<string, unknown> = {}) => ({
  mchid: MCH_ID,
  out_trade_no: 'att_1',
  transaction_id: '4200000000000000000000000001',
  out_refund_no: 'rf_1',
  refund_id: '50300000000000000000000001',
  refund_status: status,
  user_received_account: '支付用户零钱',
  amount: { total: 1234, refund: 500, payer_total: 1234, payer_refund: 500 },
  ...o,
});

const clock = Date.now();
const provider = new WechatPayProvider(stubConfig(), {
  notifyUrl: 'https://shop.example/api/provider/v1/notifications/wechatpay',
  clock: { now: () => clock },
  fetch: (async () => {
    throw new Error('no HTTP in these tests');
  }) as typeof fetch,
});

function parse(body: Buffer, headers: Record<string, string | string[]> = signedHeaders(body, clock)) {
  return provider.parseNotification(body, headers);
}
async function refused(p: Promise<unknown>, why: RegExp): Promise<void> {
  await assert.rejects(p, (e: unknown) => e instanceof ProviderNotificationError && why.test(e.message), String(why));
}

describe('accepted notifications', () => {
  test('TRANSACTION.SUCCESS: PAYMENT PAID with the amount in fen, the currency and the transaction_id', async () => {
    assert.deepEqual(await parse(notice('TRANSACTION.SUCCESS', transaction())), {
      kind: 'PAYMENT',
      attemptId: 'att_1',
      state: 'PAID',
      reason: null,
      amountFen: 1234,
      currency: 'CNY',
      providerRef: '4200000000000000000000000001',
    });
  });

  test('REFUND.SUCCESS: REFUND SUCCEEDED; REFUND.CLOSED: REFUND FAILED (nothing was refunded)', async () => {
    const base = { kind: 'REFUND', refundId: 'rf_1', amountFen: 500, providerRef: '50300000000000000000000001' };
    assert.deepEqual(await parse(notice('REFUND.SUCCESS', refundResource('SUCCESS'))), { ...base, state: 'SUCCEEDED', reason: null });
    assert.deepEqual(await parse(notice('REFUND.CLOSED', refundResource('CLOSED'))), { ...base, state: 'FAILED', reason: 'REFUND_CLOSED' });
  });

  test('header names in any case, with Wechatpay-Signature-Type', async () => {
    const body = notice('TRANSACTION.SUCCESS', transaction());
    const h = Object.fromEntries(Object.entries(signedHeaders(body, clock)).map(([k, v]) => [k.toUpperCase(), v]));
    assert.equal((await parse(body, { ...h, 'wechatpay-signature-type': 'WECHATPAY2-SHA256-RSA2048' })).kind, 'PAYMENT');
  });

  test('a timestamp up to 5 minutes away either way', async () => {
    const body = notice('TRANSACTION.SUCCESS', transaction());
    assert.equal((await parse(body, signedHeaders(body, clock - 299_000))).kind, 'PAYMENT');
    assert.equal((await parse(body, signedHeaders(body, clock + 299_000))).kind, 'PAYMENT');
  });
});

describe('refused notifications', () => {
  const body = notice('TRANSACTION.SUCCESS', transaction());

  test('REFUND.ABNORMAL: verified, but not a state change: a ProviderNoticeForOperator naming the refund', async () => {
    await assert.rejects(
      parse(notice('REFUND.ABNORMAL', refundResource('ABNORMAL'))),
      (e: unknown) =>
        e instanceof ProviderNoticeForOperator &&
        e instanceof ProviderNotificationError &&
        e.kind === 'REFUND_ABNORMAL' &&
        e.subjectId === 'rf_1' &&
        e.details.providerRef === '50300000000000000000000001',
    );
  });

  test('a signature missing, malformed, of another body, a probe, or of another key', async () => {
    const h = signedHeaders(body, clock);
    const { 'Wechatpay-Signature': _s, ...noSig } = h;
    await refused(parse(body, noSig), /missing/);
    await refused(parse(body, { ...h, 'Wechatpay-Signature': 'not base64 !' }), /bad signature/);
    await refused(parse(body, signedHeaders(Buffer.from('{}'), clock)), /bad signature/);
    await refused(parse(body, { ...h, 'Wechatpay-Signature': `WECHATPAY/SIGNTEST/${h['Wechatpay-Signature']}` }), /bad signature/);
    await refused(parse(Buffer.concat([body, Buffer.from(' ')]), h), /bad signature/);
    await refused(parse(body, signedHeaders(body, clock, 'PUB_KEY_ID_0199999999')), /key we do not hold/);
  });

  test('a stale timestamp (over 5 minutes), or a malformed one', async () => {
    await refused(parse(body, signedHeaders(body, clock - 301_000)), /5 minutes/);
    await refused(parse(body, signedHeaders(body, clock + 301_000)), /5 minutes/);
    await refused(parse(body, { ...signedHeaders(body, clock), 'Wechatpay-Timestamp': '17e8' }), /malformed/);
  });

  test('a Wechatpay-* header given twice, or another signature type', async () => {
    const h = signedHeaders(body, clock);
    await refused(parse(body, { ...h, 'wechatpay-nonce': [h['Wechatpay-Nonce']!, 'x'] }), /more than once/);
    await refused(parse(body, { ...h, 'Wechatpay-Signature-Type': 'WECHATPAY2-SM2-WITH-SM3' }), /Signature-Type/);
  });

  test('another merchant number or APPID in the resource', async () => {
    await refused(parse(notice('TRANSACTION.SUCCESS', transaction({ mchid: '1900000001' }))), /mchid/);
    await refused(parse(notice('TRANSACTION.SUCCESS', transaction({ appid: 'wx0000000000000000' }))), /appid/);
    await refused(parse(notice('REFUND.SUCCESS', refundResource('SUCCESS', { mchid: '1900000001' }))), /mchid/);
  });

  test('a resource that does not decrypt: another APIv3 key, a changed ciphertext or tag, another associated_data, another algorithm', async () => {
    await refused(parse(notice('TRANSACTION.SUCCESS', transaction(), { key: 'Z'.repeat(32) })), /decrypt/);
    const o = JSON.parse(body.toString('utf8'));
    const ct = Buffer.from(o.resource.ciphertext, 'base64');
    for (const at of [0, ct.length - 1]) {
      const bad = Buffer.from(ct);
      bad[at]! ^= 1;
      const b = Buffer.from(JSON.stringify({ ...o, resource: { ...o.resource, ciphertext: bad.toString('base64') } }));
      await refused(parse(b), /decrypt/);
    }
    const b2 = Buffer.from(JSON.stringify({ ...o, resource: { ...o.resource, associated_data: 'refund' } }));
    await refused(parse(b2), /decrypt/);
    const b3 = Buffer.from(JSON.stringify({ ...o, resource: { ...o.resource, algorithm: 'AEAD_SM4_GCM' } }));
    await refused(parse(b3), /algorithm/);
  });

  test('an unknown event type, or an event that contradicts its resource', async () => {
    await refused(parse(notice('TRANSACTION.FAIL', transaction({ trade_state: 'PAYERROR' }))), /unknown event_type/);
    await refused(parse(notice('COMPLAINT.CREATE', transaction())), /unknown event_type/);
    await refused(parse(notice('TRANSACTION.SUCCESS', transaction({ trade_state: 'NOTPAY' }))), /trade_state/);
    await refused(parse(notice('REFUND.SUCCESS', refundResource('CLOSED'))), /refund_status/);
  });

  test('amounts that are not integers in fen, or missing fields', async () => {
    await refused(parse(notice('TRANSACTION.SUCCESS', transaction({ amount: { total: 12.34, currency: 'CNY' } }))), /amount/);
    await refused(parse(notice('TRANSACTION.SUCCESS', transaction({ amount: { total: '1234', currency: 'CNY' } }))), /amount/);
    await refused(parse(notice('TRANSACTION.SUCCESS', transaction({ transaction_id: undefined }))), /transaction_id/);
    await refused(parse(notice('REFUND.SUCCESS', refundResource('SUCCESS', { amount: { refund: -1 } }))), /amount/);
  });

  test('a body that is not JSON, or without a resource', async () => {
    const notJson = Buffer.from('event_type=TRANSACTION.SUCCESS');
    await refused(parse(notJson), /not JSON/);
    const noResource = Buffer.from(JSON.stringify({ event_type: 'TRANSACTION.SUCCESS' }));
    await refused(parse(noResource), /resource/);
  });
});
