/**
 * Step 7 of the gate: every POST carries Content-Type application/json, compared after lower-casing
 * and stripping parameters; also the two bodyless POSTs; a GET may omit it (seed "Common rules";
 * decisions.md sections 2 and 4). A step-7 rejection is signed and echoes X-SVC-Request-Id.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { type Merchant, type TestApp, orderBody, provision, startTestApp } from '../helpers/app.ts';
import { OPEN, expectRejection, expectSuccess, send } from './gate-kit.test.ts';

let t: TestApp;
let m: Merchant;
let outTradeNo: string;

const PAYMENTS = `${OPEN}/payments`;

before(async () => {
  t = await startTestApp({ AUTH_FAILURE_LIMIT: '100000' });
  m = await provision(t);
  const body = orderBody();
  outTradeNo = body.outTradeNo as string;
  assert.equal((await send(t, m, 'POST', PAYMENTS, body)).r.statusCode, 201);
});
after(() => t.stop());

const ACCEPTED = [
  'application/json',
  'application/json; charset=utf-8',
  'application/json;charset=UTF-8',
  'APPLICATION/JSON',
  'Application/Json; Charset="utf-8"',
  ' application/json ',
  'application/json; foo=bar; baz=1',
];
const REFUSED = [
  null, // absent
  '',
  'text/plain',
  'text/json',
  'application/jsonp',
  'application/json-patch+json',
  'application/vnd.api+json',
  'application/x-www-form-urlencoded',
  'multipart/form-data; boundary=x',
  'application/*',
  '*/*',
  'application / json',
  'application/json, text/plain',
];

describe('create order', () => {
  test('accepted forms of application/json', async () => {
    for (const ct of ACCEPTED) {
      const s = await send(t, m, 'POST', PAYMENTS, orderBody(), { contentType: ct });
      assert.equal(s.r.statusCode, 201, `${JSON.stringify(ct)}: ${s.r.body}`);
      await expectSuccess(t, s.r, s.requestId, 201);
    }
  });

  test('anything else -> 400 OPEN_API_CONTENT_TYPE_INVALID, signed, request id echoed', async () => {
    for (const ct of REFUSED) {
      const s = await send(t, m, 'POST', PAYMENTS, orderBody(), { contentType: ct });
      assert.equal(s.r.statusCode, 400, `${JSON.stringify(ct)}: ${s.r.body}`);
      await expectRejection(t, s.r, { status: 400, code: 'OPEN_API_CONTENT_TYPE_INVALID', step: 7, sentRequestId: s.requestId });
    }
  });

  test('a refused Content-Type executes nothing', async () => {
    const body = orderBody();
    const s = await send(t, m, 'POST', PAYMENTS, body, { contentType: 'text/plain' });
    assert.equal(s.r.statusCode, 400);
    const q = await send(t, m, 'GET', `${PAYMENTS}/${body.outTradeNo}`);
    assert.equal(q.r.statusCode, 404);
  });
});

describe('the bodyless POSTs (re-create, close) need it too', () => {
  test('absent or wrong -> 400; application/json without a body -> accepted', async () => {
    for (const op of ['attempts', 'close']) {
      const url = `${PAYMENTS}/${outTradeNo}/${op}`;
      for (const ct of [null, 'text/plain', '']) {
        const s = await send(t, m, 'POST', url, undefined, { contentType: ct });
        await expectRejection(t, s.r, { status: 400, code: 'OPEN_API_CONTENT_TYPE_INVALID', step: 7, sentRequestId: s.requestId });
      }
    }
    const re = await send(t, m, 'POST', `${PAYMENTS}/${outTradeNo}/attempts`, undefined, {
      contentType: 'APPLICATION/JSON; charset=utf-8',
    });
    await expectSuccess(t, re.r, re.requestId, 201);
    const cl = await send(t, m, 'POST', `${PAYMENTS}/${outTradeNo}/close`, undefined, { contentType: 'application/json' });
    await expectSuccess(t, cl.r, cl.requestId, 200);
  });

  test('create refund needs it', async () => {
    const s = await send(
      t,
      m,
      'POST',
      `${OPEN}/refunds`,
      { outTradeNo, outRefundNo: 'RF_CT_000001', refundAmountFen: 1 },
      { contentType: 'text/plain' },
    );
    await expectRejection(t, s.r, { status: 400, code: 'OPEN_API_CONTENT_TYPE_INVALID', step: 7, sentRequestId: s.requestId });
  });
});

describe('GET may omit it, or send any', () => {
  test('the three reads without Content-Type and with other types', async () => {
    for (const url of [`${PAYMENTS}/${outTradeNo}`, `${OPEN}/settlement/accounts`, `${OPEN}/refunds/RF_NONE_0001`]) {
      for (const ct of [null, 'application/json', 'text/plain', '']) {
        const s = await send(t, m, 'GET', url, undefined, { contentType: ct });
        assert.ok(s.r.statusCode === 200 || s.r.statusCode === 404, `${url} ${JSON.stringify(ct)}: ${s.r.body}`);
        assert.notEqual(s.r.json().code, 'OPEN_API_CONTENT_TYPE_INVALID');
        assert.equal(s.r.headers['x-svc-request-id'], s.requestId);
      }
    }
  });
});
