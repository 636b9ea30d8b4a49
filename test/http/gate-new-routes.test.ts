/**
 * The statement and event-log paths behind the same gate, in the same order, as every open
 * operation (decisions.md section 2; seed "Common rules"): each step's rejection with its envelope
 * and header rules, then step 9; other methods of the new paths are 405 in the platform envelope,
 * and the paths around them stay unmounted (404 ROUTE_NOT_FOUND).
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { type Merchant, type TestApp, call, orderBody, provision, signedHeaders, startTestApp } from '../helpers/app.ts';
import { FakeClock } from '../helpers/events.ts';

const clock = new FakeClock();
import { OPEN, assertUnsigned, expectRejection, expectSuccess, send } from './gate-kit.test.ts';

let t: TestApp;
let m: Merchant;
let fenced: Merchant;
let slow: Merchant;
let routes: { method: 'GET' | 'POST'; url: string; status: number }[];

const BIG = '{"a":"' + 'x'.repeat(65_530) + '"}';
const DENIED = '198.51.100.77';

before(async () => {
  t = await startTestApp({ PLATFORM_IP_DENYLIST: '198.51.100.0/24', AUTH_FAILURE_LIMIT: '100000' }, { clock });
  m = await provision(t);
  fenced = await provision(t, { app: { ipAllowlist: ['10.20.30.40/32'] } });
  slow = await provision(t, { app: { rateLimitPerSecond: 1 } });
  const o = orderBody();
  await call(t, m, 'POST', `${OPEN}/payments`, o);
  await call(t, m, 'POST', `${OPEN}/payments/${o.outTradeNo}/close`);
  const eventId = (await call(t, m, 'GET', `${OPEN}/events`)).json().events[0].eventId as string;
  const yesterday = new Date(Date.now() + 8 * 3600_000 - 86_400_000).toISOString().slice(0, 10);
  routes = [
    { method: 'GET', url: `${OPEN}/statements/${yesterday}`, status: 200 },
    { method: 'GET', url: `${OPEN}/statements/${yesterday}/file?compression=gzip`, status: 200 },
    { method: 'GET', url: `${OPEN}/events?limit=5`, status: 200 },
    { method: 'GET', url: `${OPEN}/events/${eventId}`, status: 200 },
    { method: 'POST', url: `${OPEN}/events/${eventId}/redeliveries`, status: 202 },
  ];
});
after(() => t.stop());

describe('each step, on each new path', () => {
  test('step 9 (first, while the redelivery is not yet rate-limited): answered and signed', async () => {
    for (const r of routes) {
      const s = await send(t, m, r.method, r.url);
      if (r.url.includes('/file')) {
        assert.equal(s.r.statusCode, 200);
        assert.equal(s.r.headers['x-svc-request-id'], s.requestId);
        assert.ok(s.r.headers['x-svc-response-sign']);
      } else {
        await expectSuccess(t, s.r, s.requestId, r.status);
      }
    }
  });

  test('step 1: oversized and invalid bodies', async () => {
    for (const r of routes) {
      const big = await send(t, m, r.method, r.url, BIG);
      await expectRejection(t, big.r, { status: 413, code: 'OPEN_API_BODY_TOO_LARGE', step: 1, sentRequestId: big.requestId });
      const dup = await send(t, m, r.method, r.url, '{"a":1,"a":2}');
      await expectRejection(t, dup.r, { status: 400, code: 'OPEN_API_BODY_INVALID', step: 1, sentRequestId: dup.requestId });
    }
  });

  test('steps 2-6: source IP, headers, signature, nonce, app allowlist', async () => {
    for (const r of routes) {
      const ip = await send(t, m, r.method, r.url, undefined, { remoteAddress: DENIED });
      await expectRejection(t, ip.r, {
        status: 403,
        code: 'OPEN_API_SOURCE_IP_REJECTED',
        step: 2,
        sentRequestId: ip.requestId,
        details: { reason: 'PLATFORM_DENYLISTED' },
      });
      const h = await send(t, m, r.method, r.url, undefined, { omit: ['X-SVC-Nonce'] });
      await expectRejection(t, h.r, { status: 400, code: 'OPEN_API_HEADER_INVALID', step: 3, sentRequestId: h.requestId });
      const sig = await send(t, m, r.method, r.url, undefined, { sign: 'A'.repeat(344) });
      await expectRejection(t, sig.r, { status: 401, code: 'OPEN_API_AUTH_FAILED', step: 4, sentRequestId: sig.requestId });
      const nonce = `nonce-${r.method}-${r.url.length}-${Math.random().toString(36).slice(2, 12)}`;
      await send(t, m, r.method, r.url, undefined, { nonce });
      const again = await send(t, m, r.method, r.url, undefined, { nonce });
      await expectRejection(t, again.r, { status: 409, code: 'OPEN_API_NONCE_REPLAYED', step: 5, sentRequestId: again.requestId });
      const fence = await send(t, fenced, r.method, r.url, undefined, { remoteAddress: '203.0.113.5' });
      await expectRejection(t, fence.r, { status: 403, code: 'OPEN_API_SOURCE_IP_REJECTED', step: 6, sentRequestId: fence.requestId });
    }
  });

  test('step 7: the POST without application/json; step 8: the app rate', async () => {
    const post = routes.find((r) => r.method === 'POST')!;
    const ct = await send(t, m, 'POST', post.url, undefined, { contentType: 'text/plain' });
    await expectRejection(t, ct.r, { status: 400, code: 'OPEN_API_CONTENT_TYPE_INVALID', step: 7, sentRequestId: ct.requestId });
    for (const r of routes) {
      let limited = null;
      for (let i = 0; i < 5 && !limited; i++) {
        const s = await send(t, slow, r.method, r.url.replace(/evt_[0-9a-z]+/, 'evt_0000000000000000'));
        if (s.r.statusCode === 429) limited = s;
      }
      assert.ok(limited, `${r.url}: a 429 within five quick requests at 1/s`);
      await expectRejection(t, limited.r, { status: 429, code: 'OPEN_API_RATE_LIMITED', step: 8, sentRequestId: limited.requestId });
      clock.advance(1100); // the next second's budget
    }
  });
});

describe('around the new paths', () => {
  test('other methods are 405 METHOD_NOT_ALLOWED in the platform envelope', async () => {
    for (const r of routes) {
      const path = r.url.split('?')[0]!;
      for (const method of ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'].filter((x) => x !== r.method)) {
        const res = await t.server.inject({
          method: method as 'GET',
          url: path,
          headers: signedHeaders(m, method, path, method === 'GET' ? '' : '{}'),
          payload: method === 'GET' ? undefined : '{}',
        });
        assert.equal(res.statusCode, 405, `${method} ${path}`);
        assert.deepEqual(Object.keys(res.json()).sort(), ['error', 'message', 'status']);
        assert.equal(res.json().error, 'METHOD_NOT_ALLOWED');
        assert.equal(res.headers.allow, r.method);
        assertUnsigned(res);
      }
    }
  });

  test('the paths next to them stay unmounted: 404 ROUTE_NOT_FOUND', async () => {
    for (const url of [`${OPEN}/statements`, `${OPEN}/statements/2026-01-01/file/x`, `${OPEN}/events/evt_abcdefghij/x`, `${OPEN}/event`]) {
      const res = await t.server.inject({ method: 'GET', url, headers: signedHeaders(m, 'GET', url, '') });
      assert.equal(res.statusCode, 404, url);
      assert.equal(res.json().error, 'ROUTE_NOT_FOUND');
      assert.equal(res.headers['x-svc-request-id'], undefined);
    }
  });
});
