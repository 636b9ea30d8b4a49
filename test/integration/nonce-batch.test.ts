/**
 * The PostgreSQL nonce store batches the claims of one event-loop turn into one statement. These
 * tests hold it to the guarantees of one claim per statement, on the real database: one winner per
 * (app, nonce) within a batch, across concurrent batches and across two stores (two instances).
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { NONCE_TTL_SECONDS } from '../../src/gate/nonce-store.ts';
import { PgNonceStore as Store } from '../../src/store/nonces.ts';
import { systemClock } from '../../src/domain/clock.ts';

class PgNonceStore extends Store {
  constructor(db: Db) {
    super(db, systemClock, NONCE_TTL_SECONDS);
  }
}
import { ASYNC_COMMIT, type Db, createPool, migrate } from '../../src/store/db.ts';
import { type TestDatabase, createTestDatabase } from '../helpers/db.ts';

describe('PgNonceStore batching', () => {
  let tdb: TestDatabase;
  let db: Db;
  let db2: Db;
  before(async () => {
    tdb = await createTestDatabase();
    db = createPool(tdb.url, 8);
    db2 = createPool(tdb.url, 8);
    await migrate(db);
  });
  after(async () => {
    await db.end();
    await db2.end();
    await tdb.drop();
  });

  test('distinct claims in one turn all win, in one statement', async () => {
    const store = new PgNonceStore(db);
    const seen: string[] = [];
    const orig = db.query.bind(db);
    (db as unknown as { query: unknown }).query = (q: unknown, v?: unknown) => {
      seen.push(typeof q === 'string' ? q : ((q as { name?: string }).name ?? '?'));
      return (orig as (a: unknown, b?: unknown) => unknown)(q, v);
    };
    try {
      const r = await Promise.all(Array.from({ length: 50 }, (_, i) => store.claim('app_a', `distinct-${i}`)));
      assert.deepEqual(r, Array(50).fill(true));
      assert.deepEqual(seen, ['nonce_claim_batch']);
    } finally {
      (db as unknown as { query: unknown }).query = orig;
    }
    // The same nonce of another app is another key.
    assert.equal(await store.claim('app_b', 'distinct-0'), true);
    assert.equal(await store.claim('app_a', 'distinct-0'), false);
  });

  test('the claim commits asynchronously, and only its own statement: the connection stays synchronous', async () => {
    const one = createPool(tdb.url, 1);
    const sent: string[] = [];
    const orig = one.query.bind(one);
    (one as unknown as { query: unknown }).query = (q: unknown, v?: unknown) => {
      if (typeof q === 'object' && q !== null) sent.push((q as { text: string }).text);
      return (orig as (a: unknown, b?: unknown) => unknown)(q, v);
    };
    try {
      const store = new PgNonceStore(one);
      assert.deepEqual(await Promise.all([store.claim('app_s', 'sync-1'), store.claim('app_s', 'sync-2')]), [true, true]);
      assert.equal(await store.claim('app_s', 'sync-3'), true);
      // Every claim statement carries ASYNC_COMMIT ...
      assert.ok(sent.length >= 2 && sent.every((text) => text.includes(ASYNC_COMMIT)), sent.join('\n'));
      // ... which turns the setting off inside the statement (what makes its commit asynchronous) ...
      const inside = await orig<{ v: string }>(`SELECT current_setting('synchronous_commit') AS v FROM ${ASYNC_COMMIT}`);
      assert.equal(inside.rows[0]!.v, 'off');
      // ... and leaves the pooled connection's own setting untouched, so whatever runs next on it
      // (an order's commit) waits for the WAL flush as before.
      assert.equal((await orig<{ synchronous_commit: string }>('SHOW synchronous_commit')).rows[0]!.synchronous_commit, 'on');
    } finally {
      await one.end();
    }
  });

  test('one nonce claimed many times in one turn: exactly one wins', async () => {
    const store = new PgNonceStore(db);
    const r = await Promise.all(Array.from({ length: 20 }, () => store.claim('app_a', 'same-turn')));
    assert.equal(r.filter(Boolean).length, 1);
    assert.equal(r[0], true, 'the first claim of the turn is the one that wins');
  });

  test('two stores (two instances) race the same nonces: one winner per nonce', async () => {
    const s1 = new PgNonceStore(db);
    const s2 = new PgNonceStore(db2);
    for (let round = 0; round < 10; round++) {
      // Each store sends its batch in its own order; keys overlap fully.
      const keys = Array.from({ length: 30 }, (_, i) => `race-${round}-${i}`);
      const [a, b] = await Promise.all([
        Promise.all(keys.map((k) => s1.claim('app_r', k))),
        Promise.all([...keys].reverse().map((k) => s2.claim('app_r', k))),
      ]);
      const bByKey = [...b].reverse();
      for (let i = 0; i < keys.length; i++) assert.equal(Number(a[i]) + Number(bByKey[i]), 1, keys[i]);
    }
  });

  test('an expired nonce can be claimed again', async () => {
    const store = new PgNonceStore(db);
    assert.equal(await store.claim('app_e', 'old'), true);
    await db.query(`UPDATE nonces SET expires_at = now() - interval '1 second' WHERE app_id = 'app_e'`);
    assert.equal(await store.claim('app_e', 'old'), true);
    assert.equal(await store.claim('app_e', 'old'), false);
  });

  test('a backlog larger than one batch is split and every claim is answered', async () => {
    const store = new PgNonceStore(db);
    const r = await Promise.all(Array.from({ length: 700 }, (_, i) => store.claim('app_big', `n-${i % 600}`)));
    assert.equal(r.filter(Boolean).length, 600);
  });

  test('a failing statement rejects every claim of its batch, and the store keeps working', async () => {
    const broken = createPool(tdb.url.replace(/\/([a-z0-9_]+)(\?|$)/, '/mps_no_such_db$2'), 2);
    const store = new PgNonceStore(broken);
    const r = await Promise.allSettled([store.claim('app_x', 'a'), store.claim('app_x', 'b')]);
    assert.deepEqual(
      r.map((x) => x.status),
      ['rejected', 'rejected'],
    );
    await broken.end();
    const ok = new PgNonceStore(db);
    assert.equal(await ok.claim('app_x', 'a'), true);
  });
});
