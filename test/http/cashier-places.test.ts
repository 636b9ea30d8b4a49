/**
 * Where the cashier is opened (src/cashier/where.ts) and what each place gets, through the page
 * (inject) with the sandbox provider, which models WeChat Pay's products: the User-Agent rules, the
 * ways offered and the manual switch; a computer's Native code (its trade made on GET only, paid by
 * the sandbox's buttons); inside WeChat the authorization round trip (its state bound to the page's
 * token and single-use, the openid never in an address, a page or a log line) and the JSAPI
 * parameters; Alipay inside WeChat without any Alipay link; two trades paid, one refunded.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { type Place, chooseWay, placeOf, waysAt } from '../../src/cashier/where.ts';
import { shanghaiDay } from '../../src/domain/money.ts';
import { SANDBOX_OPENID } from '../../src/providers/sandbox/sandbox.ts';
import { waitFor } from '../helpers/events.ts';
import { createPortalUser, portalCall, portalSignIn } from '../helpers/portal.ts';
import { type Merchant, type TestApp, call, orderBody, provision, startTestApp } from '../helpers/app.ts';

const UA = {
  wechat: 'Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 Mobile/15E148 MicroMessenger/8.0.47 NetType/WIFI',
  alipay: 'Mozilla/5.0 (Linux; Android 14; V2218A) AppleWebKit/537.36 Chrome/120.0 Mobile Safari/537.36 AlipayClient/10.5.86.8000',
  phone: 'Mozilla/5.0 (Linux; Android 14; Pixel 7) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0 Mobile Safari/537.36',
  computer: 'Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4 Safari/605.1.15',
};

describe('where the link is opened: detection and the ways offered', () => {
  test('the User-Agent rules, first that matches', () => {
    const cases: [string | undefined, Place][] = [
      [UA.wechat, 'WECHAT'],
      ['Mozilla/5.0 (Windows NT 10.0) Chrome/81.0 MicroMessenger/7.0.20.1781 WindowsWechat', 'WECHAT'],
      [UA.alipay, 'ALIPAY_APP'],
      [UA.phone, 'PHONE'],
      ['Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) Version/17.4 Mobile/15E148 Safari/604.1', 'PHONE'],
      ['Mozilla/5.0 (iPad; CPU OS 16_0 like Mac OS X) Mobile/15E148', 'PHONE'],
      ['Mozilla/5.0 (Linux; HarmonyOS 4.0; ALN-AL00) ArkWeb/4.1.6.1', 'PHONE'],
      [UA.computer, 'COMPUTER'],
      ['', 'COMPUTER'],
      [undefined, 'COMPUTER'],
    ];
    for (const [ua, place] of cases) assert.equal(placeOf(ua), place, ua);
  });

  test('the ways at each place: never JSAPI outside WeChat, never H5 or an Alipay link inside it', () => {
    const all = { jsapi: true, native: true };
    assert.deepEqual(waysAt('WECHAT_H5', 'WECHAT', all), ['jsapi', 'native']);
    assert.deepEqual(waysAt('WECHAT_H5', 'WECHAT', { jsapi: false, native: true }), ['native']);
    assert.deepEqual(waysAt('WECHAT_H5', 'PHONE', all), ['h5', 'native']);
    assert.deepEqual(waysAt('WECHAT_H5', 'ALIPAY_APP', all), ['h5', 'native']);
    assert.deepEqual(waysAt('WECHAT_H5', 'COMPUTER', all), ['native', 'h5']);
    assert.deepEqual(waysAt('WECHAT_H5', 'COMPUTER', { jsapi: false, native: false }), ['h5']);
    assert.deepEqual(waysAt('ALIPAY_H5', 'WECHAT', all), ['code']);
    assert.deepEqual(waysAt('ALIPAY_H5', 'PHONE', all), ['page', 'code']);
    assert.deepEqual(waysAt('ALIPAY_H5', 'ALIPAY_APP', all), ['page', 'code']);
    assert.deepEqual(waysAt('ALIPAY_H5', 'COMPUTER', all), ['code', 'page']);
    assert.equal(chooseWay(['h5', 'native'], 'native'), 'native');
    assert.equal(chooseWay(['h5', 'native'], 'jsapi'), 'h5', 'a way the place does not offer is not taken');
    assert.equal(chooseWay(['h5', 'native'], ['native']), 'h5');
    assert.equal(chooseWay(['h5', 'native'], undefined), 'h5');
  });
});

describe('the cashier at each place (sandbox)', () => {
  let t: TestApp;
  let m: Merchant;
  const lines: string[] = [];

  before(async () => {
    t = await startTestApp({}, { logger: { level: 'debug', stream: { write: (l: string) => void lines.push(l) } } as never });
    m = await provision(t, { entityType: 'CORPORATE' });
  });
  after(() => t.stop());

  async function createOrder(o: Record<string, unknown> = {}) {
    const r = await call(t, m, 'POST', '/api/open/v1/payments', orderBody({ subject: 'Tea', amountFen: 880, ...o }));
    assert.equal(r.statusCode, 201, r.body);
    const order = r.json();
    return { order, token: new URL(order.payUrl).pathname.split('/').at(-1)! };
  }
  const get = (url: string, ua: string, lang = 'en') =>
    t.server.inject({ method: 'GET', url, headers: { 'user-agent': ua, 'accept-language': lang } });
  const act = (url: string) => t.server.inject({ method: 'POST', url, headers: { 'x-cashier-request': 'sandbox' } });
  const detail = async (openOrderId: string) => (await t.admin('GET', `/orders/${openOrderId}`)).json();
  const stateOf = (html: string) => /data-state="([A-Z_]+)"/.exec(html)?.[1];

  test('a computer: WECHAT_H5 shows a Native code (its trade made by the GET, none by a HEAD), paid by the sandbox button', async () => {
    const { order, token } = await createOrder({ channel: 'WECHAT_H5' });
    const head = await t.server.inject({ method: 'HEAD', url: `/cashier/${token}`, headers: { 'user-agent': UA.computer } });
    assert.equal(head.statusCode, 200);
    assert.deepEqual((await detail(order.openOrderId)).attempts[0].trades, [], 'a HEAD (a link preview) makes no trade');
    const p = await get(`/cashier/${token}`, UA.computer);
    assert.equal(stateOf(p.body), 'PAYABLE');
    assert.match(p.body, /<img class="qr" src="data:image\/png;base64,/);
    assert.match(p.body, /Scan the code with WeChat to pay\./);
    assert.match(p.body, /<a href="\?via=h5" data-way="h5">Pay in this browser<\/a>/);
    const trades = (await detail(order.openOrderId)).attempts[0].trades;
    assert.deepEqual(
      trades.map((x: { product: string; state: string }) => [x.product, x.state]),
      [['NATIVE', 'OPEN']],
    );
    // Again: the same trade, not a second one.
    await get(`/cashier/${token}`, UA.computer);
    assert.equal((await detail(order.openOrderId)).attempts[0].trades.length, 1);
    const paid = await act(`/cashier/${token}/sandbox/pay?via=native`);
    assert.equal(paid.statusCode, 200, paid.body);
    assert.equal(paid.json().state, 'PAID');
    const d = await detail(order.openOrderId);
    assert.equal(d.status, 'SUCCEEDED');
    assert.equal(d.attempts[0].trades[0].state, 'PAID');
    const q = (await call(t, m, 'GET', `/api/open/v1/payments/${order.outTradeNo}`)).json();
    assert.equal(q.status, 'SUCCEEDED');
    assert.equal(q.latestAttempt.state, 'PAID');
  });

  test('the manual switch: ?via= takes a way the place offers, and nothing else', async () => {
    const { token } = await createOrder({ channel: 'WECHAT_H5' });
    const h5 = await get(`/cashier/${token}?via=h5`, UA.computer);
    assert.match(h5.body, /Pay inside WeChat/, 'the sandbox H5: its buttons stand in');
    assert.doesNotMatch(h5.body, /<img class="qr"/);
    const refused = await get(`/cashier/${token}?via=jsapi`, UA.computer);
    assert.match(refused.body, /<img class="qr"/, "JSAPI is not offered outside WeChat: the place's first way");
    const alipay = await createOrder({ channel: 'ALIPAY_H5' });
    const code = await get(`/cashier/${alipay.token}`, UA.computer);
    assert.match(code.body, /Scan the code with Alipay to pay\./);
    assert.doesNotMatch(code.body, /alipays:\/\//);
    assert.match(code.body, /data-way="page">Open Alipay</);
    assert.match((await get(`/cashier/${alipay.token}?via=page`, UA.computer)).body, /alipays:\/\//);
    assert.match((await get(`/cashier/${alipay.token}`, UA.alipay)).body, /alipays:\/\//, 'in the Alipay app: the app link');
  });

  test('Alipay inside WeChat: no Alipay link at all, the guidance to the browser, the collection code', async () => {
    const { order, token } = await createOrder({ channel: 'ALIPAY_H5' });
    for (const [lang, guide] of [
      ['zh-CN', '请在浏览器中打开'],
      ['en', 'Open this page in your browser'],
    ] as const) {
      const p = await get(`/cashier/${token}?via=page`, UA.wechat, lang);
      assert.ok(p.body.includes(guide), lang);
      assert.match(p.body, /<img class="qr"/);
      assert.doesNotMatch(p.body, /alipays:|<nav class="ways"|href="http/, 'no link to Alipay, no way to one');
    }
    assert.ok(order.qrCode);
  });

  test('inside WeChat: the authorization round trip, the JSAPI parameters, paid; the openid never leaves the server', async () => {
    const { order, token } = await createOrder({ channel: 'WECHAT_H5' });
    const start = await get(`/cashier/${token}`, UA.wechat, 'zh-CN');
    assert.equal(stateOf(start.body), 'PAYABLE');
    assert.ok(start.body.includes(`<a class="btn primary" href="${token}/wechat/authorize">微信支付</a>`));
    assert.match(start.body, /data-way="native">微信扫码支付</);
    assert.doesNotMatch(start.body, /data-way="h5"/, 'no H5 inside WeChat');
    const go = await get(`/cashier/${token}/wechat/authorize`, UA.wechat);
    assert.equal(go.statusCode, 302);
    const back = new URL(String(go.headers.location));
    assert.equal(back.pathname, `/cashier/${token}/wechat/callback`, "the sandbox's authorization comes straight back");
    const state = back.searchParams.get('state')!;
    assert.match(state, /^[A-Za-z0-9]{32}$/);
    const cb = await get(`${back.pathname}${back.search}`, UA.wechat);
    assert.equal(cb.statusCode, 303);
    const landing = new URL(String(cb.headers.location));
    assert.equal(landing.pathname, `/cashier/${token}`);
    const handle = landing.searchParams.get('payer')!;
    assert.match(handle, /^[A-Za-z0-9_-]{22}$/);
    assert.equal(landing.searchParams.get('via'), 'jsapi');
    // The state is used once: the same callback again is refused.
    const again = await get(`${back.pathname}${back.search}`, UA.wechat);
    assert.equal(again.statusCode, 303);
    assert.equal(new URL(String(again.headers.location)).searchParams.get('oauth'), 'failed');
    const payPage = await get(`/cashier/${token}?via=jsapi&payer=${handle}`, UA.wechat, 'zh-CN');
    assert.match(
      payPage.body,
      /data-jsapi data-app-id="wxsandbox" data-time-stamp="\d{10}" data-nonce-str="[0-9a-f]{32}" data-package="prepay_id=sbx_prepay_[0-9a-z]+" data-sign-type="RSA" data-pay-sign="[A-Za-z0-9+/=]+">立即支付</,
    );
    // The CSP is as strict as ever: WeChat injects its bridge itself, no script is loaded for it.
    assert.equal(
      String(payPage.headers['content-security-policy']).includes("script-src 'self'") &&
        !String(payPage.headers['content-security-policy']).includes('http'),
      true,
    );
    const d = await detail(order.openOrderId);
    assert.deepEqual(
      d.attempts[0].trades.map((x: { product: string; state: string }) => [x.product, x.state]),
      [['JSAPI', 'OPEN']],
    );
    const paid = await act(`/cashier/${token}/sandbox/pay?via=jsapi&payer=${handle}`);
    assert.equal(paid.json().state, 'PAID');
    assert.equal((await detail(order.openOrderId)).attempts[0].trades[0].state, 'PAID');
    for (const text of [
      start.body,
      String(go.headers.location),
      String(cb.headers.location),
      payPage.body,
      JSON.stringify(d),
      lines.join('\n'),
    ]) {
      assert.ok(!text.includes(SANDBOX_OPENID), 'the openid is in no address, page, back-office answer or log line');
    }
  });

  test("the authorization's state is bound to the page that asked for it, and to WeChat's form", async () => {
    const a = await createOrder({ channel: 'WECHAT_H5' });
    const b = await createOrder({ channel: 'WECHAT_H5' });
    const go = new URL(String((await get(`/cashier/${a.token}/wechat/authorize`, UA.wechat)).headers.location));
    const state = go.searchParams.get('state')!;
    // The state of A's page brought to B's callback: refused (and A's state stays unused).
    const foreign = await get(`/cashier/${b.token}/wechat/callback?code=sandbox-code&state=${state}`, UA.wechat);
    assert.equal(new URL(String(foreign.headers.location)).searchParams.get('oauth'), 'failed');
    for (const bad of [
      'state=x&code=',
      'state=&code=sandbox-code',
      `state=${'a'.repeat(129)}&code=sandbox-code`,
      'code=sandbox-code',
      'state=a%20b&code=x',
    ]) {
      const r = await get(`/cashier/${a.token}/wechat/callback?${bad}`, UA.wechat);
      assert.equal(r.statusCode, 303, bad);
      assert.equal(new URL(String(r.headers.location)).searchParams.get('oauth'), 'failed', bad);
    }
    // A code the provider refuses.
    const r = await get(`/cashier/${a.token}/wechat/callback?code=forged&state=${state}`, UA.wechat);
    assert.equal(new URL(String(r.headers.location)).searchParams.get('oauth'), 'failed');
    const failed = await get(`/cashier/${a.token}?via=jsapi&oauth=failed`, UA.wechat);
    assert.match(failed.body, /WeChat could not confirm who you are\. Please try again\./);
    // A handle that is not this attempt's: authorized again, nothing shown.
    const stray = await get(`/cashier/${a.token}?via=jsapi&payer=${'A'.repeat(22)}`, UA.wechat);
    assert.match(stray.body, /wechat\/authorize/);
    assert.doesNotMatch(stray.body, /data-jsapi /);
    // HEAD never starts an authorization; an unknown token gets the neutral 404.
    assert.equal((await t.server.inject({ method: 'HEAD', url: `/cashier/${a.token}/wechat/authorize` })).statusCode, 404);
    assert.equal((await get(`/cashier/${'x'.repeat(43)}/wechat/authorize`, UA.wechat)).statusCode, 404);
  });

  test('where the page offers no JSAPI (an Alipay order, or a browser outside WeChat) the authorization routes start nothing and make no trade', async () => {
    const alipay = await createOrder({ channel: 'ALIPAY_H5' });
    const wechat = await createOrder({ channel: 'WECHAT_H5' });
    for (const [token, ua] of [
      [alipay.token, UA.wechat],
      [alipay.token, UA.computer],
      [wechat.token, UA.computer],
      [wechat.token, UA.phone],
    ] as const) {
      for (const route of ['authorize', 'callback?state=x&code=y']) {
        const r = await get(`/cashier/${token}/wechat/${route}`, ua);
        assert.equal(r.statusCode, 303, `${route} ${ua}`);
        assert.equal(new URL(String(r.headers.location)).pathname, `/cashier/${token}`);
        assert.equal(new URL(String(r.headers.location)).search, '', 'back to the page, which offers what works here');
      }
    }
    const trades = (d: Record<string, unknown>) => (d.attempts as { trades?: unknown[] }[]).flatMap((a) => a.trades ?? []);
    assert.deepEqual(trades(await detail(alipay.order.openOrderId)), [], 'no WeChat Pay trade for an Alipay order');
    assert.deepEqual(trades(await detail(wechat.order.openOrderId)), []);
  });

  test('a page that is not payable starts nothing: the authorization routes send back to it', async () => {
    const { order, token } = await createOrder({ channel: 'WECHAT_H5' });
    assert.equal((await call(t, m, 'POST', `/api/open/v1/payments/${order.outTradeNo}/close`)).statusCode, 200);
    const r = await get(`/cashier/${token}/wechat/authorize`, UA.wechat);
    assert.equal(r.statusCode, 303);
    assert.equal(new URL(String(r.headers.location)).pathname, `/cashier/${token}`);
  });

  test('two ways paid (the Native code, then the JSAPI order): the order succeeds once, the second payment is refunded', async () => {
    const { order, token } = await createOrder({ channel: 'WECHAT_H5', amountFen: 990 });
    await get(`/cashier/${token}`, UA.computer);
    const go = new URL(String((await get(`/cashier/${token}/wechat/authorize`, UA.wechat)).headers.location));
    const handle = new URL(String((await get(`${go.pathname}${go.search}`, UA.wechat)).headers.location)).searchParams.get('payer')!;
    await get(`/cashier/${token}?via=jsapi&payer=${handle}`, UA.wechat);
    assert.equal((await act(`/cashier/${token}/sandbox/pay?via=native`)).json().state, 'PAID');
    // The JSAPI trade, still open at the sandbox until the follow-up closes it, is paid too.
    const trades = (await detail(order.openOrderId)).attempts[0].trades as { tradeNo: string; product: string }[];
    const jsapi = trades.find((x) => x.product === 'JSAPI')!;
    assert.equal(await t.svc.sandbox!.buyerAction(jsapi.tradeNo, 'PAY'), 'OK');
    await t.workers.tick();
    await t.workers.tick();
    const d = await detail(order.openOrderId);
    assert.equal(d.status, 'SUCCEEDED');
    assert.deepEqual(
      d.duplicatePayments.map((x: { tradeNo: string; amountFen: number }) => [x.tradeNo, x.amountFen]),
      [[jsapi.tradeNo, 990]],
    );
    assert.ok(['PENDING', 'REFUNDED'].includes(d.duplicatePayments[0].refundState));
    assert.deepEqual(
      d.events.map((e: { eventType: string }) => e.eventType),
      ['PAYMENT_SUCCEEDED'],
      'the merchant hears of one payment',
    );
    // The merchant sees the second payment and its refund in its portal too.
    await createPortalUser(t, m.merchantId, 'dup-reader@shop.test', 'readonly');
    const reader = await portalSignIn(t, 'dup-reader@shop.test');
    const mine = await portalCall(t, reader, 'GET', `/orders/${order.openOrderId}`);
    assert.equal(mine.statusCode, 200, mine.body);
    assert.deepEqual(
      mine.json().duplicatePayments.map((x: { tradeNo: string; amountFen: number }) => [x.tradeNo, x.amountFen]),
      [[jsapi.tradeNo, 990]],
    );
  });

  test("a close of the order closes its trades at the provider too; a re-create closes the old attempt's", async () => {
    const closing = await createOrder({ channel: 'WECHAT_H5' });
    await get(`/cashier/${closing.token}`, UA.computer);
    const native = (await detail(closing.order.openOrderId)).attempts[0].trades[0];
    const c = await call(t, m, 'POST', `/api/open/v1/payments/${closing.order.outTradeNo}/close`);
    assert.equal(c.json().closeState, 'CLOSE_REQUESTED');
    assert.equal((await detail(closing.order.openOrderId)).attempts[0].trades[0].state, 'CLOSED');
    assert.equal(await t.svc.sandbox!.buyerAction(native.tradeNo, 'PAY'), 'NOT_OPEN', 'its code no longer pays');
    const again = await createOrder({ channel: 'WECHAT_H5' });
    await get(`/cashier/${again.token}`, UA.computer);
    const old = (await detail(again.order.openOrderId)).attempts[0].trades[0];
    const re = await call(t, m, 'POST', `/api/open/v1/payments/${again.order.outTradeNo}/attempts`);
    assert.equal(re.statusCode, 201, re.body);
    const d = await detail(again.order.openOrderId);
    assert.equal(d.attempts[0].trades[0].state, 'CLOSED');
    assert.equal(await t.svc.sandbox!.buyerAction(old.tradeNo, 'PAY'), 'NOT_OPEN');
  });

  test("a trade's payment whose notice was lost: the provider's statement names the trade, reconciliation applies it; a refund goes to the trade", async () => {
    const { order, token } = await createOrder({ channel: 'WECHAT_H5', amountFen: 1210 });
    await get(`/cashier/${token}`, UA.computer);
    const native = (await detail(order.openOrderId)).attempts[0].trades[0];
    assert.equal((await t.sandbox('POST', '/faults', { operation: 'PAY', outcome: 'NOTICE_LOST' })).statusCode, 201);
    await act(`/cashier/${token}/sandbox/pay?via=native`);
    assert.equal((await call(t, m, 'GET', `/api/open/v1/payments/${order.outTradeNo}`)).json().status, 'PAYING');
    const runOf = async () => {
      const r = await t.admin('POST', '/reconciliation/runs', { day: shanghaiDay(new Date()), provider: 'sandbox' });
      assert.equal(r.statusCode, 202, r.body);
      const id = r.json().runs[0].runId as string;
      return waitFor('the run', async () => {
        await t.workers.tick();
        const run = (await t.admin('GET', `/reconciliation/runs/${id}`)).json();
        return run.status === 'COMPLETED' ? run : null;
      });
    };
    await runOf();
    assert.equal((await call(t, m, 'GET', `/api/open/v1/payments/${order.outTradeNo}`)).json().status, 'SUCCEEDED');
    const found = (await t.admin('GET', '/provider-discrepancies?source=STATEMENT&limit=500')).json().discrepancies as {
      kind: string;
      subjectId: string;
      status: string;
    }[];
    assert.deepEqual(
      found.filter((x) => x.subjectId === native.tradeNo).map((x) => [x.kind, x.status]),
      [['PAID_NOT_NOTIFIED', 'RESOLVED']],
    );
    // The refund is made against the provider order that was paid (the trade's number).
    const rf = await call(t, m, 'POST', '/api/open/v1/refunds', {
      outTradeNo: order.outTradeNo,
      outRefundNo: `RF_${order.outTradeNo}`,
      refundAmountFen: 1210,
    });
    assert.equal(rf.statusCode, 201, rf.body);
    // A second run matches the trade's line: nothing new for the operator.
    const run = await runOf();
    const lines = (await t.admin('GET', `/reconciliation/runs/${run.runId}/lines?limit=1000`)).json().lines as {
      subjectId: string;
      outcome: string;
    }[];
    assert.deepEqual(
      lines.filter((l) => l.subjectId === native.tradeNo).map((l) => l.outcome),
      ['MATCHED'],
    );
  });
});
