/**
 * Waking the workers (an event came due, a delivery ended) runs a pass soon, but a stream of wakes
 * does not run a pass per wake: passes start at least 100 ms apart (src/workers.ts). Time is
 * node:test's mock clock (setTimeout and Date), moved by the test.
 */
import assert from 'node:assert/strict';
import { type TestContext, test } from 'node:test';
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

/** Moves the mock clock ms milliseconds, 1 ms at a time, letting each pass's promises settle. */
async function advance(t: TestContext, ms: number): Promise<void> {
  for (let i = 0; i < ms; i++) {
    t.mock.timers.tick(1);
    await new Promise((r) => setImmediate(r));
  }
}

test('a wake runs a pass at once; a stream of wakes runs at most one pass per 100 ms', async (t) => {
  t.mock.timers.enable({ apis: ['setTimeout', 'Date'], now: 1_000_000 });
  const passes: number[] = [];
  const w = new Workers(stubServices(), [{ name: 'count', run: async () => (passes.push(Date.now()), 0) }]);
  w.start();
  await advance(t, 250); // the first pass (50 ms after start), then quiet
  assert.deepEqual(passes, [1_000_050]);
  const t0 = Date.now();
  w.wake();
  await advance(t, 1);
  assert.equal(passes.length, 2, 'the first wake after a quiet spell runs a pass at once');
  assert.ok(passes[1]! - t0 <= 1, `the pass ran ${passes[1]! - t0} ms after the wake`);
  // 60 wakes, one every 10 ms: one pass per 100 ms, at the earliest moment allowed.
  for (let i = 0; i < 60; i++) {
    w.wake();
    await advance(t, 10);
  }
  const stopping = w.stop();
  await advance(t, 1);
  await stopping;
  const during = passes.filter((p) => p >= t0);
  const gaps = during.slice(1).map((p, i) => p - during[i]!);
  assert.ok(
    gaps.every((g) => g >= 100 && g <= 101),
    `passes start 100 ms apart while woken every 10 ms: ${gaps.join(', ')}`,
  );
  assert.ok(during.length === 6 || during.length === 7, `${during.length} passes in 600 ms of wakes`);
});
