/**
 * What the WeChat Pay adapter makes of each answer, row by row of the tables in
 * src/providers/wechatpay/mapping.ts (and docs/providers-wechatpay.md), through the adapter's own
 * HTTP path against an in-memory WeChat Pay whose answers are signed (test/providers/wechatpay-stub.ts).
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { type CreateAttemptInput, ProviderRejectedError, ProviderUncertainError } from '../../src/providers/provider.ts';
import {
  CLOSE_ERRORS,
  CREATE_ERRORS,
  QUERY_ERRORS,
  REFUND_ERRORS,
  REFUND_QUERY_ERRORS,
  type ErrorTable,
  type Outcome,
  classify,
} from '../../src/providers/wechatpay/mapping.ts';
import { APP_ID, MCH_ID, type StubAnswer, type StubRequest, stubProvider } from './wechatpay-stub.ts';

const ATTEMPT = 'att_0123456789abcdefghjkmnpq';

function input(o: Partial<CreateAttemptInput> = {}): CreateAttemptInput {
  return {
    attemptId: ATTEMPT,
    openOrderId: 'ord_0123456789abcdefghjkmnpq',
    channel: 'WECHAT_H5',
    amountFen: 1234,
    currency: 'CNY',
    subject: 'A cup of tea',
    expireAt: new Date(Date.UTC(2030, 0, 2, 3, 4, 5, 678)),
    payerClientIp: '203.0.113.7',
    returnUrl: 'https://shop.example/return?order=1&x=a b',
    ...o,
  };
}

const err = (status: number, code: string): StubAnswer => ({ status, body: { code, message: code } });
const order = (trade_state: string, extra: Record<string, unknown> = {}): StubAnswer => ({
  status: 200,
  body: { appid: APP_ID, mchid: MCH_ID, out_trade_no: ATTEMPT, trade_state, amount: { total: 1234, currency: 'CNY' }, ...extra },
});
const paidOrder = order('SUCCESS', { transaction_id: '4200000000000000000000000001' });
const refund = (status: string, out_refund_no = 'rf_1'): StubAnswer => ({
  status: 200,
  body: { refund_id: '50300000000000000000000001', out_refund_no, status, amount: { refund: 500, total: 1234, currency: 'CNY' } },
});

async function rejectedWith(p: Promise<unknown>, reason: string): Promise<void> {
  await assert.rejects(p, (e: unknown) => e instanceof ProviderRejectedError && e.reason === reason, reason);
}
async function uncertain(p: Promise<unknown>, what = ''): Promise<void> {
  await assert.rejects(p, (e: unknown) => e instanceof ProviderUncertainError, what);
}

/**
 * What the safety-critical codes must mean (docs/providers-wechatpay.md), written out here rather
 * than read from the tables under test, so that a wrong row of mapping.ts fails: [status, code,
 * outcome]. UNCERTAIN: a code no table lists (5xx, 429), uncertain whatever its status.
 */
type Expected = readonly (readonly [number, string, Outcome])[];
const UNCERTAIN_CODES: Expected = [
  [500, 'SYSTEM_ERROR', 'UNCERTAIN'],
  [429, 'FREQUENCY_LIMITED', 'UNCERTAIN'],
];
const EXPECTED_CREATE: Expected = [
  // An order of this number exists (paid, closed, or open with other parameters): only a query tells.
  [400, 'ORDERPAID', 'CHECK'],
  [400, 'ORDER_PAID', 'CHECK'],
  [400, 'ORDER_CLOSED', 'CHECK'],
  [403, 'OUT_TRADE_NO_USED', 'CHECK'],
  // The order was not created.
  [400, 'PARAM_ERROR', 'REJECTED'],
  [400, 'INVALID_REQUEST', 'REJECTED'],
  [401, 'SIGN_ERROR', 'REJECTED'],
  [403, 'NOTENOUGH', 'REJECTED'],
  [403, 'NOT_ENOUGH', 'REJECTED'],
  ...UNCERTAIN_CODES,
];
const EXPECTED_QUERY: Expected = [
  [404, 'ORDER_NOT_EXIST', 'NOT_FOUND'],
  [404, 'ORDERNOTEXIST', 'NOT_FOUND'],
  [400, 'PARAM_ERROR', 'REJECTED'],
  [401, 'SIGN_ERROR', 'REJECTED'],
  ...UNCERTAIN_CODES,
];
const EXPECTED_CLOSE: Expected = [
  [404, 'ORDER_NOT_EXIST', 'CLOSED'],
  [404, 'ORDERNOTEXIST', 'CLOSED'],
  [400, 'ORDER_CLOSED', 'CLOSED'],
  // Paid meanwhile, or any other refusal: the order's state decides, never the code alone.
  [400, 'ORDERPAID', 'CHECK'],
  [400, 'ORDER_PAID', 'CHECK'],
  [400, 'PARAM_ERROR', 'CHECK'],
  [401, 'SIGN_ERROR', 'CHECK'],
  ...UNCERTAIN_CODES,
];
const EXPECTED_REFUND: Expected = [
  // No refund was created: the amount stays refundable.
  [403, 'NOT_ENOUGH', 'REJECTED'],
  [403, 'NOTENOUGH', 'REJECTED'],
  [404, 'RESOURCE_NOT_EXISTS', 'REJECTED'],
  [400, 'PARAM_ERROR', 'REJECTED'],
  [400, 'INVALID_REQUEST', 'REJECTED'],
  [401, 'SIGN_ERROR', 'REJECTED'],
  // "The refund may be being accepted".
  ...UNCERTAIN_CODES,
];
const EXPECTED_REFUND_QUERY: Expected = [
  [404, 'RESOURCE_NOT_EXISTS', 'NOT_FOUND'],
  [400, 'PARAM_ERROR', 'REJECTED'],
  [401, 'SIGN_ERROR', 'REJECTED'],
  ...UNCERTAIN_CODES,
];

/** The table gives each documented code its documented outcome; an UNCERTAIN one at any 4xx or 5xx status. */
function agreesWith(table: ErrorTable, expected: Expected): void {
  for (const [status, code, outcome] of expected) {
    assert.equal(classify(table, status, code), outcome, `${status} ${code}`);
    if (outcome === 'UNCERTAIN')
      for (const s of [400, 403, 404, 429, 500]) assert.equal(classify(table, s, code), 'UNCERTAIN', `${s} ${code}`);
  }
}

/** A stub answering the first call with `first` and any later one (a follow-up query) with `then`. */
function twoStep(first: StubAnswer, then?: StubAnswer) {
  let n = 0;
  return stubProvider(() => (n++ === 0 ? first : (then ?? err(500, 'SYSTEM_ERROR'))));
}

describe('rules common to every call', () => {
  test('any 5xx, whatever its code, and 429 are uncertain; so is a 4xx code a table does not know', () => {
    for (const t of [CREATE_ERRORS, QUERY_ERRORS, CLOSE_ERRORS, REFUND_ERRORS, REFUND_QUERY_ERRORS]) {
      assert.equal(classify(t, 500, 'SYSTEM_ERROR'), 'UNCERTAIN');
      assert.equal(classify(t, 502, 'PARAM_ERROR'), 'UNCERTAIN');
      assert.equal(classify(t, 429, 'FREQUENCY_LIMITED'), 'UNCERTAIN');
      assert.equal(classify(t, 403, 'SOMETHING_NEW'), 'UNCERTAIN');
      assert.equal(classify(t, 400, null), 'UNCERTAIN');
      assert.equal(classify(t, 302, null), 'UNCERTAIN');
    }
  });

  for (const [what, a] of [
    ['an unsigned answer', { status: 200, body: { h5_url: 'https://wx.tenpay.com/x' }, signature: 'none' }],
    ['a badly signed answer', { status: 200, body: { h5_url: 'https://wx.tenpay.com/x' }, signature: 'bad' }],
    ['an answer signed 6 minutes ago', { status: 200, body: { h5_url: 'https://wx.tenpay.com/x' }, signature: 'stale' }],
    ['an unsigned 400 PARAM_ERROR', { status: 400, body: { code: 'PARAM_ERROR', message: 'x' }, signature: 'none' }],
    ['an unsigned 401 SIGN_ERROR', { status: 401, body: { code: 'SIGN_ERROR', message: 'x' }, signature: 'none' }],
    ['a signed answer that is not JSON', { status: 200, body: '<html>', signature: 'ok' }],
  ] as [string, StubAnswer][]) {
    test(`${what} is uncertain`, async () => {
      await uncertain(stubProvider(() => a).provider.createAttempt(input()), what);
    });
  }

  test('a transport failure is uncertain', async () => {
    const { provider } = stubProvider(() => {
      throw new TypeError('fetch failed');
    });
    await uncertain(provider.queryPayment(ATTEMPT));
  });

  test('no answer within the timeout is uncertain', async () => {
    // The stub never answers: only the timeout ends the call, and the error names it.
    const { provider } = stubProvider(() => new Promise(() => {}), { timeoutMs: 50 });
    await assert.rejects(
      provider.queryPayment(ATTEMPT),
      (e: unknown) => e instanceof ProviderUncertainError && /no answer within 50 ms/.test(e.message),
    );
  });
});

describe('createAttempt: POST /v3/pay/transactions/h5', () => {
  test('sends the documented body, signed; ACCEPTED with the h5_url and the return page as redirect_url', async () => {
    const { provider, requests } = stubProvider(() => ({
      status: 200,
      body: { h5_url: 'https://wx.tenpay.com/cgi-bin/mmpayweb-bin/checkmweb?prepay_id=wx1&package=2' },
    }));
    const r = await provider.createAttempt(input());
    assert.deepEqual(r, {
      outcome: 'ACCEPTED',
      providerRef: ATTEMPT,
      material: {
        qrCode: null,
        redirectUrl:
          'https://wx.tenpay.com/cgi-bin/mmpayweb-bin/checkmweb?prepay_id=wx1&package=2&redirect_url=https%3A%2F%2Fshop.example%2Freturn%3Forder%3D1%26x%3Da%20b',
      },
    });
    const q = requests[0]!;
    assert.equal(q.method, 'POST');
    assert.equal(q.path, '/v3/pay/transactions/h5');
    assert.match(
      q.headers.authorization!,
      /^WECHATPAY2-SHA256-RSA2048 mchid="1230000109",nonce_str="[0-9A-Za-z]{32}",timestamp="\d{10}",serial_no="5157F09EFDC096DE15EBE81A47057A7232F1B8E1",signature="[A-Za-z0-9+/=]+"$/,
    );
    assert.equal(q.headers['wechatpay-serial'], 'PUB_KEY_ID_0112300001092025000000000001');
    assert.deepEqual(q.body, {
      appid: APP_ID,
      mchid: MCH_ID,
      description: 'A cup of tea',
      out_trade_no: ATTEMPT,
      time_expire: '2030-01-02T11:04:05+08:00',
      notify_url: 'https://shop.example/api/provider/v1/notifications/wechatpay',
      amount: { total: 1234, currency: 'CNY' },
      scene_info: { payer_client_ip: '203.0.113.7', h5_info: { type: 'Wap' } },
    });
  });

  test('no return URL: the h5_url as it is; a description over 127 characters is cut', async () => {
    const { provider, requests } = stubProvider(() => ({ status: 200, body: { h5_url: 'https://wx.tenpay.com/x?a=1' } }));
    const r = await provider.createAttempt(input({ returnUrl: null, subject: '茶'.repeat(200) }));
    assert.equal(r.outcome === 'ACCEPTED' && r.material.redirectUrl, 'https://wx.tenpay.com/x?a=1');
    assert.equal(requests[0]!.body!.description, '茶'.repeat(127));
  });

  test('another channel, or an amount that is not a positive integer, is rejected without a call', async () => {
    const { provider, requests } = stubProvider(() => ({ status: 200, body: { h5_url: 'https://x' } }));
    await rejectedWith(provider.createAttempt(input({ channel: 'ALIPAY_H5' })), 'CHANNEL_NOT_SUPPORTED');
    await rejectedWith(provider.createAttempt(input({ amountFen: 12.5 })), 'AMOUNT_INVALID');
    await rejectedWith(provider.createAttempt(input({ amountFen: 0 })), 'AMOUNT_INVALID');
    assert.equal(requests.length, 0);
  });

  test('200 without an h5_url is uncertain', async () => {
    await uncertain(stubProvider(() => ({ status: 200, body: {} })).provider.createAttempt(input()));
  });

  function answered(status: number, code: string, outcome: Outcome, from: string): void {
    if (outcome === 'REJECTED') {
      test(`${status} ${code} (${from}): rejected, nothing asked again`, async () => {
        const { provider, requests } = twoStep(err(status, code));
        await rejectedWith(provider.createAttempt(input()), code);
        assert.equal(requests.length, 1);
      });
    } else if (outcome === 'CHECK') {
      test(`${status} ${code} (${from}): the order is queried; PAID when it was paid, else rejected`, async () => {
        const paid = twoStep(err(status, code), paidOrder);
        assert.deepEqual(await paid.provider.createAttempt(input()), { outcome: 'PAID', providerRef: '4200000000000000000000000001' });
        assert.match(paid.requests[1]!.path, /^\/v3\/pay\/transactions\/out-trade-no\/att_\w+\?mchid=1230000109$/);
        await rejectedWith(twoStep(err(status, code), order('NOTPAY')).provider.createAttempt(input()), code);
        await rejectedWith(twoStep(err(status, code), order('CLOSED')).provider.createAttempt(input()), code);
        await uncertain(twoStep(err(status, code), err(500, 'SYSTEM_ERROR')).provider.createAttempt(input()));
      });
    } else if (outcome === 'UNCERTAIN') {
      test(`${status} ${code} (${from}): uncertain`, async () => {
        await uncertain(twoStep(err(status, code)).provider.createAttempt(input()));
      });
    } else {
      test(`${status} ${code} (${from}): ${outcome}`, () => assert.fail(`no H5 order answer means ${outcome}`));
    }
  }

  test('the table gives the documented codes their documented outcomes', () => agreesWith(CREATE_ERRORS, EXPECTED_CREATE));
  for (const [status, code, outcome] of EXPECTED_CREATE) answered(status, code, outcome, 'documented');
  for (const [code, outcome] of Object.entries(CREATE_ERRORS)) {
    const status = code === 'SIGN_ERROR' ? 401 : code.startsWith('NO') || code.includes('LIMIT') || code.includes('ACCOUNT') ? 403 : 400;
    answered(status, code, outcome === 'REJECTED' ? 'REJECTED' : 'CHECK', 'table row');
  }
});

describe('queryPayment: GET /v3/pay/transactions/out-trade-no/{out_trade_no}', () => {
  const states: [string, string, string][] = [
    ['SUCCESS', 'PAID', '4200000000000000000000000001'],
    ['REFUND', 'PAID', '4200000000000000000000000001'],
    ['NOTPAY', 'OPEN', ATTEMPT],
    ['USERPAYING', 'OPEN', ATTEMPT],
    ['CLOSED', 'CLOSED', ATTEMPT],
    ['REVOKED', 'CLOSED', ATTEMPT],
    ['PAYERROR', 'FAILED', ATTEMPT],
  ];
  for (const [tradeState, state, ref] of states) {
    test(`trade_state ${tradeState}: ${state}, reference ${ref === ATTEMPT ? 'the out_trade_no' : 'the transaction_id'}, the amount`, async () => {
      const extra = state === 'PAID' ? { transaction_id: ref } : {};
      const q = await stubProvider(() => order(tradeState, extra)).provider.queryPayment(ATTEMPT);
      assert.deepEqual(q, { state, providerRef: ref, material: null, amountFen: 1234 });
    });
  }

  test('an unknown trade_state, another order, or another currency is uncertain', async () => {
    await uncertain(stubProvider(() => order('SOMETHING')).provider.queryPayment(ATTEMPT));
    await uncertain(stubProvider(() => order('NOTPAY', { out_trade_no: 'att_other' })).provider.queryPayment(ATTEMPT));
    await uncertain(stubProvider(() => order('NOTPAY', { mchid: '1900000001' })).provider.queryPayment(ATTEMPT));
    await uncertain(stubProvider(() => order('NOTPAY', { amount: { total: 1, currency: 'USD' } })).provider.queryPayment(ATTEMPT));
  });

  function answered(status: number, code: string, outcome: Outcome, from: string): void {
    test(`${status} ${code} (${from}): ${outcome}`, async () => {
      const p = stubProvider(() => err(status, code)).provider.queryPayment(ATTEMPT);
      if (outcome === 'NOT_FOUND') assert.deepEqual(await p, { state: 'NOT_FOUND', providerRef: null, material: null, amountFen: null });
      else if (outcome === 'UNCERTAIN') await uncertain(p);
      else await rejectedWith(p, code);
    });
  }

  test('the table gives the documented codes their documented outcomes', () => agreesWith(QUERY_ERRORS, EXPECTED_QUERY));
  for (const [status, code, outcome] of EXPECTED_QUERY) answered(status, code, outcome, 'documented');
  for (const [code, outcome] of Object.entries(QUERY_ERRORS)) {
    const status = outcome === 'NOT_FOUND' ? 404 : code === 'SIGN_ERROR' ? 401 : 400;
    answered(status, code, outcome === 'NOT_FOUND' ? 'NOT_FOUND' : 'REJECTED', 'table row');
  }
});

describe('closePayment: POST /v3/pay/transactions/out-trade-no/{out_trade_no}/close', () => {
  test('204: CLOSED; the body names our merchant number', async () => {
    const { provider, requests } = stubProvider(() => ({ status: 204 }));
    assert.deepEqual(await provider.closePayment(ATTEMPT), { outcome: 'CLOSED' });
    assert.equal(requests[0]!.path, `/v3/pay/transactions/out-trade-no/${ATTEMPT}/close`);
    assert.deepEqual(requests[0]!.body, { mchid: MCH_ID });
  });

  function answered(status: number, code: string, outcome: Outcome, from: string): void {
    if (outcome === 'CLOSED') {
      test(`${status} ${code} (${from}): CLOSED, no query`, async () => {
        const { provider, requests } = twoStep(err(status, code));
        assert.deepEqual(await provider.closePayment(ATTEMPT), { outcome: 'CLOSED' });
        assert.equal(requests.length, 1);
      });
    } else if (outcome === 'CHECK') {
      test(`${status} ${code} (${from}): the order is queried; PAID, CLOSED, or the refusal for an open order`, async () => {
        assert.deepEqual(await twoStep(err(status, code), paidOrder).provider.closePayment(ATTEMPT), { outcome: 'PAID' });
        assert.deepEqual(await twoStep(err(status, code), order('CLOSED')).provider.closePayment(ATTEMPT), { outcome: 'CLOSED' });
        assert.deepEqual(await twoStep(err(status, code), err(404, 'ORDER_NOT_EXIST')).provider.closePayment(ATTEMPT), {
          outcome: 'CLOSED',
        });
        await rejectedWith(twoStep(err(status, code), order('NOTPAY')).provider.closePayment(ATTEMPT), code);
        await uncertain(twoStep(err(status, code), err(503, 'SYSTEM_ERROR')).provider.closePayment(ATTEMPT));
      });
    } else if (outcome === 'UNCERTAIN') {
      test(`${status} ${code} (${from}): uncertain`, async () => {
        await uncertain(twoStep(err(status, code)).provider.closePayment(ATTEMPT));
      });
    } else {
      test(`${status} ${code} (${from}): ${outcome}`, () => assert.fail(`no close answer means ${outcome}`));
    }
  }

  test('the table gives the documented codes their documented outcomes', () => agreesWith(CLOSE_ERRORS, EXPECTED_CLOSE));
  for (const [status, code, outcome] of EXPECTED_CLOSE) answered(status, code, outcome, 'documented');
  for (const [code, outcome] of Object.entries(CLOSE_ERRORS)) {
    const status = code.includes('NOT_EXIST') || code === 'ORDERNOTEXIST' ? 404 : code === 'SIGN_ERROR' ? 401 : 400;
    answered(status, code, outcome === 'CLOSED' ? 'CLOSED' : 'CHECK', 'table row');
  }
});

describe('refund: POST /v3/refund/domestic/refunds', () => {
  const r = { refundId: 'rf_1', paidAttemptId: ATTEMPT, amountFen: 500, paymentAmountFen: 1234, reason: 'r'.repeat(100) };

  test('sends out_trade_no, out_refund_no, the amounts, the notify URL and the reason cut to 80 characters', async () => {
    const { provider, requests } = stubProvider(() => refund('PROCESSING'));
    assert.deepEqual(await provider.refund(r), { outcome: 'PENDING', providerRef: '50300000000000000000000001' });
    assert.deepEqual(requests[0]!.body, {
      out_trade_no: ATTEMPT,
      out_refund_no: 'rf_1',
      notify_url: 'https://shop.example/api/provider/v1/notifications/wechatpay',
      amount: { refund: 500, total: 1234, currency: 'CNY' },
      reason: 'r'.repeat(80),
    });
  });

  for (const [status, outcome] of [
    ['SUCCESS', 'SUCCEEDED'],
    ['PROCESSING', 'PENDING'],
    ['ABNORMAL', 'PENDING'],
  ]) {
    test(`status ${status}: ${outcome}`, async () => {
      assert.deepEqual(await stubProvider(() => refund(status!)).provider.refund(r), {
        outcome,
        providerRef: '50300000000000000000000001',
      });
    });
  }

  test('status CLOSED: rejected (nothing was refunded); an unknown status or another refund: uncertain', async () => {
    await rejectedWith(stubProvider(() => refund('CLOSED')).provider.refund(r), 'REFUND_CLOSED');
    await uncertain(stubProvider(() => refund('WHATEVER')).provider.refund(r));
    await uncertain(stubProvider(() => refund('SUCCESS', 'rf_other')).provider.refund(r));
  });

  test('the table gives the documented codes their documented outcomes', () => agreesWith(REFUND_ERRORS, EXPECTED_REFUND));
  for (const [status, code, outcome] of EXPECTED_REFUND) {
    test(`${status} ${code} (documented): ${outcome}`, async () => {
      const p = stubProvider(() => err(status, code)).provider.refund(r);
      if (outcome === 'UNCERTAIN') await uncertain(p);
      else await rejectedWith(p, code);
    });
  }

  for (const [code, outcome] of Object.entries(REFUND_ERRORS)) {
    const status =
      code === 'RESOURCE_NOT_EXISTS'
        ? 404
        : code === 'SIGN_ERROR'
          ? 401
          : code.startsWith('NOT') || code.startsWith('NO_') || code.startsWith('USER')
            ? 403
            : 400;
    test(`${status} ${code}: ${outcome}`, async () => {
      assert.equal(outcome, 'REJECTED');
      await rejectedWith(stubProvider(() => err(status, code)).provider.refund(r), code);
    });
  }

  test('429 FREQUENCY_LIMITED ("the refund may be being accepted") and 500 SYSTEM_ERROR: uncertain', async () => {
    await uncertain(stubProvider(() => err(429, 'FREQUENCY_LIMITED')).provider.refund(r));
    await uncertain(stubProvider(() => err(500, 'SYSTEM_ERROR')).provider.refund(r));
  });
});

describe('queryRefund: GET /v3/refund/domestic/refunds/{out_refund_no}', () => {
  for (const [status, state] of [
    ['SUCCESS', 'SUCCEEDED'],
    ['PROCESSING', 'PENDING'],
    ['ABNORMAL', 'PENDING'],
    ['CLOSED', 'FAILED'],
  ]) {
    test(`status ${status}: ${state}, with the refund's amount`, async () => {
      const { provider, requests } = stubProvider(() => refund(status!));
      assert.deepEqual(await provider.queryRefund({ refundId: 'rf_1', paidAttemptId: ATTEMPT }), { state, amountFen: 500 });
      assert.equal(requests[0]!.path, '/v3/refund/domestic/refunds/rf_1');
    });
  }

  function answered(status: number, code: string, outcome: Outcome, from: string): void {
    test(`${status} ${code} (${from}): ${outcome}`, async () => {
      const p = stubProvider(() => err(status, code)).provider.queryRefund({ refundId: 'rf_1', paidAttemptId: ATTEMPT });
      if (outcome === 'NOT_FOUND') assert.deepEqual(await p, { state: 'NOT_FOUND', amountFen: null });
      else if (outcome === 'UNCERTAIN') await uncertain(p);
      else await rejectedWith(p, code);
    });
  }

  test('the table gives the documented codes their documented outcomes', () => agreesWith(REFUND_QUERY_ERRORS, EXPECTED_REFUND_QUERY));
  for (const [status, code, outcome] of EXPECTED_REFUND_QUERY) answered(status, code, outcome, 'documented');
  for (const [code, outcome] of Object.entries(REFUND_QUERY_ERRORS)) {
    const status = outcome === 'NOT_FOUND' ? 404 : code === 'SIGN_ERROR' ? 401 : 400;
    answered(status, code, outcome === 'NOT_FOUND' ? 'NOT_FOUND' : 'REJECTED', 'table row');
  }
});

describe('notificationAck', () => {
  test('received: 204 with no body; refused: 500 with {"code":"FAIL","message"}', () => {
    const { provider } = stubProvider(() => ({ status: 204 }));
    assert.deepEqual(provider.notificationAck(true), { status: 204, contentType: 'text/plain; charset=utf-8', body: '' });
    const no = provider.notificationAck(false, 'bad signature');
    assert.equal(no.status, 500);
    assert.deepEqual(JSON.parse(no.body), { code: 'FAIL', message: 'bad signature' });
  });
});

export type { StubRequest };
