/**
 * The gate's auth cache (src/gate/auth-cache.ts) on a stand-in database: concurrent misses of one
 * entry share one load, and a load that an invalidation overtook is not kept.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { FakeClock } from '../helpers/events.ts';
import { AuthCache } from '../../src/gate/auth-cache.ts';
import type { Db } from '../../src/store/db.ts';

/** Answers every read of an app with the same app, its merchant with the same merchant; counts the reads. */
function standIn(): { db: Db; reads: () => number; release: () => void } {
  let reads = 0;
  let open: () => void = () => {};
  let gate = new Promise<void>((r) => (open = r));
  const db = {
    query: async (text: string) => {
      reads++;
      await gate;
      return {
        rows: [text.includes('FROM apps') ? { id: 'app_1', merchantId: 'm_1', status: 'ACTIVE' } : { id: 'm_1', entityType: 'CORPORATE' }],
      };
    },
  } as unknown as Db;
  return {
    db,
    reads: () => reads,
    release: () => {
      open();
      gate = Promise.resolve();
    },
  };
}

test('concurrent misses of one app share one load; the entry then answers until it expires', async () => {
  const s = standIn();
  const clock = new FakeClock();
  const cache = new AuthCache(s.db, clock);
  const all = Array.from({ length: 50 }, () => cache.app('app_1'));
  await new Promise((r) => setImmediate(r));
  s.release();
  const got = await Promise.all(all);
  assert.ok(got.every((g) => g?.merchantEntityType === 'CORPORATE'));
  assert.equal(s.reads(), 2, 'one read of the app and one of its merchant for 50 requests');
  await cache.app('app_1');
  assert.equal(s.reads(), 2);
  clock.advance(3_001);
  await Promise.all([cache.app('app_1'), cache.app('app_1')]);
  assert.equal(s.reads(), 4, 'expired: read again, once');
});

test('a load overtaken by an invalidation is answered but not kept', async () => {
  const s = standIn();
  const cache = new AuthCache(s.db, new FakeClock());
  const first = cache.app('app_1');
  await new Promise((r) => setImmediate(r));
  cache.invalidateApp('app_1');
  s.release();
  assert.ok(await first);
  await cache.app('app_1');
  assert.equal(s.reads(), 4, 'the value read before the change was not kept');
});
