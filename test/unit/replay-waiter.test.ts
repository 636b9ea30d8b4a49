/**
 * A duplicate request id that arrives while the first request is executing on this instance waits
 * for that execution to finish (an in-process signal), then replays its answer; it does not poll.
 * Ids held elsewhere (another instance) are still polled. Real database.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { ReplayStore } from '../../src/gate/replay.ts';
import { type Db, createPool, migrate } from '../../src/store/db.ts';
import { type TestDatabase, createTestDatabase } from '../helpers/db.ts';

function counting(db: Db): { db: Db; count: () => number } {
  let n = 0;
  const wrapped = new Proxy(db, {
    get(target, prop, receiver) {
      if (prop === 'query') {
        return (...a: unknown[]) => {
          n++;
          return (target.query as (...x: unknown[]) => unknown).apply(target, a);
        };
      }
      return Reflect.get(target, prop, receiver);
    },
  });
  return { db: wrapped, count: () => n };
}

describe('request-id replay: waiting for an execution in flight', () => {
  let tdb: TestDatabase;
  let db: Db;
  before(async () => {
    tdb = await createTestDatabase();
    db = createPool(tdb.url, 8);
    await migrate(db);
  });
  after(async () => {
    await db.end();
    await tdb.drop();
  });

  const key = (requestId: string) => ({ appId: 'app_w', requestId, method: 'POST', target: '/api/open/v1/payments', bodySha256: 'ab' });

  test('held on this instance: the duplicate wakes when the answer is recorded, with no polling', async () => {
    const c = counting(db);
    const store = new ReplayStore(c.db);
    const k = key('req_waiter_local');
    assert.deepEqual(await store.begin(k), { kind: 'execute' });
    const before = c.count();
    const dup = store.begin(k);
    await new Promise((r) => setTimeout(r, 600));
    await store.complete(k, 201, '{"ok":true}');
    assert.deepEqual(await dup, { kind: 'replay', status: 201, body: '{"ok":true}' });
    // insert + read before waiting, insert + read after: no statement while it waited.
    assert.equal(c.count() - before - 1, 4, 'the waiting duplicate issued 4 statements (plus the complete)');
  });

  test('a stop that cuts requests off ends the leases held here: another instance takes the ids over at once', async () => {
    const dying = new ReplayStore(db);
    const other = new ReplayStore(db);
    const held = [key('req_cut_off_1'), key('req_cut_off_2')];
    for (const k of held) assert.deepEqual(await dying.begin(k), { kind: 'execute' });
    const done = key('req_cut_off_done');
    assert.deepEqual(await dying.begin(done), { kind: 'execute' });
    await dying.complete(done, 201, '{"kept":true}');
    assert.equal(await dying.endLeasesHeldHere(), 2, 'only the ids still executing');
    const started = Date.now();
    for (const k of held) assert.deepEqual(await other.begin(k), { kind: 'execute' });
    assert.ok(Date.now() - started < 2000, 'taken over without waiting for the lease');
    assert.deepEqual(await other.begin(done), { kind: 'replay', status: 201, body: '{"kept":true}' });
    assert.equal(await new ReplayStore(db).endLeasesHeldHere(), 0);
  });

  test('an abandoned execution wakes the duplicate, which then executes itself', async () => {
    const store = new ReplayStore(db);
    const k = key('req_waiter_abandon');
    assert.deepEqual(await store.begin(k), { kind: 'execute' });
    const dup = store.begin(k);
    await new Promise((r) => setTimeout(r, 100));
    await store.abandon(k);
    assert.deepEqual(await dup, { kind: 'execute' });
    await store.complete(k, 201, '{}');
  });

  test('held by another instance: polled until that instance records the answer', async () => {
    const here = new ReplayStore(db);
    const there = new ReplayStore(db);
    const k = key('req_waiter_remote');
    assert.deepEqual(await there.begin(k), { kind: 'execute' });
    const dup = here.begin(k);
    await new Promise((r) => setTimeout(r, 150));
    await there.complete(k, 200, '{"r":1}');
    assert.deepEqual(await dup, { kind: 'replay', status: 200, body: '{"r":1}' });
  });

  test('a different body under the same id is a conflict at once, not a wait', async () => {
    const store = new ReplayStore(db);
    const k = key('req_waiter_conflict');
    assert.deepEqual(await store.begin(k), { kind: 'execute' });
    assert.deepEqual(await store.begin({ ...k, bodySha256: 'cd' }), { kind: 'conflict' });
    await store.complete(k, 201, '{}');
  });
});
