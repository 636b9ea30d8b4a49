import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { type Merchant, type TestApp, call, orderBody, provision, startTestApp } from '../helpers/app.ts';

let t: TestApp;
let m: Merchant;
before(async () => {
  t = await startTestApp();
  m = await provision(t);
});
after(() => t.stop());

test('create, query, pay, refund', async () => {
  const body = orderBody();
  const r = await call(t, m, 'POST', '/api/open/v1/payments', body);
  assert.equal(r.statusCode, 201, r.body);
  const o = r.json();
  assert.equal(o.status, 'PAYING');
  assert.match(o.payUrl, /^https:\/\/pay\.example\.test\/cashier\//);
  const q = await call(t, m, 'GET', `/api/open/v1/payments/${body.outTradeNo}`);
  assert.equal(q.statusCode, 200, q.body);
  assert.equal(q.json().latestAttempt.state, 'ACCEPTED');
  const pay = await t.server.inject({
    method: 'POST',
    url: `/api/sandbox/v1/payments/${o.openOrderId}/pay`,
    headers: { authorization: 'Bearer test-admin-token-0123456789' },
  });
  assert.equal(pay.statusCode, 200, pay.body);
  const q2 = await call(t, m, 'GET', `/api/open/v1/payments/${body.outTradeNo}`);
  assert.equal(q2.json().status, 'SUCCEEDED');
  const rf = await call(t, m, 'POST', '/api/open/v1/refunds', {
    outTradeNo: body.outTradeNo,
    outRefundNo: 'RF_000001',
    refundAmountFen: 400,
  });
  assert.equal(rf.statusCode, 201, rf.body);
  assert.equal(rf.json().state, 'PENDING');
});
