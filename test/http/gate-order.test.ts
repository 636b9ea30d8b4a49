/**
 * The gate, row by row and in order (decisions.md section 2): every rejection carries the exact
 * failure envelope, X-SVC-Request-Id only from step 4 on, a response signature only from step 7 on,
 * a `gw_` requestId before step 3 passed and the merchant's after; a request failing two checks
 * gets the earlier one.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { type Merchant, type TestApp, call, orderBody, provision, startTestApp, tradeNo } from '../helpers/app.ts';
import { OPEN, assertNoAddressLeak, expectRejection, expectSuccess, send } from './gate-kit.test.ts';

let t: TestApp;
let m: Merchant;
/** App whose IP allowlist admits only 10.20.30.40 (step 6). */
let fenced: Merchant;
/** App limited to one request per second (step 8). */
let slow: Merchant;

const SETTLEMENT = `${OPEN}/settlement/accounts`;
const PAYMENTS = `${OPEN}/payments`;
const DENIED = '198.51.100.77';
const PROXY = '10.0.0.1';
const FENCE_OK = '10.20.30.40';

before(async () => {
  t = await startTestApp({ TRUSTED_PROXIES: PROXY, PLATFORM_IP_DENYLIST: '198.51.100.0/24', AUTH_FAILURE_LIMIT: '100000' });
  m = await provision(t);
  fenced = await provision(t, { app: { ipAllowlist: [`${FENCE_OK}/32`] } });
  slow = await provision(t, { app: { rateLimitPerSecond: 1 } });
});
after(() => t.stop());

const BIG = '{"a":"' + 'x'.repeat(65_530) + '"}'; // 65,538 bytes
assert.ok(Buffer.byteLength(BIG) > 65_536);

describe('each row of the gate (decisions.md section 2)', () => {
  test('step 1: a body over 65,536 bytes is 413 OPEN_API_BODY_TOO_LARGE, even fully signed', async () => {
    const { r, requestId } = await send(t, m, 'POST', PAYMENTS, BIG);
    await expectRejection(t, r, { status: 413, code: 'OPEN_API_BODY_TOO_LARGE', step: 1, sentRequestId: requestId });
  });

  test('step 1: invalid JSON and duplicate keys are 400 OPEN_API_BODY_INVALID, even fully signed', async () => {
    for (const raw of ['{"outTradeNo":', '{"a":{"b":1,"b":2}}', '\u00ff']) {
      const { r, requestId } = await send(t, m, 'POST', PAYMENTS, raw);
      await expectRejection(t, r, { status: 400, code: 'OPEN_API_BODY_INVALID', step: 1, sentRequestId: requestId });
    }
  });

  test('step 2: a platform-denylisted source is 403 with details.reason and the address is never echoed', async () => {
    const { r, requestId } = await send(t, m, 'GET', SETTLEMENT, undefined, { remoteAddress: DENIED });
    await expectRejection(t, r, {
      status: 403,
      code: 'OPEN_API_SOURCE_IP_REJECTED',
      step: 2,
      sentRequestId: requestId,
      details: { reason: 'PLATFORM_DENYLISTED' },
    });
    assertNoAddressLeak(r, DENIED);
  });

  test('step 3: a missing header is 400 OPEN_API_HEADER_INVALID with a gw_ requestId', async () => {
    const { r, requestId } = await send(t, m, 'GET', SETTLEMENT, undefined, { omit: ['X-SVC-Nonce'] });
    await expectRejection(t, r, { status: 400, code: 'OPEN_API_HEADER_INVALID', step: 3, sentRequestId: requestId });
  });

  test('step 4: a bad signature is 401 OPEN_API_AUTH_FAILED, X-SVC-Request-Id echoed, unsigned', async () => {
    const { r, requestId } = await send(t, m, 'GET', SETTLEMENT, undefined, { sign: 'A'.repeat(344) });
    await expectRejection(t, r, { status: 401, code: 'OPEN_API_AUTH_FAILED', step: 4, sentRequestId: requestId });
  });

  test('step 5: a replayed nonce is 409 OPEN_API_NONCE_REPLAYED, unsigned', async () => {
    const nonce = 'nonce-order-step5-0001';
    const first = await send(t, m, 'GET', SETTLEMENT, undefined, { nonce });
    await expectSuccess(t, first.r, first.requestId, 200);
    const { r, requestId } = await send(t, m, 'GET', SETTLEMENT, undefined, { nonce });
    await expectRejection(t, r, { status: 409, code: 'OPEN_API_NONCE_REPLAYED', step: 5, sentRequestId: requestId });
  });

  test('step 6: an app-allowlist miss is 403 with exactly three fields, unsigned, address not echoed', async () => {
    const { r, requestId } = await send(t, fenced, 'GET', SETTLEMENT, undefined, { remoteAddress: '203.0.113.5' });
    const b = await expectRejection(t, r, { status: 403, code: 'OPEN_API_SOURCE_IP_REJECTED', step: 6, sentRequestId: requestId });
    assert.deepEqual(Object.keys(b).sort(), ['code', 'message', 'requestId']);
    assertNoAddressLeak(r, '203.0.113.5');
    const ok = await send(t, fenced, 'GET', SETTLEMENT, undefined, { remoteAddress: FENCE_OK });
    await expectSuccess(t, ok.r, ok.requestId, 200);
  });

  test('step 7: a POST with the wrong Content-Type is 400 OPEN_API_CONTENT_TYPE_INVALID, signed', async () => {
    const { r, requestId } = await send(t, m, 'POST', PAYMENTS, orderBody(), { contentType: 'text/plain' });
    await expectRejection(t, r, { status: 400, code: 'OPEN_API_CONTENT_TYPE_INVALID', step: 7, sentRequestId: requestId });
  });

  test('step 8: over the app rate is 429 OPEN_API_RATE_LIMITED with Retry-After, signed', async () => {
    let limited: Awaited<ReturnType<typeof send>> | null = null;
    for (let i = 0; i < 5 && !limited; i++) {
      const s = await send(t, slow, 'GET', SETTLEMENT);
      if (s.r.statusCode === 429) limited = s;
    }
    assert.ok(limited, 'a 429 within five quick requests at 1/s');
    await expectRejection(t, limited.r, { status: 429, code: 'OPEN_API_RATE_LIMITED', step: 8, sentRequestId: limited.requestId });
    assert.match(String(limited.r.headers['retry-after']), /^[1-9][0-9]*$/);
  });

  test('step 9: a schema failure and a neutral 404 are signed failure envelopes', async () => {
    const bad = await send(t, m, 'POST', PAYMENTS, { outTradeNo: tradeNo() });
    await expectRejection(t, bad.r, { status: 400, code: 'OPEN_API_BODY_INVALID', step: 9, sentRequestId: bad.requestId, details: 'any' });
    const nf = await send(t, m, 'GET', `${PAYMENTS}/NO_SUCH_ORDER_1`);
    await expectRejection(t, nf.r, { status: 404, code: 'OPEN_API_NOT_FOUND', step: 9, sentRequestId: nf.requestId });
    const ext = await send(t, m, 'POST', PAYMENTS, orderBody({ extra: 1 }));
    await expectRejection(t, ext.r, { status: 400, code: 'OPEN_API_BODY_INVALID', step: 9, sentRequestId: ext.requestId, details: 'any' });
  });

  test('success: 201 and 200 carry the requestId and a verifying signature', async () => {
    const c = await send(t, m, 'POST', PAYMENTS, orderBody());
    await expectSuccess(t, c.r, c.requestId, 201);
    const g = await send(t, m, 'GET', SETTLEMENT);
    await expectSuccess(t, g.r, g.requestId, 200);
  });
});

describe('the observed address is never echoed', () => {
  test('on successes and on rejections of every step', async () => {
    const addr = '198.18.7.9';
    const proxied = '198.18.7.10';
    const responses = [
      (await send(t, m, 'GET', SETTLEMENT, undefined, { remoteAddress: addr })).r,
      (await send(t, m, 'POST', PAYMENTS, orderBody(), { remoteAddress: addr })).r,
      (await send(t, m, 'POST', PAYMENTS, BIG, { remoteAddress: addr })).r,
      (await send(t, m, 'POST', PAYMENTS, '{"a":1,"a":1}', { remoteAddress: addr })).r,
      (await send(t, m, 'GET', SETTLEMENT, undefined, { remoteAddress: addr, headers: { 'X-Forwarded-For': proxied } })).r,
      (await send(t, m, 'GET', SETTLEMENT, undefined, { remoteAddress: PROXY, headers: { 'X-Forwarded-For': proxied } })).r,
      (await send(t, m, 'GET', SETTLEMENT, undefined, { remoteAddress: PROXY, headers: { 'X-Forwarded-For': `${proxied}, junk` } })).r,
      (await send(t, m, 'GET', SETTLEMENT, undefined, { remoteAddress: addr, omit: ['X-SVC-Sign'] })).r,
      (await send(t, m, 'GET', SETTLEMENT, undefined, { remoteAddress: addr, sign: 'A'.repeat(344) })).r,
      (await send(t, fenced, 'GET', SETTLEMENT, undefined, { remoteAddress: addr })).r,
      (await send(t, m, 'POST', PAYMENTS, orderBody(), { remoteAddress: addr, contentType: 'text/plain' })).r,
      (await send(t, m, 'GET', `${PAYMENTS}/NO_SUCH_ORDER_3`, undefined, { remoteAddress: addr })).r,
      await t.server.inject({ method: 'GET', url: `${OPEN}/nope`, remoteAddress: addr }),
    ];
    for (const r of responses) assertNoAddressLeak(r, addr, proxied);
  });
});

describe('a request failing two checks gets the earlier one', () => {
  test('oversized body + no headers at all -> 413', async () => {
    const r = await t.server.inject({ method: 'POST', url: PAYMENTS, payload: BIG, remoteAddress: DENIED });
    await expectRejection(t, r, { status: 413, code: 'OPEN_API_BODY_TOO_LARGE', step: 1 });
  });

  test('duplicate keys + no headers on a GET -> 400 OPEN_API_BODY_INVALID', async () => {
    const r = await t.server.inject({
      method: 'GET',
      url: SETTLEMENT,
      payload: '{"a":1,"a":1}',
      headers: { 'content-type': 'application/json' },
    });
    await expectRejection(t, r, { status: 400, code: 'OPEN_API_BODY_INVALID', step: 1 });
  });

  test('invalid JSON + untrusted forwarder -> 400 OPEN_API_BODY_INVALID', async () => {
    const { r, requestId } = await send(t, m, 'POST', PAYMENTS, '{bad', {
      headers: { 'X-Forwarded-For': '8.8.8.8' },
      remoteAddress: '192.0.2.1',
    });
    await expectRejection(t, r, { status: 400, code: 'OPEN_API_BODY_INVALID', step: 1, sentRequestId: requestId });
  });

  test('oversized body + denylisted source -> 413', async () => {
    const { r, requestId } = await send(t, m, 'POST', PAYMENTS, BIG, { remoteAddress: DENIED });
    await expectRejection(t, r, { status: 413, code: 'OPEN_API_BODY_TOO_LARGE', step: 1, sentRequestId: requestId });
  });

  test('untrusted forwarder + malformed headers -> 403 FORWARDER_UNTRUSTED', async () => {
    const { r, requestId } = await send(t, m, 'GET', SETTLEMENT, undefined, {
      headers: { 'X-Forwarded-For': '8.8.8.8', 'X-SVC-Nonce': 'short' },
      remoteAddress: '192.0.2.1',
    });
    await expectRejection(t, r, {
      status: 403,
      code: 'OPEN_API_SOURCE_IP_REJECTED',
      step: 2,
      sentRequestId: requestId,
      details: { reason: 'FORWARDER_UNTRUSTED' },
    });
    assertNoAddressLeak(r, '192.0.2.1', '8.8.8.8');
  });

  test('denylisted client behind a trusted proxy + no headers -> 403 PLATFORM_DENYLISTED', async () => {
    const r = await t.server.inject({ method: 'GET', url: SETTLEMENT, headers: { 'X-Forwarded-For': DENIED }, remoteAddress: PROXY });
    await expectRejection(t, r, { status: 403, code: 'OPEN_API_SOURCE_IP_REJECTED', step: 2, details: { reason: 'PLATFORM_DENYLISTED' } });
    assertNoAddressLeak(r, DENIED, PROXY);
  });

  test('malformed header + bad signature -> 400 OPEN_API_HEADER_INVALID', async () => {
    const { r, requestId } = await send(t, m, 'GET', SETTLEMENT, undefined, {
      sign: 'A'.repeat(344),
      headers: { 'X-SVC-Timestamp': '12345678901' },
    });
    await expectRejection(t, r, { status: 400, code: 'OPEN_API_HEADER_INVALID', step: 3, sentRequestId: requestId });
  });

  test('malformed header + wrong Content-Type -> 400 OPEN_API_HEADER_INVALID (unsigned)', async () => {
    const { r, requestId } = await send(t, m, 'POST', PAYMENTS, orderBody(), { contentType: 'text/plain', omit: ['X-SVC-Key-Id'] });
    await expectRejection(t, r, { status: 400, code: 'OPEN_API_HEADER_INVALID', step: 3, sentRequestId: requestId });
  });

  test('bad signature + replayed nonce -> 401', async () => {
    const nonce = 'nonce-order-pair-0002';
    const first = await send(t, m, 'GET', SETTLEMENT, undefined, { nonce });
    assert.equal(first.r.statusCode, 200);
    const { r, requestId } = await send(t, m, 'GET', SETTLEMENT, undefined, { nonce, sign: 'A'.repeat(344) });
    await expectRejection(t, r, { status: 401, code: 'OPEN_API_AUTH_FAILED', step: 4, sentRequestId: requestId });
  });

  test('stale timestamp + replayed nonce -> 401', async () => {
    const nonce = 'nonce-order-pair-0003';
    assert.equal((await send(t, m, 'GET', SETTLEMENT, undefined, { nonce })).r.statusCode, 200);
    const ts = String(Math.floor(Date.now() / 1000) - 3600);
    const { r, requestId } = await send(t, m, 'GET', SETTLEMENT, undefined, { nonce, timestamp: ts });
    await expectRejection(t, r, { status: 401, code: 'OPEN_API_AUTH_FAILED', step: 4, sentRequestId: requestId });
  });

  test('a rejected signature does not use up the nonce', async () => {
    const nonce = 'nonce-order-pair-0004';
    const bad = await send(t, m, 'GET', SETTLEMENT, undefined, { nonce, sign: 'A'.repeat(344) });
    assert.equal(bad.r.statusCode, 401);
    const good = await send(t, m, 'GET', SETTLEMENT, undefined, { nonce });
    await expectSuccess(t, good.r, good.requestId, 200);
  });

  test('replayed nonce + app-allowlist miss -> 409', async () => {
    const nonce = 'nonce-order-pair-0005';
    assert.equal((await send(t, fenced, 'GET', SETTLEMENT, undefined, { nonce, remoteAddress: FENCE_OK })).r.statusCode, 200);
    const { r, requestId } = await send(t, fenced, 'GET', SETTLEMENT, undefined, { nonce, remoteAddress: '203.0.113.6' });
    await expectRejection(t, r, { status: 409, code: 'OPEN_API_NONCE_REPLAYED', step: 5, sentRequestId: requestId });
  });

  test('app-allowlist miss + wrong Content-Type -> 403 with three fields', async () => {
    const { r, requestId } = await send(t, fenced, 'POST', PAYMENTS, orderBody(), {
      contentType: 'text/plain',
      remoteAddress: '203.0.113.7',
    });
    await expectRejection(t, r, { status: 403, code: 'OPEN_API_SOURCE_IP_REJECTED', step: 6, sentRequestId: requestId });
  });

  test('app-allowlist miss + invalid schema -> 403', async () => {
    const { r, requestId } = await send(t, fenced, 'POST', PAYMENTS, { nope: true }, { remoteAddress: '203.0.113.7' });
    await expectRejection(t, r, { status: 403, code: 'OPEN_API_SOURCE_IP_REJECTED', step: 6, sentRequestId: requestId });
  });

  /** Drives `slow` (1/s) into its limit, sends `probe` at once, and returns the probe's response. */
  async function whileLimited(probe: () => Promise<Awaited<ReturnType<typeof send>>>, accept: (status: number) => boolean) {
    let last: Awaited<ReturnType<typeof send>> | null = null;
    // A limit window may roll over between two requests: retry a few times (a misordered gate fails every time).
    for (let attempt = 0; attempt < 5; attempt++) {
      let limited = false;
      for (let i = 0; i < 5 && !limited; i++) limited = (await send(t, slow, 'GET', SETTLEMENT)).r.statusCode === 429;
      assert.ok(limited);
      last = await probe();
      if (accept(last.r.statusCode)) return last;
    }
    return last!;
  }

  test('wrong Content-Type + rate limited -> 400 OPEN_API_CONTENT_TYPE_INVALID', async () => {
    const s = await whileLimited(
      () => send(t, slow, 'POST', PAYMENTS, orderBody(), { contentType: 'text/plain' }),
      (st) => st === 400,
    );
    await expectRejection(t, s.r, { status: 400, code: 'OPEN_API_CONTENT_TYPE_INVALID', step: 7, sentRequestId: s.requestId });
  });

  test('rate limited + invalid body schema -> 429', async () => {
    const s = await whileLimited(
      () => send(t, slow, 'POST', PAYMENTS, { outTradeNo: 'x' }),
      (st) => st === 429,
    );
    await expectRejection(t, s.r, { status: 429, code: 'OPEN_API_RATE_LIMITED', step: 8, sentRequestId: s.requestId });
  });

  test('rate limited + unknown order -> 429, not 404', async () => {
    const s = await whileLimited(
      () => send(t, slow, 'GET', `${PAYMENTS}/NO_SUCH_ORDER_2`),
      (st) => st === 429,
    );
    await expectRejection(t, s.r, { status: 429, code: 'OPEN_API_RATE_LIMITED', step: 8, sentRequestId: s.requestId });
  });

  test('rate limited + replayed nonce -> 409 (unsigned)', async () => {
    const nonce = 'nonce-order-pair-0006';
    let used = false;
    const s = await whileLimited(
      async () => {
        const x = await send(t, slow, 'GET', SETTLEMENT, undefined, { nonce });
        if (!used) {
          used = true;
          // The first use of the nonce passed step 5 (and was limited at step 8); re-send it now.
          return send(t, slow, 'GET', SETTLEMENT, undefined, { nonce });
        }
        return x;
      },
      (st) => st === 409,
    );
    await expectRejection(t, s.r, { status: 409, code: 'OPEN_API_NONCE_REPLAYED', step: 5, sentRequestId: s.requestId });
  });

  test('a failed step-7 check does not spend a rate-limit point', async () => {
    // Ten wrong Content-Types on a 1/s app, then a good request still passes.
    const lone = await provision(t, { app: { rateLimitPerSecond: 1 } });
    for (let i = 0; i < 10; i++) {
      const s = await call(t, lone, 'POST', PAYMENTS, orderBody(), { contentType: 'text/plain' });
      assert.equal(s.statusCode, 400);
    }
    const ok = await send(t, lone, 'GET', SETTLEMENT);
    await expectSuccess(t, ok.r, ok.requestId, 200);
  });
});
