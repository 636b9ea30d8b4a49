/**
 * Step 5 of the gate: nonce replay (seed "Authentication" rule 3; decisions.md sections 1-2). Per
 * app, remembered at least 600 s, atomic under concurrency: on PostgreSQL (the default store) and
 * on Redis (REDIS_URL), also across two instances sharing the store. The Redis half is skipped
 * when TEST_REDIS_URL is not set.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Redis } from 'ioredis';
import { type BuiltApp, buildApp } from '../../src/app.ts';
import { type Merchant, type TestApp, call, orderBody, provision, startTestApp } from '../helpers/app.ts';
import { OPEN, expectRejection, expectSuccess, send } from './gate-kit.test.ts';
import { REDIS, skipUnless } from '../helpers/prerequisites.ts';

const SETTLEMENT = `${OPEN}/settlement/accounts`;
const PAYMENTS = `${OPEN}/payments`;
const REDIS_URL = process.env.TEST_REDIS_URL;

/** The behaviour every store must show. `instance2` answers on the same store (another process in production). */
function nonceSuite(
  label: string,
  env: () => Record<string, string>,
  inspect: (t: TestApp, appId: string, nonce: string) => Promise<number | null>,
) {
  let t: TestApp;
  let a: Merchant;
  let b: Merchant;
  let second: BuiltApp | null = null;

  before(async () => {
    t = await startTestApp({ AUTH_FAILURE_LIMIT: '100000', ...env() });
    a = await provision(t);
    b = await provision(t);
  });
  after(async () => {
    await second?.close();
    await t?.stop();
  });

  test(`${label}: a reused nonce is 409 OPEN_API_NONCE_REPLAYED, on any endpoint and method`, async () => {
    const nonce = `n-${label}-reuse-0000001`;
    const first = await send(t, a, 'GET', SETTLEMENT, undefined, { nonce });
    await expectSuccess(t, first.r, first.requestId, 200);
    for (const [method, url, body] of [
      ['GET', SETTLEMENT, undefined],
      ['GET', `${PAYMENTS}/T_1234567`, undefined],
      ['POST', PAYMENTS, orderBody()],
    ] as const) {
      const s = await send(t, a, method, url, body, { nonce });
      await expectRejection(t, s.r, { status: 409, code: 'OPEN_API_NONCE_REPLAYED', step: 5, sentRequestId: s.requestId });
    }
  });

  test(`${label}: nonces are per app`, async () => {
    const nonce = `n-${label}-perapp-000001`;
    const x = await send(t, a, 'GET', SETTLEMENT, undefined, { nonce });
    await expectSuccess(t, x.r, x.requestId, 200);
    const y = await send(t, b, 'GET', SETTLEMENT, undefined, { nonce });
    await expectSuccess(t, y.r, y.requestId, 200);
    const z = await send(t, b, 'GET', SETTLEMENT, undefined, { nonce });
    await expectRejection(t, z.r, { status: 409, code: 'OPEN_API_NONCE_REPLAYED', step: 5, sentRequestId: z.requestId });
  });

  test(`${label}: nonces are case-sensitive and compared whole`, async () => {
    const base = `n-${label}-CaSe-000000001`;
    for (const n of [base, base.toLowerCase(), base.toUpperCase(), `${base}x`, base.slice(1)]) {
      const s = await send(t, a, 'GET', SETTLEMENT, undefined, { nonce: n });
      await expectSuccess(t, s.r, s.requestId, 200);
    }
  });

  test(`${label}: a nonce is spent once authentication passed, whatever happens after`, async () => {
    const nonce = `n-${label}-spent-00001`;
    const ct = await send(t, a, 'POST', PAYMENTS, orderBody(), { nonce, contentType: 'text/plain' });
    assert.equal(ct.r.statusCode, 400);
    const again = await send(t, a, 'POST', PAYMENTS, orderBody(), { nonce });
    await expectRejection(t, again.r, { status: 409, code: 'OPEN_API_NONCE_REPLAYED', step: 5, sentRequestId: again.requestId });
  });

  test(`${label}: remembered for at least 600 s`, async () => {
    const nonce = `n-${label}-ttl-0000001`;
    assert.equal((await send(t, a, 'GET', SETTLEMENT, undefined, { nonce })).r.statusCode, 200);
    const ttl = await inspect(t, a.appId, nonce);
    assert.ok(ttl !== null, 'the nonce is stored');
    assert.ok(
      ttl >= 605 && ttl <= 611,
      `remembered 610 s: the 600 s a request can stay valid after its first use, and a margin (got ${ttl})`,
    );
  });

  test(`${label}: 30 concurrent requests with one nonce -> exactly one passes`, async () => {
    for (let round = 0; round < 3; round++) {
      const nonce = `n-${label}-race-${round}-00001`;
      const rs = await Promise.all(Array.from({ length: 30 }, () => call(t, a, 'GET', SETTLEMENT, undefined, { nonce })));
      const counts = rs.reduce<Record<number, number>>((acc, r) => ((acc[r.statusCode] = (acc[r.statusCode] ?? 0) + 1), acc), {});
      assert.deepEqual(counts, { 200: 1, 409: 29 }, JSON.stringify(counts));
    }
  });

  test(`${label}: concurrent creates with one nonce -> one order`, async () => {
    const nonce = `n-${label}-race-create-1`;
    const bodies = Array.from({ length: 10 }, () => orderBody());
    const rs = await Promise.all(bodies.map((body) => call(t, a, 'POST', PAYMENTS, body, { nonce })));
    assert.deepEqual(rs.map((r) => r.statusCode).sort(), [201, ...Array(9).fill(409)]);
  });

  test(`${label}: two instances on one store share the nonces`, async () => {
    second = (await buildApp(t.config, { logger: false })).valueOf() as BuiltApp;
    const nonce = `n-${label}-twoinst-0001`;
    const one = await send(t, a, 'GET', SETTLEMENT, undefined, { nonce });
    await expectSuccess(t, one.r, one.requestId, 200);
    const other = { ...t, server: second.server } as TestApp;
    const two = await send(other, a, 'GET', SETTLEMENT, undefined, { nonce });
    await expectRejection(t, two.r, { status: 409, code: 'OPEN_API_NONCE_REPLAYED', step: 5, sentRequestId: two.requestId });
    // And concurrently across both.
    const n2 = `n-${label}-twoinst-0002`;
    const rs = await Promise.all(
      Array.from({ length: 20 }, (_, i) => call(i % 2 ? other : t, a, 'GET', SETTLEMENT, undefined, { nonce: n2 })),
    );
    assert.equal(rs.filter((r) => r.statusCode === 200).length, 1);
    assert.equal(rs.filter((r) => r.statusCode === 409).length, 19);
  });
}

describe('on PostgreSQL', () => {
  nonceSuite(
    'pg',
    () => ({}),
    async (t, appId, nonce) => {
      const r = await t.svc.db.query<{ s: number }>(
        `SELECT EXTRACT(EPOCH FROM (expires_at - now()))::float8 AS s FROM nonces WHERE app_id = $1 AND nonce = $2`,
        [appId, nonce],
      );
      return r.rows[0] ? Math.round(r.rows[0].s) : null;
    },
  );
});

describe('on Redis', { skip: skipUnless(REDIS) }, () => {
  let redis: Redis | null = null;
  before(() => {
    redis = new Redis(REDIS_URL!, { lazyConnect: false, maxRetriesPerRequest: 2 });
  });
  after(async () => {
    await redis?.quit();
  });
  nonceSuite(
    'redis',
    () => ({ REDIS_URL: REDIS_URL! }),
    async (_t, appId, nonce) => {
      const ttl = await redis!.ttl(`mps:nonce:${appId}:${nonce}`);
      return ttl < 0 ? null : ttl;
    },
  );

  test('redis: the nonce is not written to PostgreSQL', async () => {
    // Checked through the store type rather than the table: the app wired the Redis store.
    const t = await startTestApp({ REDIS_URL: REDIS_URL! });
    try {
      assert.equal(t.svc.nonces.constructor.name, 'RedisNonceStore');
      const m = await provision(t);
      assert.equal((await call(t, m, 'GET', SETTLEMENT)).statusCode, 200);
      const r = await t.svc.db.query('SELECT count(*)::int AS n FROM nonces');
      assert.equal(r.rows[0].n, 0);
    } finally {
      await t.stop();
    }
  });
});
