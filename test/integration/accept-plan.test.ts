/**
 * The accepted outcome of a create (acceptAttempts, src/store/attempt-acceptance.ts) finds its rows by
 * primary key, whatever the planner thinks of the partial indexes: with thousands
 * of orders inside their payment window, accepting one attempt reads a handful of order and attempt
 * rows, not every open order. Counted with pg_stat_xact_user_tables inside the call's transaction.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { type Db, type Queryable, createPool, migrate } from '../../src/store/db.ts';
import { acceptAttempts } from '../../src/store/attempt-acceptance.ts';
import { ACCEPT_TRANSITIONS } from '../../src/usecases/attempts.ts';
import { type TestDatabase, createTestDatabase } from '../helpers/db.ts';
import { insertAttempts, insertOrders, rowsReadIn } from '../helpers/rows.ts';

const OPEN_ORDERS = 3000;

/** Accepts the items; answers the orders whose attempt was accepted. */
async function acceptItems(
  db: Queryable,
  items: { order_id: string; attempt_id: string; provider_ref: string | null }[],
): Promise<string[]> {
  const r = await acceptAttempts(
    db,
    items.map((x) => ({
      orderId: x.order_id,
      attemptId: x.attempt_id,
      providerRef: x.provider_ref,
      qrCode: null,
      redirectUrl: null,
      answer: null,
    })),
    ACCEPT_TRANSITIONS,
    new Date(),
  );
  return items.filter((_, n) => r[n]!.applied).map((x) => x.order_id);
}

describe('accepting an attempt reads by primary key', () => {
  let tdb: TestDatabase;
  let db: Db;
  before(async () => {
    tdb = await createTestDatabase();
    db = createPool(tdb.url, 2);
    await migrate(db);
    // Many open (PAYING) orders with accepted attempts, plus PENDING attempts made ACCEPTED (dead
    // entries in the partial indexes), then statistics, as in a busy service.
    await insertOrders(db, { key: 'open', appId: 'app_plan', merchantId: 'mch_plan', status: 'PAYING', from: 1, to: OPEN_ORDERS });
    await insertAttempts(db, { key: 'open', state: 'PENDING', from: 1, to: OPEN_ORDERS });
    await db.query(`UPDATE attempts SET state = 'ACCEPTED' WHERE id LIKE 'att_open_%'`);
    await db.query('ANALYZE orders');
    await db.query('ANALYZE attempts');
  });
  after(async () => {
    await db.end();
    await tdb.drop();
  });

  async function newCreated(n: number): Promise<{ order: string; attempt: string }> {
    await insertOrders(db, { key: 'new', appId: 'app_plan', merchantId: 'mch_plan', status: 'CREATED', from: n, to: n });
    await insertAttempts(db, { key: 'new', state: 'PENDING', from: n, to: n });
    return { order: `ord_new_${n}`, attempt: `att_new_${n}` };
  }

  /** rowsReadIn on a connection of the pool. */
  async function rowsRead(call: (c: pg.PoolClient) => Promise<void>): Promise<{ orders: number; attempts: number }> {
    const c = await (db as pg.Pool).connect();
    try {
      return await rowsReadIn(c, call);
    } finally {
      c.release();
    }
  }

  test('a batch of two: both accepted, a few rows read', async () => {
    const a = await newCreated(1);
    const b = await newCreated(2);
    let accepted: string[] = [];
    const read = await rowsRead(async (c) => {
      const items = [a, b].map((x) => ({ order_id: x.order, attempt_id: x.attempt, provider_ref: `ref_${x.order}` }));
      accepted = await acceptItems(c, items);
    });
    assert.deepEqual(accepted.sort(), [a.order, b.order]);
    assert.ok(read.orders < 20, `orders rows read: ${read.orders} (of ${OPEN_ORDERS} open)`);
    assert.ok(read.attempts < 20, `attempts rows read: ${read.attempts}`);
    const o = await db.query<{ status: string; state: string; provider_ref: string }>(
      'SELECT o.status, a.state, a.provider_ref FROM orders o JOIN attempts a ON a.order_id = o.id WHERE o.id = $1',
      [a.order],
    );
    assert.deepEqual(o.rows[0], { status: 'PAYING', state: 'ACCEPTED', provider_ref: `ref_${a.order}` });
  });

  test("an item only ever accepts its own order's attempt, and only for an order still CREATED", async () => {
    const a = await newCreated(4);
    const b = await newCreated(5);
    await db.query(`UPDATE orders SET status = 'PAYING' WHERE id = $1`, [b.order]);
    // a's order (CREATED) names b's attempt; b's order (not CREATED) names its own: nothing applies.
    const items = [
      { order_id: a.order, attempt_id: b.attempt, provider_ref: 'ref_wrong' },
      { order_id: b.order, attempt_id: b.attempt, provider_ref: 'ref_b' },
    ];
    assert.deepEqual(await acceptItems(db, items), []);
    const rows = await db.query<{ id: string; status: string; state: string; provider_ref: string | null; state_version: number }>(
      `SELECT o.id, o.status, a.state, a.provider_ref, o.state_version FROM orders o JOIN attempts a ON a.order_id = o.id
        WHERE o.id = ANY($1) ORDER BY o.id`,
      [[a.order, b.order]],
    );
    assert.deepEqual(
      rows.rows.map((x) => [x.id, x.status, x.state, x.provider_ref, x.state_version]),
      [
        [a.order, 'CREATED', 'PENDING', null, 1],
        [b.order, 'PAYING', 'PENDING', null, 1],
      ],
    );
  });

  test('one at a time: accepted, a few rows read; a second call changes nothing', async () => {
    const a = await newCreated(3);
    const call = async (c: pg.PoolClient) =>
      (await acceptItems(c, [{ order_id: a.order, attempt_id: a.attempt, provider_ref: 'ref_3' }])).length === 1;
    let ok = false;
    const read = await rowsRead(async (c) => {
      ok = await call(c);
    });
    assert.equal(ok, true);
    assert.ok(read.orders < 10 && read.attempts < 10, JSON.stringify(read));
    const c = await (db as pg.Pool).connect();
    try {
      assert.equal(await call(c), false, 'the order is PAYING now: nothing to accept');
    } finally {
      c.release();
    }
  });
});

describe('a plan cached while the tables were small stays a primary-key lookup', () => {
  let tdb: TestDatabase;
  let db: Db;
  before(async () => {
    tdb = await createTestDatabase();
    db = createPool(tdb.url, 1);
    await migrate(db);
  });
  after(async () => {
    await db.end();
    await tdb.drop();
  });

  test('eight calls on near-empty tables, then 3,000 more open orders without ANALYZE: a few rows read', async () => {
    const c = await (db as pg.Pool).connect();
    try {
      let n = 0;
      const accept = async () => {
        n++;
        await insertOrders(c, { key: 'c', appId: 'app_plan', merchantId: 'mch_plan', status: 'CREATED', from: n, to: n });
        await insertAttempts(c, { key: 'c', state: 'PENDING', from: n, to: n });
        const items = [{ order_id: `ord_c_${n}`, attempt_id: `att_c_${n}`, provider_ref: `ref_${n}` }];
        let ids: string[] = [];
        const read = await rowsReadIn(c, async () => {
          ids = await acceptItems(c, items);
        });
        assert.deepEqual(ids, [`ord_c_${n}`]);
        return read.orders + read.attempts;
      };
      // A prepared statement settles on a generic plan after five runs; these run while the tables are tiny.
      for (let i = 0; i < 8; i++) await accept();
      await insertOrders(c, { key: 'big', appId: 'app_plan', merchantId: 'mch_plan', status: 'PAYING', from: 1, to: 3000 });
      await insertAttempts(c, { key: 'big', state: 'ACCEPTED', from: 1, to: 3000 });
      const read = await accept();
      assert.ok(read < 20, `rows read after the tables grew: ${read}`);
    } finally {
      c.release();
    }
  });
});
