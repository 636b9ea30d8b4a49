/**
 * The WeChat Pay simulator as a gateway (what a merchant meets: signature checks, signed answers,
 * the buyer's page, notifications and their retries, refunds going ABNORMAL) and the adapter's
 * platform-certificate mode against it (download, rotation, refresh limits).
 */
import assert from 'node:assert/strict';
import { createPublicKey, createSecretKey } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { ProviderNoticeForOperator, ProviderNotificationError, ProviderUncertainError } from '../../src/providers/provider.ts';
import { whyUnverified } from '../../src/providers/wechatpay/client.ts';
import { PublicKeyPlatform } from '../../src/providers/wechatpay/platform-keys.ts';
import { authorizationHeader, newNonce, requestMessage, signMessage } from '../../src/providers/wechatpay/protocol.ts';
import { WechatPayProvider } from '../../src/providers/wechatpay/wechatpay.ts';
import { newId } from '../../src/domain/ids.ts';
import { type WechatPayHarness, startHarness } from './wechatpay-harness.ts';
import type { CreateAttemptInput } from '../../src/providers/provider.ts';

function input(o: Partial<CreateAttemptInput> = {}): CreateAttemptInput {
  return {
    attemptId: newId.attempt(),
    openOrderId: newId.order(),
    channel: 'WECHAT_H5',
    amountFen: 1000,
    currency: 'CNY',
    subject: 'Simulator test',
    expireAt: new Date(Date.now() + 15 * 60_000),
    payerClientIp: '203.0.113.7',
    returnUrl: 'https://shop.example/back',
    ...o,
  };
}

async function waitFor<T>(fn: () => T | undefined | null, ms = 3000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = fn();
    if (v) return v;
    if (Date.now() > end) throw new Error('waited in vain');
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('the simulator as WeChat Pay', () => {
  let h: WechatPayHarness;
  before(async () => {
    h = await startHarness();
  });
  after(() => h.close());

  /** A raw signed request, its parts changeable. */
  async function raw(
    o: {
      method?: string;
      path?: string;
      body?: string;
      mchId?: string;
      serial?: string;
      ts?: number;
      tamper?: boolean;
      auth?: string | null;
    } = {},
  ) {
    const method = o.method ?? 'GET';
    const p = o.path ?? `/v3/pay/transactions/out-trade-no/att_none0000000000?mchid=${h.config.mchId}`;
    const body = o.body ?? '';
    const ts = o.ts ?? Math.floor(Date.now() / 1000);
    const nonce = newNonce();
    const signature = signMessage(requestMessage(method, p, ts, nonce, body + (o.tamper ? ' ' : '')), h.config.privateKey);
    const auth = authorizationHeader({
      mchId: o.mchId ?? h.config.mchId,
      nonce,
      timestamp: ts,
      serialNo: o.serial ?? h.config.certSerial,
      signature,
    });
    const headers: Record<string, string> = { 'user-agent': 'test', accept: 'application/json' };
    if (o.auth !== null) headers.authorization = o.auth ?? auth;
    if (method === 'POST') headers['content-type'] = 'application/json';
    const res = await fetch(h.sim.url + p, { method, headers, body: method === 'POST' ? body : undefined });
    const text = await res.text();
    const hs: Record<string, string> = {};
    res.headers.forEach((v, k) => (hs[k] = v));
    return { status: res.status, json: text ? JSON.parse(text) : null, headers: hs, body: Buffer.from(text) };
  }

  test('a well-signed request is answered, and the answer is signed with the public key', async () => {
    const r = await raw();
    assert.equal(r.status, 404);
    assert.equal(r.json.code, 'ORDER_NOT_EXIST');
    const keys = new PublicKeyPlatform(h.sim.keys.publicKeyId, createPublicKey(h.sim.keys.platformPublicKeyPem));
    assert.equal(await whyUnverified(r.headers, r.body, keys, Date.now()), null);
  });

  test('a bad Authorization is refused with 401 SIGN_ERROR, unsigned', async () => {
    for (const o of [
      { tamper: true },
      { mchId: '1900009999' },
      { serial: 'ABCDEF0123456789' },
      { ts: Math.floor(Date.now() / 1000) - 400 },
      { auth: null },
      { auth: 'Bearer x' },
    ]) {
      const r = await raw(o);
      assert.equal(r.status, 401, JSON.stringify(o));
      assert.equal(r.json.code, 'SIGN_ERROR');
      assert.equal(r.headers['wechatpay-signature'], undefined);
    }
  });

  test("the body's mchid and appid must be the merchant's", async () => {
    const body = (o: Record<string, unknown>) =>
      JSON.stringify({
        appid: h.config.appId,
        mchid: h.config.mchId,
        description: 'x',
        out_trade_no: 'att_0000000001',
        notify_url: 'https://shop.example/n',
        amount: { total: 1, currency: 'CNY' },
        scene_info: { payer_client_ip: '1.2.3.4', h5_info: { type: 'Wap' } },
        ...o,
      });
    const a = await raw({ method: 'POST', path: '/v3/pay/transactions/h5', body: body({ mchid: '1900009999' }) });
    assert.deepEqual([a.status, a.json.code], [400, 'PARAM_ERROR']);
    const b = await raw({ method: 'POST', path: '/v3/pay/transactions/h5', body: body({ appid: 'wx0000000000000000' }) });
    assert.deepEqual([b.status, b.json.code], [400, 'APPID_MCHID_NOT_MATCH']);
    const c = await raw({ path: '/v3/pay/transactions/out-trade-no/att_0000000001?mchid=1900009999' });
    assert.deepEqual([c.status, c.json.code], [400, 'PARAM_ERROR']);
  });

  test('the buyer pays on the h5_url page and is sent to redirect_url; the payment is notified', async () => {
    const i = input();
    const r = await h.provider.createAttempt(i);
    assert.equal(r.outcome, 'ACCEPTED');
    const page = r.outcome === 'ACCEPTED' ? r.material.redirectUrl! : '';
    assert.ok(page.startsWith(`${h.sim.url}/pay/h5?prepay_id=wx`));
    assert.ok(page.endsWith('&redirect_url=https%3A%2F%2Fshop.example%2Fback'));
    const html = await (await fetch(page)).text();
    assert.match(html, /¥10\.00/);
    assert.match(html, /id="pay"/);
    const prepay = new URL(page).searchParams.get('prepay_id')!;
    const before = h.delivered.length;
    const res = await fetch(`${h.sim.url}/pay/h5/pay`, {
      method: 'POST',
      redirect: 'manual',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ prepay_id: prepay, redirect_url: 'https://shop.example/back' }).toString(),
    });
    assert.equal(res.status, 303);
    assert.equal(res.headers.get('location'), 'https://shop.example/back');
    const q = await h.provider.queryPayment(i.attemptId);
    assert.equal(q.state, 'PAID');
    assert.match(q.providerRef!, /^4200\d{24}$/);
    const n = h.delivered[before]!;
    assert.equal(n.headers['Wechatpay-Signature-Type'], 'WECHATPAY2-SHA256-RSA2048');
    assert.deepEqual(await h.provider.parseNotification(n.rawBody, n.headers), {
      kind: 'PAYMENT',
      attemptId: i.attemptId,
      state: 'PAID',
      reason: null,
      amountFen: 1000,
      currency: 'CNY',
      providerRef: q.providerRef,
    });
  });

  test('a failed payment is PAYERROR (FAILED, not notified); an expired order cannot be paid', async () => {
    const a = input();
    await h.provider.createAttempt(a);
    h.sim.controls.fail(a.attemptId);
    assert.equal((await h.provider.queryPayment(a.attemptId)).state, 'FAILED');
    const b = input();
    await h.provider.createAttempt(b);
    h.sim.controls.expire(b.attemptId);
    await assert.rejects(h.sim.controls.pay(b.attemptId), /cannot be paid/);
    assert.equal((await h.provider.queryPayment(b.attemptId)).state, 'OPEN');
    assert.deepEqual(await h.provider.closePayment(b.attemptId), { outcome: 'CLOSED' });
  });

  test('a repeated create with other parameters is OUT_TRADE_NO_USED: queried, then rejected', async () => {
    const i = input();
    await h.provider.createAttempt(i);
    await assert.rejects(h.provider.createAttempt({ ...i, amountFen: 999 }), /OUT_TRADE_NO_USED/);
  });

  test('faults: an answer with a bad or probe signature, or an unsigned error, is uncertain; the work was done', async () => {
    for (const fault of [{ kind: 'badSignature' }, { kind: 'probeSignature' }] as const) {
      const i = input();
      h.sim.controls.programFault('create', fault);
      await assert.rejects(h.provider.createAttempt(i), ProviderUncertainError);
      assert.equal((await h.provider.queryPayment(i.attemptId)).state, 'OPEN');
    }
    h.sim.controls.programFault('query', { kind: 'error', status: 404, code: 'ORDER_NOT_EXIST', signed: false });
    await assert.rejects(h.provider.queryPayment(newId.attempt()), ProviderUncertainError);
    h.sim.controls.programFault('query', { kind: 'error', status: 500, code: 'SYSTEM_ERROR' });
    await assert.rejects(h.provider.queryPayment(newId.attempt()), ProviderUncertainError);
  });

  test('HTTP controls: /__sim/orders/{no}/pay and /__sim/state', async () => {
    const i = input();
    await h.provider.createAttempt(i);
    const r = await fetch(`${h.sim.url}/__sim/orders/${i.attemptId}/pay`, { method: 'POST' });
    assert.equal(r.status, 200);
    assert.equal(((await r.json()) as { trade_state: string }).trade_state, 'SUCCESS');
    const state = (await (await fetch(`${h.sim.url}/__sim/state`)).json()) as { orders: { outTradeNo: string; tradeState: string }[] };
    assert.ok(state.orders.some((o) => o.outTradeNo === i.attemptId && o.tradeState === 'SUCCESS'));
    const f = await fetch(`${h.sim.url}/__sim/faults`, {
      method: 'POST',
      body: JSON.stringify({ endpoint: 'close', fault: { kind: 'error', status: 500, code: 'SYSTEM_ERROR' } }),
    });
    assert.equal(f.status, 204);
    await assert.rejects(h.provider.closePayment(i.attemptId), ProviderUncertainError);
  });

  test('a refund that goes ABNORMAL: PENDING at the query, its notice refused as not a state change; then SUCCESS', async () => {
    const i = input();
    await h.provider.createAttempt(i);
    await h.sim.controls.pay(i.attemptId);
    h.sim.controls.nextRefundsSettleAs('ABNORMAL');
    const refundId = newId.refund();
    const refunded = await h.provider.refund({
      refundId,
      paidAttemptId: i.attemptId,
      amountFen: 300,
      paymentAmountFen: 1000,
      reason: null,
    });
    const abnormal = await waitFor(() =>
      h.sim.controls
        .sentNotifications()
        .find((n) => n.eventType === 'REFUND.ABNORMAL' && h.sim.controls.refund(refundId)?.status === 'ABNORMAL'),
    );
    assert.deepEqual(await h.provider.queryRefund({ refundId, paidAttemptId: i.attemptId }), { state: 'PENDING', amountFen: 300 });
    await assert.rejects(
      h.provider.parseNotification(abnormal.rawBody, abnormal.headers),
      (e: unknown) =>
        e instanceof ProviderNoticeForOperator &&
        e.kind === 'REFUND_ABNORMAL' &&
        e.subjectId === refundId &&
        e.details.providerRef === refunded.providerRef,
    );
    await h.sim.controls.settleRefund(refundId, 'SUCCESS');
    assert.deepEqual(await h.provider.queryRefund({ refundId, paidAttemptId: i.attemptId }), { state: 'SUCCEEDED', amountFen: 300 });
    const success = h.sim.controls.sentNotifications().at(-1)!;
    assert.equal((await h.provider.parseNotification(success.rawBody, success.headers)).kind, 'REFUND');
  });
});

describe('notification delivery', () => {
  test('sent again until answered 2xx, each try signed anew; duplicated or lost on demand', async () => {
    let answers = [500, 503, 204];
    const h = await startHarness({ answer: () => answers.shift() ?? 204 });
    try {
      const i = input();
      await h.provider.createAttempt(i);
      await h.sim.controls.pay(i.attemptId);
      const tries = await waitFor(() => {
        const t = h.sim.controls.sentNotifications().filter((n) => n.eventType === 'TRANSACTION.SUCCESS');
        return t.length >= 3 ? t : null;
      });
      assert.deepEqual(
        tries.map((t) => t.status),
        [500, 503, 204],
      );
      assert.equal(new Set(tries.map((t) => t.headers['Wechatpay-Nonce'])).size, 3);
      for (const t of tries) assert.equal((await h.provider.parseNotification(t.rawBody, t.headers)).kind, 'PAYMENT');
      await new Promise((r) => setTimeout(r, 1000));
      assert.equal(h.sim.controls.sentNotifications().length, 3, 'nothing after the 204');

      answers = [];
      h.sim.controls.programNotifications({ duplicate: 1 });
      const d = input();
      await h.provider.createAttempt(d);
      await h.sim.controls.pay(d.attemptId);
      assert.equal(h.delivered.length, 3);
      h.sim.controls.programNotifications({ lose: 1 });
      const l = input();
      await h.provider.createAttempt(l);
      await h.sim.controls.pay(l.attemptId);
      assert.equal(h.delivered.length, 3, 'a lost notification is not sent');
      assert.equal((await h.provider.queryPayment(l.attemptId)).state, 'PAID', 'the query still tells');
    } finally {
      await h.close();
    }
  });
});

describe('platform-certificate mode', () => {
  test('certificates are downloaded on first use, and again when an answer names a new one', async () => {
    let offset = 0;
    const h = await startHarness({ mode: 'certificate', provider: { clock: { now: () => Date.now() + offset } } });
    try {
      assert.equal(h.sim.controls.requestCount('certificates'), 0);
      assert.equal((await h.provider.queryPayment(newId.attempt())).state, 'NOT_FOUND');
      assert.equal(h.sim.controls.requestCount('certificates'), 1);
      await h.provider.queryPayment(newId.attempt());
      assert.equal(h.sim.controls.requestCount('certificates'), 1, 'kept');
      h.sim.controls.rotateCertificate();
      offset = 61_000;
      // The request still names the old certificate, which the simulator honours; a notification
      // is signed with the newest one: an unknown serial, so the list is fetched again.
      const i = input();
      await h.provider.createAttempt(i);
      await h.sim.controls.pay(i.attemptId);
      const n = h.delivered.at(-1)!;
      assert.equal(n.headers['Wechatpay-Serial'], h.sim.keys.certificates.at(-1)!.serial);
      assert.equal((await h.provider.parseNotification(n.rawBody, n.headers)).kind, 'PAYMENT');
      assert.equal(h.sim.controls.requestCount('certificates'), 2);
    } finally {
      await h.close();
    }
  });

  test('an unknown serial fetches the list at most once a minute; a forged one is refused', async () => {
    const h = await startHarness({ mode: 'certificate' });
    try {
      await h.provider.queryPayment(newId.attempt());
      const headers = {
        'wechatpay-timestamp': String(Math.floor(Date.now() / 1000)),
        'wechatpay-nonce': 'x',
        'wechatpay-signature': 'AAAA',
        'wechatpay-serial': 'FFFF0000',
      };
      for (let k = 0; k < 3; k++) await assert.rejects(h.provider.parseNotification(Buffer.from('{}'), headers), ProviderNotificationError);
      assert.equal(h.sim.controls.requestCount('certificates'), 1, 'the list was fetched less than a minute ago: not again');
    } finally {
      await h.close();
    }
  });

  test('a certificate list that cannot be fetched or decrypted: uncertain, and fetched again a minute later', async () => {
    let offset = 0;
    const h = await startHarness({ mode: 'certificate', provider: { clock: { now: () => Date.now() + offset } } });
    try {
      h.sim.controls.programFault('certificates', { kind: 'error', status: 500, code: 'SYSTEM_ERROR' });
      await assert.rejects(h.provider.queryPayment(newId.attempt()), ProviderUncertainError);
      await assert.rejects(h.provider.queryPayment(newId.attempt()), ProviderUncertainError, 'not fetched again at once');
      assert.equal(h.sim.controls.requestCount('certificates'), 1);
      offset = 61_000;
      assert.equal((await h.provider.queryPayment(newId.attempt())).state, 'NOT_FOUND');
      assert.equal(h.sim.controls.requestCount('certificates'), 2);
      // Another APIv3 key: the list does not decrypt, nothing can be verified.
      const wrong = new WechatPayProvider(
        { ...h.config, apiV3Key: createSecretKey(Buffer.from('w'.repeat(32))) },
        { notifyUrl: 'https://shop.example/n' },
      );
      await assert.rejects(wrong.queryPayment(newId.attempt()), ProviderUncertainError);
    } finally {
      await h.close();
    }
  });
});
