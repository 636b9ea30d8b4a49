/**
 * The budget of statement files made at once (src/usecases/statement-downloads.ts): an app's slots
 * (counted where the AppSlots say: the database across instances, test/http/statement-leases.test.ts)
 * and the instance's total, a refusal that says when to come back, slots given back once however
 * often released, one computation shared by concurrent callers of a key (its error too), and slices
 * that take turns (back to back while no other request waits, paced while one does: the bench).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { DomainError } from '../../src/domain/errors.ts';
import { WorkTurns } from '../../src/usecases/work-turns.ts';
import { type AppSlots, STATEMENT_RETRY_AFTER_SECONDS, StatementDownloads } from '../../src/usecases/statement-downloads.ts';

const limits = { perApp: 2, total: 3, stallTimeoutMs: 1000 };

/** An app's slots counted in this process (the test's stand-in for the database's leases). */
function countedSlots(): AppSlots & { held: Map<string, number> } {
  const held = new Map<string, number>();
  return {
    held,
    async take(appId, limit) {
      const n = held.get(appId) ?? 0;
      if (n >= limit) return { release: null, limit };
      held.set(appId, n + 1);
      return { limit, release: () => held.set(appId, (held.get(appId) ?? 1) - 1) };
    },
  };
}

function budget(othersWaiting = () => false): { b: StatementDownloads; held: Map<string, number> } {
  const slots = countedSlots();
  return { b: new StatementDownloads(limits, { appSlots: slots, turns: new WorkTurns(othersWaiting) }), held: slots.held };
}

async function refused(f: () => Promise<unknown>): Promise<DomainError> {
  try {
    await f();
  } catch (err) {
    assert.ok(err instanceof DomainError);
    return err;
  }
  assert.fail('not refused');
}

test("at most an app's limit of an app and total in all; a refusal is RATE_LIMITED with Retry-After; a slot is given back once", async () => {
  const { b, held } = budget();
  const a1 = await b.acquire('app_a');
  await b.acquire('app_a');
  const e = await refused(() => b.acquire('app_a'));
  assert.equal(e.code, 'RATE_LIMITED');
  assert.equal(e.retryAfterSeconds, STATEMENT_RETRY_AFTER_SECONDS);
  assert.match(e.message, /At most 2 statement files of an app/);
  assert.equal(b.inUse(), 2, 'a refused app takes none of the instance slots');
  const b1 = await b.acquire('app_b');
  assert.equal((await refused(() => b.acquire('app_c'))).code, 'RATE_LIMITED');
  assert.equal(held.get('app_c') ?? 0, 0, 'refused by the instance before asking for an app slot');
  assert.equal(b.inUse(), 3);
  a1();
  a1();
  assert.equal(b.inUse(), 2);
  assert.equal(held.get('app_a'), 1);
  await b.acquire('app_c');
  b1();
  assert.equal(held.get('app_b'), 0);
});

test('a failure to count the app slots takes no instance slot', async () => {
  const b = new StatementDownloads(limits, {
    appSlots: { take: () => Promise.reject(new Error('database down')) },
    turns: new WorkTurns(() => false),
  });
  await assert.rejects(b.acquire('app_a'), /database down/);
  assert.equal(b.inUse(), 0);
});

test('concurrent callers of one key share one computation, its result and its error; a later call computes again', async () => {
  const { b } = budget();
  let runs = 0;
  let release!: (v: string) => void;
  const make = () => {
    runs++;
    return new Promise<string>((res) => (release = res));
  };
  const all = Promise.all([b.once('k', make), b.once('k', make), b.once('k', make)]);
  release('digest');
  assert.deepEqual(await all, ['digest', 'digest', 'digest']);
  assert.equal(runs, 1);
  const failing = [b.once('k', () => Promise.reject(new Error('boom'))), b.once('k', make)];
  for (const p of failing) await assert.rejects(p, /boom/);
  assert.equal(runs, 1);
});

test('slices take turns in the order asked', async () => {
  const { b } = budget();
  const order: number[] = [];
  await Promise.all([1, 2, 3, 4].map((i) => b.turn().then(() => order.push(i))));
  assert.deepEqual(order, [1, 2, 3, 4]);
});

test('each turn asks whether other requests wait (the pacing itself is measured by the bench, not asserted here)', async () => {
  let asked = 0;
  const { b } = budget(() => {
    asked++;
    return asked % 2 === 0;
  });
  await Promise.all([1, 2, 3, 4].map(() => b.turn()));
  assert.equal(asked, 4);
});

test('one at a time per kind: a second waits for the first, even when the first fails; other kinds do not wait', async () => {
  const turns = new WorkTurns(() => false);
  const log: string[] = [];
  let endFirst!: () => void;
  const first = turns.oneAtATime('recon', () =>
    new Promise<void>((res) => (endFirst = res))
      .then(() => log.push('first'))
      .then(() => {
        throw new Error('first failed');
      }),
  );
  const second = turns.oneAtATime('recon', async () => log.push('second'));
  await turns.oneAtATime('other', async () => log.push('other'));
  assert.deepEqual(log, ['other']);
  endFirst();
  await assert.rejects(first, /first failed/);
  await second;
  assert.deepEqual(log, ['other', 'first', 'second']);
});
