/**
 * Alipay notifications: verified before anything else is read, then read strictly. Notices are
 * signed here with a test key by Alipay's rule (every parameter but sign and sign_type, empty
 * values left out, sorted); the vectors test (alipay-vectors.test.ts) checks the same path with a
 * notice Alipay really sent.
 */
import assert from 'node:assert/strict';
import { createSign, generateKeyPairSync } from 'node:crypto';
import { describe, test } from 'node:test';
import { AlipayProvider, NOTIFICATION_LIMITS } from '../../src/providers/alipay/alipay.ts';
import { ProviderNotificationError } from '../../src/providers/provider.ts';

const APP_ID = '2021000000000042';
const alipay = generateKeyPairSync('rsa', { modulusLength: 2048 });
const stranger = generateKeyPairSync('rsa', { modulusLength: 2048 });
const merchant = generateKeyPairSync('rsa', { modulusLength: 2048 });

const provider = new AlipayProvider(
  {
    appId: APP_ID,
    privateKey: merchant.privateKey,
    mode: { kind: 'PUBLIC_KEY', alipayPublicKey: alipay.publicKey },
    gatewayUrl: 'http://127.0.0.1:9/gateway.do',
    timeoutMs: 1000,
  },
  { notifyUrl: 'https://merchant.example/n' },
);

type Params = [string, string][];

function paidNotice(o: Record<string, string> = {}): Params {
  return Object.entries({
    notify_time: '2026-11-26 12:00:01',
    notify_type: 'trade_status_sync',
    notify_id: 'ac05099524730693a8b330c5ecf72da9786',
    charset: 'utf-8',
    version: '1.0',
    app_id: APP_ID,
    auth_app_id: APP_ID,
    out_trade_no: 'att_0123456789abcdefghjkmnpq',
    trade_no: '2026112622001400001234567890',
    trade_status: 'TRADE_SUCCESS',
    total_amount: '12.34',
    receipt_amount: '12.34',
    subject: '茶 & cake',
    gmt_payment: '2026-11-26 12:00:00',
    fund_bill_list: '[{"amount":"12.34","fundChannel":"ALIPAYACCOUNT"}]',
    sign_type: 'RSA2',
    ...o,
  });
}

/** Signs by Alipay's notification rule and form-encodes, parameters in the order given. */
function signed(params: Params, key = alipay.privateKey): Buffer {
  const content = params
    .filter(([k, v]) => k !== 'sign' && k !== 'sign_type' && v !== '')
    .sort(([a], [b]) => (a < b ? -1 : 1))
    .map(([k, v]) => `${k}=${v}`)
    .join('&');
  const sign = createSign('RSA-SHA256').update(content, 'utf8').sign(key, 'base64');
  return Buffer.from(new URLSearchParams([...params.filter(([k]) => k !== 'sign'), ['sign', sign]]).toString());
}

async function refused(body: Buffer, pattern: RegExp): Promise<void> {
  await assert.rejects(
    () => provider.parseNotification(body, { 'content-type': 'application/x-www-form-urlencoded; charset=utf-8' }),
    (e: unknown) => e instanceof ProviderNotificationError && pattern.test(e.message),
  );
}

describe('alipay notifications: accepted', () => {
  test('TRADE_SUCCESS: PAYMENT PAID with the amount in fen, trade_no as reference', async () => {
    assert.deepEqual(await provider.parseNotification(signed(paidNotice()), {}), {
      kind: 'PAYMENT',
      attemptId: 'att_0123456789abcdefghjkmnpq',
      state: 'PAID',
      reason: null,
      amountFen: 1234,
      currency: null,
      providerRef: '2026112622001400001234567890',
    });
  });

  test('TRADE_FINISHED is PAID too (sent when the trade can no longer be refunded)', async () => {
    assert.equal(
      ((await provider.parseNotification(signed(paidNotice({ trade_status: 'TRADE_FINISHED' })), {})) as { state: string }).state,
      'PAID',
    );
  });

  test('TRADE_CLOSED without a refund: PAYMENT CLOSED', async () => {
    const n = await provider.parseNotification(signed(paidNotice({ trade_status: 'TRADE_CLOSED' })), {});
    assert.equal(n.kind === 'PAYMENT' && n.state, 'CLOSED');
  });

  test('a refund (out_biz_no, refund_fee, gmt_refund), partial or full: REFUND SUCCEEDED for that refund id', async () => {
    for (const status of ['TRADE_SUCCESS', 'TRADE_CLOSED']) {
      const n = await provider.parseNotification(
        signed(
          paidNotice({
            trade_status: status,
            out_biz_no: 'rf_0123456789abcdefghjkmnpq',
            refund_fee: '12.34',
            gmt_refund: '2026-11-26 12:05:00.123',
          }),
        ),
        {},
      );
      assert.deepEqual(n, {
        kind: 'REFUND',
        refundId: 'rf_0123456789abcdefghjkmnpq',
        state: 'SUCCEEDED',
        reason: null,
        providerRef: '2026112622001400001234567890',
      });
    }
  });

  test('a parameter with an empty value is outside the signed content, as in Alipay’s SDKs', async () => {
    assert.equal((await provider.parseNotification(signed(paidNotice({ body: '' })), {})).kind, 'PAYMENT');
  });

  test('a currency, when the notice carries one (trans_currency)', async () => {
    const n = await provider.parseNotification(signed(paidNotice({ trans_currency: 'CNY' })), {});
    assert.equal(n.kind === 'PAYMENT' && n.currency, 'CNY');
  });

  test('the acknowledgement Alipay reads: `success` or `fail`, text/plain', () => {
    assert.deepEqual(provider.notificationAck(true), { status: 200, contentType: 'text/plain; charset=utf-8', body: 'success' });
    assert.deepEqual(provider.notificationAck(false, 'x'), { status: 200, contentType: 'text/plain; charset=utf-8', body: 'fail' });
  });
});

describe('alipay notifications: refused (ProviderNotificationError)', () => {
  test('signed by another key', () => refused(signed(paidNotice(), stranger.privateKey), /bad signature/));

  test('a signed value changed afterwards', async () => {
    const body = signed(paidNotice()).toString().replace('total_amount=12.34', 'total_amount=99.99');
    await refused(Buffer.from(body), /bad signature/);
  });

  test('a parameter added after signing', async () => {
    await refused(Buffer.concat([signed(paidNotice()), Buffer.from('&refund_fee=1.00')]), /bad signature/);
  });

  test('no sign, a malformed sign, or a sign_type other than RSA2', async () => {
    await refused(Buffer.from(new URLSearchParams(paidNotice()).toString()), /missing or malformed sign/);
    await refused(Buffer.from(`${new URLSearchParams(paidNotice()).toString()}&sign=not%20base64!`), /missing or malformed sign/);
    await refused(signed(paidNotice({ sign_type: 'RSA' })), /sign_type is not RSA2/);
  });

  test('the app_id of another app, even signed by Alipay', () =>
    refused(signed(paidNotice({ app_id: '2021000000000043' })), /app_id is not ours/));

  test('an unknown or missing trade_status (WAIT_BUYER_PAY is not acted on)', async () => {
    await refused(signed(paidNotice({ trade_status: 'WAIT_BUYER_PAY' })), /unknown trade_status/);
    await refused(signed(paidNotice({ trade_status: 'TRADE_REFUNDING' })), /unknown trade_status/);
    await refused(signed(paidNotice().filter(([k]) => k !== 'trade_status')), /unknown trade_status/);
  });

  test('another notify_type, a charset other than utf-8', async () => {
    await refused(signed(paidNotice({ notify_type: 'servicemarket_order_notify' })), /unknown notify_type/);
    await refused(signed(paidNotice({ charset: 'GBK' })), /charset is not utf-8/);
  });

  test('no out_trade_no, no valid total_amount, a payment without trade_no, out_biz_no without a refund', async () => {
    await refused(signed(paidNotice().filter(([k]) => k !== 'out_trade_no')), /no out_trade_no/);
    await refused(signed(paidNotice({ total_amount: '12.3' })), /no valid total_amount/);
    await refused(signed(paidNotice({ total_amount: '-12.34' })), /no valid total_amount/);
    await refused(signed(paidNotice().filter(([k]) => k !== 'trade_no')), /without trade_no/);
    await refused(signed(paidNotice({ out_biz_no: 'rf_x' })), /out_biz_no without a refund/);
  });

  test('a parameter given twice, even when both copies are signed alike', async () => {
    const body = signed(paidNotice()).toString();
    await refused(Buffer.from(`${body}&trade_status=TRADE_SUCCESS`), /given twice/);
    await refused(Buffer.from(`trade_status=TRADE_CLOSED&${body}`), /given twice/);
  });

  test(`values over ${NOTIFICATION_LIMITS.maxValueChars} characters, more than ${NOTIFICATION_LIMITS.maxParams} parameters, long names`, async () => {
    await refused(signed(paidNotice({ subject: 'x'.repeat(NOTIFICATION_LIMITS.maxValueChars + 1) })), /over 4096 characters/);
    const many = paidNotice(Object.fromEntries(Array.from({ length: NOTIFICATION_LIMITS.maxParams }, (_, i) => [`extra_${i}`, 'v'])));
    await refused(signed(many), /more than 100 parameters/);
    await refused(signed(paidNotice({ ['n'.repeat(65)]: 'v' })), /malformed parameter name/);
  });

  test('not a form: JSON, empty, not UTF-8, a malformed escape, a part without =', async () => {
    await refused(Buffer.from(JSON.stringify({ kind: 'PAYMENT', state: 'PAID' })), /not name=value/);
    await refused(Buffer.alloc(0), /empty/);
    await refused(Buffer.from([0x61, 0x3d, 0xff, 0xfe]), /not UTF-8/);
    await refused(Buffer.from(`${signed(paidNotice()).toString()}&x=%E4%B8`), /malformed percent escape/);
    await refused(Buffer.from(`${signed(paidNotice()).toString()}&novalue`), /not name=value/);
  });

  test('verification comes first: an unsigned notice with every other fault is refused for its signature', async () => {
    const body = new URLSearchParams(paidNotice({ app_id: 'x', trade_status: 'NOPE', total_amount: 'x' })).toString();
    await refused(Buffer.from(`${body}&sign=${encodeURIComponent(Buffer.alloc(256).toString('base64'))}`), /bad signature/);
  });
});
