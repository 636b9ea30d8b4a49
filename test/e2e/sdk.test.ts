/**
 * The merchant SDK against a listening server: every operation, real response signatures
 * verified with the platform keys, typed errors, retries on 429 that reuse the request id.
 */
import assert from 'node:assert/strict';
import { createPublicKey } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { gunzipSync } from 'node:zlib';
import { after, before, test } from 'node:test';
import { NotFoundError, PaymentClient, ResponseSignatureError, UnprocessableError, parsePlatformKeysJson } from '@mps/sdk';
import { type Merchant, type TestApp, orderBody, provision, startTestApp } from '../helpers/app.ts';

let t: TestApp;
let m: Merchant;
let base: string;
let platformPublicKeys: ReturnType<typeof parsePlatformKeysJson>;

before(async () => {
  t = await startTestApp();
  m = await provision(t);
  await t.server.listen({ port: 0, host: '127.0.0.1' });
  base = `http://127.0.0.1:${(t.server.server.address() as AddressInfo).port}`;
  platformPublicKeys = parsePlatformKeysJson((await t.admin('GET', '/platform-keys')).body);
});
after(() => t.stop());

function client(o: Partial<ConstructorParameters<typeof PaymentClient>[0]> = {}) {
  return new PaymentClient({
    baseUrl: base,
    appId: m.appId,
    keyId: m.keyId,
    privateKeyPem: m.privateKeyPem,
    platformPublicKeys,
    requireSignedSuccess: true,
    ...o,
  });
}

test('the seven operations through the SDK, every answer signature-verified', async () => {
  const c = client();
  const body = orderBody();
  const created = await c.createOrder(body as never);
  assert.equal(created.status, 201);
  assert.equal(created.signatureVerified, true);
  const openOrderId = (created.body as { openOrderId: string }).openOrderId;
  const re = await c.recreateAttempt(String(body.outTradeNo));
  assert.equal(re.status, 201);
  assert.equal(re.signatureVerified, true);
  assert.equal((await c.queryOrder(String(body.outTradeNo))).body.status, 'PAYING');
  await t.sandbox('POST', `/payments/${openOrderId}/pay`);
  const rf = await c.createRefund({ outTradeNo: String(body.outTradeNo), outRefundNo: 'RF_SDK_000001', refundAmountFen: 100 });
  assert.equal(rf.status, 201);
  assert.equal((await c.queryRefund('RF_SDK_000001')).body.replayed, true);
  const st = await c.getSettlementAccounts();
  assert.equal(st.signatureVerified, true);
  const other = orderBody();
  await c.createOrder(other as never);
  const closed = await c.closeOrder(String(other.outTradeNo));
  assert.equal((closed.body as { closeState: string }).closeState, 'CLOSE_REQUESTED');
});

test("a day's statement streamed to a file through the SDK, checked against its summary and signature; the event log", async () => {
  const c = client();
  const yesterday = new Date(Date.now() + 8 * 3600_000 - 86_400_000).toISOString().slice(0, 10);
  const chunks: Buffer[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _e, cb) {
      chunks.push(chunk);
      cb();
    },
  });
  const d = await c.downloadStatement(yesterday, sink, { compression: 'gzip' });
  assert.equal(d.signatureVerified, true);
  assert.equal(d.sha256, d.summary.sha256);
  assert.equal(gunzipSync(Buffer.concat(chunks)).toString().split('\r\n')[0]!.split(',')[0], 'type');
  const events = [];
  for await (const e of c.iterateEvents({ limit: 2 })) events.push(e);
  assert.ok(events.length >= 2, 'the events of the first test');
  const one = await c.getEvent(events[0]!.eventId);
  assert.equal(one.signatureVerified, true);
  assert.equal((await c.redeliverEvent(events[0]!.eventId)).status, 202);
});

test('contract failures arrive as typed errors carrying code, status, requestId and details', async () => {
  const c = client();
  await assert.rejects(c.queryOrder('NO_SUCH_ORDER'), (err: unknown) => {
    assert.ok(err instanceof NotFoundError);
    assert.equal(err.code, 'OPEN_API_NOT_FOUND');
    assert.equal(err.status, 404);
    assert.match(String(err.requestId), /./);
    return true;
  });
  const mch = await provision(t, { entityType: 'INDIVIDUAL' });
  const ci = new PaymentClient({ baseUrl: base, appId: mch.appId, keyId: mch.keyId, privateKeyPem: mch.privateKeyPem, platformPublicKeys });
  await assert.rejects(ci.createOrder(orderBody({ amountFen: 500_001 }) as never), (err: unknown) => {
    assert.ok(err instanceof UnprocessableError);
    assert.equal(err.code, 'OPEN_API_LIMIT_EXCEEDED');
    assert.deepEqual(err.details, { scopes: ['SINGLE_AMOUNT'] });
    return true;
  });
});

test('429 is retried with the same request id and a fresh nonce, then succeeds', async () => {
  const mch = await provision(t, { app: { rateLimitPerSecond: 1 } });
  const c = new PaymentClient({
    baseUrl: base,
    appId: mch.appId,
    keyId: mch.keyId,
    privateKeyPem: mch.privateKeyPem,
    platformPublicKeys,
    maxRetries: 3,
  });
  await assert.rejects(c.queryOrder('NOT_THERE_YET'), NotFoundError); // spends this second's budget
  const body = orderBody();
  const created = await c.createOrder(body as never, { requestId: 'req_sdk_retry_1' });
  assert.equal(created.status, 201);
  assert.ok(created.attempts >= 2, `the create was rate limited and retried (attempts: ${created.attempts})`);
  const again = await c.createOrder(body as never, { requestId: 'req_sdk_retry_1' });
  assert.equal(again.status, 201, 'the request id replays the first answer');
  assert.equal(JSON.stringify(again.body), JSON.stringify(created.body));
});

test('a response signed with another key is refused by the SDK', async () => {
  const notPlatform = createPublicKey(m.privateKeyPem).export({ type: 'spki', format: 'pem' }).toString();
  const wrong = parsePlatformKeysJson(JSON.stringify({ keys: [{ keyId: Object.keys(platformPublicKeys)[0], publicKeyPem: notPlatform }] }));
  await assert.rejects(client({ platformPublicKeys: wrong }).getSettlementAccounts(), ResponseSignatureError);
});
