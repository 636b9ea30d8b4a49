/**
 * The service in live mode (PROVIDER=live) against the two gateway simulators, end to end through
 * the open API: create (both channels) -> cashier -> the buyer pays at the simulator -> the
 * provider's notification -> PAYMENT_SUCCEEDED to the merchant -> refund -> REFUND_SUCCEEDED; and
 * the uncertain paths (no answer on create, close and refund) converge through the provider check.
 * A listening service (the simulators post their notifications to it) with a clock the tests move.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { LiveSimulators } from '../../simulators/live.ts';
import { type Merchant, type TestApp, call, orderBody } from '../helpers/app.ts';
import { FakeClock, type Receiver, waitFor } from '../helpers/events.ts';
import { type LiveService, startLiveService } from '../helpers/live.ts';

let sims: LiveSimulators;
let t: TestApp;
let m: Merchant;
let rx: Receiver;
const clock = new FakeClock();
const HOOK = '/hooks/live';
const PHONE_UA =
  'Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4 Mobile/15E148 Safari/604.1';
const DESKTOP_UA = 'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0 Safari/537.36';

let live: LiveService;
before(async () => {
  // The simulators on the same clock: their 5-minute signature windows move with the service's time.
  live = await startLiveService(clock, HOOK, { wechatpay: { now: () => clock.now() }, alipay: { now: () => new Date(clock.now()) } });
  ({ sims, t, m, rx } = live);
});
after(() => live.stop());

/** Signed open-API call stamped with the test's clock. */
const api = (method: string, url: string, body?: unknown) =>
  call(t, m, method, url, body, { timestamp: String(Math.floor(clock.now() / 1000)) });

async function attemptOf(openOrderId: string): Promise<string> {
  const adm = (await t.admin('GET', `/orders/${openOrderId}`)).json();
  return adm.attempts.at(-1).attemptId as string;
}

/** The workers run until `what` holds (the dispatcher delivers events, the provider check converges). */
async function until(what: string, ok: () => Promise<boolean>): Promise<void> {
  await waitFor(what, async () => {
    await t.workers.tick();
    return ok();
  });
}

function eventsOf(outTradeNo: string): { eventType: string; status: string }[] {
  return rx
    .at(HOOK)
    .map((r) => JSON.parse(r.body) as { eventType: string; status: string; outTradeNo: string })
    .filter((e) => e.outTradeNo === outTradeNo);
}

async function pay(channel: 'ALIPAY_H5' | 'WECHAT_H5', attemptId: string): Promise<void> {
  if (channel === 'ALIPAY_H5') await sims.alipay.pay(attemptId);
  else await sims.wechatpay.controls.pay(attemptId);
}

describe('live mode against the simulators', () => {
  test('the providers serve their channels; the sandbox helpers do not exist', async () => {
    assert.equal(t.svc.providers.forChannel('ALIPAY_H5')!.name, 'alipay');
    assert.equal(t.svc.providers.forChannel('WECHAT_H5')!.name, 'wechatpay');
    assert.equal((await t.sandbox('POST', '/faults', { operation: 'CLOSE', outcome: 'REJECT' })).statusCode, 404);
  });

  for (const channel of ['ALIPAY_H5', 'WECHAT_H5'] as const) {
    test(`${channel}: create -> cashier -> the buyer pays at the provider -> PAYMENT_SUCCEEDED -> refund -> REFUND_SUCCEEDED`, async () => {
      const body = orderBody({ channel, amountFen: 1234 });
      const no = String(body.outTradeNo);
      const c = await api('POST', '/api/open/v1/payments', body);
      assert.equal(c.statusCode, 201, c.body);
      const o = c.json();
      assert.equal(o.status, 'PAYING');
      if (channel === 'ALIPAY_H5') assert.match(String(o.qrCode), /^http/, 'the official collection code');
      else assert.equal('qrCode' in o, false);

      // The cashier, in a phone's browser, sends the buyer to the provider's own page.
      const page = await t.server.inject({
        method: 'GET',
        url: new URL(String(o.payUrl)).pathname,
        headers: { 'accept-language': 'zh-CN', 'user-agent': PHONE_UA },
      });
      assert.equal(page.statusCode, 200);
      const attemptId = await attemptOf(o.openOrderId);
      const link = /<a[^>]+href="([^"]+)"[^>]*>[^<]*(支付宝|微信支付)/.exec(page.body);
      assert.ok(link, 'a link to the provider page');
      const providerPage = link[1]!.replaceAll('&amp;', '&');
      assert.ok(providerPage.startsWith(channel === 'ALIPAY_H5' ? sims.alipay.url : sims.wechatpay.url), providerPage);
      assert.doesNotMatch(page.body, /模拟付款/, 'no sandbox buttons in live mode');

      await pay(channel, attemptId);
      await until('the order paid', async () => (await api('GET', `/api/open/v1/payments/${no}`)).json().status === 'SUCCEEDED');
      await until('PAYMENT_SUCCEEDED delivered', async () => eventsOf(no).some((e) => e.eventType === 'PAYMENT_SUCCEEDED'));

      const rf = await api('POST', '/api/open/v1/refunds', { outTradeNo: no, outRefundNo: `RF_${no}`, refundAmountFen: 234 });
      assert.equal(rf.statusCode, 201, rf.body);
      assert.ok(['PENDING', 'SUCCEEDED'].includes(rf.json().state), rf.body);
      await until('the refund settled', async () => (await api('GET', `/api/open/v1/refunds/RF_${no}`)).json().state === 'SUCCEEDED');
      await until('REFUND_SUCCEEDED delivered', async () => eventsOf(no).some((e) => e.eventType === 'REFUND_SUCCEEDED'));
      const types = eventsOf(no).map((e) => e.eventType);
      assert.deepEqual([...new Set(types)], ['PAYMENT_SUCCEEDED', 'REFUND_SUCCEEDED']);
    });
  }

  /** Where a buyer's phone browser opens the link: the provider's page, and for Alipay its collection code beside it. */
  async function phonePage(payUrl: string): Promise<string> {
    const r = await t.server.inject({ method: 'GET', url: new URL(payUrl).pathname, headers: { 'user-agent': PHONE_UA } });
    assert.equal(r.statusCode, 200);
    return r.body;
  }

  for (const channel of ['ALIPAY_H5', 'WECHAT_H5'] as const) {
    const sim = channel === 'ALIPAY_H5' ? 'alipay' : 'wechatpay';
    const fault = (kind: 'timeout' | 'drop') => {
      if (channel === 'ALIPAY_H5') sims.alipay.programFault('alipay.trade.precreate', { kind }, 1);
      else sims.wechatpay.controls.programFault('create', kind === 'timeout' ? { kind: 'noAnswer' } : { kind: 'drop' }, 1);
    };

    test(`${channel}: a create whose answer was lost after the provider acted gets its material again (the identical order); the buyer pays`, async () => {
      fault('timeout');
      const body = orderBody({ channel, amountFen: 777 });
      const no = String(body.outTradeNo);
      const c = await api('POST', '/api/open/v1/payments', body);
      assert.equal(c.statusCode, 201, c.body);
      assert.equal(c.json().status, 'UNKNOWN');
      assert.equal(c.json().payUrl, null);
      clock.advance(5_000);
      await until(
        'the attempt found open at the provider',
        async () => (await api('GET', `/api/open/v1/payments/${no}`)).json().status === 'PAYING',
      );
      // PAYING is payable: the merchant's replay of the create hands out the link, and the page has the material.
      const replay = await api('POST', '/api/open/v1/payments', body);
      assert.equal(replay.statusCode, 200, replay.body);
      const o = replay.json();
      assert.equal(o.replayed, true);
      assert.match(String(o.payUrl), /\/cashier\//);
      assert.equal('nextAction' in o, false);
      const attemptId = await attemptOf(o.openOrderId);
      // The collection code the identical precreate answered again: the simulator's, for this trade.
      if (channel === 'ALIPAY_H5') assert.ok(String(o.qrCode).startsWith(`${sims.alipay.url}/qr/`), o.qrCode);
      const html = await phonePage(o.payUrl);
      const link = /<a class="btn primary" href="([^"]+)"/.exec(html);
      assert.ok(link && link[1]!.replaceAll('&amp;', '&').startsWith(sims[sim].url), 'a link to the provider page');
      if (channel === 'ALIPAY_H5') assert.match(html, /<img class="qr"/);
      await pay(channel, attemptId);
      await until('the order paid', async () => (await api('GET', `/api/open/v1/payments/${no}`)).json().status === 'SUCCEEDED');
    });

    test(`${channel}: a create lost before the provider acted answers nextAction CREATE_ATTEMPT; a re-create is paid`, async () => {
      fault('drop');
      const body = orderBody({ channel, amountFen: 778 });
      const no = String(body.outTradeNo);
      const c = await api('POST', '/api/open/v1/payments', body);
      assert.equal(c.statusCode, 201, c.body);
      assert.equal(c.json().status, 'UNKNOWN');
      clock.advance(5_000);
      await until(
        'the attempt found never made',
        async () => (await api('GET', `/api/open/v1/payments/${no}`)).json().status === 'CREATED',
      );
      const q = (await api('GET', `/api/open/v1/payments/${no}`)).json();
      assert.equal(q.nextAction, 'CREATE_ATTEMPT');
      assert.equal(q.latestAttempt.state, 'FAILED');
      const replay = (await api('POST', '/api/open/v1/payments', body)).json();
      assert.equal(replay.payUrl, null);
      assert.equal(replay.nextAction, 'CREATE_ATTEMPT');
      const re = await api('POST', `/api/open/v1/payments/${no}/attempts`);
      assert.equal(re.statusCode, 201, re.body);
      assert.equal(re.json().status, 'PAYING');
      assert.match(await phonePage(re.json().payUrl), new RegExp(`href="${sims[sim].url}`));
      await pay(channel, await attemptOf(re.json().openOrderId));
      await until('the order paid', async () => (await api('GET', `/api/open/v1/payments/${no}`)).json().status === 'SUCCEEDED');
    });
  }

  test("WECHAT_H5: a link opened after the h5_url's 5 minutes gets a fresh one (the identical order asked again), and is paid", async () => {
    const body = orderBody({ channel: 'WECHAT_H5', amountFen: 640 });
    const no = String(body.outTradeNo);
    const o = (await api('POST', '/api/open/v1/payments', body)).json();
    const creates = sims.wechatpay.controls.requestCount('create');
    await phonePage(o.payUrl);
    assert.equal(sims.wechatpay.controls.requestCount('create'), creates, 'a young page is used as it is');
    clock.advance(4 * 60_000 + 1000);
    const html = await phonePage(o.payUrl);
    assert.equal(sims.wechatpay.controls.requestCount('create'), creates + 1, 'asked again');
    assert.ok(html.includes(`href="${sims.wechatpay.url}/pay/h5?`), 'the page the answer gave');
    await phonePage(o.payUrl);
    assert.equal(sims.wechatpay.controls.requestCount('create'), creates + 1, 'the fresh page is used as it is');
    await pay('WECHAT_H5', await attemptOf(o.openOrderId));
    await until('the order paid', async () => (await api('GET', `/api/open/v1/payments/${no}`)).json().status === 'SUCCEEDED');
  });

  test('WECHAT_H5: a buyer who pays through two products (the Native code, then the H5 page) is charged once: the second is refunded', async () => {
    const body = orderBody({ channel: 'WECHAT_H5', amountFen: 1500 });
    const no = String(body.outTradeNo);
    const o = (await api('POST', '/api/open/v1/payments', body)).json();
    const attemptId = await attemptOf(o.openOrderId);
    // A computer: the page makes the attempt's Native trade (its own out_trade_no) and shows its code.
    const page = await t.server.inject({ method: 'GET', url: new URL(String(o.payUrl)).pathname, headers: { 'user-agent': DESKTOP_UA } });
    assert.equal(page.statusCode, 200);
    assert.match(page.body, /<img class="qr"/);
    const trades = (await t.admin('GET', `/orders/${o.openOrderId}`)).json().attempts[0].trades as { tradeNo: string; product: string }[];
    assert.equal(trades.length, 1);
    assert.equal(trades[0]!.product, 'NATIVE');
    const native = sims.wechatpay.controls.order(trades[0]!.tradeNo)!;
    assert.equal(native.tradeType, 'NATIVE');
    assert.notEqual(native.outTradeNo, attemptId, 'another number than the H5 order');
    await sims.wechatpay.controls.scanPay(native.codeUrl!);
    // Before the service has closed the H5 order, the buyer pays it too.
    await sims.wechatpay.controls.pay(attemptId);
    const duplicates = async () =>
      (await t.admin('GET', `/orders/${o.openOrderId}`)).json().duplicatePayments as { tradeNo: string; refundState: string }[];
    // Refunded at WeChat Pay, and the ledger's duplicate converged (the duplicate's provider check).
    await until('the second payment refunded', async () => {
      clock.advance(4_000);
      return (await duplicates())[0]?.refundState === 'REFUNDED';
    });
    const q = (await api('GET', `/api/open/v1/payments/${no}`)).json();
    assert.equal(q.status, 'SUCCEEDED');
    const dup = sims.wechatpay.controls.refund(`dup_${attemptId.slice(4)}`)!;
    assert.equal(dup.status, 'SUCCESS');
    assert.equal(dup.outTradeNo, attemptId);
    assert.equal(dup.refund, 1500);
    assert.equal(sims.wechatpay.controls.refund(`dup_${native.outTradeNo.slice(4)}`), null, 'the first payment is kept');
    await until('PAYMENT_SUCCEEDED delivered', async () => eventsOf(no).some((e) => e.eventType === 'PAYMENT_SUCCEEDED'));
    assert.deepEqual(
      eventsOf(no).map((e) => e.eventType),
      ['PAYMENT_SUCCEEDED'],
      "one payment for the merchant; the duplicate is the service's own refund",
    );
    assert.deepEqual(
      (await duplicates()).map((x) => [x.tradeNo, x.refundState]),
      [[attemptId, 'REFUNDED']],
    );
  });

  test('a close the provider does not answer is UNKNOWN_KEPT, then finished by the pending-close worker', async () => {
    const body = orderBody({ channel: 'WECHAT_H5' });
    const no = String(body.outTradeNo);
    assert.equal((await api('POST', '/api/open/v1/payments', body)).statusCode, 201);
    sims.wechatpay.controls.programFault('close', { kind: 'noAnswer' }, 1);
    const cl = await api('POST', `/api/open/v1/payments/${no}/close`);
    assert.equal(cl.statusCode, 200, cl.body);
    assert.equal(cl.json().closeState, 'UNKNOWN_KEPT');
    clock.advance(3_000);
    await until('the order closed', async () => (await api('GET', `/api/open/v1/payments/${no}`)).json().status === 'CLOSED');
    await until('PAYMENT_CLOSED delivered', async () => eventsOf(no).some((e) => e.eventType === 'PAYMENT_CLOSED'));
  });

  test('a refund the provider does not answer is UNKNOWN, then converges through the provider check', async () => {
    const body = orderBody({ channel: 'ALIPAY_H5', amountFen: 900 });
    const no = String(body.outTradeNo);
    const o = (await api('POST', '/api/open/v1/payments', body)).json();
    await pay('ALIPAY_H5', await attemptOf(o.openOrderId));
    await until('the order paid', async () => (await api('GET', `/api/open/v1/payments/${no}`)).json().status === 'SUCCEEDED');
    sims.alipay.programFault('alipay.trade.refund', { kind: 'timeout' }, 1);
    // Its settlement notice is lost too: only the provider check can learn the outcome.
    sims.alipay.loseNotifications(1);
    const rf = await api('POST', '/api/open/v1/refunds', { outTradeNo: no, outRefundNo: `RF_${no}`, refundAmountFen: 900 });
    assert.equal(rf.statusCode, 201, rf.body);
    assert.equal(rf.json().state, 'UNKNOWN');
    clock.advance(5_000);
    await until('the refund settled', async () => {
      clock.advance(3_000);
      return (await api('GET', `/api/open/v1/refunds/RF_${no}`)).json().state === 'SUCCEEDED';
    });
  });

  test('a notice whose amount does not match the order is kept for the operator, never applied', async () => {
    const body = orderBody({ channel: 'WECHAT_H5', amountFen: 500 });
    const no = String(body.outTradeNo);
    const o = (await api('POST', '/api/open/v1/payments', body)).json();
    const attemptId = await attemptOf(o.openOrderId);
    // The provider's record says another amount (as if the order had been tampered with on the way).
    sims.wechatpay.controls.order(attemptId)!.total = 499;
    await sims.wechatpay.controls.pay(attemptId);
    const kept = await waitFor('the discrepancy', async () => {
      const d = (await t.admin('GET', '/provider-discrepancies?status=OPEN')).json().discrepancies as { subjectId: string; kind: string }[];
      return d.find((x) => x.subjectId === attemptId);
    });
    assert.equal(kept.kind, 'AMOUNT_MISMATCH');
    assert.equal((await api('GET', `/api/open/v1/payments/${no}`)).json().status, 'PAYING', 'not applied');
    const metrics = await t.server.inject({
      method: 'GET',
      url: '/metrics',
      headers: { authorization: 'Bearer test-admin-token-0123456789' },
    });
    assert.match(metrics.body, /mps_provider_discrepancies_open\{provider="wechatpay",kind="AMOUNT_MISMATCH"\} 1/);
  });
});
