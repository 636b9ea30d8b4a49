/**
 * The pace of refusals per source address (docs/configuration.md, "Fairness"; src/gate/refusal-pacer.ts):
 * past an address's budget of refusals before authentication (REFUSALS_PER_ADDRESS_PER_SECOND after a
 * burst of REFUSALS_BURST_PER_ADDRESS), each refusal is held, and still answered exactly as the contract answers it
 * (status, code, envelope, no X-SVC-Request-Id before step 3, never signed); the parser's refusals
 * and the rate limit's 429s (signed, with Retry-After) likewise. The same address's valid requests are never held, other addresses keep their own budget,
 * and the budget comes back as the clock moves. The clock is the test's own and stands still unless
 * moved, so which refusals are held is exact; how long they wait is not asserted.
 */
import assert from 'node:assert/strict';
import net from 'node:net';
import { after, before, test } from 'node:test';
import type { LightMyRequestResponse } from 'fastify';
import type { Clock } from '../../src/domain/clock.ts';
import { ADMIN_TOKEN, type Merchant, type TestApp, call, provision, startTestApp } from '../helpers/app.ts';

const RATE = 10; // refusals a second per address: a burst of 20, then one every 100 ms
const BURST = 2 * RATE;

class StillClock implements Clock {
  at = Date.now();
  now(): number {
    return this.at;
  }
}

let t: TestApp;
let m: Merchant;
let port: number;
const clock = new StillClock();

before(async () => {
  t = await startTestApp(
    { REFUSALS_PER_ADDRESS_PER_SECOND: String(RATE), REFUSALS_BURST_PER_ADDRESS: String(BURST), AUTH_FAILURE_LIMIT: '1000000' },
    { clock },
  );
  m = await provision(t, { app: { rateLimitPerSecond: 100_000 } });
  await t.server.listen({ port: 0, host: '127.0.0.1' });
  port = (t.server.server.address() as net.AddressInfo).port;
});
after(() => t.stop());

async function heldTotal(): Promise<number> {
  const r = await t.server.inject({ method: 'GET', url: '/metrics', headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
  assert.equal(r.statusCode, 200);
  return Number(/^mps_refusals_held_total (\d+)$/m.exec(r.body)?.[1]);
}

/** A fresh budget for every address: the clock moved past any hold. */
function budgetsBack(): void {
  clock.at += 60_000;
}

const unsigned = (remoteAddress: string, payload: string) =>
  t.server.inject({
    method: 'POST',
    url: '/api/open/v1/payments',
    headers: { 'content-type': 'application/json' },
    payload,
    remoteAddress,
  });

/** The contract's answer of a refusal before step 4: the code, a gw_ id, neither X-SVC-Request-Id nor a signature. */
function preAuthRefusal(r: LightMyRequestResponse, status: number, code: string): void {
  assert.equal(r.statusCode, status, r.body);
  const b = r.json() as Record<string, unknown>;
  assert.equal(b.code, code);
  assert.match(b.requestId as string, /^gw_/);
  assert.equal(r.headers['x-svc-request-id'], undefined);
  assert.equal(r.headers['x-svc-response-sign'], undefined);
}

test('refusals past an address budget are held and keep the contract answers; its valid requests and other addresses are not held', async () => {
  budgetsBack();
  const before = await heldTotal();
  const extra = 4;
  // Missing headers (step 3) and a body that is no JSON (step 1), all from one address.
  const answers = await Promise.all(
    Array.from({ length: BURST + extra }, (_, i) => unsigned('203.0.113.7', i % 2 === 0 ? '{"a":1}' : '{"a":')),
  );
  answers.forEach((r, i) =>
    i % 2 === 0 ? preAuthRefusal(r, 400, 'OPEN_API_HEADER_INVALID') : preAuthRefusal(r, 400, 'OPEN_API_BODY_INVALID'),
  );
  assert.equal((await heldTotal()) - before, extra);

  // A bad signature (step 4) from the same address: held, the contract's 401 with the merchant's request id, unsigned.
  const forged = await call(t, m, 'GET', '/api/open/v1/settlement/accounts', undefined, {
    remoteAddress: '203.0.113.7',
    sign: Buffer.alloc(256, 1).toString('base64'),
    requestId: 'req-forged-0001',
  });
  assert.equal(forged.statusCode, 401, forged.body);
  assert.equal((forged.json() as { code: string }).code, 'OPEN_API_AUTH_FAILED');
  assert.equal(forged.headers['x-svc-request-id'], 'req-forged-0001');
  assert.equal(forged.headers['x-svc-response-sign'], undefined);
  assert.equal((await heldTotal()) - before, extra + 1);

  // A valid request from that address is served and never held.
  const ok = await call(t, m, 'GET', '/api/open/v1/settlement/accounts', undefined, { remoteAddress: '203.0.113.7' });
  assert.equal(ok.statusCode, 200, ok.body);
  assert.ok(ok.headers['x-svc-response-sign']);
  // Another address has its own budget.
  preAuthRefusal(await unsigned('198.51.100.9', '{"a":1}'), 400, 'OPEN_API_HEADER_INVALID');
  // IPv6 addresses of one /64 share theirs.
  const v6 = await Promise.all(Array.from({ length: BURST + 1 }, (_, i) => unsigned(`2001:db8:1:2::${(i + 1).toString(16)}`, '{}')));
  for (const r of v6) preAuthRefusal(r, 400, 'OPEN_API_HEADER_INVALID');
  assert.equal((await heldTotal()) - before, extra + 2);
});

test('the budget comes back as the clock moves', async () => {
  budgetsBack();
  const before = await heldTotal();
  for (let i = 0; i < BURST; i++) preAuthRefusal(await unsigned('203.0.113.8', '{}'), 400, 'OPEN_API_HEADER_INVALID');
  assert.equal(await heldTotal(), before);
  preAuthRefusal(await unsigned('203.0.113.8', '{}'), 400, 'OPEN_API_HEADER_INVALID');
  assert.equal(await heldTotal(), before + 1);
  // Two refusals' worth of time: the one held took the place it waited for, the next is free again.
  clock.at += 2 * (1000 / RATE);
  preAuthRefusal(await unsigned('203.0.113.8', '{}'), 400, 'OPEN_API_HEADER_INVALID');
  assert.equal(await heldTotal(), before + 1);
});

test("the rate limit's 429s past an address budget are held and keep their answer: signed, with Retry-After", async () => {
  budgetsBack();
  const limited = await provision(t, { app: { rateLimitPerSecond: 1 } });
  const before = await heldTotal();
  const first = await call(t, limited, 'GET', '/api/open/v1/settlement/accounts', undefined, { remoteAddress: '203.0.113.9' });
  assert.equal(first.statusCode, 200, first.body);
  const extra = 2;
  const answers = await Promise.all(
    Array.from({ length: BURST + extra }, () =>
      call(t, limited, 'GET', '/api/open/v1/settlement/accounts', undefined, { remoteAddress: '203.0.113.9' }),
    ),
  );
  for (const r of answers) {
    assert.equal(r.statusCode, 429, r.body);
    assert.equal((r.json() as { code: string }).code, 'OPEN_API_RATE_LIMITED');
    assert.match(String(r.headers['retry-after']), /^[1-9]\d*$/);
    assert.ok(r.headers['x-svc-request-id']);
    assert.ok(r.headers['x-svc-response-sign']);
  }
  assert.equal((await heldTotal()) - before, extra);
});

/** Writes raw bytes on a fresh connection; resolves with all the server sent before closing it. */
function raw(bytes: string | Buffer): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = net.connect(port, '127.0.0.1');
    let out = '';
    s.setEncoding('latin1');
    s.on('data', (d: string) => (out += d));
    s.on('error', reject);
    s.on('close', () => resolve(out));
    s.end(bytes);
  });
}

test("the parser's refusals past the address budget are held and keep their answers", async () => {
  budgetsBack();
  const before = await heldTotal();
  const extra = 3;
  const kinds = [
    { bytes: `GET /api/open/v1/settlement/accounts HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`, status: 431 },
    { bytes: 'FOOBAR /api/open/v1/payments HTTP/1.1\r\nHost: x\r\n\r\n', status: 400 },
  ];
  const answers = await Promise.all(Array.from({ length: BURST + extra }, (_, i) => raw(kinds[i % 2]!.bytes)));
  answers.forEach((a, i) => {
    const status = kinds[i % 2]!.status;
    const [head, body] = a.split('\r\n\r\n');
    assert.match(head!, new RegExp(`^HTTP/1\\.1 ${status} `), a);
    assert.match(head!, /\r\nconnection: close(\r\n|$)/i);
    const b = JSON.parse(body!) as Record<string, unknown>;
    assert.equal(b.status, status);
    assert.equal(b.error, status === 431 ? 'REQUEST_HEADER_FIELDS_TOO_LARGE' : 'BAD_REQUEST');
  });
  assert.equal((await heldTotal()) - before, extra);
});
