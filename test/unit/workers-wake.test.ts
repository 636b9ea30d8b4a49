/**
 * Waking the workers (an event came due, a delivery ended) runs a pass soon, but a stream of wakes
 * does not run a pass per wake: passes start at least 100 ms apart (src/workers.ts).
 */
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { test } from 'node:test';
import { type WorkerDeps, Workers } from '../../src/workers.ts';

function stubServices(): WorkerDeps {
  const none = async () => ({ rows: [], rowCount: 0 });
  return {
    db: { query: none },
    log: { warn() {}, info() {}, error() {} },
    clock: { now: () => Date.now() },
    purge: async () => 0,
  } as unknown as WorkerDeps;
}

test('a wake runs a pass at once; a stream of wakes runs at most one pass per 100 ms', async () => {
  const svc = stubServices();
  const passes: number[] = [];
  const w = new Workers(svc, [{ name: 'count', run: async () => (passes.push(Date.now()), 0) }]);
  w.start();
  await sleep(250); // the first pass (50 ms after start), then quiet
  assert.equal(passes.length, 1);
  const t0 = Date.now();
  w.wake();
  await sleep(50);
  assert.equal(passes.length, 2, 'the first wake after a quiet spell runs a pass at once');
  // 60 wakes over ~600 ms: passes stay >= 100 ms apart.
  for (let i = 0; i < 60; i++) {
    w.wake();
    await sleep(10);
  }
  await w.stop();
  const during = passes.filter((p) => p >= t0);
  assert.ok(during.length >= 3 && during.length <= 9, `${during.length} passes in ~630 ms of wakes`);
  for (let i = 1; i < during.length; i++) assert.ok(during[i]! - during[i - 1]! >= 95, `passes ${during[i]! - during[i - 1]!} ms apart`);
});
