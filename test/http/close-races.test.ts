/**
 * Closes and attempts under provider trouble, driven with a patched provider: a rejected close
 * does not withdraw a close another caller kept pending; expiry that the provider keeps rejecting
 * does not crowd out the other due orders; a payment the provider reports for an attempt that
 * ended meanwhile is applied, never dropped.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { type Merchant, type TestApp, call, drainFollowUps, orderBody, provision, runDueWork, startTestApp } from '../helpers/app.ts';
import { closeOrderById } from '../../src/usecases/close-order.ts';
import { ProviderRejectedError, ProviderUncertainError, type PaymentProvider } from '../../src/providers/provider.ts';

let t: TestApp;
let m: Merchant;
before(async () => {
  t = await startTestApp();
  m = await provision(t);
});
after(() => t.stop());

type Patchable = { -readonly [K in keyof PaymentProvider]: PaymentProvider[K] };
/** Replaces one provider method for the duration of `fn`. */
async function withProvider<K extends keyof PaymentProvider>(name: K, impl: PaymentProvider[K], fn: () => Promise<void>): Promise<void> {
  const p = t.svc.providers.byName('sandbox') as Patchable;
  const orig = p[name];
  p[name] = impl;
  try {
    await fn();
  } finally {
    p[name] = orig;
  }
}

const createOrder = async () => {
  const r = await call(t, m, 'POST', '/api/open/v1/payments', orderBody());
  assert.equal(r.statusCode, 201, r.body);
  return r.json() as { openOrderId: string; outTradeNo: string };
};

test('a rejected close does not withdraw the pending close of a concurrent close that answered UNKNOWN_KEPT', async () => {
  const o = await createOrder();
  const orig = t.svc.providers.byName('sandbox').closePayment.bind(t.svc.providers.byName('sandbox'));
  let n = 0;
  let releaseA!: () => void;
  const aGate = new Promise<void>((r) => (releaseA = r));
  let aStarted!: () => void;
  const aAtProvider = new Promise<void>((r) => (aStarted = r));
  await withProvider(
    'closePayment',
    async (id, opts) => {
      const k = ++n;
      if (k === 1) {
        aStarted();
        await aGate;
        throw new ProviderRejectedError('NOPE');
      }
      if (k === 2) throw new ProviderUncertainError('timeout');
      return orig(id, opts);
    },
    async () => {
      const a = closeOrderById(t.svc, o.openOrderId, 'CLOSE_REQUESTED').then(
        (r) => r.closeState as string,
        (e: { code?: string }) => `error ${e.code}`,
      );
      await aAtProvider;
      const b = await closeOrderById(t.svc, o.openOrderId, 'MERCHANT_CLOSED');
      assert.equal(b.closeState, 'UNKNOWN_KEPT');
      releaseA();
      assert.equal(await a, 'error PROVIDER_REJECTED');
    },
  );
  const row = (await t.svc.db.query('SELECT status, close_pending FROM orders WHERE id = $1', [o.openOrderId])).rows[0];
  assert.equal(row.close_pending, 'MERCHANT_CLOSED', 'the kept close survives the other close rejection');
  const rc = await call(t, m, 'POST', `/api/open/v1/payments/${o.outTradeNo}/attempts`);
  assert.equal(rc.statusCode, 409, 'no new attempt while that close is pending');
  // The kept close's hold lapses: FINISH_CLOSE finishes it.
  await t.svc.db.query(`UPDATE orders SET close_held_until = now() - interval '1 second' WHERE id = $1`, [o.openOrderId]);
  await runDueWork(t);
  assert.equal((await t.svc.db.query('SELECT status FROM orders WHERE id = $1', [o.openOrderId])).rows[0].status, 'CLOSED');
});

test('two overlapping closes both refused: the order is left as it was, and a refused request close does not delay expiry', async () => {
  const o = await createOrder();
  let releaseA!: () => void;
  const aGate = new Promise<void>((r) => (releaseA = r));
  let aStarted!: () => void;
  const aAtProvider = new Promise<void>((r) => (aStarted = r));
  let n = 0;
  await withProvider(
    'closePayment',
    async () => {
      if (++n === 1) {
        aStarted();
        await aGate;
      }
      throw new ProviderRejectedError('NOPE');
    },
    async () => {
      const a = closeOrderById(t.svc, o.openOrderId, 'CLOSE_REQUESTED').catch((e: { code?: string }) => e.code);
      await aAtProvider;
      await assert.rejects(closeOrderById(t.svc, o.openOrderId, 'MERCHANT_CLOSED'), /OPEN_API_PROVIDER_REJECTED|rejected/i);
      releaseA();
      assert.equal(await a, 'PROVIDER_REJECTED');
    },
  );
  const row = (await t.svc.db.query('SELECT status, close_pending, close_held_until FROM orders WHERE id = $1', [o.openOrderId])).rows[0];
  assert.equal(row.status, 'PAYING');
  assert.equal(row.close_pending, null, 'withdrawn');
  assert.equal(row.close_held_until, null, 'the hold is released');
  assert.equal((await call(t, m, 'POST', `/api/open/v1/payments/${o.outTradeNo}/attempts`)).statusCode, 201, 're-create works again');
  await t.svc.db.query(`UPDATE orders SET expire_at = now() - interval '1 second' WHERE id = $1`, [o.openOrderId]);
  await runDueWork(t);
  assert.equal(
    (await t.svc.db.query('SELECT status FROM orders WHERE id = $1', [o.openOrderId])).rows[0].status,
    'CLOSED',
    'expiry at once',
  );
});

test('expiry that the provider keeps rejecting backs off: the other due orders still expire', async () => {
  const ids: string[] = [];
  for (let i = 0; i < 21; i++) ids.push((await createOrder()).openOrderId);
  // The 20 oldest expired first; the 21st later (still due).
  for (let i = 0; i < 21; i++) {
    await t.svc.db.query(`UPDATE orders SET expire_at = now() - ($2 || ' minutes')::interval WHERE id = $1`, [ids[i], String(100 - i)]);
  }
  const bad = new Set(
    (await t.svc.db.query<{ id: string }>('SELECT id FROM attempts WHERE order_id = ANY($1)', [ids.slice(0, 20)])).rows.map((a) => a.id),
  );
  const orig = t.svc.providers.byName('sandbox').closePayment.bind(t.svc.providers.byName('sandbox'));
  let rejected = 0;
  await withProvider(
    'closePayment',
    async (id, opts) => {
      if (bad.has(id)) {
        rejected++;
        throw new ProviderRejectedError('NOPE');
      }
      return orig(id, opts);
    },
    async () => {
      await runDueWork(t);
    },
  );
  assert.equal(rejected, 20, 'each rejected order is tried once, then waits for its backoff');
  const backoff = await t.svc.db.query<{ runs: number; later: boolean }>(
    `SELECT runs, run_at > now() AS later FROM jobs WHERE kind = 'EXPIRE_ORDER' AND subject_id = ANY($1)`,
    [ids.slice(0, 20)],
  );
  assert.equal(backoff.rowCount, 20);
  for (const j of backoff.rows) assert.deepEqual(j, { runs: 1, later: true });
  assert.equal((await t.svc.db.query('SELECT status FROM orders WHERE id = $1', [ids[20]])).rows[0].status, 'CLOSED');
  const pending = await t.svc.db.query('SELECT count(*)::int AS n FROM orders WHERE id = ANY($1) AND close_pending IS NOT NULL', [
    ids.slice(0, 20),
  ]);
  assert.equal(pending.rows[0].n, 0, 'a rejected close is withdrawn: the orders stay as they were');
});

test('a PAID answer for an attempt the provider check ended meanwhile is applied: the order succeeds', async () => {
  await withProvider(
    'createAttempt',
    async (input) => {
      // The provider check judged the slow PENDING attempt unknown to the provider and ended it meanwhile.
      await t.svc.db.query(`UPDATE attempts SET state = 'FAILED' WHERE id = $1`, [input.attemptId]);
      return { outcome: 'PAID', providerRef: 'prov_paid_late_1' };
    },
    async () => {
      await withProvider(
        'closePayment',
        async () => {
          throw new ProviderUncertainError('provider unreachable');
        },
        async () => {
          const r = await call(t, m, 'POST', '/api/open/v1/payments', orderBody());
          assert.equal(r.statusCode, 201, r.body);
          assert.equal(r.json().status, 'SUCCEEDED', 'the answer reports the payment');
          assert.ok(!('nextAction' in r.json()), 'no new attempt is asked for');
          await drainFollowUps(t);
          const o = await t.svc.db.query('SELECT status FROM orders WHERE id = $1', [r.json().openOrderId]);
          assert.equal(o.rows[0].status, 'SUCCEEDED');
          const a = await t.svc.db.query('SELECT state FROM attempts WHERE order_id = $1', [r.json().openOrderId]);
          assert.equal(a.rows[0].state, 'PAID');
        },
      );
    },
  );
});
