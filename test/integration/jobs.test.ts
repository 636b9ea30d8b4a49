/**
 * The job queue on a real database (src/store/jobs.ts): one claim (FOR UPDATE SKIP LOCKED) that
 * two claimers racing never share, completion and failure fenced by the holder, a lease that lapses,
 * jobs of an instance that stopped beating released at once, schedule's two modes, and the runner
 * (src/usecases/jobs.ts) retrying with the backoff rule and dropping a job with no run left.
 */
import assert from 'node:assert/strict';
import { after, before, beforeEach, describe, test } from 'node:test';
import { type Db, createPool, migrate } from '../../src/store/db.ts';
import * as jobs from '../../src/store/jobs.ts';
import type { UseCaseDeps } from '../../src/usecases/deps.ts';
import { JobRunner, type JobHandlers } from '../../src/usecases/jobs.ts';
import { type TestDatabase, createTestDatabase } from '../helpers/db.ts';

let tdb: TestDatabase;
let db: Db;
before(async () => {
  tdb = await createTestDatabase();
  db = createPool(tdb.url, 12);
  await migrate(db);
});
after(async () => {
  await db.end();
  await tdb.drop();
});
beforeEach(async () => {
  await db.query('DELETE FROM jobs');
  await db.query('DELETE FROM service_instances');
});

const T0 = Date.parse('2030-01-01T00:00:00Z');
const at = (s: number) => new Date(T0 + s * 1000);
const claim = (holder: string, now: Date, limit = 100, instance = 'ins_a') =>
  jobs.claimJobs(db, { limit, holder, instance, now, leaseUntil: new Date(now.getTime() + 60_000) });
const row = async (kind: string, subject: string) =>
  (
    await db.query<{ run_at: Date; runs: number; locked_by: string | null; last_error: string | null }>(
      'SELECT run_at, runs, locked_by, last_error FROM jobs WHERE kind = $1 AND subject_id = $2',
      [kind, subject],
    )
  ).rows[0] ?? null;

describe('the claim', () => {
  test('due jobs only, oldest first; two claimers racing share none', async () => {
    for (let i = 0; i < 200; i++) await jobs.schedule(db, 'CHECK_ATTEMPT', `att_${i}`, at(i % 50));
    await jobs.schedule(db, 'CHECK_ATTEMPT', 'att_later', at(120));
    const got = await Promise.all(Array.from({ length: 8 }, (_, i) => claim(`h${i}`, at(100), 30)));
    const ids = got.flat().map((j) => j.subjectId);
    assert.equal(ids.length, 200, 'every due job claimed once');
    assert.equal(new Set(ids).size, 200, 'no job claimed twice');
    assert.ok(!ids.includes('att_later'));
    const first = await claim('h9', at(130), 1);
    assert.deepEqual(
      first.map((j) => [j.subjectId, j.runs]),
      [['att_later', 1]],
      'a leased job is not claimed again before its lease ends',
    );
  });

  test('a lease that lapses: the job is claimed by another holder, and the first holder is fenced out', async () => {
    await jobs.schedule(db, 'REFUND_DUPLICATE', 'dup_1', at(0));
    const [j] = await claim('dead', at(1));
    assert.equal((await claim('other', at(30))).length, 0, 'leased for 60 s');
    const [again] = await claim('other', at(62));
    assert.equal(again!.id, j!.id);
    assert.equal(again!.runs, 2);
    assert.equal(await jobs.completeJob(db, j!.id, 'dead', null), false, 'the first holder cannot complete it');
    assert.equal(await jobs.failJob(db, j!.id, 'dead', at(100), 'x'), false);
    assert.equal(await jobs.renewJob(db, j!.id, 'dead', at(200)), false);
    assert.equal(await jobs.completeJob(db, j!.id, 'other', null), true);
    assert.equal(await row('REFUND_DUPLICATE', 'dup_1'), null);
  });

  test('the jobs of an instance that stopped beating are due at once', async () => {
    await db.query(`INSERT INTO service_instances(id, started_at, heartbeat_at) VALUES ('ins_alive', $1, $1), ('ins_gone', $1, $2)`, [
      at(10),
      at(0),
    ]);
    await jobs.schedule(db, 'CHECK_REFUND', 'rf_1', at(0));
    await jobs.schedule(db, 'CHECK_REFUND', 'rf_2', at(0));
    await claim('gone.1', at(1), 1, 'ins_gone');
    await claim('alive.1', at(1), 1, 'ins_alive');
    assert.equal(await jobs.releaseJobsOfGoneInstances(db, at(6), at(10), 'ins_gone'), 0, 'an instance never judges itself gone');
    assert.equal(await jobs.releaseJobsOfGoneInstances(db, at(6), at(10), 'ins_alive'), 1);
    const due = await claim('next', at(10));
    assert.equal(due.length, 1, "only the gone instance's job");
  });
});

describe('schedule', () => {
  test('earliest keeps the sooner time; exactly sets it; either releases a job being run', async () => {
    await jobs.schedule(db, 'FINISH_CLOSE', 'ord_1', at(30));
    await jobs.schedule(db, 'FINISH_CLOSE', 'ord_1', at(50));
    assert.deepEqual((await row('FINISH_CLOSE', 'ord_1'))!.run_at, at(30));
    await jobs.schedule(db, 'FINISH_CLOSE', 'ord_1', at(50), 'exactly');
    assert.deepEqual((await row('FINISH_CLOSE', 'ord_1'))!.run_at, at(50));
    const [j] = await claim('h', at(60));
    await jobs.schedule(db, 'FINISH_CLOSE', 'ord_1', at(62), 'exactly');
    assert.equal(await jobs.completeJob(db, j!.id, 'h', null), false, 'work added while it ran is not dropped');
    assert.deepEqual((await row('FINISH_CLOSE', 'ord_1'))!.run_at, at(62));
  });
});

describe('the runner', () => {
  let now = T0;
  const deps = (): UseCaseDeps =>
    ({
      instanceId: 'ins_runner',
      db,
      clock: { now: () => now },
      log: { info() {}, warn() {}, error() {} },
      wakeWorkers() {},
    }) as unknown as UseCaseDeps;

  const handlers = (h: Partial<JobHandlers<UseCaseDeps>>): JobHandlers<UseCaseDeps> =>
    new Proxy(h, { get: (o, k) => (o as Record<string | symbol, unknown>)[k] ?? (async () => 'done') }) as JobHandlers<UseCaseDeps>;

  test('done completes, retry and a throw back off by the rule, a recurring job comes again', async () => {
    now = T0;
    await db.query('DELETE FROM jobs');
    await jobs.schedule(db, 'CHECK_ATTEMPT', 'att_ok', at(0));
    await jobs.schedule(db, 'CHECK_ATTEMPT', 'att_retry', at(0));
    await jobs.schedule(db, 'CLOSE_STRAY_ATTEMPT', 'att_throw', at(0));
    const runner = new JobRunner(
      deps(),
      handlers({
        CHECK_ATTEMPT: async (_d, j) => (j.subjectId === 'att_ok' ? 'done' : 'retry'),
        CLOSE_STRAY_ATTEMPT: async () => {
          throw new Error('provider down');
        },
      }),
    );
    await runner.run();
    await runner.idle();
    assert.equal(await row('CHECK_ATTEMPT', 'att_ok'), null);
    assert.deepEqual((await row('CHECK_ATTEMPT', 'att_retry'))!.run_at, at(2), 'first retry 2 s later');
    const thrown = (await row('CLOSE_STRAY_ATTEMPT', 'att_throw'))!;
    assert.deepEqual(thrown.run_at, at(2));
    assert.equal(thrown.last_error, 'provider down');
    now = T0 + 2000;
    await runner.run();
    await runner.idle();
    assert.deepEqual((await row('CHECK_ATTEMPT', 'att_retry'))!.run_at, at(6), 'second retry 4 s after the second run');
    const findDueWork = (await row('FIND_DUE_WORK', ''))!;
    assert.deepEqual(findDueWork.run_at, at(3), 'the recurring job runs again a second after');
  });

  test('a kind with no run left is dropped', async () => {
    now = T0;
    await db.query('DELETE FROM jobs');
    await db.query(`INSERT INTO jobs(kind, subject_id, run_at, runs, created_at) VALUES ('RECONCILE_STATEMENT', '7', $1, 5, $1)`, [at(0)]);
    const runner = new JobRunner(deps(), handlers({ RECONCILE_STATEMENT: async () => 'retry' }));
    await runner.run();
    await runner.idle();
    assert.equal(await row('RECONCILE_STATEMENT', '7'), null, 'the sixth run failed: dropped');
  });
});
