/**
 * Step 8 of the gate: the per-app rate limit, 429 OPEN_API_RATE_LIMITED with Retry-After in
 * seconds (decisions.md sections 2 and 4), in memory and on Redis (REDIS_URL; skipped when
 * TEST_REDIS_URL is not set), including two instances sharing one Redis budget.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { type BuiltApp, buildApp } from '../../src/app.ts';
import { type Merchant, type TestApp, call, orderBody, provision, startTestApp } from '../helpers/app.ts';
import { FakeClock } from '../helpers/events.ts';
import { OPEN, expectRejection, expectSuccess, send } from './gate-kit.test.ts';
import { REDIS, skipUnless } from '../helpers/prerequisites.ts';

const SETTLEMENT = `${OPEN}/settlement/accounts`;
const REDIS_URL = process.env.TEST_REDIS_URL;

function rateSuite(label: string, env: () => Record<string, string>) {
  let t: TestApp;
  let second: BuiltApp | null = null;
  // The service's clock, moved instead of waiting for the next second.
  const clock = new FakeClock();

  before(async () => {
    t = await startTestApp({ AUTH_FAILURE_LIMIT: '100000', ...env() }, { clock });
  });
  after(async () => {
    await second?.close();
    await t?.stop();
  });

  async function appAt(perSecond: number): Promise<Merchant> {
    const a = await provision(t);
    const r = await t.admin('PATCH', `/apps/${a.appId}`, { rateLimitPerSecond: perSecond });
    assert.equal(r.statusCode, 200, r.body);
    assert.equal(r.json().rateLimitPerSecond, perSecond);
    return a;
  }

  test(`${label}: PATCH rateLimitPerSecond to 1 -> the second request in the second is 429 with Retry-After, signed`, async () => {
    const a = await appAt(1);
    const first = await send(t, a, 'GET', SETTLEMENT);
    await expectSuccess(t, first.r, first.requestId, 200);
    assert.equal(first.r.headers['retry-after'], undefined);
    const s = await send(t, a, 'GET', SETTLEMENT);
    await expectRejection(t, s.r, { status: 429, code: 'OPEN_API_RATE_LIMITED', step: 8, sentRequestId: s.requestId });
    const ra = String(s.r.headers['retry-after']);
    assert.match(ra, /^[1-9][0-9]*$/, 'Retry-After in whole seconds');
    assert.ok(Number(ra) <= 1, `Retry-After ${ra} at 1/s`);
    clock.advance(Number(ra) * 1000 + 50);
    const later = await send(t, a, 'GET', SETTLEMENT);
    await expectSuccess(t, later.r, later.requestId, 200);
  });

  test(`${label}: POSTs and GETs share the budget; other apps are not affected`, async () => {
    const a = await appAt(1);
    const b = await appAt(1);
    assert.equal((await call(t, a, 'POST', `${OPEN}/payments`, orderBody())).statusCode, 201);
    assert.equal((await call(t, a, 'GET', SETTLEMENT)).statusCode, 429);
    assert.equal((await call(t, b, 'GET', SETTLEMENT)).statusCode, 200);
  });

  test(`${label}: a burst of 12 at 5/s lets exactly 5 through`, async () => {
    const a = await appAt(5);
    const rs = await Promise.all(Array.from({ length: 12 }, () => call(t, a, 'GET', SETTLEMENT)));
    const ok = rs.filter((r) => r.statusCode === 200).length;
    const limited = rs.filter((r) => r.statusCode === 429);
    assert.equal(ok, 5, rs.map((r) => r.statusCode).join(','));
    assert.equal(limited.length, 7);
    for (const r of limited) assert.ok(r.headers['retry-after']);
  });

  test(`${label}: raising the limit takes effect at once`, async () => {
    const a = await appAt(1);
    assert.equal((await call(t, a, 'GET', SETTLEMENT)).statusCode, 200);
    assert.equal((await call(t, a, 'GET', SETTLEMENT)).statusCode, 429);
    const r = await t.admin('PATCH', `/apps/${a.appId}`, { rateLimitPerSecond: 100 });
    assert.equal(r.statusCode, 200);
    for (let i = 0; i < 5; i++) assert.equal((await call(t, a, 'GET', SETTLEMENT)).statusCode, 200);
  });

  test(`${label}: rejected requests before step 8 do not spend the budget`, async () => {
    const a = await appAt(1);
    for (let i = 0; i < 5; i++) {
      assert.equal((await call(t, a, 'GET', SETTLEMENT, undefined, { sign: 'A'.repeat(344) })).statusCode, 401);
      assert.equal((await call(t, a, 'GET', SETTLEMENT, undefined, { omit: ['X-SVC-Nonce'] })).statusCode, 400);
    }
    assert.equal((await call(t, a, 'GET', SETTLEMENT)).statusCode, 200);
  });

  test(`${label}: two instances share the budget when the store is shared`, async () => {
    second = await buildApp(t.config, { logger: false, clock });
    const other = { ...t, server: second.server } as TestApp;
    const a = await appAt(4);
    const rs = await Promise.all(Array.from({ length: 12 }, (_, i) => call(i % 2 ? other : t, a, 'GET', SETTLEMENT)));
    const ok = rs.filter((r) => r.statusCode === 200).length;
    if (label === 'redis') assert.equal(ok, 4, `one shared budget: ${rs.map((r) => r.statusCode).join(',')}`);
    else assert.ok(ok >= 4 && ok <= 8, `per-instance budgets in memory: ${ok}`);
  });
}

describe('in memory', () => {
  rateSuite('memory', () => ({}));
});

describe('on Redis', { skip: skipUnless(REDIS) }, () => {
  rateSuite('redis', () => ({ REDIS_URL: REDIS_URL! }));
});
