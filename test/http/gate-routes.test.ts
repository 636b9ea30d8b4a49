/**
 * Paths and methods not mounted on the open routes (seed "Common rules"; decisions.md section 4):
 * the platform envelope {status, error, message}, never `code` or `requestId`, never an
 * OPEN_API_* code, no X-SVC-Request-Id and no response signature; 405 METHOD_NOT_ALLOWED for a
 * mounted path with another method; malformed percent-encoding and HEAD never a 5xx.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { LightMyRequestResponse } from 'fastify';
import { type Merchant, type TestApp, provision, signedHeaders, startTestApp } from '../helpers/app.ts';
import { OPEN, type Resp, assertUnsigned, listen, rawHead, rawRequest } from './gate-kit.test.ts';

let t: TestApp;
let m: Merchant;

before(async () => {
  t = await startTestApp({ AUTH_FAILURE_LIMIT: '100000' });
  m = await provision(t);
});
after(() => t.stop());

function platformEnvelope(r: Resp, status: number, error: string): Record<string, unknown> {
  assert.equal(r.statusCode, status, r.body);
  const b = JSON.parse(r.body) as Record<string, unknown>;
  assert.deepEqual(Object.keys(b).sort(), ['error', 'message', 'status'], r.body);
  assert.equal(b.status, status);
  assert.equal(b.error, error);
  assert.equal(typeof b.message, 'string');
  assert.ok(!/^OPEN_API_/.test(String(b.error)));
  assert.equal(r.headers['x-svc-request-id'], undefined);
  assertUnsigned(r);
  return b;
}

/** A fully signed request for any method and path (so only the routing can refuse it). */
function signed(method: string, url: string, body?: string): Promise<LightMyRequestResponse> {
  const raw = body ?? '';
  return t.server.inject({
    method: method as 'GET',
    url,
    headers: signedHeaders(m, method, url, raw, { contentType: 'application/json' }),
    payload: raw === '' ? undefined : raw,
    remoteAddress: '127.0.0.1',
  });
}

describe('404 ROUTE_NOT_FOUND', () => {
  test('unmounted paths, signed or not', async () => {
    for (const url of [
      `${OPEN}/nope`,
      `${OPEN}/payments/T_1234567/refunds`,
      `${OPEN}/settlement`,
      `${OPEN}/settlement/accounts/`,
      `${OPEN}//payments/T_1234567`,
      '/api/open/v2/payments',
      '/api/open/V1/payments',
      '/api/open',
      '/api/open/v1',
    ]) {
      platformEnvelope(await t.server.inject({ method: 'GET', url }), 404, 'ROUTE_NOT_FOUND');
      platformEnvelope(await signed('GET', url), 404, 'ROUTE_NOT_FOUND');
      platformEnvelope(await signed('POST', url, '{}'), 404, 'ROUTE_NOT_FOUND');
    }
  });

  test('the path is case-sensitive', async () => {
    platformEnvelope(await signed('POST', `${OPEN}/PAYMENTS`, '{}'), 404, 'ROUTE_NOT_FOUND');
  });

  test('an unmounted path with an invalid, oversized or odd body is still a 404', async () => {
    platformEnvelope(
      await t.server.inject({ method: 'POST', url: `${OPEN}/nope`, payload: '{bad', headers: { 'content-type': 'application/json' } }),
      404,
      'ROUTE_NOT_FOUND',
    );
    platformEnvelope(
      await t.server.inject({
        method: 'POST',
        url: `${OPEN}/nope`,
        payload: 'x'.repeat(2_000_000),
        headers: { 'content-type': 'application/json' },
      }),
      404,
      'ROUTE_NOT_FOUND',
    );
  });
});

describe('405 METHOD_NOT_ALLOWED on mounted paths', () => {
  const mounted: [string, string[]][] = [
    [`${OPEN}/payments`, ['POST']],
    [`${OPEN}/payments/T_1234567`, ['GET']],
    [`${OPEN}/payments/T_1234567/attempts`, ['POST']],
    [`${OPEN}/payments/T_1234567/close`, ['POST']],
    [`${OPEN}/refunds`, ['POST']],
    [`${OPEN}/refunds/RF_1234567`, ['GET']],
    [`${OPEN}/settlement/accounts`, ['GET']],
  ];
  for (const [url, allowed] of mounted) {
    test(`${url}: every other method`, async () => {
      for (const method of ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'HEAD'].filter((x) => !allowed.includes(x))) {
        const r = await signed(method, url, method === 'HEAD' || method === 'GET' ? undefined : '{}');
        assert.equal(r.statusCode, 405, `${method} ${url}: ${r.body}`);
        assert.equal(r.headers.allow, allowed.join(', '));
        if (method === 'HEAD') {
          assert.equal(r.body, '');
          assert.equal(r.headers['x-svc-request-id'], undefined);
          assertUnsigned(r);
        } else {
          platformEnvelope(r, 405, 'METHOD_NOT_ALLOWED');
        }
      }
    });
  }

  test('a 405 does not look at the body', async () => {
    const r = await t.server.inject({
      method: 'PUT',
      url: `${OPEN}/payments`,
      payload: '{bad',
      headers: { 'content-type': 'application/json' },
    });
    platformEnvelope(r, 405, 'METHOD_NOT_ALLOWED');
    const r2 = await t.server.inject({
      method: 'PUT',
      url: `${OPEN}/payments`,
      payload: 'x',
      headers: { 'content-type': 'application/x-foo' },
    });
    platformEnvelope(r2, 405, 'METHOD_NOT_ALLOWED');
  });

  test('TRACE (a method Fastify supports) on a mounted path is 405 as well', async () => {
    const r = await t.server.inject({ method: 'TRACE' as 'GET', url: `${OPEN}/payments` });
    platformEnvelope(r, 405, 'METHOD_NOT_ALLOWED');
  });
});

describe('odd request targets', () => {
  test('a reference with malformed percent-encoding goes through the gate and gets the neutral 404', async () => {
    for (const [method, url] of [
      ['GET', `${OPEN}/payments/%E0%A4%A`],
      ['GET', `${OPEN}/payments/abc%ZZdef`],
      ['GET', `${OPEN}/payments/%C0%AF`],
      ['GET', `${OPEN}/payments/%FFabcdef`],
      ['POST', `${OPEN}/payments/%ZZabcdef/close`],
      ['POST', `${OPEN}/payments/%ZZabcdef/attempts`],
      ['GET', `${OPEN}/refunds/%ZZabcdef?x=1`],
    ] as const) {
      const r = await signed(method, url, method === 'POST' ? '' : undefined);
      assert.equal(r.statusCode, 404, `${method} ${url}: ${r.body}`);
      const b = JSON.parse(r.body) as Record<string, unknown>;
      assert.deepEqual(Object.keys(b).sort(), ['code', 'message', 'requestId'], r.body);
      assert.equal(b.code, 'OPEN_API_NOT_FOUND');
      assert.equal(r.headers['x-svc-request-id'], b.requestId);
      assert.ok(r.headers['x-svc-response-sign'], 'answered after the gate: signed');
    }
    // The same target unsigned is stopped by the gate like any other request.
    const u = await t.server.inject({ method: 'GET', url: `${OPEN}/payments/abc%ZZdef` });
    assert.equal(u.statusCode, 400);
    assert.equal(JSON.parse(u.body).code, 'OPEN_API_HEADER_INVALID');
  });

  test('an unmounted open path with malformed percent-encoding is the platform 404 envelope', async () => {
    const r = await signed('GET', `${OPEN}/x%`);
    const b = platformEnvelope(r, 404, 'ROUTE_NOT_FOUND');
    assert.equal(b.message, `No route GET ${OPEN}/x%.`, 'the path as sent');
  });

  test('malformed percent-encoding in the query reaches the gate (signed target as sent)', async () => {
    const url = `${OPEN}/settlement/accounts?x=%ZZ&y=%`;
    const r = await signed('GET', url);
    assert.equal(r.statusCode, 200, r.body);
  });

  test('on a real socket: HEAD, odd methods and bad targets get complete answers, never 5xx', async () => {
    const port = await listen(t);
    for (const [method, target] of [
      ['HEAD', `${OPEN}/settlement/accounts`],
      ['HEAD', `${OPEN}/nope`],
      ['GET', `${OPEN}/payments/%ZZ`],
      ['DELETE', `${OPEN}/payments`],
      ['OPTIONS', `${OPEN}/refunds`],
      ['GET', '*'],
    ] as const) {
      const r = await rawRequest(port, rawHead(method, target, [['Connection', 'close']]));
      assert.ok(r.statusCode >= 400 && r.statusCode < 500, `${method} ${target}: ${r.raw.slice(0, 200)}`);
      assert.equal(r.headers['x-svc-request-id'], undefined);
    }
  });
});
