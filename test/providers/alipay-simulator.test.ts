/**
 * The Alipay simulator where the contract does not look: refusing badly signed requests the way
 * the gateway does, the buyer pages and the return to return_url, notifications retried until
 * answered `success` (and the delay, duplicate and loss levers), trades made only once scanned,
 * expiry, certificate mode end to end, and the HTTP control API.
 */
import assert from 'node:assert/strict';
import { createPrivateKey, createVerify, generateKeyPairSync } from 'node:crypto';
import { describe, test } from 'node:test';
import { AlipaySdk } from 'alipay-sdk';
import { newId } from '../../src/domain/ids.ts';
import { AlipayProvider } from '../../src/providers/alipay/alipay.ts';
import { notificationSignContent, topLevelMembers } from '../../src/providers/alipay/wire.ts';
import { type CreateAttemptInput, ProviderRejectedError, ProviderUncertainError } from '../../src/providers/provider.ts';
import { makeCertSet } from '../../simulators/alipay/certs.ts';
import { attemptInput, useAlipayHarness } from './alipay-harness.ts';

const input = (o: Partial<CreateAttemptInput> = {}) =>
  attemptInput({ amountFen: 2500, subject: 'Simulator test', returnUrl: 'https://merchant.example/return?order=1', ...o });

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function until(what: string, check: () => boolean, ms = 3000): Promise<void> {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() > end) assert.fail(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

describe('alipay simulator: the gateway refuses bad requests as Alipay does', () => {
  const harness = useAlipayHarness();

  /** Posts a request the SDK signed with `privateKey` (changed by `edit`), returns the answer's response member and whether Alipay's signature verifies. */
  async function call(opts: { privateKey?: string; appId?: string; edit?: (p: URLSearchParams) => void; method?: string }) {
    const sdk = new AlipaySdk({
      appId: opts.appId ?? harness().sim.appId,
      privateKey: opts.privateKey ?? harness().sim.keys.merchantPrivateKeyPem!,
      keyType: 'PKCS8',
      signType: 'RSA2',
      camelcase: false,
    });
    const p = new URLSearchParams(sdk.sdkExecute(opts.method ?? 'alipay.trade.query', { bizContent: { out_trade_no: 'att_x' } }));
    opts.edit?.(p);
    const res = await fetch(harness().sim.gatewayUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: p.toString(),
    });
    const text = await res.text();
    const members = topLevelMembers(text);
    const [key, inner] = [...members].find(([k]) => k.endsWith('_response'))!;
    const sign = JSON.parse(members.get('sign')!) as string;
    const verified = createVerify('RSA-SHA256').update(inner, 'utf8').verify(harness().sim.keys.alipayPublicKeyPem, sign, 'base64');
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
    assert.equal((await call({ edit: (p) => p.append('app_id', harness().sim.appId) })).response.sub_code, 'isv.invalid-parameter');
  });

  test('a well signed request is answered 10000 / ACQ.TRADE_NOT_EXIST, signed', async () => {
    const a = await call({});
    assert.equal(a.response.sub_code, 'ACQ.TRADE_NOT_EXIST');
    assert.ok(a.verified);
  });
});

describe('alipay simulator: buyer pages', () => {
  const harness = useAlipayHarness();

  async function page(url: string): Promise<{ status: number; html: string; session: string | null }> {
    const res = await fetch(url, { redirect: 'manual' });
    const html = await res.text();
    return { status: res.status, html, session: /\/buyer\/([^/]+)\/pay/.exec(html)?.[1] ?? null };
  }

  test('the wap.pay page: pay, then back to return_url with the signed return parameters', async () => {
    const i = input();
    const r = await harness().provider.createAttempt(i);
    assert.equal(r.outcome, 'ACCEPTED');
    if (r.outcome !== 'ACCEPTED') return;
    const p = await page(r.material.redirectUrl!);
    assert.equal(p.status, 200);
    assert.match(p.html, /¥25\.00/);
    const paid = await fetch(`${harness().sim.url}/buyer/${p.session}/pay`, { method: 'POST', redirect: 'manual' });
    assert.equal(paid.status, 302);
    const back = new URL(paid.headers.get('location')!);
    assert.equal(`${back.origin}${back.pathname}`, 'https://merchant.example/return');
    assert.equal(back.searchParams.get('order'), '1', 'return_url keeps its own query');
    assert.equal(back.searchParams.get('out_trade_no'), i.attemptId);
    assert.equal(back.searchParams.get('method'), 'alipay.trade.wap.pay.return');
    const params = new Map([...back.searchParams].filter(([k]) => k !== 'order'));
    const ok = createVerify('RSA-SHA256')
      .update(notificationSignContent(params), 'utf8')
      .verify(harness().sim.keys.alipayPublicKeyPem, params.get('sign')!, 'base64');
    assert.ok(ok, 'the return parameters are signed by Alipay (sign and sign_type left out)');
    await until('the payment notice', () =>
      harness().received.some((n) => n.parsed?.kind === 'PAYMENT' && n.parsed.attemptId === i.attemptId),
    );
    assert.equal((await harness().provider.queryPayment(i.attemptId)).state, 'PAID');
    assert.match((await page(r.material.redirectUrl!)).html, /has been paid/, 'opening the page again shows it paid');
  });

  test('the QR code page; a failed payment leaves the trade open', async () => {
    const i = input();
    const r = await harness().provider.createAttempt(i);
    if (r.outcome !== 'ACCEPTED') return assert.fail();
    const p = await page(r.material.qrCode!);
    const failed = await fetch(`${harness().sim.url}/buyer/${p.session}/fail`, { method: 'POST' });
    assert.match(await failed.text(), /still open/);
    const q = await harness().provider.queryPayment(i.attemptId);
    assert.equal(q.state, 'OPEN');
    assert.equal(q.providerRef, harness().sim.trade(i.attemptId)!.tradeNo, 'scanned: the trade has its trade_no');
  });

  test('a page URL changed after signing: the error page (isv.invalid-signature), no trade', async () => {
    const i = input();
    const r = await harness().provider.createAttempt(i);
    if (r.outcome !== 'ACCEPTED') return assert.fail();
    const tampered = r.material.redirectUrl!.replace('%2225.00%22', '%220.01%22');
    assert.notEqual(tampered, r.material.redirectUrl);
    const p = await page(tampered);
    assert.match(p.html, /isv\.invalid-signature/);
    assert.equal(p.session, null);
  });
});

describe('alipay simulator: notifications', () => {
  const harness = useAlipayHarness();

  async function paidTrade(): Promise<string> {
    const i = input();
    await harness().provider.createAttempt(i);
    await harness().sim.pay(i.attemptId);
    return i.attemptId;
  }
  const sendsOf = (id: string) =>
    harness()
      .sim.notifications()
      .filter((n) => n.rawBody.toString().includes(id));

  test('sent again until answered `success`, on the retry schedule', async () => {
    harness().failAcks(true);
    const id = await paidTrade();
    await until('a retry', () => sendsOf(id).length >= 2);
    harness().failAcks(false);
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
    harness().sim.duplicateNotifications(1);
    const id = await paidTrade();
    await until('two sends', () => sendsOf(id).length === 2);
    assert.deepEqual(sendsOf(id)[0]!.rawBody, sendsOf(id)[1]!.rawBody);
  });

  test('delayed: sent late', async () => {
    harness().sim.delayNotifications(300, 1);
    const id = await paidTrade();
    assert.equal(sendsOf(id).length, 0, 'not sent with the payment');
    await until('the late send', () => sendsOf(id).length === 1);
  });

  test('lost: never sent, never retried; the payment is still there to be queried', async () => {
    harness().sim.loseNotifications(1);
    const id = await paidTrade();
    await sleep(400);
    assert.equal(sendsOf(id).length, 0);
    assert.equal((await harness().provider.queryPayment(id)).state, 'PAID');
  });

  test('expiry: an open trade past its time_expire is closed and notified TRADE_CLOSED', async () => {
    const i = input();
    await harness().provider.createAttempt(i);
    await harness().sim.expire(i.attemptId);
    await until('the close notice', () =>
      harness().received.some((n) => n.parsed?.kind === 'PAYMENT' && n.parsed.attemptId === i.attemptId),
    );
    const n = harness().received.find((x) => x.parsed?.kind === 'PAYMENT' && x.parsed.attemptId === i.attemptId)!;
    assert.equal(n.parsed?.kind === 'PAYMENT' && n.parsed.state, 'CLOSED');
    assert.equal((await harness().provider.queryPayment(i.attemptId)).state, 'CLOSED');
    await assert.rejects(() => harness().sim.pay(i.attemptId), /TRADE_CLOSED/);
  });
});

describe('alipay simulator: time_expire runs out by the clock', () => {
  let offset = 0;
  const harness = useAlipayHarness({ now: () => new Date(Date.now() + offset) });

  test('a trade is CLOSED once its time_expire has passed, and cannot be paid', async () => {
    const i = input({ expireAt: new Date(Date.now() + 5 * 60_000) });
    await harness().provider.createAttempt(i);
    offset = 6 * 60_000;
    assert.equal((await harness().provider.queryPayment(i.attemptId)).state, 'CLOSED');
    await assert.rejects(() => harness().sim.pay(i.attemptId));
  });
});

describe("alipay simulator: a precreated trade exists only once scanned, as at Alipay ('scan-creates-trade')", () => {
  const harness = useAlipayHarness({ tradeVisibleOnPrecreate: false });

  test('NOT_FOUND and closed before the scan; still payable after that close, until time_expire', async () => {
    const i = input();
    const r = await harness().provider.createAttempt(i);
    assert.equal(r.outcome, 'ACCEPTED');
    assert.equal((await harness().provider.queryPayment(i.attemptId)).state, 'NOT_FOUND');
    assert.deepEqual(await harness().provider.closePayment(i.attemptId), { outcome: 'CLOSED' }, 'ACQ.TRADE_NOT_EXIST counts as closed');
    // Alipay knew no trade to close: the QR code still works. The service treats the payment that follows as a late payment.
    const { tradeNo } = await harness().sim.pay(i.attemptId);
    await until('the payment notice', () =>
      harness().received.some((n) => n.parsed?.kind === 'PAYMENT' && n.parsed.attemptId === i.attemptId),
    );
    assert.deepEqual(await harness().provider.queryPayment(i.attemptId), {
      state: 'PAID',
      providerRef: tradeNo,
      material: null,
      amountFen: 2500,
    });
  });

  test('scanning makes the trade: OPEN with its trade_no; then a close closes it', async () => {
    const i = input();
    await harness().provider.createAttempt(i);
    harness().sim.scan(i.attemptId);
    assert.equal((await harness().provider.queryPayment(i.attemptId)).state, 'OPEN');
    assert.deepEqual(await harness().provider.closePayment(i.attemptId), { outcome: 'CLOSED' });
    await assert.rejects(() => harness().sim.pay(i.attemptId));
  });
});

describe('alipay simulator: certificate mode end to end', () => {
  const harness = useAlipayHarness({ certMode: true });

  test('requests carry the SNs the simulator computed on its own; answers carry its alipay_cert_sn', async () => {
    assert.deepEqual(harness().provider.certSns, harness().sim.certSns);
    const i = input();
    await harness().provider.createAttempt(i);
    const { tradeNo } = await harness().sim.pay(i.attemptId);
    assert.equal((await harness().provider.queryPayment(i.attemptId)).providerRef, tradeNo);
    const r = await harness().provider.refund({
      refundId: newId.refund(),
      paidAttemptId: i.attemptId,
      amountFen: 100,
      paymentAmountFen: 2500,
      reason: null,
    });
    assert.equal(r.providerRef, tradeNo);
    await until('a verified notice', () =>
      harness().received.some((n) => n.parsed?.kind === 'PAYMENT' && n.parsed.attemptId === i.attemptId),
    );
  });

  test('an app certificate Alipay does not hold: 40002 isv.app-cert-sn-mismatch, a refusal', async () => {
    const key = createPrivateKey(harness().sim.keys.merchantPrivateKeyPem!);
    const other = makeCertSet(harness().sim.appId, key, generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey);
    const p = new AlipayProvider(
      {
        ...harness().config,
        mode: {
          kind: 'CERT',
          appCertPem: other.app.pem,
          alipayPublicCertPem: harness().sim.keys.certs!.alipayPublicCertPem,
          alipayRootCertPem: harness().sim.keys.certs!.alipayRootCertPem,
        },
      },
      { notifyUrl: harness().notifyUrl },
    );
    await assert.rejects(
      () => p.queryPayment(newId.attempt()),
      (e: unknown) => e instanceof ProviderRejectedError && e.reason === 'isv.app-cert-sn-mismatch',
    );
  });

  test('answers signed under another Alipay certificate than the configured one: UNCERTAIN, naming the file to update', async () => {
    const other = makeCertSet(
      harness().sim.appId,
      createPrivateKey(harness().sim.keys.merchantPrivateKeyPem!),
      generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey,
    );
    const p = new AlipayProvider(
      {
        ...harness().config,
        mode: {
          kind: 'CERT',
          appCertPem: harness().sim.keys.certs!.appCertPem,
          alipayPublicCertPem: other.alipay.pem,
          alipayRootCertPem: harness().sim.keys.certs!.alipayRootCertPem,
        },
      },
      { notifyUrl: harness().notifyUrl },
    );
    await assert.rejects(
      () => p.queryPayment(newId.attempt()),
      (e: unknown) => e instanceof ProviderUncertainError && /ALIPAY_PUBLIC_CERT_FILE/.test(e.message),
    );
  });
});

describe('alipay simulator: the HTTP control API (/__sim/)', () => {
  const harness = useAlipayHarness();
  const post = (path: string, body?: object) =>
    fetch(`${harness().sim.url}/__sim/${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: body ? JSON.stringify(body) : undefined,
    });

  test('faults, trades, pay, notifications', async () => {
    const info = (await (await fetch(`${harness().sim.url}/__sim/`)).json()) as { gatewayUrl: string };
    assert.equal(info.gatewayUrl, harness().sim.gatewayUrl);
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
    await assert.rejects(() => harness().provider.createAttempt(input()), ProviderRejectedError);
    const i = input();
    await harness().provider.createAttempt(i);
    const trade = (await (await fetch(`${harness().sim.url}/__sim/trades/${i.attemptId}`)).json()) as {
      status: string;
      totalAmount: string;
    };
    assert.deepEqual([trade.status, trade.totalAmount], ['WAIT_BUYER_PAY', '25.00']);
    const paid = await post(`trades/${i.attemptId}/pay`);
    assert.equal(paid.status, 200);
    assert.equal((await post(`trades/${i.attemptId}/pay`)).status, 409, 'a paid trade cannot be paid again');
    const sent = (await (await fetch(`${harness().sim.url}/__sim/notifications`)).json()) as { rawBody: string; acknowledged: boolean }[];
    assert.ok(sent.some((n) => n.rawBody.includes(i.attemptId) && n.acknowledged));
    assert.equal((await post('faults', { method: 'alipay.trade.nope', fault: { kind: 'timeout' } })).status, 400);
    assert.equal((await fetch(`${harness().sim.url}/__sim/faults`, { method: 'DELETE' })).status, 200);
  });
});
