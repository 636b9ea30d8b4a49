/**
 * The Alipay simulator where the contract does not look: refusing badly signed requests the way
 * the gateway does, the buyer pages and the return to return_url, notifications retried until
 * answered `success` (and the delay, duplicate and loss levers), trades made only once scanned,
 * expiry, certificate mode end to end, and the HTTP control API.
 */
import assert from 'node:assert/strict';
import { createPrivateKey, createVerify, generateKeyPairSync } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { AlipaySdk } from 'alipay-sdk';
import { newId } from '../../src/domain/ids.ts';
import { AlipayProvider } from '../../src/providers/alipay/alipay.ts';
import { notificationSignContent, topLevelMembers } from '../../src/providers/alipay/wire.ts';
import { type CreateAttemptInput, ProviderRejectedError, ProviderUncertainError } from '../../src/providers/provider.ts';
import { makeCertSet } from '../../simulators/alipay/certs.ts';
import { type AlipayHarness, startAlipayHarness } from './alipay-harness.ts';

function input(o: Partial<CreateAttemptInput> = {}): CreateAttemptInput {
  return {
    attemptId: newId.attempt(),
    openOrderId: newId.order(),
    channel: 'ALIPAY_H5',
    amountFen: 2500,
    currency: 'CNY',
    subject: 'Simulator test',
    expireAt: new Date(Date.now() + 15 * 60_000),
    payerClientIp: '8.8.8.8',
    returnUrl: 'https://merchant.example/return?order=1',
    ...o,
  };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function until(what: string, check: () => boolean, ms = 3000): Promise<void> {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() > end) assert.fail(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

describe('alipay simulator: the gateway refuses bad requests as Alipay does', () => {
  let h: AlipayHarness;
  before(async () => {
    h = await startAlipayHarness();
  });
  after(() => h.close());

  /** Posts a request the SDK signed with `privateKey` (changed by `edit`), returns the answer's response member and whether Alipay's signature verifies. */
  async function call(opts: { privateKey?: string; appId?: string; edit?: (p: URLSearchParams) => void; method?: string }) {
    const sdk = new AlipaySdk({
      appId: opts.appId ?? h.sim.appId,
      privateKey: opts.privateKey ?? h.sim.keys.merchantPrivateKeyPem!,
      keyType: 'PKCS8',
      signType: 'RSA2',
      camelcase: false,
    });
    const p = new URLSearchParams(sdk.sdkExecute(opts.method ?? 'alipay.trade.query', { bizContent: { out_trade_no: 'att_x' } }));
    opts.edit?.(p);
    const res = await fetch(h.sim.gatewayUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: p.toString(),
    });
    const text = await res.text();
    const members = topLevelMembers(text);
    const [key, inner] = [...members].find(([k]) => k.endsWith('_response'))!;
    const sign = JSON.parse(members.get('sign')!) as string;
    const verified = createVerify('RSA-SHA256').update(inner, 'utf8').verify(h.sim.keys.alipayPublicKeyPem, sign, 'base64');
    return { key, response: JSON.parse(inner) as Record<string, string>, verified };
  }

  test('a signature made with another key: 40002 isv.invalid-signature, in a signed answer', async () => {
    const other = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
    const a = await call({ privateKey: other });
    assert.equal(a.key, 'alipay_trade_query_response');
    assert.equal(a.response.code, '40002');
    assert.equal(a.response.sub_code, 'isv.invalid-signature');
    assert.match(a.response.sub_msg!, /网关生成的验签字符串为：app_id=/);
    assert.ok(a.verified);
  });

  test('a parameter changed after signing is a bad signature too', async () => {
    const a = await call({ edit: (p) => p.set('biz_content', '{"out_trade_no":"att_y"}') });
    assert.equal(a.response.sub_code, 'isv.invalid-signature');
  });

  test('app id, signature, signature type, method: the gateway codes', async () => {
    assert.equal((await call({ appId: '2021000000000099' })).response.sub_code, 'isv.invalid-app-id');
    assert.equal((await call({ edit: (p) => p.delete('sign') })).response.sub_code, 'isv.missing-signature');
    assert.equal((await call({ edit: (p) => p.set('sign_type', 'RSA') })).response.sub_code, 'isv.invalid-signature-type');
    assert.equal((await call({ edit: (p) => p.set('timestamp', 'yesterday') })).response.sub_code, 'isv.invalid-timestamp');
    const unknown = await call({ method: 'alipay.trade.pay' });
    assert.equal(unknown.key, 'error_response');
    assert.equal(unknown.response.sub_code, 'isv.invalid-method');
    assert.equal((await call({ edit: (p) => p.append('app_id', h.sim.appId) })).response.sub_code, 'isv.invalid-parameter');
  });

  test('a well signed request is answered 10000 / ACQ.TRADE_NOT_EXIST, signed', async () => {
    const a = await call({});
    assert.equal(a.response.sub_code, 'ACQ.TRADE_NOT_EXIST');
    assert.ok(a.verified);
  });
});

describe('alipay simulator: buyer pages', () => {
  let h: AlipayHarness;
  before(async () => {
    h = await startAlipayHarness();
  });
  after(() => h.close());

  async function page(url: string): Promise<{ status: number; html: string; session: string | null }> {
    const res = await fetch(url, { redirect: 'manual' });
    const html = await res.text();
    return { status: res.status, html, session: /\/buyer\/([^/]+)\/pay/.exec(html)?.[1] ?? null };
  }

  test('the wap.pay page: pay, then back to return_url with the signed return parameters', async () => {
    const i = input();
    const r = await h.provider.createAttempt(i);
    assert.equal(r.outcome, 'ACCEPTED');
    if (r.outcome !== 'ACCEPTED') return;
    const p = await page(r.material.redirectUrl!);
    assert.equal(p.status, 200);
    assert.match(p.html, /¥25\.00/);
    const paid = await fetch(`${h.sim.url}/buyer/${p.session}/pay`, { method: 'POST', redirect: 'manual' });
    assert.equal(paid.status, 302);
    const back = new URL(paid.headers.get('location')!);
    assert.equal(`${back.origin}${back.pathname}`, 'https://merchant.example/return');
    assert.equal(back.searchParams.get('order'), '1', 'return_url keeps its own query');
    assert.equal(back.searchParams.get('out_trade_no'), i.attemptId);
    assert.equal(back.searchParams.get('method'), 'alipay.trade.wap.pay.return');
    const params = new Map([...back.searchParams].filter(([k]) => k !== 'order'));
    const ok = createVerify('RSA-SHA256')
      .update(notificationSignContent(params), 'utf8')
      .verify(h.sim.keys.alipayPublicKeyPem, params.get('sign')!, 'base64');
    assert.ok(ok, 'the return parameters are signed by Alipay (sign and sign_type left out)');
    await until('the payment notice', () => h.received.some((n) => n.parsed?.kind === 'PAYMENT' && n.parsed.attemptId === i.attemptId));
    assert.equal((await h.provider.queryPayment(i.attemptId)).state, 'PAID');
    assert.match((await page(r.material.redirectUrl!)).html, /has been paid/, 'opening the page again shows it paid');
  });

  test('the QR code page; a failed payment leaves the trade open', async () => {
    const i = input();
    const r = await h.provider.createAttempt(i);
    if (r.outcome !== 'ACCEPTED') return assert.fail();
    const p = await page(r.material.qrCode!);
    const failed = await fetch(`${h.sim.url}/buyer/${p.session}/fail`, { method: 'POST' });
    assert.match(await failed.text(), /still open/);
    const q = await h.provider.queryPayment(i.attemptId);
    assert.equal(q.state, 'OPEN');
    assert.equal(q.providerRef, h.sim.trade(i.attemptId)!.tradeNo, 'scanned: the trade has its trade_no');
  });

  test('a page URL changed after signing: the error page (isv.invalid-signature), no trade', async () => {
    const i = input();
    const r = await h.provider.createAttempt(i);
    if (r.outcome !== 'ACCEPTED') return assert.fail();
    const tampered = r.material.redirectUrl!.replace('%2225.00%22', '%220.01%22');
    assert.notEqual(tampered, r.material.redirectUrl);
    const p = await page(tampered);
    assert.match(p.html, /isv\.invalid-signature/);
    assert.equal(p.session, null);
  });
});

describe('alipay simulator: notifications', () => {
  let h: AlipayHarness;
  before(async () => {
    h = await startAlipayHarness();
  });
  after(() => h.close());

  async function paidTrade(): Promise<string> {
    const i = input();
    await h.provider.createAttempt(i);
    await h.sim.pay(i.attemptId);
    return i.attemptId;
  }
  const sendsOf = (id: string) => h.sim.notifications().filter((n) => n.rawBody.toString().includes(id));

  test('sent again until answered `success`, on the retry schedule', async () => {
    h.failAcks(true);
    const id = await paidTrade();
    await until('a retry', () => sendsOf(id).length >= 2);
    h.failAcks(false);
    await until('the acknowledgement', () => sendsOf(id).some((n) => n.acknowledged));
    const sends = sendsOf(id);
    assert.deepEqual(
      sends.map((n) => n.attempt),
      sends.map((_, k) => k + 1),
    );
    assert.equal(sends.at(-1)!.acknowledged, true);
    assert.equal(sends.filter((n) => n.acknowledged).length, 1, 'nothing is sent after success');
    await sleep(500);
    assert.equal(sendsOf(id).length, sends.length);
  });

  test('duplicated: the same notice twice, both accepted (the service applies them idempotently)', async () => {
    h.sim.duplicateNotifications(1);
    const id = await paidTrade();
    await until('two sends', () => sendsOf(id).length === 2);
    assert.deepEqual(sendsOf(id)[0]!.rawBody, sendsOf(id)[1]!.rawBody);
  });

  test('delayed: sent late', async () => {
    h.sim.delayNotifications(300, 1);
    const t0 = Date.now();
    const id = await paidTrade();
    assert.equal(sendsOf(id).length, 0);
    await until('the late send', () => sendsOf(id).length === 1);
    assert.ok(Date.now() - t0 >= 290);
  });

  test('lost: never sent, never retried; the payment is still there to be queried', async () => {
    h.sim.loseNotifications(1);
    const id = await paidTrade();
    await sleep(400);
    assert.equal(sendsOf(id).length, 0);
    assert.equal((await h.provider.queryPayment(id)).state, 'PAID');
  });

  test('expiry: an open trade past its time_expire is closed and notified TRADE_CLOSED', async () => {
    const i = input();
    await h.provider.createAttempt(i);
    await h.sim.expire(i.attemptId);
    await until('the close notice', () => h.received.some((n) => n.parsed?.kind === 'PAYMENT' && n.parsed.attemptId === i.attemptId));
    const n = h.received.find((x) => x.parsed?.kind === 'PAYMENT' && x.parsed.attemptId === i.attemptId)!;
    assert.equal(n.parsed?.kind === 'PAYMENT' && n.parsed.state, 'CLOSED');
    assert.equal((await h.provider.queryPayment(i.attemptId)).state, 'CLOSED');
    await assert.rejects(() => h.sim.pay(i.attemptId), /TRADE_CLOSED/);
  });
});

describe('alipay simulator: time_expire runs out by the clock', () => {
  let h: AlipayHarness;
  let offset = 0;
  before(async () => {
    h = await startAlipayHarness({ now: () => new Date(Date.now() + offset) });
  });
  after(() => h.close());

  test('a trade is CLOSED once its time_expire has passed, and cannot be paid', async () => {
    const i = input({ expireAt: new Date(Date.now() + 5 * 60_000) });
    await h.provider.createAttempt(i);
    offset = 6 * 60_000;
    assert.equal((await h.provider.queryPayment(i.attemptId)).state, 'CLOSED');
    await assert.rejects(() => h.sim.pay(i.attemptId));
  });
});

describe("alipay simulator: a precreated trade exists only once scanned, as at Alipay ('scan-creates-trade')", () => {
  let h: AlipayHarness;
  before(async () => {
    h = await startAlipayHarness({ tradeVisibleOnPrecreate: false });
  });
  after(() => h.close());

  test('NOT_FOUND and closed before the scan; still payable after that close, until time_expire', async () => {
    const i = input();
    const r = await h.provider.createAttempt(i);
    assert.equal(r.outcome, 'ACCEPTED');
    assert.equal((await h.provider.queryPayment(i.attemptId)).state, 'NOT_FOUND');
    assert.deepEqual(await h.provider.closePayment(i.attemptId), { outcome: 'CLOSED' }, 'ACQ.TRADE_NOT_EXIST counts as closed');
    // Alipay knew no trade to close: the QR code still works. The service treats the payment that follows as a late payment.
    const { tradeNo } = await h.sim.pay(i.attemptId);
    await until('the payment notice', () => h.received.some((n) => n.parsed?.kind === 'PAYMENT' && n.parsed.attemptId === i.attemptId));
    assert.deepEqual(await h.provider.queryPayment(i.attemptId), { state: 'PAID', providerRef: tradeNo, material: null, amountFen: 2500 });
  });

  test('scanning makes the trade: OPEN with its trade_no; then a close closes it', async () => {
    const i = input();
    await h.provider.createAttempt(i);
    h.sim.scan(i.attemptId);
    assert.equal((await h.provider.queryPayment(i.attemptId)).state, 'OPEN');
    assert.deepEqual(await h.provider.closePayment(i.attemptId), { outcome: 'CLOSED' });
    await assert.rejects(() => h.sim.pay(i.attemptId));
  });
});

describe('alipay simulator: certificate mode end to end', () => {
  let h: AlipayHarness;
  before(async () => {
    h = await startAlipayHarness({ certMode: true });
  });
  after(() => h.close());

  test('requests carry the SNs the simulator computed on its own; answers carry its alipay_cert_sn', async () => {
    assert.deepEqual(h.provider.certSns, h.sim.certSns);
    const i = input();
    await h.provider.createAttempt(i);
    const { tradeNo } = await h.sim.pay(i.attemptId);
    assert.equal((await h.provider.queryPayment(i.attemptId)).providerRef, tradeNo);
    const r = await h.provider.refund({
      refundId: newId.refund(),
      paidAttemptId: i.attemptId,
      amountFen: 100,
      paymentAmountFen: 2500,
      reason: null,
    });
    assert.equal(r.providerRef, tradeNo);
    await until('a verified notice', () => h.received.some((n) => n.parsed?.kind === 'PAYMENT' && n.parsed.attemptId === i.attemptId));
  });

  test('an app certificate Alipay does not hold: 40002 isv.app-cert-sn-mismatch, a refusal', async () => {
    const key = createPrivateKey(h.sim.keys.merchantPrivateKeyPem!);
    const other = makeCertSet(h.sim.appId, key, generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey);
    const p = new AlipayProvider(
      {
        ...h.config,
        mode: {
          kind: 'CERT',
          appCertPem: other.app.pem,
          alipayPublicCertPem: h.sim.keys.certs!.alipayPublicCertPem,
          alipayRootCertPem: h.sim.keys.certs!.alipayRootCertPem,
        },
      },
      { notifyUrl: h.notifyUrl },
    );
    await assert.rejects(
      () => p.queryPayment(newId.attempt()),
      (e: unknown) => e instanceof ProviderRejectedError && e.reason === 'isv.app-cert-sn-mismatch',
    );
  });

  test('answers signed under another Alipay certificate than the configured one: UNCERTAIN, naming the file to update', async () => {
    const other = makeCertSet(
      h.sim.appId,
      createPrivateKey(h.sim.keys.merchantPrivateKeyPem!),
      generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey,
    );
    const p = new AlipayProvider(
      {
        ...h.config,
        mode: {
          kind: 'CERT',
          appCertPem: h.sim.keys.certs!.appCertPem,
          alipayPublicCertPem: other.alipay.pem,
          alipayRootCertPem: h.sim.keys.certs!.alipayRootCertPem,
        },
      },
      { notifyUrl: h.notifyUrl },
    );
    await assert.rejects(
      () => p.queryPayment(newId.attempt()),
      (e: unknown) => e instanceof ProviderUncertainError && /ALIPAY_PUBLIC_CERT_FILE/.test(e.message),
    );
  });
});

describe('alipay simulator: the HTTP control API (/__sim/)', () => {
  let h: AlipayHarness;
  before(async () => {
    h = await startAlipayHarness();
  });
  after(() => h.close());
  const post = (path: string, body?: object) =>
    fetch(`${h.sim.url}/__sim/${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: body ? JSON.stringify(body) : undefined,
    });

  test('faults, trades, pay, notifications', async () => {
    const info = (await (await fetch(`${h.sim.url}/__sim/`)).json()) as { gatewayUrl: string };
    assert.equal(info.gatewayUrl, h.sim.gatewayUrl);
    assert.equal(
      (
        await post('faults', {
          method: 'alipay.trade.precreate',
          fault: { kind: 'business', code: '40004', subCode: 'ACQ.ACCESS_FORBIDDEN' },
          times: 1,
        })
      ).status,
      200,
    );
    await assert.rejects(() => h.provider.createAttempt(input()), ProviderRejectedError);
    const i = input();
    await h.provider.createAttempt(i);
    const trade = (await (await fetch(`${h.sim.url}/__sim/trades/${i.attemptId}`)).json()) as { status: string; totalAmount: string };
    assert.deepEqual([trade.status, trade.totalAmount], ['WAIT_BUYER_PAY', '25.00']);
    const paid = await post(`trades/${i.attemptId}/pay`);
    assert.equal(paid.status, 200);
    assert.equal((await post(`trades/${i.attemptId}/pay`)).status, 409, 'a paid trade cannot be paid again');
    const sent = (await (await fetch(`${h.sim.url}/__sim/notifications`)).json()) as { rawBody: string; acknowledged: boolean }[];
    assert.ok(sent.some((n) => n.rawBody.includes(i.attemptId) && n.acknowledged));
    assert.equal((await post('faults', { method: 'alipay.trade.nope', fault: { kind: 'timeout' } })).status, 400);
    assert.equal((await fetch(`${h.sim.url}/__sim/faults`, { method: 'DELETE' })).status, 200);
  });
});
