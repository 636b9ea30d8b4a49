/**
 * The workers' claims read their small partial indexes, not the orders table: with many open orders
 * and no statistics yet (a table that grew faster than autovacuum analyzed it), the pending-close
 * claim would scan and sort every order on every pass, ~10 ms each with 100,000 orders
 * (docs/performance.md, "Plans that stay right as tables grow").
 * Counted with pg_stat_xact_user_tables inside the pass's transaction.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { UseCaseDeps } from '../../src/usecases/deps.ts';
import { type Db, createPool, migrate } from '../../src/store/db.ts';
import { expireDueOrders, reconcileCloses } from '../../src/usecases/reconcile.ts';
import { type TestDatabase, createTestDatabase } from '../helpers/db.ts';
import { insertOrders, rowsReadIn } from '../helpers/rows.ts';

const OPEN_ORDERS = 20_000;

describe('worker claims with many open orders and no statistics', () => {
  let tdb: TestDatabase;
  let db: Db;
  before(async () => {
    tdb = await createTestDatabase();
    db = createPool(tdb.url, 2);
    await migrate(db);
    // No ANALYZE, and none by autovacuum while the test runs.
    await db.query('ALTER TABLE orders SET (autovacuum_enabled = off)');
    await insertOrders(db, { key: 'open', appId: 'app_claim', merchantId: 'mch_claim', status: 'PAYING', from: 1, to: OPEN_ORDERS });
    // One order with a pending close, one past its window: each claim has something to find.
    await db.query(`UPDATE orders SET close_pending = 'CLOSE_REQUESTED' WHERE id = 'ord_open_7'`);
    await db.query(`UPDATE orders SET expire_at = now() - interval '1 second' WHERE id = 'ord_open_9'`);
  });
  after(async () => {
    await db.end();
    await tdb.drop();
  });

  for (const [name, pass, expected] of [
    ['pending closes', reconcileCloses, 'ord_open_7'],
    ['expiry', expireDueOrders, 'ord_open_9'],
  ] as const) {
    test(`the ${name} claim reads a handful of orders, not ${OPEN_ORDERS}`, async () => {
      const c = await db.connect();
      try {
        // Only the claim runs: the order's work (a provider call) fails at once on this stub and is retried later.
        const svc = { db: c, log: { warn() {}, info() {}, error() {} }, clock: { now: () => Date.now() } } as unknown as UseCaseDeps;
        const read = (await rowsReadIn(c, () => pass(svc, 20).catch(() => 0))).orders;
        assert.ok(read < 100, `${read} order rows read`);
        const lease = await c.query<{ id: string }>(`SELECT id FROM orders WHERE worker_lease_until IS NOT NULL`);
        assert.ok(
          lease.rows.some((r) => r.id === expected),
          'the due order was claimed',
        );
      } finally {
        c.release();
      }
    });
  }
});
