/** The OpenAPI document: valid OpenAPI 3.1, served, and true to real responses. */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Validator } from '@seriousme/openapi-schema-validator';
import type { ObjectSchema } from '../../src/domain/schema.ts';
import { validate } from '../../src/domain/schema.ts';
import {
  failureSchema,
  orderCloseSchema,
  orderCreatedSchema,
  orderQuerySchema,
  refundSchema,
  settlementSchema,
} from '../../src/domain/response-schemas.ts';
import { type Merchant, type TestApp, call, orderBody, provision, startTestApp } from '../helpers/app.ts';

let t: TestApp;
let m: Merchant;
before(async () => {
  t = await startTestApp();
  m = await provision(t);
});
after(() => t.stop());

function conforms(schema: ObjectSchema, body: unknown, what: string) {
  const v = validate(schema, body);
  assert.equal(v, null, `${what}: ${JSON.stringify(v)} in ${JSON.stringify(body)}`);
}

test('GET /docs/openapi.json is a valid OpenAPI 3.1 document covering the seven operations', async () => {
  const r = await t.server.inject({ method: 'GET', url: '/docs/openapi.json' });
  assert.equal(r.statusCode, 200);
  const doc = r.json();
  const result = await new Validator().validate(doc);
  assert.equal(result.valid, true, String(JSON.stringify(result.errors)).slice(0, 2000));
  assert.equal(doc.openapi, '3.1.0');
  assert.equal(
    doc.webhooks.event.post.requestBody.content['application/json'].schema.required.length,
    13,
    'the notification payload is published',
  );
  const ops = Object.values(doc.paths as Record<string, Record<string, { operationId: string }>>).flatMap((p) =>
    Object.values(p).map((o) => o.operationId),
  );
  assert.deepEqual(ops.sort(), [
    'closeOrder',
    'createOrder',
    'createRefund',
    'queryOrder',
    'queryRefund',
    'readSettlement',
    'recreateAttempt',
  ]);
  const create = doc.paths['/payments'].post;
  for (const h of ['X-SVC-App-Id', 'X-SVC-Timestamp', 'X-SVC-Nonce', 'X-SVC-Key-Id', 'X-SVC-Request-Id', 'X-SVC-Sign']) {
    assert.ok(
      create.parameters.some((p: { name: string }) => p.name === h),
      h,
    );
  }
  assert.ok(create.responses['201'].headers['X-SVC-Response-Sign']);
  assert.deepEqual(create.responses['422'].content['application/json'].schema.properties.code.enum.sort(), [
    'OPEN_API_CHANNEL_UNAVAILABLE',
    'OPEN_API_LIMIT_EXCEEDED',
    'OPEN_API_TRADE_SCOPE_UNAVAILABLE',
  ]);
  assert.equal(create.requestBody.content['application/json'].schema.additionalProperties, false);
});

test('real responses conform to the documented response schemas', async () => {
  const body = orderBody();
  const c = await call(t, m, 'POST', '/api/open/v1/payments', body);
  conforms(orderCreatedSchema, c.json(), 'create 201');
  conforms(orderCreatedSchema, (await call(t, m, 'POST', '/api/open/v1/payments', body)).json(), 'create 200');
  conforms(orderCreatedSchema, (await call(t, m, 'POST', '/api/open/v1/payments', orderBody({ channel: 'WECHAT_H5' }))).json(), 'wechat');
  conforms(orderQuerySchema, (await call(t, m, 'GET', `/api/open/v1/payments/${body.outTradeNo}`)).json(), 'query');
  conforms(orderCreatedSchema, (await call(t, m, 'POST', `/api/open/v1/payments/${body.outTradeNo}/attempts`)).json(), 're-create');
  const paid = orderBody();
  const p = (await call(t, m, 'POST', '/api/open/v1/payments', paid)).json();
  await t.sandbox('POST', `/payments/${p.openOrderId}/pay`);
  const rf = await call(t, m, 'POST', '/api/open/v1/refunds', {
    outTradeNo: paid.outTradeNo,
    outRefundNo: 'RF_OPENAPI_1',
    refundAmountFen: 10,
    reason: 'r',
  });
  conforms(refundSchema, rf.json(), 'refund');
  conforms(refundSchema, (await call(t, m, 'GET', '/api/open/v1/refunds/RF_OPENAPI_1')).json(), 'query refund');
  conforms(orderCloseSchema, (await call(t, m, 'POST', `/api/open/v1/payments/${body.outTradeNo}/close`)).json(), 'close');
  conforms(settlementSchema, (await call(t, m, 'GET', '/api/open/v1/settlement/accounts')).json(), 'settlement');
  for (const r of [
    await call(t, m, 'POST', '/api/open/v1/payments', { ...orderBody(), amountFen: 0 }),
    await call(t, m, 'GET', '/api/open/v1/payments/NOPE_NOPE'),
    await call(t, m, 'POST', '/api/open/v1/payments', { ...body, amountFen: 5 }),
  ]) {
    conforms(failureSchema, r.json(), `failure ${r.statusCode}`);
  }
});
