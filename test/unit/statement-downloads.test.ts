/**
 * The budget of statement files made at once (src/usecases/statement-downloads.ts): per app and in
 * all, a refusal that says when to come back, slots given back once however often released, one
 * computation shared by concurrent callers of a key (its error too), and slices that take turns.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { DomainError } from '../../src/domain/errors.ts';
import { STATEMENT_RETRY_AFTER_SECONDS, StatementDownloads } from '../../src/usecases/statement-downloads.ts';

const limits = { perApp: 2, total: 3, stallTimeoutMs: 1000 };

function refused(f: () => unknown): DomainError {
  try {
    f();
  } catch (err) {
    assert.ok(err instanceof DomainError);
    return err;
  }
  assert.fail('not refused');
}

test('at most perApp of an app and total in all; a refusal is RATE_LIMITED with Retry-After; a slot is given back once', () => {
  const b = new StatementDownloads(limits);
  const a1 = b.acquire('app_a');
  b.acquire('app_a');
  const e = refused(() => b.acquire('app_a'));
  assert.equal(e.code, 'RATE_LIMITED');
  assert.equal(e.retryAfterSeconds, STATEMENT_RETRY_AFTER_SECONDS);
  const b1 = b.acquire('app_b');
  assert.equal(refused(() => b.acquire('app_c')).code, 'RATE_LIMITED');
  assert.equal(b.inUse(), 3);
  a1();
  a1();
  assert.equal(b.inUse(), 2);
  assert.equal(b.inUse('app_a'), 1);
  b.acquire('app_c');
  b1();
  assert.equal(b.inUse('app_b'), 0);
});

test('concurrent callers of one key share one computation, its result and its error; a later call computes again', async () => {
  const b = new StatementDownloads(limits);
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
  const b = new StatementDownloads(limits);
  const order: number[] = [];
  await Promise.all([1, 2, 3, 4].map((i) => b.turn().then(() => order.push(i))));
  assert.deepEqual(order, [1, 2, 3, 4]);
});
