/**
 * Create order, re-create attempt, query order, close order through signed HTTP (seed
 * "Endpoints", "States and transitions"; decisions.md sections 4-6).
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import {
  type Merchant,
  type TestApp,
  call,
  merchantKeyPair,
  orderBody,
  provision,
  requestId,
  runDueWork,
  startTestApp,
  tradeNo,
  drainFollowUps,
  makeJobDue,
} from '../helpers/app.ts';
import { FakeClock, waitFor } from '../helpers/events.ts';
import { REFUND_SETTLE_MS } from '../../src/providers/sandbox/sandbox.ts';

let t: TestApp;
let m: Merchant;
const clock = new FakeClock();
before(async () => {
  t = await startTestApp({}, { clock });
  m = await provision(t);
});
after(() => t.stop());

const create = (body: Record<string, unknown>, mch = m, o = {}) => call(t, mch, 'POST', '/api/open/v1/payments', body, o);
const query = (no: string, mch = m) => call(t, mch, 'GET', `/api/open/v1/payments/${no}`);
const recreate = (no: string, mch = m, o = {}) => call(t, mch, 'POST', `/api/open/v1/payments/${no}/attempts`, undefined, o);
const closeOrder = (no: string, mch = m) => call(t, mch, 'POST', `/api/open/v1/payments/${no}/close`);
/** Settles `p` while the service's clock runs fast (a second every 20 ms of real time). */
async function whileTimePasses<T>(p: Promise<T>): Promise<T> {
  let done = false;
  void p.finally(() => (done = true)).catch(() => {});
  while (!done) {
    await new Promise((r) => setTimeout(r, 20));
    clock.advance(1000);
  }
  return p;
}
const fault = async (operation: string, outcome: string, times = 1, delayMs?: number) => {
  const r = await t.sandbox('POST', '/faults', { operation, outcome, times, ...(delayMs !== undefined ? { delayMs } : {}) });
  assert.equal(r.statusCode, 201, r.body);
};
const pay = async (openOrderId: string, attemptId?: string) => {
  const r = await t.sandbox('POST', `/payments/${openOrderId}/pay`, attemptId ? { attemptId } : undefined);
  assert.equal(r.statusCode, 200, r.body);
};

function expectBodyInvalid(r: { statusCode: number; json(): Record<string, unknown> }, field?: string) {
  assert.equal(r.statusCode, 400);
  const b = r.json();
  assert.equal(b.code, 'OPEN_API_BODY_INVALID');
  if (field) assert.deepEqual(b.details, { field });
}

describe('create order', () => {
  test('201 with the order snapshot of a new order', async () => {
    const body = orderBody({ attach: '  keep me  ', tradeScope: 'CARD_VIRTUAL', returnUrl: 'https://shop.example/done' });
    const before = Date.now();
    const r = await create(body);
    assert.equal(r.statusCode, 201, r.body);
    const o = r.json();
    assert.match(o.requestId, /^req_/);
    assert.match(o.openOrderId, /^ord_/);
    assert.equal(o.outTradeNo, body.outTradeNo);
    assert.equal(o.status, 'PAYING');
    assert.equal(o.closedReason, null);
    assert.equal(o.channel, 'ALIPAY_H5');
    assert.equal(o.tradeScope, 'CARD_VIRTUAL');
    assert.deepEqual(o.links, ['ALIPAY_AGGREGATION_NATIVE']);
    assert.equal(o.amountFen, 1000);
    assert.equal(o.currency, 'CNY');
    assert.equal(o.attach, 'keep me', 'attach is trimmed');
    assert.match(o.expireAt, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    const exp = Date.parse(o.expireAt);
    assert.ok(exp >= before + 900_000 - 2000 && exp <= Date.now() + 900_000 + 2000, 'default window is 15 minutes');
    assert.equal(o.payUrlExpireHint, Math.floor(exp / 1000));
    assert.match(o.payUrl, /^https:\/\/pay\.example\.test\/cashier\/[A-Za-z0-9_-]{43}$/);
    assert.ok(!o.payUrl.includes(body.outTradeNo as string) && !o.payUrl.includes(o.openOrderId));
    assert.equal(typeof o.qrCode, 'string');
    assert.ok(!('nextAction' in o));
    assert.ok(!('latestAttempt' in o));
    assert.equal(o.replayed, false);
    assert.ok(!('unknown' in o), 'unknown appears only when true');
    assert.deepEqual(o.feeProjection, {
      companyServiceFeeFen: 6,
      companyServiceFeeRateBps: 60,
      merchantRateBps: 60,
      merchantSettlementFen: 994,
      ruleVersion: 0,
      thresholdFen: 10_000_000,
      tier: 'STANDARD',
    });
  });

  test('WECHAT_H5 orders get WECHAT_JSAPI and no qrCode field', async () => {
    const r = await create(orderBody({ channel: 'WECHAT_H5' }));
    assert.equal(r.statusCode, 201, r.body);
    assert.deepEqual(r.json().links, ['WECHAT_JSAPI']);
    assert.ok(!('qrCode' in r.json()));
  });

  test('fee projection follows the merchant fee rule and its threshold tier', async () => {
    const mch = await provision(t);
    const fr = await t.admin('PUT', `/merchants/${mch.merchantId}/fee-rule`, {
      ruleVersion: 7,
      standardRateBps: 55,
      largeRateBps: 30,
      thresholdFen: 100_000,
      merchantRateBps: 38,
    });
    assert.equal(fr.statusCode, 200, fr.body);
    const small = (await create(orderBody({ amountFen: 99_999 }), mch)).json().feeProjection;
    assert.deepEqual(small, {
      companyServiceFeeFen: Math.floor((99_999 * 55 + 5000) / 10000),
      companyServiceFeeRateBps: 55,
      merchantRateBps: 38,
      merchantSettlementFen: 99_999 - Math.floor((99_999 * 55 + 5000) / 10000),
      ruleVersion: 7,
      thresholdFen: 100_000,
      tier: 'STANDARD',
    });
    const large = (await create(orderBody({ amountFen: 100_000 }), mch)).json().feeProjection;
    assert.equal(large.tier, 'LARGE');
    assert.equal(large.companyServiceFeeRateBps, 30);
    assert.equal(large.companyServiceFeeFen, 300);
  });

  test('field constraints at their boundaries give 400 OPEN_API_BODY_INVALID and create nothing', async () => {
    const cases: [Record<string, unknown>, string | undefined][] = [
      [{ outTradeNo: 'A2345' }, 'outTradeNo'],
      [{ outTradeNo: 'A'.repeat(65) }, 'outTradeNo'],
      [{ outTradeNo: 'ABC.123456' }, 'outTradeNo'],
      [{ outTradeNo: 'ABC 123456' }, 'outTradeNo'],
      [{ outTradeNo: 'ABCé123456' }, 'outTradeNo'],
      [{ channel: 'alipay_h5' }, 'channel'],
      [{ tradeScope: 'ONLINE' }, 'tradeScope'],
      [{ amountFen: 0 }, 'amountFen'],
      [{ amountFen: -1 }, 'amountFen'],
      [{ amountFen: 10_000_000_001 }, 'amountFen'],
      [{ amountFen: 12.5 }, 'amountFen'],
      [{ amountFen: '100' }, 'amountFen'],
      [{ amountFen: null }, 'amountFen'],
      [{ currency: 'cny' }, 'currency'],
      [{ currency: 'USD' }, 'currency'],
      [{ subject: 'x'.repeat(129) }, 'subject'],
      [{ subject: '😀'.repeat(129) }, 'subject'],
      [{ description: 'd'.repeat(257) }, 'description'],
      [{ attach: 'a'.repeat(257) }, 'attach'],
      [{ returnUrl: 'http://shop.example/done' }, 'returnUrl'],
      [{ returnUrl: 'https://user:pw@shop.example/done' }, 'returnUrl'],
      [{ returnUrl: 'https://shop.example/done?x=1' }, 'returnUrl'],
      [{ returnUrl: 'https://shop.example/done?' }, 'returnUrl'],
      [{ returnUrl: 'https://shop.example/done#top' }, 'returnUrl'],
      [{ returnUrl: `https://shop.example/${'p'.repeat(513 - 21)}` }, 'returnUrl'],
      [{ returnUrl: '/relative' }, 'returnUrl'],
      [{ returnUrl: 'https:///shop.example/done' }, 'returnUrl'],
      [{ unknownField: 1 }, 'unknownField'],
      // PostgreSQL text cannot hold U+0000: refused as input, never a 503.
      [{ subject: 'a\u0000b' }, 'subject'],
      [{ description: '\u0000' }, 'description'],
      [{ attach: 'x\u0000' }, 'attach'],
      // A lone surrogate would be stored as U+FFFD, unlike the value answered: refused as input.
      [{ subject: 'a\ud800b' }, 'subject'],
      [{ attach: '\udc00' }, 'attach'],
    ];
    for (const ip of [
      '10.1.2.3',
      '172.16.0.1',
      '192.168.1.1',
      '127.0.0.1',
      '100.64.0.1',
      '169.254.1.1',
      '192.0.2.1',
      '198.51.100.7',
      '203.0.113.9',
      '0.0.0.0',
      '255.255.255.255',
      '224.0.0.1',
      '::1',
      'fe80::1',
      'fc00::1',
      '2001:db8::1',
      '::ffff:10.0.0.1',
      'not-an-ip',
      '8.8.8',
    ]) {
      cases.push([{ payerClientIp: ip }, 'payerClientIp']);
    }
    for (const [patch, field] of cases) {
      const body = orderBody(patch);
      const r = await create(body);
      assert.equal(r.statusCode, 400, `${JSON.stringify(patch).slice(0, 60)}: ${r.body}`);
      expectBodyInvalid(r, field);
      assert.equal(
        (
          await query(
            String(body.outTradeNo)
              .replace(/[^A-Za-z0-9_-]/g, '_')
              .padEnd(6, '_')
              .slice(0, 64),
          )
        ).statusCode,
        404,
      );
    }
    for (const required of ['outTradeNo', 'channel', 'amountFen', 'currency', 'subject', 'payerClientIp']) {
      const body = orderBody();
      delete body[required];
      expectBodyInvalid(await create(body), required);
    }
    expectBodyInvalid(await create([orderBody()] as unknown as Record<string, unknown>));
    // 1.0 is a decimal even though JSON.parse reads it as 1.
    const raw = JSON.stringify(orderBody({ amountFen: 7 })).replace('"amountFen":7', '"amountFen":1.0');
    expectBodyInvalid(await create(raw as unknown as Record<string, unknown>), 'amountFen');
    const exp = JSON.stringify(orderBody({ amountFen: 7 })).replace('"amountFen":7', '"amountFen":1e2');
    expectBodyInvalid(await create(exp as unknown as Record<string, unknown>), 'amountFen');
  });

  test('limits just inside the boundaries are accepted', async () => {
    // Order numbers of exactly 6 and 64 characters, unique per run (the rest of the body varies too).
    const six = tradeNo()
      .replace(/[^A-Za-z0-9]/g, '')
      .slice(-6);
    const ok: Record<string, unknown>[] = [
      { outTradeNo: six },
      { outTradeNo: `${tradeNo()}_`.padEnd(64, 'Z') },
      { amountFen: 1 },
      { amountFen: 10_000_000_000 },
      { subject: '😀'.repeat(128) },
      { description: 'd'.repeat(256) },
      { attach: `   ${'a'.repeat(256)}   ` },
      { returnUrl: `https://shop.example/${'p'.repeat(512 - 21)}` },
      { payerClientIp: '2606:4700:4700::1111' },
      { payerClientIp: '1.1.1.1' },
    ];
    assert.equal(String(ok[0]!.outTradeNo).length, 6);
    assert.equal(String(ok[1]!.outTradeNo).length, 64);
    for (const patch of ok) {
      const r = await create(orderBody(patch));
      assert.equal(r.statusCode, 201, `${JSON.stringify(patch).slice(0, 80)}: ${r.body}`);
    }
  });

  test('the largest amount the schema allows is payable, paid and refunded in full (one create alone, and creates batched together)', async () => {
    const max = 10_000_000_000;
    const alone = orderBody({ amountFen: max });
    const batched = [0, 1, 2].map((i) => orderBody({ amountFen: max - i, channel: i % 2 ? 'WECHAT_H5' : 'ALIPAY_H5' }));
    const answers = [await create(alone), ...(await Promise.all(batched.map((b) => create(b))))];
    for (const r of answers) {
      assert.equal(r.statusCode, 201, r.body);
      assert.equal(r.json().status, 'PAYING', r.body);
      assert.notEqual(r.json().payUrl, null);
    }
    for (const [i, body] of [alone, ...batched].entries()) {
      await pay(answers[i]!.json().openOrderId);
      const q = (await query(String(body.outTradeNo))).json();
      assert.equal(q.status, 'SUCCEEDED', JSON.stringify(q));
      assert.equal(q.amountFen, body.amountFen);
    }
    const outRefundNo = `R${tradeNo()}`.slice(0, 64);
    const refund = await call(t, m, 'POST', '/api/open/v1/refunds', { outTradeNo: alone.outTradeNo, outRefundNo, refundAmountFen: max });
    assert.equal(refund.statusCode, 201, refund.body);
    assert.equal(refund.json().state, 'PENDING', refund.body);
    assert.equal(refund.json().amountFen, max);
    // The sandbox's settlement time passes and it sends its notice: the whole amount refunded.
    clock.advance(REFUND_SETTLE_MS);
    await t.svc.sandbox!.sendDueRefundNotices(1000);
    const settled = (await call(t, m, 'GET', `/api/open/v1/refunds/${outRefundNo}`)).json();
    assert.equal(settled.state, 'SUCCEEDED', JSON.stringify(settled));
    const more = await call(t, m, 'POST', '/api/open/v1/refunds', {
      outTradeNo: alone.outTradeNo,
      outRefundNo: `${outRefundNo.slice(0, 60)}_2`,
      refundAmountFen: 1,
    });
    assert.equal(more.statusCode, 422, 'nothing is left to refund');
  });

  test('same outTradeNo and digest replays (payerClientIp outside the digest); another digest conflicts', async () => {
    const body = orderBody({ returnUrl: 'https://shop.example/r', attach: 'x' });
    const first = (await create(body)).json();
    const again = await create({ ...body, payerClientIp: '1.0.0.1', attach: '  x ' });
    assert.equal(again.statusCode, 200, again.body);
    const a = again.json();
    assert.equal(a.replayed, true);
    assert.equal(a.openOrderId, first.openOrderId);
    assert.equal(a.payUrl, first.payUrl, 'the valid attempt is still offered');
    for (const patch of [
      { amountFen: 1001 },
      { returnUrl: 'https://shop.example/other' },
      { subject: 'Tea' },
      { description: 'd' },
      { tradeScope: 'PHYSICAL_FACE_TO_FACE' },
      { channel: 'WECHAT_H5' },
      { attach: 'y' },
    ]) {
      const c = await create({ ...body, ...patch });
      assert.equal(c.statusCode, 409, JSON.stringify(patch));
      assert.equal(c.json().code, 'OPEN_API_IDEMPOTENCY_CONFLICT');
    }
  });

  test('a repeated X-SVC-Request-Id returns the first response, not the current state', async () => {
    const body = orderBody();
    const rid = `rid_${tradeNo()}`;
    const first = await create(body, m, { requestId: rid });
    assert.equal(first.statusCode, 201);
    await closeOrder(String(body.outTradeNo));
    const again = await create(body, m, { requestId: rid });
    assert.equal(again.statusCode, 201);
    assert.equal(again.body, first.body, 'byte for byte');
    assert.equal((await query(String(body.outTradeNo))).json().status, 'CLOSED');
  });

  test('channel and trade scope availability give 422', async () => {
    const mch = await provision(t, { app: { channels: ['WECHAT_H5'], tradeScopes: ['PHYSICAL_FACE_TO_FACE'] } });
    const c = await create(orderBody(), mch);
    assert.equal(c.statusCode, 422);
    assert.equal(c.json().code, 'OPEN_API_CHANNEL_UNAVAILABLE');
    const s = await create(orderBody({ channel: 'WECHAT_H5', tradeScope: 'CARD_VIRTUAL' }), mch);
    assert.equal(s.statusCode, 422);
    assert.equal(s.json().code, 'OPEN_API_TRADE_SCOPE_UNAVAILABLE');
    assert.equal((await create(orderBody({ channel: 'WECHAT_H5' }), mch)).statusCode, 201);
  });

  test('a voided link is never listed', async () => {
    const mch = await provision(t, { app: { voidedLinks: ['ALIPAY_AGGREGATION_NATIVE'] } });
    const r = await create(orderBody(), mch);
    assert.equal(r.statusCode, 201, r.body);
    assert.deepEqual(r.json().links, []);
  });

  test('the payment window is the app own (60 to 7,200 s) and sets expireAt', async () => {
    for (const [seconds, status] of [
      [60, 201],
      [7200, 201],
      [59, 400],
      [7201, 400],
    ] as const) {
      const r = await t.admin('POST', `/merchants/${m.merchantId}/apps`, { paymentWindowSeconds: seconds });
      assert.equal(r.statusCode, status, `${seconds}: ${r.body}`);
    }
    const mch = await provision(t, { app: { paymentWindowSeconds: 60 } });
    const before = Date.now();
    const o = (await create(orderBody(), mch)).json();
    const exp = Date.parse(o.expireAt);
    assert.ok(exp >= before + 60_000 - 2000 && exp <= Date.now() + 60_000 + 2000, `${o.expireAt}`);
  });

  test('the same outTradeNo in another app is another order (identity is app + outTradeNo)', async () => {
    const other = await provision(t);
    const body = orderBody();
    const a = await create(body);
    const b = await create(body, other);
    assert.equal(a.statusCode, 201);
    assert.equal(b.statusCode, 201, 'not a replay of the other app order');
    assert.notEqual(a.json().openOrderId, b.json().openOrderId);
    assert.equal(b.json().replayed, false);
  });

  test('PRIORITY and SINGLE: the whole amount goes against the first account ceiling, or the next available one', async () => {
    const mch = await provision(t, { entityType: 'CORPORATE' });
    const acc = async (entityType: string) =>
      (
        await t.admin('POST', `/merchants/${mch.merchantId}/settlement-accounts`, {
          entityType,
          entityName: 'E',
          merchantNo: 'M1',
          cardNumber: '6222020000001234',
        })
      ).json().accountId as string;
    const ind = await acc('INDIVIDUAL');
    const corp = await acc('CORPORATE');
    for (const [mode, participants] of [
      ['PRIORITY', [ind, corp]],
      ['SINGLE', [ind]],
    ] as const) {
      const al = await t.admin('PUT', `/merchants/${mch.merchantId}/allocation`, { mode, participants, unavailablePolicy: 'FAIL' });
      assert.equal(al.statusCode, 200, al.body);
      assert.equal((await create(orderBody({ amountFen: 500_000 }), mch)).statusCode, 201, mode);
      const over = await create(orderBody({ amountFen: 500_001 }), mch);
      assert.equal(over.statusCode, 422, `${mode}: ${over.body}`);
      assert.deepEqual(over.json().details, { scopes: ['SINGLE_AMOUNT'] });
    }
    // The first participant cannot take it: with NEXT_AVAILABLE (or REDISTRIBUTE) the next one does.
    for (const unavailablePolicy of ['NEXT_AVAILABLE', 'REDISTRIBUTE']) {
      const al = await t.admin('PUT', `/merchants/${mch.merchantId}/allocation`, {
        mode: 'PRIORITY',
        participants: [ind, corp],
        unavailablePolicy,
      });
      assert.equal(al.statusCode, 200, al.body);
      const r = await create(orderBody({ amountFen: 500_001 }), mch);
      assert.equal(r.statusCode, 201, `${unavailablePolicy}: ${r.body}`);
    }
    const only = await t.admin('PUT', `/merchants/${mch.merchantId}/allocation`, {
      mode: 'PRIORITY',
      participants: [ind],
      unavailablePolicy: 'NEXT_AVAILABLE',
    });
    assert.equal(only.statusCode, 200, only.body);
    assert.equal((await create(orderBody({ amountFen: 500_001 }), mch)).statusCode, 422, 'no next participant');
  });

  test('amount ceilings: individual default tier, agreed value, RATIO legs, corporate none, daily ceiling', async () => {
    const ind = await provision(t, { entityType: 'INDIVIDUAL' });
    assert.equal((await create(orderBody({ amountFen: 500_000 }), ind)).statusCode, 201);
    const over = await create(orderBody({ amountFen: 500_001 }), ind);
    assert.equal(over.statusCode, 422);
    assert.deepEqual(over.json(), {
      code: 'OPEN_API_LIMIT_EXCEEDED',
      message: over.json().message,
      requestId: over.json().requestId,
      details: { scopes: ['SINGLE_AMOUNT'] },
    });

    const corp = await provision(t, { entityType: 'CORPORATE' });
    assert.equal((await create(orderBody({ amountFen: 9_000_000_000 }), corp)).statusCode, 201);

    // RATIO: each leg against its own account; the corporate leg has no ceiling.
    const mix = await provision(t, { entityType: 'CORPORATE' });
    const acc = async (entityType: string, agreedCeilingFen?: number) =>
      (
        await t.admin('POST', `/merchants/${mix.merchantId}/settlement-accounts`, {
          entityType,
          entityName: 'E',
          merchantNo: 'M1',
          cardNumber: '6222020000001234',
          ...(agreedCeilingFen ? { agreedCeilingFen } : {}),
        })
      ).json().accountId as string;
    const a1 = await acc('INDIVIDUAL', 1_000_000);
    const a2 = await acc('CORPORATE');
    const al = await t.admin('PUT', `/merchants/${mix.merchantId}/allocation`, {
      mode: 'RATIO',
      participants: [a1, a2],
      ratios: [
        { accountId: a1, shareBps: 2500 },
        { accountId: a2, shareBps: 7500 },
      ],
      unavailablePolicy: 'FAIL',
    });
    assert.equal(al.statusCode, 200, al.body);
    assert.equal((await create(orderBody({ amountFen: 4_000_000 }), mix)).statusCode, 201, 'individual leg 1,000,000 = agreed ceiling');
    const r = await create(orderBody({ amountFen: 4_000_004 }), mix);
    assert.equal(r.statusCode, 422, 'individual leg 1,000,001 (remainder to the first leg)');
    assert.deepEqual(r.json().details, { scopes: ['SINGLE_AMOUNT'] });

    const daily = await provision(t, { app: { dailyAmountCeilingFen: 3000 } });
    assert.equal((await create(orderBody({ amountFen: 2000 }), daily)).statusCode, 201);
    const d = await create(orderBody({ amountFen: 1001 }), daily);
    assert.equal(d.statusCode, 422);
    assert.deepEqual(d.json().details, { scopes: ['DAILY_AMOUNT'] });
    assert.equal((await create(orderBody({ amountFen: 1000 }), daily)).statusCode, 201, 'exactly the ceiling');

    const both = await provision(t, { entityType: 'INDIVIDUAL', app: { dailyAmountCeilingFen: 100 } });
    const b = await create(orderBody({ amountFen: 600_000 }), both);
    assert.deepEqual(b.json().details, { scopes: ['SINGLE_AMOUNT', 'DAILY_AMOUNT'] });
  });

  test('50 parallel creates with one outTradeNo make one order', async () => {
    const body = orderBody();
    const rs = await Promise.all(Array.from({ length: 50 }, () => create(body)));
    const statuses = rs.map((r) => r.statusCode).sort();
    assert.ok(
      rs.every((r) => r.statusCode < 300),
      rs
        .filter((r) => r.statusCode >= 300)
        .map((r) => r.body)
        .slice(0, 3)
        .join('\n'),
    );
    assert.equal(statuses.filter((s) => s === 201).length, 1, statuses.join(','));
    assert.equal(statuses.filter((s) => s === 200).length, 49);
    const ids = new Set(rs.map((r) => r.json().openOrderId));
    assert.equal(ids.size, 1);
    const payUrls = new Set(rs.map((r) => r.json().payUrl));
    assert.equal(payUrls.size, 1, 'every answer offers the same attempt');
    const adm = await t.admin('GET', `/orders/${[...ids][0]}`);
    assert.equal(adm.json().attempts.length, 1);
  });

  test('40 parallel creates of distinct orders (batched together): each answer and each stored order is its own', async () => {
    const bodies = Array.from({ length: 40 }, (_, i) =>
      orderBody({ amountFen: 1000 + i, channel: i % 2 ? 'WECHAT_H5' : 'ALIPAY_H5', attach: `n${i}` }),
    );
    const rs = await Promise.all(bodies.map((b) => create(b)));
    const queried = await Promise.all(bodies.map((b) => query(String(b.outTradeNo))));
    for (const [i, b] of bodies.entries()) {
      const r = rs[i]!.json();
      assert.equal(rs[i]!.statusCode, 201, rs[i]!.body);
      assert.equal(r.requestId, rs[i]!.headers['x-svc-request-id']);
      assert.equal(r.outTradeNo, b.outTradeNo);
      assert.equal(r.amountFen, b.amountFen);
      assert.equal(r.channel, b.channel);
      assert.equal(r.attach, `n${i}`);
      assert.equal(r.status, 'PAYING');
      assert.ok(r.payUrl);
      const q = queried[i]!.json();
      assert.equal(q.openOrderId, r.openOrderId);
      assert.equal(q.amountFen, b.amountFen);
      assert.equal(q.latestAttempt.state, 'ACCEPTED');
    }
    assert.equal(new Set(rs.map((r) => r.json().openOrderId)).size, 40);
    assert.equal(new Set(rs.map((r) => r.json().payUrl)).size, 40);
    // Replays of each answer, also in parallel, are byte for byte the first answers.
    const again = await Promise.all(bodies.map((b, i) => create(b, m, { requestId: rs[i]!.json().requestId })));
    again.forEach((a, i) => {
      assert.equal(a.statusCode, 201);
      assert.equal(a.body, rs[i]!.body);
    });
  });

  test('provider outcomes: REJECT gives 502 and a payable order; TIMEOUT gives unknown; PAID succeeds at once', async () => {
    await fault('CREATE_ATTEMPT', 'REJECT');
    const rejected = orderBody();
    const r = await create(rejected);
    assert.equal(r.statusCode, 502);
    assert.deepEqual(Object.keys(r.json()).sort(), ['code', 'message', 'requestId']);
    assert.equal(r.json().code, 'OPEN_API_PROVIDER_REJECTED');
    const replay = await create(rejected);
    assert.equal(replay.statusCode, 200);
    assert.equal(replay.json().status, 'CREATED');
    assert.equal(replay.json().payUrl, null);
    assert.equal(replay.json().nextAction, 'CREATE_ATTEMPT');

    await fault('CREATE_ATTEMPT', 'TIMEOUT');
    const uncertain = orderBody();
    const u = await create(uncertain);
    assert.equal(u.statusCode, 201, u.body);
    assert.equal(u.json().unknown, true);
    assert.equal(u.json().status, 'UNKNOWN');
    assert.equal(u.json().payUrl, null);

    await fault('CREATE_ATTEMPT', 'PAID');
    const paid = await create(orderBody());
    assert.equal(paid.statusCode, 201);
    assert.equal(paid.json().status, 'SUCCEEDED');
    assert.equal(paid.json().payUrl, null);
  });
});

/** The openOrderId of an order once the create in flight has recorded it (before the provider answers). */
async function recordedOrderId(no: string): Promise<string> {
  for (let i = 0; i < 50; i++) {
    await new Promise((r) => setTimeout(r, 20));
    const q = await query(no);
    if (q.statusCode === 200) return q.json().openOrderId;
  }
  throw new Error(`order ${no} not recorded within 1 s`);
}

describe('create order: the outcome when the order changed during the provider call', () => {
  test('a close during the provider call waits for the attempt, then closes it at the provider too; the create replays its own answer', async () => {
    await fault('CREATE_ATTEMPT', 'DELAY_MS', 1, 700);
    const body = orderBody();
    const no = String(body.outTradeNo);
    const rid = requestId();
    const pending = create(body, m, { requestId: rid });
    // The order exists (CREATED, its attempt PENDING) while the provider call waits.
    let seen = false;
    for (let i = 0; i < 50 && !seen; i++) {
      await new Promise((r) => setTimeout(r, 20));
      seen = (await query(no)).statusCode === 200;
    }
    assert.ok(seen, 'the order is recorded before the provider answers');
    const closing = closeOrder(no);
    const r = await pending;
    assert.equal(r.statusCode, 201, r.body);
    assert.equal(r.json().status, 'PAYING');
    const closed = await closing;
    assert.equal(closed.statusCode, 200, closed.body);
    assert.equal(closed.json().closeState, 'CLOSE_REQUESTED');
    assert.equal(closed.json().status, 'CLOSED');
    const q = await query(no);
    assert.equal(q.json().status, 'CLOSED');
    assert.equal(q.json().latestAttempt.state, 'CLOSED');
    // The payment the provider opened after the close was sent is closed there too.
    const adm = (await t.admin('GET', `/orders/${r.json().openOrderId}`)).json();
    const late = await t.sandbox('POST', `/payments/${r.json().openOrderId}/pay`, { attemptId: adm.attempts[0].attemptId });
    assert.equal(late.statusCode, 409, late.body);
    const again = await create(body, m, { requestId: rid });
    assert.equal(again.statusCode, 201);
    assert.equal(again.body, r.body, 'the request id replays the first answer byte for byte');
  });

  test('a close kept pending (UNKNOWN_KEPT) while the attempt was being created: the create hands out no material, the cashier takes no payment, the close then finishes', async () => {
    await fault('CREATE_ATTEMPT', 'DELAY_MS', 1, 700);
    const body = orderBody({ channel: 'ALIPAY_H5' });
    const no = String(body.outTradeNo);
    const rid = requestId();
    const pending = create(body, m, { requestId: rid });
    const id = await recordedOrderId(no);
    // A close that gave up waiting for the PENDING attempt (as a request does after 10 s): the
    // order is kept, its close pending.
    const { closeOrderById } = await import('../../src/usecases/close-order.ts');
    const kept = await closeOrderById(t.svc, id, 'CLOSE_REQUESTED', { background: true });
    assert.equal(kept.closeState, 'UNKNOWN_KEPT');
    const r = await pending;
    assert.equal(r.statusCode, 201, r.body);
    const o = r.json();
    assert.equal(o.payUrl, null, 'no payment material behind a close');
    assert.equal(o.qrCode, null);
    assert.equal(o.nextAction, undefined, 'an order being closed needs no new attempt');
    // The provider's attempt is recorded; the hosted page does not offer it, and refuses to pay it.
    const [att] = (
      await t.svc.db.query<{ state: string; cashier_token: string }>('SELECT state, cashier_token FROM attempts WHERE order_id = $1', [id])
    ).rows;
    assert.equal(att!.state, 'ACCEPTED');
    const status = await t.server.inject({ method: 'GET', url: `/cashier/${att!.cashier_token}/status` });
    assert.equal(status.json().state, 'PROCESSING');
    const pay = await t.server.inject({
      method: 'POST',
      url: `/cashier/${att!.cashier_token}/sandbox/pay`,
      headers: { 'x-cashier-request': 'sandbox' },
    });
    assert.equal(pay.statusCode, 409, pay.body);
    const replay = (
      await t.svc.db.query<{ response_body: string }>('SELECT response_body FROM request_replays WHERE request_id = $1', [rid])
    ).rows[0];
    assert.equal(replay?.response_body, r.body, 'the answer kept for the request id is the one sent');
    // The pending-close worker finishes the close: the order and the provider's payment are closed.
    const done = await closeOrderById(t.svc, id, 'CLOSE_REQUESTED', { background: true });
    assert.equal(done.closeState, 'CLOSE_REQUESTED');
    const q = (await query(no)).json();
    assert.equal(q.status, 'CLOSED');
    assert.equal(q.latestAttempt.state, 'CLOSED');
    const late = await t.sandbox('POST', `/payments/${id}/pay`, {
      attemptId: (await t.admin('GET', `/orders/${id}`)).json().attempts[0].attemptId,
    });
    assert.equal(late.statusCode, 409, late.body);
  });

  test('the batched accept leaves an order with a pending close to the general path', async () => {
    const a = (await create(orderBody())).json();
    const b = (await create(orderBody())).json();
    // Two orders as a create leaves them before the accept: CREATED, attempt PENDING; one has a close pending.
    for (const o of [a, b]) {
      await t.svc.db.query(`UPDATE orders SET status = 'CREATED' WHERE id = $1`, [o.openOrderId]);
      await t.svc.db.query(`UPDATE attempts SET state = 'PENDING' WHERE order_id = $1`, [o.openOrderId]);
    }
    await t.svc.db.query(`UPDATE orders SET close_pending = 'CLOSE_REQUESTED' WHERE id = $1`, [b.openOrderId]);
    const { acceptAttempts } = await import('../../src/store/attempt-acceptance.ts');
    const { ACCEPT_TRANSITIONS } = await import('../../src/usecases/attempts.ts');
    const items = [];
    for (const o of [a, b]) {
      const [att] = (await t.svc.db.query<{ id: string }>('SELECT id FROM attempts WHERE order_id = $1', [o.openOrderId])).rows;
      items.push({ orderId: o.openOrderId, attemptId: att!.id, providerRef: null, qrCode: null, redirectUrl: null, answer: null });
    }
    const done = await acceptAttempts(t.svc.db, items, ACCEPT_TRANSITIONS, new Date());
    assert.deepEqual(
      done.map((r) => r.applied),
      [true, false],
    );
    const [one] = await acceptAttempts(t.svc.db, [items[1]!], ACCEPT_TRANSITIONS, new Date());
    assert.equal(one!.applied, false);
    await t.svc.db.query(`UPDATE orders SET close_pending = NULL WHERE id = $1`, [b.openOrderId]);
  });

  test('an attempt still being created when the order expires keeps the order open until it settles, then it is closed', async () => {
    await fault('CREATE_ATTEMPT', 'DELAY_MS', 1, 600);
    const body = orderBody();
    const no = String(body.outTradeNo);
    const pending = create(body);
    const id = await recordedOrderId(no);
    await t.svc.db.query(`UPDATE orders SET expire_at = now() - interval '1 second' WHERE id = $1`, [id]);
    const { closeOrderById } = await import('../../src/usecases/close-order.ts');
    const kept = await closeOrderById(t.svc, id, 'EXPIRED', { background: true });
    assert.equal(kept.closeState, 'UNKNOWN_KEPT', 'background work does not wait, nor close what the provider may open next');
    assert.equal((await pending).statusCode, 201);
    const done = await closeOrderById(t.svc, id, 'EXPIRED', { background: true });
    assert.equal(done.closeState, 'CLOSE_REQUESTED');
    assert.equal(done.order.closedReason, 'EXPIRED');
    const adm = (await t.admin('GET', `/orders/${id}`)).json();
    assert.deepEqual(
      adm.attempts.map((a: { state: string }) => a.state),
      ['CLOSED'],
    );
  });

  test('a payment the provider reports for an attempt recorded as closed is not lost: the order pays, or the duplicate is refunded', async () => {
    // A close that crossed the payment at the provider: simulated by ending the attempt locally only.
    const payable = (await create(orderBody())).json();
    let adm = (await t.admin('GET', `/orders/${payable.openOrderId}`)).json();
    await t.svc.db.query(`UPDATE attempts SET state = 'CLOSED' WHERE id = $1`, [adm.attempts[0].attemptId]);
    await pay(payable.openOrderId, adm.attempts[0].attemptId);
    adm = (await t.admin('GET', `/orders/${payable.openOrderId}`)).json();
    assert.equal(adm.status, 'SUCCEEDED', 'the order could still be paid: it is');
    assert.equal(adm.duplicatePayments.length, 0);

    const body = orderBody();
    const closed = (await create(body)).json();
    adm = (await t.admin('GET', `/orders/${closed.openOrderId}`)).json();
    const attemptId = adm.attempts[0].attemptId;
    await t.svc.db.query(`UPDATE attempts SET state = 'CLOSED' WHERE id = $1`, [attemptId]);
    await t.svc.db.query(`UPDATE orders SET status = 'CLOSED', closed_reason = 'CLOSE_REQUESTED' WHERE id = $1`, [closed.openOrderId]);
    await pay(closed.openOrderId, attemptId);
    await drainFollowUps(t);
    adm = (await t.admin('GET', `/orders/${closed.openOrderId}`)).json();
    assert.equal(adm.status, 'CLOSED', 'a closed order is never reopened');
    assert.equal(adm.duplicatePayments.length, 1, 'the money is recorded');
    assert.equal(adm.duplicatePayments[0].attemptId, attemptId);
    assert.ok(['PENDING', 'REFUNDED'].includes(adm.duplicatePayments[0].refundState), 'and refunded automatically');
  });

  test('the stored answer of a create is the answer sent, and the order is PAYING with stateVersion 2', async () => {
    const body = orderBody();
    const rid = requestId();
    const r = await create(body, m, { requestId: rid });
    assert.equal(r.statusCode, 201);
    assert.equal(r.json().status, 'PAYING');
    const row = await t.svc.db.query(
      `SELECT rr.state, rr.status_code, rr.response_body, o.state_version, a.state AS attempt_state,
              (SELECT count(*)::int FROM jobs WHERE subject_id = a.id) AS jobs
         FROM request_replays rr, orders o JOIN attempts a ON a.order_id = o.id
        WHERE rr.app_id = $1 AND rr.request_id = $2 AND o.out_trade_no = $3`,
      [m.appId, rid, body.outTradeNo],
    );
    assert.equal(row.rowCount, 1);
    const x = row.rows[0];
    assert.equal(x.state, 'DONE');
    assert.equal(x.status_code, 201);
    assert.equal(x.response_body, r.body);
    assert.equal(x.state_version, 2);
    assert.equal(x.attempt_state, 'ACCEPTED');
    assert.equal(x.jobs, 0, 'an attempt accepted at once leaves no background work');
  });
});

describe('query order', () => {
  test('local projection with latestAttempt; payUrl and qrCode null; no replayed/unknown', async () => {
    const body = orderBody();
    const c = (await create(body)).json();
    const r = await query(String(body.outTradeNo));
    assert.equal(r.statusCode, 200);
    const q = r.json();
    assert.equal(q.openOrderId, c.openOrderId);
    assert.equal(q.payUrl, null);
    assert.equal(q.qrCode, null);
    assert.deepEqual(q.latestAttempt, { state: 'ACCEPTED', expireAt: c.expireAt });
    assert.ok(!('replayed' in q) && !('unknown' in q) && !('nextAction' in q));
    assert.deepEqual(q.feeProjection, c.feeProjection);
  });

  test('a query calls no provider and changes nothing (no fault taken, stateVersion unchanged)', async () => {
    const body = orderBody();
    const o = (await create(body)).json();
    await fault('CREATE_ATTEMPT', 'REJECT');
    await fault('CLOSE', 'REJECT');
    const faults = (await t.sandbox('GET', '/faults')).json();
    const v = (await t.admin('GET', `/orders/${o.openOrderId}`)).json().stateVersion;
    for (let i = 0; i < 3; i++) assert.equal((await query(String(body.outTradeNo))).statusCode, 200);
    assert.deepEqual((await t.sandbox('GET', '/faults')).json(), faults);
    assert.equal((await t.admin('GET', `/orders/${o.openOrderId}`)).json().stateVersion, v);
    assert.equal((await t.sandbox('DELETE', '/faults')).statusCode, 200);
  });

  test('missing, cross-app, cross-merchant and malformed references give the same neutral 404', async () => {
    // Another app of the same merchant, with its own key.
    const app2 = await t.admin('POST', `/merchants/${m.merchantId}/apps`, {});
    assert.equal(app2.statusCode, 201, app2.body);
    const sameMerchantOtherApp: Merchant = { ...m, appId: app2.json().appId };
    const k2 = await t.admin('POST', `/apps/${sameMerchantOtherApp.appId}/keys`, {
      keyId: m.keyId,
      publicKeyPem: merchantKeyPair().publicKeyPem,
    });
    assert.equal(k2.statusCode, 201, k2.body);
    const body = orderBody();
    await create(body);
    const other = await provision(t);
    const bodies = [];
    for (const [mch, no] of [
      [m, tradeNo()],
      [sameMerchantOtherApp, body.outTradeNo],
      [other, body.outTradeNo],
      [m, 'bad.ref!'],
      [m, 'x'],
      [m, 'A'.repeat(65)],
      [m, '%E4%BD%A0%E5%A5%BD123'],
    ] as const) {
      const r = await query(String(no), mch);
      assert.equal(r.statusCode, 404, `${no}: ${r.body}`);
      const { requestId: _r, ...rest } = r.json();
      bodies.push(JSON.stringify(rest));
    }
    assert.equal(new Set(bodies).size, 1, bodies.join('\n'));
    assert.deepEqual(JSON.parse(bodies[0]!), { code: 'OPEN_API_NOT_FOUND', message: 'Not found.' });
  });
});

describe('re-create attempt', () => {
  test('closes the old attempt and offers new material; old material is not reusable', async () => {
    const body = orderBody();
    const first = (await create(body)).json();
    const r = await recreate(String(body.outTradeNo));
    assert.equal(r.statusCode, 201, r.body);
    const n = r.json();
    assert.notEqual(n.payUrl, first.payUrl);
    assert.notEqual(n.qrCode, first.qrCode);
    assert.equal(n.replayed, false);
    assert.equal(n.status, 'PAYING');
    const adm = (await t.admin('GET', `/orders/${first.openOrderId}`)).json();
    assert.deepEqual(
      adm.attempts.map((a: { state: string }) => a.state),
      ['CLOSED', 'ACCEPTED'],
    );
    // The buyer can no longer pay the old attempt at the provider.
    const old = await t.sandbox('POST', `/payments/${first.openOrderId}/pay`, { attemptId: adm.attempts[0].attemptId });
    assert.equal(old.statusCode, 409);
    // Query reports the latest attempt (the new one), not the first.
    const q = (await query(String(body.outTradeNo))).json();
    assert.equal(q.latestAttempt.state, 'ACCEPTED');
    const closedFirst = await closeOrder(String(body.outTradeNo));
    assert.equal(closedFirst.statusCode, 200);
    const after = (await query(String(body.outTradeNo))).json();
    assert.equal(after.latestAttempt.state, 'CLOSED');
    const seqs = await t.svc.db.query('SELECT seq, state FROM attempts WHERE order_id = $1 ORDER BY seq', [first.openOrderId]);
    assert.deepEqual(
      seqs.rows.map((x) => x.state),
      ['CLOSED', 'CLOSED'],
    );
  });

  test('concurrent re-creates produce one 201 and 200 projections of that winner', async () => {
    const body = orderBody();
    const first = (await create(body)).json();
    const rs = await Promise.all(Array.from({ length: 12 }, () => recreate(String(body.outTradeNo))));
    const created = rs.filter((r) => r.statusCode === 201);
    assert.equal(created.length, 1, rs.map((r) => `${r.statusCode}`).join(','));
    assert.ok(
      rs.every((r) => r.statusCode === 201 || r.statusCode === 200),
      rs.map((r) => r.body).join('\n'),
    );
    const winnerUrl = created[0]!.json().payUrl;
    for (const r of rs) assert.equal(r.json().payUrl, winnerUrl);
    const adm = (await t.admin('GET', `/orders/${first.openOrderId}`)).json();
    assert.equal(adm.attempts.filter((a: { state: string }) => a.state === 'ACCEPTED').length, 1, 'never two live attempts');
  });

  test('re-creates overlapping one whose attempt was withdrawn because the old attempt got paid: all 409, none a 200 without a winner', async () => {
    const body = orderBody();
    const no = String(body.outTradeNo);
    const first = (await create(body)).json();
    // The winner's close of the old attempt waits 400 ms at the provider; the buyer pays the old
    // attempt meanwhile, so the close finds it paid and the winner withdraws its new attempt.
    await fault('CLOSE', 'DELAY_MS', 1, 400);
    const winner = recreate(no);
    await waitFor(
      'the winner attempt being made',
      async () =>
        (await t.svc.db.query(`SELECT 1 FROM attempts WHERE order_id = $1 AND state = 'PENDING'`, [first.openOrderId])).rowCount === 1,
    );
    const losers = Array.from({ length: 4 }, () => recreate(no));
    await pay(first.openOrderId);
    const rs = await Promise.all([winner, ...losers]);
    for (const r of rs) {
      assert.equal(r.statusCode, 409, r.body);
      assert.equal(r.json().code, 'OPEN_API_STATE_INVALID');
    }
    const q = (await query(no)).json();
    assert.equal(q.status, 'SUCCEEDED');
  });

  test('a re-create refused because the old attempt could not be closed leaves the order as it was: the old material still pays', async () => {
    const body = orderBody();
    const no = String(body.outTradeNo);
    const first = (await create(body)).json();
    await fault('CLOSE', 'REJECT');
    const r = await recreate(no);
    assert.equal(r.statusCode, 502, r.body);
    assert.equal(r.json().code, 'OPEN_API_PROVIDER_REJECTED');
    const q = (await query(no)).json();
    assert.equal(q.status, 'PAYING');
    assert.equal(q.latestAttempt.state, 'ACCEPTED');
    assert.equal(q.nextAction, undefined, 'the old attempt is still valid');
    const replay = (await create(body)).json();
    assert.equal(replay.payUrl, first.payUrl);
    assert.equal(replay.qrCode, first.qrCode);
    const adm = (await t.admin('GET', `/orders/${first.openOrderId}`)).json();
    assert.deepEqual(
      adm.attempts.map((a: { state: string }) => a.state),
      ['ACCEPTED'],
      'the new attempt never reached the provider and left no trace',
    );
  });

  test('re-creates racing a winner that finished while they waited for the order: still one 201', async () => {
    for (let round = 0; round < 5; round++) {
      const body = orderBody();
      await create(body);
      const rs = await Promise.all(Array.from({ length: 20 }, () => recreate(String(body.outTradeNo))));
      const created = rs.filter((r) => r.statusCode === 201);
      assert.equal(created.length, 1, rs.map((r) => `${r.statusCode}`).join(','));
      const winnerUrl = created[0]!.json().payUrl;
      for (const r of rs) assert.equal(r.json().payUrl, winnerUrl, 'every answer carries the winner material');
    }
  });

  test('a re-create that arrived before the winner finished is answered with the winner; one sent after the answer makes a new attempt', async () => {
    const { recreateAttempt } = await import('../../src/usecases/recreate-attempt.ts');
    const { getApp } = await import('../../src/store/merchants.ts');
    const app = (await getApp(t.svc.db, m.appId))!;
    const as = (receivedAtMs: number) => ({ app, merchantEntityType: 'CORPORATE' as const, requestId: requestId(), receivedAtMs });
    const body = orderBody();
    const no = String(body.outTradeNo);
    await create(body);
    const winner = await recreateAttempt(t.svc, as(clock.now()), no);
    assert.equal(winner.replayed, false, 'the winner made an attempt');
    const madeAt = winner.attempt!.madeAt!.getTime();
    // Arrived before the winner's attempt was made, got the order after it: it overlapped the winner.
    const late = await recreateAttempt(t.svc, as(madeAt - 5), no);
    assert.equal(late.replayed, true);
    assert.equal(late.attempt!.id, winner.attempt!.id);
    const next = await recreateAttempt(t.svc, as(madeAt + 5), no);
    assert.equal(next.replayed, false, 'sent after the winner answered: a new attempt');
    assert.notEqual(next.attempt!.id, winner.attempt!.id);
  });

  test('the new attempt is judged like a new order: 422 when the channel, the trade form or the ceiling no longer allows it; nothing changes', async () => {
    const mch = await provision(t, { entityType: 'INDIVIDUAL', app: { tradeScopes: ['PHYSICAL_FACE_TO_FACE', 'CARD_VIRTUAL'] } });
    const attemptsOf = async (openOrderId: string) =>
      (await t.admin('GET', `/orders/${openOrderId}`)).json().attempts.map((a: { state: string }) => a.state);

    const ch = (await create(orderBody({ tradeScope: 'CARD_VIRTUAL' }), mch)).json();
    assert.equal((await t.admin('PATCH', `/apps/${mch.appId}`, { channels: ['WECHAT_H5'] })).statusCode, 200);
    const r1 = await recreate(ch.outTradeNo, mch);
    assert.equal(r1.statusCode, 422, r1.body);
    assert.equal(r1.json().code, 'OPEN_API_CHANNEL_UNAVAILABLE');
    assert.deepEqual(await attemptsOf(ch.openOrderId), ['ACCEPTED']);

    assert.equal(
      (await t.admin('PATCH', `/apps/${mch.appId}`, { channels: ['ALIPAY_H5', 'WECHAT_H5'], tradeScopes: ['PHYSICAL_FACE_TO_FACE'] }))
        .statusCode,
      200,
    );
    const r2 = await recreate(ch.outTradeNo, mch);
    assert.equal(r2.statusCode, 422, r2.body);
    assert.equal(r2.json().code, 'OPEN_API_TRADE_SCOPE_UNAVAILABLE');

    const big = (await create(orderBody({ amountFen: 400_000 }), mch)).json();
    const acc = await t.admin('POST', `/merchants/${mch.merchantId}/settlement-accounts`, {
      entityType: 'INDIVIDUAL',
      entityName: 'E',
      merchantNo: 'M1',
      cardNumber: '6222020000001234',
      agreedCeilingFen: 100_000,
    });
    assert.equal(acc.statusCode, 201, acc.body);
    const al = await t.admin('PUT', `/merchants/${mch.merchantId}/allocation`, {
      mode: 'SINGLE',
      participants: [acc.json().accountId],
      unavailablePolicy: 'FAIL',
    });
    assert.equal(al.statusCode, 200, al.body);
    const r3 = await recreate(big.outTradeNo, mch);
    assert.equal(r3.statusCode, 422, r3.body);
    assert.deepEqual(r3.json().details, { scopes: ['SINGLE_AMOUNT'] });
    assert.deepEqual(await attemptsOf(big.openOrderId), ['ACCEPTED'], 'the old attempt is untouched');
    assert.equal((await query(big.outTradeNo, mch)).json().status, 'PAYING');
  });

  test('an uncertain new attempt: 201 with unknown true, status UNKNOWN, no material', async () => {
    const body = orderBody();
    await create(body);
    await fault('CREATE_ATTEMPT', 'TIMEOUT');
    const r = await recreate(String(body.outTradeNo));
    assert.equal(r.statusCode, 201, r.body);
    assert.equal(r.json().unknown, true);
    assert.equal(r.json().replayed, false);
    assert.equal(r.json().status, 'UNKNOWN');
    assert.equal(r.json().payUrl, null);
  });

  /** What a crash during a re-create's provider call leaves: a PENDING attempt the provider never saw, due for a check. */
  async function cutOffRecreate(openOrderId: string, closeOld: boolean, requestId?: string): Promise<void> {
    const { withTx } = await import('../../src/store/db.ts');
    const { getOrderLocked } = await import('../../src/store/orders.ts');
    const { insertAttempt } = await import('../../src/store/attempts.ts');
    const { newId } = await import('../../src/domain/ids.ts');
    if (closeOld) await t.svc.db.query(`UPDATE attempts SET state = 'CLOSED' WHERE order_id = $1`, [openOrderId]);
    await withTx(t.svc.db, async (tx) => {
      const ids = { id: newId.attempt(), cashierToken: newId.cashierToken(), provider: 'sandbox', createdBy: t.svc.instanceId };
      const a = await insertAttempt(tx, (await getOrderLocked(tx, openOrderId))!, ids, new Date());
      if (requestId) {
        await tx.query('INSERT INTO recreate_requests(order_id, request_id, attempt_id) VALUES ($1, $2, $3)', [
          openOrderId,
          requestId,
          a.id,
        ]);
      }
      return a;
    });
    await stall(openOrderId);
  }

  /** The PENDING attempt of the order was created 151 s ago: its creation stalled (FIND_DUE_WORK checks it). */
  async function stall(openOrderId: string, stalled = true): Promise<void> {
    await t.svc.db.query(`UPDATE attempts SET created_at = now() - $2::interval WHERE order_id = $1 AND state = 'PENDING'`, [
      openOrderId,
      stalled ? '151 seconds' : '0 seconds',
    ]);
  }

  test('a re-create cut off after closing the old attempt: once the provider check finds the new one never created, the order is CREATED again', async () => {
    const body = orderBody();
    const c = (await create(body)).json();
    await cutOffRecreate(c.openOrderId, true);
    assert.equal((await query(String(body.outTradeNo))).json().status, 'PAYING');
    await runDueWork(t);
    const q = (await query(String(body.outTradeNo))).json();
    assert.equal(q.status, 'CREATED', 'no live attempt: payable again, not PAYING');
    assert.equal(q.latestAttempt.state, 'FAILED');
    assert.equal(q.nextAction, 'CREATE_ATTEMPT');
    const r = await recreate(String(body.outTradeNo));
    assert.equal(r.statusCode, 201, r.body);
    assert.equal(r.json().status, 'PAYING');
    assert.match(String(r.json().payUrl), /\/cashier\//);
  });

  test('a re-create cut off before closing the old attempt: once the new one is found never created, the old one is closed too and the order is CREATED again', async () => {
    const body = orderBody();
    const c = (await create(body)).json();
    await cutOffRecreate(c.openOrderId, false);
    await runDueWork(t);
    await drainFollowUps(t);
    const adm = (await t.admin('GET', `/orders/${c.openOrderId}`)).json();
    assert.deepEqual(
      adm.attempts.map((a: { state: string }) => a.state),
      ['CLOSED', 'FAILED'],
      'the old attempt closed, as the re-create meant to',
    );
    assert.equal(adm.status, 'CREATED');
    const q = (await query(String(body.outTradeNo))).json();
    assert.equal(q.status, 'CREATED');
    assert.equal(q.nextAction, 'CREATE_ATTEMPT', 'no order reads PAYING with no payable attempt');
    const paid = await t.sandbox('POST', `/payments/${c.openOrderId}/pay`, { attemptId: adm.attempts[0].attemptId });
    assert.equal(paid.statusCode, 409, 'the old link no longer pays');
    const r = await recreate(String(body.outTradeNo));
    assert.equal(r.statusCode, 201, r.body);
    assert.equal(r.json().status, 'PAYING');
  });

  test('the retry of a re-create cut off mid-call, sent once its request-id lease lapsed: 503 (kept for no one) while its attempt is unsettled, then the order as it is (no second attempt)', async () => {
    const body = orderBody();
    const c = (await create(body)).json();
    const no = String(body.outTradeNo);
    // The cut-off request held its id, and recorded it with the attempt it was making; its lease
    // (120 s) ran out before the attempt's recheck (150 s).
    const rid = requestId();
    await cutOffRecreate(c.openOrderId, true, rid);
    await stall(c.openOrderId, false);
    await t.svc.db.query(
      `INSERT INTO request_replays(app_id, request_id, method, target, body_sha256, state, lease_until)
       VALUES ($1, $2, 'POST', $3, encode(sha256(''::bytea), 'hex'), 'IN_PROGRESS', now() - interval '1 second')`,
      [m.appId, rid, `/api/open/v1/payments/${no}/attempts`],
    );
    // It waits (20 s on the service's clock) for the attempt to settle, then gives up.
    const busy = await whileTimePasses(recreate(no, m, { requestId: rid }));
    assert.equal(busy.statusCode, 503, busy.body);
    assert.equal(busy.json().code, 'OPEN_API_GUARD_UNAVAILABLE');
    assert.match(busy.json().message, /still being created/);
    assert.equal(busy.headers['retry-after'], '5');
    assert.ok(busy.headers['x-svc-response-sign'], 'signed like every answer after the gate');
    const kept = await t.svc.db.query('SELECT 1 FROM request_replays WHERE app_id = $1 AND request_id = $2', [m.appId, rid]);
    assert.equal(kept.rowCount, 0, 'the 503 is not kept for the request id');

    // The provider check finds the attempt never created: the order is payable again.
    await stall(c.openOrderId);
    await runDueWork(t);
    const settled = await recreate(no, m, { requestId: rid });
    assert.equal(settled.statusCode, 200, settled.body);
    assert.equal(settled.json().replayed, true);
    assert.equal(settled.json().status, 'CREATED');
    assert.equal(settled.json().payUrl, null);
    assert.equal(settled.json().nextAction, 'CREATE_ATTEMPT', 'the merchant is told to re-create');
    const again = await recreate(no, m, { requestId: rid });
    assert.equal(again.body, settled.body, 'now kept and replayed byte for byte');
    const made = await recreate(no);
    assert.equal(made.statusCode, 201, 'a re-create with a new request id makes the attempt');
    assert.equal(made.json().status, 'PAYING');
  });

  test('the retry of a re-create whose answer was never recorded (lease lapsed) answers from the attempt it made, and makes no second one', async () => {
    const body = orderBody();
    const c = (await create(body)).json();
    const no = String(body.outTradeNo);
    const rid = requestId();
    const first = await recreate(no, m, { requestId: rid });
    assert.equal(first.statusCode, 201, first.body);
    // Cut off after the attempt was made, before the answer was recorded: the id's record is
    // still IN_PROGRESS, and its lease has lapsed.
    await t.svc.db.query(
      `UPDATE request_replays SET state = 'IN_PROGRESS', status_code = NULL, response_body = NULL, lease_until = now() - interval '1 second'
        WHERE app_id = $1 AND request_id = $2`,
      [m.appId, rid],
    );
    const retry = await recreate(no, m, { requestId: rid });
    assert.equal(retry.statusCode, 200, retry.body);
    assert.equal(retry.json().replayed, true);
    assert.equal(retry.json().payUrl, first.json().payUrl, "the first execution's attempt");
    const adm = (await t.admin('GET', `/orders/${c.openOrderId}`)).json();
    assert.deepEqual(
      adm.attempts.map((a: { state: string }) => a.state),
      ['CLOSED', 'ACCEPTED'],
      'one attempt per request id',
    );
    const other = await recreate(no);
    assert.equal(other.statusCode, 201, 'a re-create with a new request id makes a new attempt');
  });

  test("a loser answered 503 while the winner's attempt was still being created: its retry (same request id) gets the winner's attempt, not a new one", async () => {
    const body = orderBody();
    const c = (await create(body)).json();
    const no = String(body.outTradeNo);
    // A winner's attempt in flight at the provider (slower than a loser's 20 s wait).
    await cutOffRecreate(c.openOrderId, false);
    await stall(c.openOrderId, false);
    const loserId = requestId();
    const busy = await whileTimePasses(recreate(no, m, { requestId: loserId }));
    assert.equal(busy.statusCode, 503, busy.body);
    // The winner finishes: its attempt accepted, the old one closed.
    await t.svc.db.query(`UPDATE attempts SET state = CASE WHEN state = 'PENDING' THEN 'ACCEPTED' ELSE 'CLOSED' END WHERE order_id = $1`, [
      c.openOrderId,
    ]);
    const winner = (
      await t.svc.db.query<{ token: string }>(`SELECT cashier_token AS token FROM attempts WHERE order_id = $1 AND seq = 2`, [
        c.openOrderId,
      ])
    ).rows[0]!;
    const retry = await recreate(no, m, { requestId: loserId });
    assert.equal(retry.statusCode, 200, retry.body);
    assert.equal(retry.json().replayed, true);
    assert.equal(retry.json().payUrl, `https://pay.example.test/cashier/${winner.token}`, "the winner's attempt");
    const adm = (await t.admin('GET', `/orders/${c.openOrderId}`)).json();
    assert.deepEqual(
      adm.attempts.map((a: { state: string }) => a.state),
      ['CLOSED', 'ACCEPTED'],
      "no new attempt: the winner's stays payable",
    );
  });

  test('409 when the order is not payable; 404 when unknown', async () => {
    await fault('CREATE_ATTEMPT', 'PAID');
    const body = orderBody();
    await create(body);
    const r = await recreate(String(body.outTradeNo));
    assert.equal(r.statusCode, 409);
    assert.equal(r.json().code, 'OPEN_API_STATE_INVALID');
    assert.equal((await recreate(tradeNo())).statusCode, 404);
  });

  test('an uncertain attempt is not closed; if it later turns out paid too, the duplicate is refunded automatically', async () => {
    await fault('CREATE_ATTEMPT', 'TIMEOUT');
    const body = orderBody();
    const first = (await create(body)).json();
    assert.equal(first.unknown, true);
    const r = await recreate(String(body.outTradeNo));
    assert.equal(r.statusCode, 201, r.body);
    assert.equal(r.json().status, 'PAYING');
    let adm = (await t.admin('GET', `/orders/${first.openOrderId}`)).json();
    assert.deepEqual(
      adm.attempts.map((a: { state: string }) => a.state),
      ['UNKNOWN', 'ACCEPTED'],
    );
    await pay(first.openOrderId, adm.attempts[1].attemptId);
    await pay(first.openOrderId, adm.attempts[0].attemptId);
    await drainFollowUps(t);
    adm = (await t.admin('GET', `/orders/${first.openOrderId}`)).json();
    assert.equal(adm.status, 'SUCCEEDED');
    assert.equal(adm.duplicatePayments.length, 1);
    assert.equal(adm.duplicatePayments[0].attemptId, adm.attempts[0].attemptId);
    assert.ok(['PENDING', 'REFUNDED'].includes(adm.duplicatePayments[0].refundState));
    const list = (await t.admin('GET', '/duplicate-payments')).json().duplicatePayments;
    assert.ok(list.some((d: { openOrderId: string }) => d.openOrderId === first.openOrderId));
    assert.equal(adm.events.filter((e: { eventType: string }) => e.eventType === 'PAYMENT_SUCCEEDED').length, 1, 'one payment event');
  });
});

describe('close order', () => {
  test('CLOSE_REQUESTED: the provider confirms unpaid; then ALREADY_CLOSED', async () => {
    const body = orderBody();
    await create(body);
    const r = await closeOrder(String(body.outTradeNo));
    assert.equal(r.statusCode, 200, r.body);
    const c = r.json();
    assert.equal(c.closeState, 'CLOSE_REQUESTED');
    assert.equal(c.status, 'CLOSED');
    assert.equal(c.closedReason, 'CLOSE_REQUESTED');
    assert.equal(c.payUrl, null);
    assert.equal(c.latestAttempt, null);
    assert.equal(c.qrCode, null);
    assert.ok(!('replayed' in c) && !('unknown' in c) && !('nextAction' in c));
    const again = await closeOrder(String(body.outTradeNo));
    assert.equal(again.json().closeState, 'ALREADY_CLOSED');
    assert.equal((await recreate(String(body.outTradeNo))).statusCode, 409, 'a closed order takes no new attempt');
  });

  test('409 OPEN_API_STATE_INVALID for an order already known paid, with only code, message, requestId', async () => {
    const body = orderBody();
    const o = (await create(body)).json();
    await pay(o.openOrderId);
    const r = await closeOrder(String(body.outTradeNo));
    assert.equal(r.statusCode, 409);
    assert.deepEqual(Object.keys(r.json()).sort(), ['code', 'message', 'requestId']);
    assert.equal(r.json().code, 'OPEN_API_STATE_INVALID');
  });

  test('UNKNOWN_KEPT when the provider outcome is uncertain; the order is kept, then converges', async () => {
    const body = orderBody();
    await create(body);
    await fault('CLOSE', 'TIMEOUT');
    const r = await closeOrder(String(body.outTradeNo));
    assert.equal(r.statusCode, 200, r.body);
    assert.equal(r.json().closeState, 'UNKNOWN_KEPT');
    assert.equal(r.json().status, 'PAYING');
    // Kept as it was: its attempt is still valid, so the receipt asks for no new one (as a query would).
    assert.equal('nextAction' in r.json(), false);
    assert.equal(r.json().latestAttempt, null);
    assert.equal(r.json().payUrl, null);
    assert.equal('nextAction' in (await query(String(body.outTradeNo))).json(), false);
    const again = await recreate(String(body.outTradeNo));
    assert.equal(again.statusCode, 409, 'no new material for an order whose close is being completed');
    assert.equal(again.json().code, 'OPEN_API_STATE_INVALID');
    await t.workers.tick();
    assert.equal((await query(String(body.outTradeNo))).json().status, 'PAYING', 'finished only after a short hold (2 s)');
    await t.svc.db.query(`UPDATE orders SET close_held_until = now() - interval '1 second' WHERE out_trade_no = $1`, [body.outTradeNo]);
    await runDueWork(t);
    assert.equal((await query(String(body.outTradeNo))).json().status, 'CLOSED');
  });

  test('PROVIDER_PAID_CONFLICT when the provider reports paid during the close', async () => {
    const body = orderBody();
    await create(body);
    await fault('CLOSE', 'PAID');
    const r = await closeOrder(String(body.outTradeNo));
    assert.equal(r.statusCode, 200, r.body);
    assert.equal(r.json().closeState, 'PROVIDER_PAID_CONFLICT');
    assert.equal(r.json().status, 'SUCCEEDED');
  });

  test('a close the provider rejects answers 502 and leaves the order as it was', async () => {
    const body = orderBody();
    await create(body);
    await fault('CLOSE', 'REJECT');
    const r = await closeOrder(String(body.outTradeNo));
    assert.equal(r.statusCode, 502);
    assert.equal(r.json().code, 'OPEN_API_PROVIDER_REJECTED');
    assert.equal((await query(String(body.outTradeNo))).json().status, 'PAYING');
  });

  test('a close racing a re-create leaves no payment open at the provider: the re-create is refused, or its attempt is closed too', async () => {
    for (const offset of [5, 20, 60]) {
      const body = orderBody();
      const no = String(body.outTradeNo);
      const o = (await create(body)).json();
      await fault('CLOSE', 'DELAY_MS', 1, 100);
      const [cl, rc] = await Promise.all([closeOrder(no), new Promise((r) => setTimeout(r, offset)).then(() => recreate(no))]);
      assert.equal(cl.statusCode, 200, cl.body);
      assert.equal(cl.json().closeState, 'CLOSE_REQUESTED');
      assert.ok(rc.statusCode === 409 || rc.statusCode === 201, `${offset} ms: ${rc.statusCode} ${rc.body}`);
      await drainFollowUps(t);
      const q = (await query(no)).json();
      assert.equal(q.status, 'CLOSED');
      const att = await t.svc.db.query('SELECT id, state FROM attempts WHERE order_id = $1', [o.openOrderId]);
      assert.ok(
        att.rows.every((a) => a.state === 'CLOSED'),
        JSON.stringify(att.rows),
      );
      const open = await t.svc.db.query(`SELECT state FROM sandbox_payments WHERE attempt_id = ANY($1) AND state = 'OPEN'`, [
        att.rows.map((a) => a.id),
      ]);
      assert.equal(open.rowCount, 0, `${offset} ms: a payment is still open at the provider`);
    }
  });

  test('a close rejected for one of several live attempts: 502, the order stays, and the attempts the provider did close are recorded', async () => {
    const body = orderBody();
    const no = String(body.outTradeNo);
    const first = (await create(body)).json();
    await fault('CLOSE', 'TIMEOUT');
    assert.equal((await recreate(no)).statusCode, 201);
    let adm = (await t.admin('GET', `/orders/${first.openOrderId}`)).json();
    assert.deepEqual(
      adm.attempts.map((a: { state: string }) => a.state),
      ['UNKNOWN', 'ACCEPTED'],
    );
    await fault('CLOSE', 'REJECT'); // taken by the first (uncertain) attempt's close
    const r = await closeOrder(no);
    assert.equal(r.statusCode, 502, r.body);
    const q = (await query(no)).json();
    assert.equal(q.status, 'PAYING', 'the order stays as it was');
    assert.equal(q.latestAttempt.state, 'CLOSED', 'the provider closed the new attempt: recorded');
    assert.equal(q.nextAction, 'CREATE_ATTEMPT');
    adm = (await t.admin('GET', `/orders/${first.openOrderId}`)).json();
    assert.deepEqual(
      adm.attempts.map((a: { state: string }) => a.state),
      ['UNKNOWN', 'CLOSED'],
    );
    assert.equal((await create(body)).json().payUrl, null, 'no closed material is handed out');
  });

  test('create rule 1: a replay after the close has an empty payUrl and nextAction; a paid order replays without one', async () => {
    const body = orderBody();
    await create(body);
    assert.equal((await closeOrder(String(body.outTradeNo))).statusCode, 200);
    const replay = await create(body);
    assert.equal(replay.statusCode, 200);
    assert.equal(replay.json().replayed, true);
    assert.equal(replay.json().status, 'CLOSED');
    assert.equal(replay.json().payUrl, null);
    assert.equal(replay.json().qrCode, null);
    assert.equal(replay.json().nextAction, 'CREATE_ATTEMPT', 'the attempt is final');
    assert.ok(!('nextAction' in (await query(String(body.outTradeNo))).json()), 'the query: the order is not payable');

    await fault('CREATE_ATTEMPT', 'PAID');
    const paid = orderBody();
    assert.equal((await create(paid)).json().status, 'SUCCEEDED');
    const again = await create(paid);
    assert.equal(again.json().status, 'SUCCEEDED');
    assert.ok(!('nextAction' in again.json()), 'a paid order needs nothing');
  });

  test('a back-office close: CLOSED with MERCHANT_CLOSED after the provider confirms, and its PAYMENT_CLOSED event', async () => {
    const body = orderBody();
    const o = (await create(body)).json();
    const r = await t.admin('POST', `/orders/${o.openOrderId}/close`);
    assert.equal(r.statusCode, 200, r.body);
    assert.deepEqual(r.json(), {
      closeState: 'CLOSE_REQUESTED',
      openOrderId: o.openOrderId,
      status: 'CLOSED',
      closedReason: 'MERCHANT_CLOSED',
    });
    const q = (await query(String(body.outTradeNo))).json();
    assert.equal(q.status, 'CLOSED');
    assert.equal(q.closedReason, 'MERCHANT_CLOSED');
    const adm = (await t.admin('GET', `/orders/${o.openOrderId}`)).json();
    assert.deepEqual(
      adm.events.map((e: { eventType: string }) => e.eventType),
      ['PAYMENT_CLOSED'],
    );
    const again = await closeOrder(String(body.outTradeNo));
    assert.equal(again.json().closeState, 'ALREADY_CLOSED');
    assert.equal(again.json().closedReason, 'MERCHANT_CLOSED');
  });

  test('404 for an unknown order', async () => {
    assert.equal((await closeOrder(tradeNo())).statusCode, 404);
  });

  test('a back-office close the provider rejects: 502 ADMIN_PROVIDER_REJECTED, the order unchanged', async () => {
    const body = orderBody();
    const o = (await create(body)).json();
    const v = (await t.admin('GET', `/orders/${o.openOrderId}`)).json().stateVersion;
    await fault('CLOSE', 'REJECT');
    const r = await t.admin('POST', `/orders/${o.openOrderId}/close`);
    assert.equal(r.statusCode, 502, r.body);
    assert.equal(r.json().code, 'ADMIN_PROVIDER_REJECTED');
    assert.deepEqual(Object.keys(r.json()).sort(), ['code', 'message']);
    const q = (await query(String(body.outTradeNo))).json();
    assert.equal(q.status, 'PAYING');
    assert.equal((await t.admin('GET', `/orders/${o.openOrderId}`)).json().stateVersion, v);
  });
});

describe('background work', () => {
  test('an order past expireAt is closed as EXPIRED once the provider confirms it unpaid', async () => {
    const body = orderBody();
    const o = (await create(body)).json();
    assert.equal((await t.sandbox('POST', `/payments/${o.openOrderId}/expire`)).statusCode, 200);
    const before = (await query(String(body.outTradeNo))).json();
    assert.equal(before.latestAttempt.expireAt, before.expireAt, 'the material lives at most until the order expireAt');
    await t.workers.tick();
    const q = (await query(String(body.outTradeNo))).json();
    assert.equal(q.status, 'CLOSED');
    assert.equal(q.closedReason, 'EXPIRED');
    const replay = await create(body);
    assert.equal(replay.json().payUrl, null, 'no expired material is returned');
    assert.equal(replay.json().nextAction, 'CREATE_ATTEMPT', 'create rule 1: the attempt expired');
    assert.ok(!('nextAction' in q), 'a query follows the OrderSnapshot rule: the order is not payable');
  });

  test('once the window has ended the sandbox buyer cannot pay or fail, even before the expiry worker ran', async () => {
    const body = orderBody();
    const o = (await create(body)).json();
    assert.equal((await t.sandbox('POST', `/payments/${o.openOrderId}/expire`)).statusCode, 200);
    for (const action of ['pay', 'fail']) {
      const r = await t.sandbox('POST', `/payments/${o.openOrderId}/${action}`);
      assert.equal(r.statusCode, 409, r.body);
      assert.equal(r.json().code, 'ADMIN_STATE_INVALID');
      assert.match(r.json().message, /window has ended/);
    }
    assert.equal((await query(String(body.outTradeNo))).json().status, 'PAYING', 'nothing paid');
    await t.workers.tick();
    const q = (await query(String(body.outTradeNo))).json();
    assert.equal(q.status, 'CLOSED');
    assert.equal(q.closedReason, 'EXPIRED');
    const adm = (await t.admin('GET', `/orders/${o.openOrderId}`)).json();
    assert.deepEqual(
      adm.events.map((e: { eventType: string }) => e.eventType),
      ['PAYMENT_CLOSED'],
    );
  });

  test('the natural end of the window: the provider refuses the buyer from expireAt on', async () => {
    const body = orderBody();
    const o = (await create(body)).json();
    // As if the window had been opened a window ago: the provider's own copy of the expiry has passed.
    await t.svc.db.query(`UPDATE sandbox_payments SET expire_at = now() - interval '1 millisecond' WHERE attempt_id = $1`, [
      (await t.admin('GET', `/orders/${o.openOrderId}`)).json().attempts[0].attemptId,
    ]);
    const r = await t.sandbox('POST', `/payments/${o.openOrderId}/pay`);
    assert.equal(r.statusCode, 409, r.body);
    assert.equal((await query(String(body.outTradeNo))).json().status, 'PAYING');
  });

  test('sandbox expire of an unknown order is 404, of a closed one 409', async () => {
    const r = await t.sandbox('POST', '/payments/ord_nope/expire');
    assert.equal(r.statusCode, 404, r.body);
    assert.equal(r.json().code, 'ADMIN_NOT_FOUND');
    const body = orderBody();
    const o = (await create(body)).json();
    assert.equal((await closeOrder(String(body.outTradeNo))).statusCode, 200);
    const c = await t.sandbox('POST', `/payments/${o.openOrderId}/expire`);
    assert.equal(c.statusCode, 409, c.body);
    assert.equal(c.json().code, 'ADMIN_STATE_INVALID');
  });

  test('background work takes no programmed fault: a fault waits for the next call of a request', async () => {
    const expiring = orderBody();
    const e = (await create(expiring)).json();
    const other = orderBody();
    await create(other);
    await fault('CLOSE', 'REJECT');
    assert.equal((await t.sandbox('POST', `/payments/${e.openOrderId}/expire`)).statusCode, 200);
    await t.workers.tick();
    const q = (await query(String(expiring.outTradeNo))).json();
    assert.equal(q.status, 'CLOSED', 'the expiry closed the order without taking the fault');
    assert.equal(q.closedReason, 'EXPIRED');
    const r = await closeOrder(String(other.outTradeNo));
    assert.equal(r.statusCode, 502, 'the fault applies to the next close of a request');
    assert.equal((await t.sandbox('GET', '/faults')).json().faults.length, 0);
  });

  test('the provider check converges an UNKNOWN attempt by asking the provider', async () => {
    await fault('CREATE_ATTEMPT', 'TIMEOUT');
    const body = orderBody();
    const o = (await create(body)).json();
    const [a] = (await t.svc.db.query<{ id: string }>('SELECT id FROM attempts WHERE order_id = $1', [o.openOrderId])).rows;
    assert.equal(await makeJobDue(t, 'CHECK_ATTEMPT', a!.id), 1, 'the UNKNOWN attempt has its check');
    await t.workers.tick();
    const q = (await query(String(body.outTradeNo))).json();
    assert.equal(q.status, 'PAYING');
    assert.equal(q.latestAttempt.state, 'ACCEPTED');
    const replay = (await create(body)).json();
    assert.match(replay.payUrl, /cashier/, 'the converged attempt is payable');
  });

  /** Runs `fn` while the sandbox's notices fail to reach the service (it is cut off), then reconnects them. */
  async function noticesCutOff(fn: () => Promise<unknown>, why = 'cut off'): Promise<void> {
    const { handleProviderNotification } = await import('../../src/usecases/notifications.ts');
    const sandbox = t.svc.sandbox!;
    sandbox.setNotificationSink(async () => {
      throw new Error(why);
    });
    try {
      await fn();
    } finally {
      sandbox.setNotificationSink(async (raw, headers) => {
        await handleProviderNotification(t.svc, sandbox, raw, headers);
      });
    }
  }

  /** The order's unacknowledged sandbox notices fall due now. */
  const noticesDueNow = (openOrderId: string) =>
    t.svc.db.query(
      `UPDATE sandbox_payments SET notice_due_at = now() - interval '1 second' WHERE attempt_id IN (SELECT id FROM attempts WHERE order_id = $1)`,
      [openOrderId],
    );

  test('a provider-closed notice the service did not acknowledge is sent again until applied: CLOSED, PROVIDER_CLOSED', async () => {
    const sandbox = t.svc.sandbox!;
    const body = orderBody();
    const o = (await create(body)).json();
    await noticesCutOff(async () => assert.equal((await t.sandbox('POST', `/payments/${o.openOrderId}/provider-close`)).statusCode, 200));
    assert.equal((await query(String(body.outTradeNo))).json().status, 'PAYING', 'the notice was lost');
    await noticesDueNow(o.openOrderId);
    assert.equal(await sandbox.redeliverNotices(), 1);
    const q = (await query(String(body.outTradeNo))).json();
    assert.equal(q.status, 'CLOSED');
    assert.equal(q.closedReason, 'PROVIDER_CLOSED');
    assert.equal(await sandbox.redeliverNotices(), 0, 'acknowledged');
  });

  test('a payment notice the service did not acknowledge (cut off) is sent again by the sandbox until it is applied', async () => {
    const { NOTICE_FIRST_RETRY_SECONDS } = await import('../../src/providers/sandbox/sandbox.ts');
    const sandbox = t.svc.sandbox!;
    const body = orderBody();
    const o = (await create(body)).json();
    // The service dies (or its transaction fails) while the buyer's payment notice arrives.
    await noticesCutOff(() => pay(o.openOrderId));
    assert.equal((await query(String(body.outTradeNo))).json().status, 'PAYING', 'the notice was lost');
    const due = async () =>
      (
        await t.svc.db.query<{ due: number | null; tries: number }>(
          `SELECT extract(epoch FROM notice_due_at - now())::float8 AS due, notice_tries AS tries
             FROM sandbox_payments p JOIN attempts a ON a.id = p.attempt_id WHERE a.order_id = $1`,
          [o.openOrderId],
        )
      ).rows[0]!;
    const pending = await due();
    assert.ok(
      pending.due !== null && pending.due > NOTICE_FIRST_RETRY_SECONDS - 5,
      `due in ~${NOTICE_FIRST_RETRY_SECONDS} s: ${pending.due}`,
    );
    await t.workers.tick();
    assert.equal((await query(String(body.outTradeNo))).json().status, 'PAYING', 'not sent again before it falls due');

    // Falls due while the service still fails: tried again, and due again later (x3).
    await noticesDueNow(o.openOrderId);
    await noticesCutOff(async () => assert.equal(await sandbox.redeliverNotices(), 1), 'still failing');
    const retried = await due();
    assert.equal(retried.tries, 1);
    assert.ok(retried.due !== null && retried.due > 3 * NOTICE_FIRST_RETRY_SECONDS - 5, `next try in ~30 s: ${retried.due}`);

    // Due again with the service back: applied once, acknowledged, not sent again.
    await noticesDueNow(o.openOrderId);
    await t.workers.tick();
    const q = (await query(String(body.outTradeNo))).json();
    assert.equal(q.status, 'SUCCEEDED');
    assert.deepEqual(await due(), { due: null, tries: 0 }, 'acknowledged');
    assert.equal(await sandbox.redeliverNotices(), 0);
    const adm = (await t.admin('GET', `/orders/${o.openOrderId}`)).json();
    assert.deepEqual(
      adm.events.map((e: { eventType: string }) => e.eventType),
      ['PAYMENT_SUCCEEDED'],
    );
  });

  test('an acknowledged payment notice is not sent again', async () => {
    const body = orderBody();
    const o = (await create(body)).json();
    await pay(o.openOrderId);
    // The acknowledgement is recorded off the buyer's path (batched with concurrent ones): wait for it.
    await waitFor('the notice acknowledged', async () => {
      const r = await t.svc.db.query(
        `SELECT notice_due_at FROM sandbox_payments WHERE attempt_id IN (SELECT id FROM attempts WHERE order_id = $1)`,
        [o.openOrderId],
      );
      return r.rows[0]?.notice_due_at === null;
    });
  });

  test('state changes bump stateVersion and write one event each', async () => {
    const body = orderBody();
    const o = (await create(body)).json();
    await pay(o.openOrderId);
    const adm = (await t.admin('GET', `/orders/${o.openOrderId}`)).json();
    assert.equal(adm.status, 'SUCCEEDED');
    assert.deepEqual(
      adm.events.map((e: { eventType: string }) => e.eventType),
      ['PAYMENT_SUCCEEDED'],
    );
    assert.equal(adm.events[0].stateVersion, adm.stateVersion);
  });
});

describe('database faults', () => {
  test('a connection terminated mid-transaction (PostgreSQL restart, failover, pg_terminate_backend): 503, and the service carries on', async () => {
    const pg = (await import('pg')).default;
    const body = orderBody();
    const c = (await create(body)).json();
    // Another session holds the order's row, so the re-create's transaction waits on the lock.
    const holder = new pg.Client({ connectionString: t.config.databaseUrl! });
    await holder.connect();
    try {
      await holder.query('BEGIN');
      await holder.query('SELECT 1 FROM orders WHERE id = $1 FOR UPDATE', [c.openOrderId]);
      const pending = recreate(String(body.outTradeNo));
      let pid: number | undefined;
      for (let i = 0; i < 200 && pid === undefined; i++) {
        await new Promise((r) => setTimeout(r, 25));
        const w = await holder.query<{ pid: number }>(
          `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()`,
        );
        pid = w.rows[0]?.pid;
      }
      assert.ok(pid !== undefined, 'the re-create waits on the lock');
      await holder.query('SELECT pg_terminate_backend($1)', [pid]);
      const r = await pending;
      assert.equal(r.statusCode, 503, r.body);
      assert.equal(r.json().code, 'OPEN_API_GUARD_UNAVAILABLE');
    } finally {
      await holder.query('ROLLBACK').catch(() => {});
      await holder.end();
    }
    // Still serving, on the pool's remaining connections.
    const again = await recreate(String(body.outTradeNo));
    assert.equal(again.statusCode, 201, again.body);
    assert.equal((await query(String(body.outTradeNo))).json().status, 'PAYING');
  });
});

test('racing creates of mixed amounts never take the created amount above the daily ceiling; every refused one changed nothing', async () => {
  const ceiling = 25_000;
  const mch = await provision(t, { app: { dailyAmountCeilingFen: ceiling } });
  const bodies = Array.from({ length: 120 }, (_, i) => orderBody({ amountFen: 100 + ((i * 7919) % 900) }));
  const rs = await Promise.all(bodies.map((b) => create(b, mch)));
  let created = 0;
  const refused: number[] = [];
  for (let i = 0; i < rs.length; i++) {
    const r = rs[i]!;
    if (r.statusCode === 201) created += bodies[i]!.amountFen as number;
    else {
      assert.equal(r.statusCode, 422, r.body);
      assert.deepEqual(r.json().details, { scopes: ['DAILY_AMOUNT'] });
      refused.push(bodies[i]!.amountFen as number);
      assert.equal((await query(String(bodies[i]!.outTradeNo), mch)).statusCode, 404, 'a refused create leaves no order');
    }
  }
  assert.ok(created <= ceiling, `created ${created} > ceiling ${ceiling}`);
  assert.ok(refused.length > 0, 'the ceiling was reached');
  // Each refusal was exact: what it asked for did not fit what was left at its turn (and what is
  // left only shrinks), so it does not fit what is left at the end either.
  for (const amt of refused) assert.ok(amt > ceiling - created, `${amt} refused with ${ceiling - created} left`);
  // A refused number is free: created again within what is left, it is kept.
  const left = ceiling - created;
  if (left > 0) assert.equal((await create(orderBody({ amountFen: left }), mch)).statusCode, 201, 'exactly what is left');
  const over = await create(orderBody({ amountFen: 1 }), mch);
  assert.equal(over.statusCode, 422, 'the ceiling is full');
});

test('a daily ceiling set during the day counts the orders already created that day, and parallel creates cannot overshoot it', async () => {
  const mch = await provision(t);
  assert.equal((await create(orderBody({ amountFen: 700 }), mch)).statusCode, 201);
  assert.equal((await t.admin('PATCH', `/apps/${mch.appId}`, { dailyAmountCeilingFen: 1000 })).statusCode, 200);
  const over = await create(orderBody({ amountFen: 301 }), mch);
  assert.equal(over.statusCode, 422);
  assert.deepEqual(over.json().details, { scopes: ['DAILY_AMOUNT'] });
  const rs = await Promise.all(Array.from({ length: 10 }, () => create(orderBody({ amountFen: 100 }), mch)));
  assert.equal(rs.filter((r) => r.statusCode === 201).length, 3, rs.map((r) => r.statusCode).join(','));
  assert.ok(rs.every((r) => r.statusCode === 201 || r.statusCode === 422));
});
