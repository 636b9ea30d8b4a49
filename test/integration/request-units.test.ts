/**
 * Request-id units on a real database (src/usecases/request-units.ts): a duplicate of a request
 * executing on this instance waits for it (no polling) and replays its answer; one held elsewhere
 * is polled; a holder whose instance stopped beating, or whose leases were ended by a stop, is
 * taken over at once; only the holder completes a record.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Clock } from '../../src/domain/clock.ts';
import { type Db, createPool, migrate } from '../../src/store/db.ts';
import { claimRequestId } from '../../src/store/replays.ts';
import { INSTANCE_GONE_AFTER_MS, RequestDecided, RequestUnits, type RequestUnit } from '../../src/usecases/request-units.ts';
import { FakeClock, waitFor } from '../helpers/events.ts';
import { type TestDatabase, createTestDatabase } from '../helpers/db.ts';

const quiet = { info() {}, warn() {}, error() {} };

/**
 * Counts the statements issued on `db` (`count`) and those answered (`answered`). The instance's
 * heartbeat is not counted: it beats on a timer, not for a request.
 */
function counting(db: Db): { db: Db; count: () => number; answered: () => number } {
  let n = 0;
  let answered = 0;
  const wrapped = new Proxy(db, {
    get(target, prop, receiver) {
      if (prop === 'query') {
        return (...a: unknown[]) => {
          if ((a[0] as { name?: string } | undefined)?.name === 'instance_beat') {
            return (target.query as (...x: unknown[]) => unknown).apply(target, a);
          }
          n++;
          const r = (target.query as (...x: unknown[]) => unknown).apply(target, a);
          if (r instanceof Promise) {
            r.then(
              () => answered++,
              () => answered++,
            );
          }
          return r;
        };
      }
      return Reflect.get(target, prop, receiver);
    },
  });
  return { db: wrapped, count: () => n, answered: () => answered };
}

/** Whether `p` is still unsettled once everything already queued (its pending continuations) has run. */
async function pending(p: Promise<unknown>): Promise<boolean> {
  const sentinel = Symbol('pending');
  const first = await Promise.race([p, new Promise((res) => setImmediate(() => res(sentinel)))]);
  return first === sentinel;
}

/** What a unit's claim decides: executes (the unit holds the id now) or the other request's outcome. */
async function begin(u: RequestUnit): Promise<unknown> {
  try {
    await u.claim();
    return { kind: 'execute' };
  } catch (err) {
    if (err instanceof RequestDecided) return err.outcome;
    throw err;
  }
}

const render = () => ({ status: 200, body: '{}', kept: false });

describe('request-id units', () => {
  let tdb: TestDatabase;
  let db: Db;
  const clock = new FakeClock();
  const started: RequestUnits[] = [];
  async function instance(on: Db = db, at: Clock = clock): Promise<RequestUnits> {
    const u = new RequestUnits(on, at, quiet);
    await u.start({ alone: false });
    started.push(u);
    return u;
  }
  before(async () => {
    tdb = await createTestDatabase();
    db = createPool(tdb.url, 8);
    await migrate(db);
  });
  after(async () => {
    for (const u of started) await u.stop();
    await db.end();
    await tdb.drop();
  });

  const key = (requestId: string) => ({ appId: 'app_w', requestId, method: 'POST', target: '/api/open/v1/payments', bodySha256: 'ab' });

  test('held on this instance: the duplicate wakes when the answer is recorded, with no polling', async () => {
    const c = counting(db);
    const units = await instance(c.db);
    const k = key('req_waiter_local');
    const first = units.open(k, render);
    assert.deepEqual(await begin(first), { kind: 'execute' });
    const before = c.count();
    const dup = begin(units.open(k, render));
    await new Promise((r) => setTimeout(r, 600));
    await first.finish({ status: 201, body: '{"ok":true}', kept: true });
    assert.deepEqual(await dup, { kind: 'replay', status: 201, body: '{"ok":true}' });
    // insert + read before waiting, insert + read after: no statement while it waited.
    assert.equal(c.count() - before - 1, 4, 'the waiting duplicate issued 4 statements (plus the complete)');
  });

  test('a stop that cuts requests off ends the leases held here: another instance takes the ids over at once', async () => {
    const dying = await instance();
    const c = counting(db);
    const other = await instance(c.db);
    const held = [key('req_cut_off_1'), key('req_cut_off_2')];
    for (const k of held) assert.deepEqual(await begin(dying.open(k, render)), { kind: 'execute' });
    const done = key('req_cut_off_done');
    const d = dying.open(done, render);
    assert.deepEqual(await begin(d), { kind: 'execute' });
    await d.finish({ status: 201, body: '{"kept":true}', kept: true });
    assert.equal(await dying.endLeasesHeldHere(), 2, 'only the ids still executing');
    for (const k of held) {
      const before = c.count();
      assert.deepEqual(await begin(other.open(k, render)), { kind: 'execute' });
      // Taken over without waiting for the lease: the claim, the read, the take-over; no round of polling.
      assert.equal(c.count() - before, 3, 'claim, read, take over: no wait');
    }
    assert.deepEqual(await begin(other.open(done, render)), { kind: 'replay', status: 201, body: '{"kept":true}' });
  });

  test('a holder whose instance stopped beating (a crash) is taken over as soon as it is judged gone, not after its lease', async () => {
    // The crashed instance is never stopped (as after kill -9: its row stays, nothing is released).
    // Its clock is frozen, so every beat it still makes records the same instant: its heartbeat
    // stops moving. Its lease (LEASE_SECONDS) outlives the whole test: only the heartbeat decides.
    const crashedAt = Date.now();
    const frozen: Clock = { now: () => crashedAt };
    const crashed = await instance(db, frozen);
    const k = key('req_crashed_holder');
    assert.deepEqual(await begin(crashed.open(k, render)), { kind: 'execute' });

    const liveClock = new FakeClock();
    const c = counting(db);
    const survivor = await instance(c.db, liveClock);
    const before = c.count();
    const retry = begin(survivor.open(k, render));
    // While the crashed instance's last beat is fresh, the retry polls (two rounds at least) and does not take over.
    await waitFor('the retry polling the held id', async () => c.count() - before >= 4 && c.answered() === c.count(), 2000);
    assert.ok(await pending(retry), 'not taken over while the heartbeat of the holder is fresh');
    assert.ok(liveClock.now() - crashedAt < INSTANCE_GONE_AFTER_MS, 'still within INSTANCE_GONE_AFTER_MS of the last beat');

    // Time passes for the live instance: the holder has not beaten for longer than INSTANCE_GONE_AFTER_MS.
    liveClock.advance(INSTANCE_GONE_AFTER_MS + 1000);
    const atAdvance = c.count();
    assert.deepEqual(await retry, { kind: 'execute' });
    // Taken over at the next round of polling: at most the round under way (claim, read) and the
    // round that takes it (claim, read, take over).
    assert.ok(c.count() - atAdvance <= 5, `taken over at the next round (${c.count() - atAdvance} statements)`);
  });

  test('a holder that was judged gone cannot complete the record any more: the new holder answers', async () => {
    const slow = await instance();
    const k = key('req_fenced');
    const first = slow.open(k, render);
    assert.deepEqual(await begin(first), { kind: 'execute' });
    await slow.endLeasesHeldHere();
    const other = await instance();
    const second = other.open(k, render);
    assert.deepEqual(await begin(second), { kind: 'execute' });
    await first.finish({ status: 201, body: '{"from":"first"}', kept: true });
    await second.finish({ status: 201, body: '{"from":"second"}', kept: true });
    assert.deepEqual(await begin((await instance()).open(k, render)), { kind: 'replay', status: 201, body: '{"from":"second"}' });
  });

  test('an abandoned execution wakes the duplicate, which then executes itself', async () => {
    const c = counting(db);
    const units = await instance(c.db);
    const k = key('req_waiter_abandon');
    const first = units.open(k, render);
    assert.deepEqual(await begin(first), { kind: 'execute' });
    const before = c.count();
    const dup = begin(units.open(k, render));
    // Its insert and read answered (the id is held here): the duplicate is waiting, not done.
    await waitFor('the duplicate waiting', async () => c.count() - before === 2 && c.answered() === c.count(), 2000);
    assert.ok(await pending(dup), 'the duplicate waits for the holder');
    assert.equal(c.count() - before, 2, 'no statement while it waits');
    await first.abandon();
    assert.deepEqual(await dup, { kind: 'execute' });
    // insert + read before waiting, the abandon, then the insert that claims the id.
    assert.equal(c.count() - before, 4);
  });

  test('held by another instance: polled until that instance records the answer', async () => {
    const c = counting(db);
    const here = await instance(c.db);
    const there = await instance();
    const k = key('req_waiter_remote');
    const first = there.open(k, render);
    assert.deepEqual(await begin(first), { kind: 'execute' });
    const before = c.count();
    const dup = begin(here.open(k, render));
    // Two rounds (insert + read) issued and answered: it has polled once already, and is still waiting.
    await waitFor('the duplicate polling', async () => c.count() - before >= 4 && c.answered() === c.count(), 2000);
    assert.ok(await pending(dup), 'the duplicate waits for the other instance');
    await first.finish({ status: 200, body: '{"r":1}', kept: true });
    assert.deepEqual(await dup, { kind: 'replay', status: 200, body: '{"r":1}' });
    // At least two rounds that found the id held, then the one that read the answer.
    const rounds = (c.count() - before) / 2;
    assert.ok(Number.isInteger(rounds) && rounds >= 3, `polled in ${rounds} rounds`);
  });

  test('a different body under the same id is a conflict at once, not a wait', async () => {
    const units = await instance();
    const k = key('req_waiter_conflict');
    assert.deepEqual(await begin(units.open(k, render)), { kind: 'execute' });
    assert.deepEqual(await begin(units.open({ ...k, bodySha256: 'cd' }, render)), { kind: 'conflict' });
  });

  test('an answer the surface does not keep (a 429 or 503) is given up: a retry executes afresh', async () => {
    const units = await instance();
    const k = key('req_not_kept');
    const first = units.open(k, render);
    assert.deepEqual(await begin(first), { kind: 'execute' });
    await first.finish({ status: 503, body: '{}', kept: false });
    assert.deepEqual(await begin(units.open(k, render)), { kind: 'execute' });
  });

  test('a claim joined to a write whose commit was lost (the primary died): its lease ends once the database answers, and a retry elsewhere takes it over at once', async () => {
    // The database refuses every statement while `down` (a failover), then answers again.
    let down = false;
    const flaky = new Proxy(db, {
      get(target, prop, receiver) {
        if (prop === 'query') {
          return (...a: unknown[]) =>
            down
              ? Promise.reject(new Error('Connection terminated unexpectedly'))
              : (target.query as (...x: unknown[]) => unknown).apply(target, a);
        }
        return Reflect.get(target, prop, receiver);
      },
    });
    const here = await instance(flaky);
    const c = counting(db);
    const other = await instance(c.db);
    const k = key('req_commit_lost');
    const unit = here.open(k, render);
    const claim = unit.joinClaim()!;
    // The create's statement committed its claim, but its answer never came back: the unit does not know.
    assert.equal(
      await claimRequestId(
        db,
        k,
        { holder: claim.holder, instance: claim.holderInstance, leaseUntil: claim.leaseUntil },
        new Date(clock.now()),
      ),
      true,
    );
    down = true;
    await unit.abandon();
    down = false;
    // The lease is ended at the next heartbeat at the latest: the retry executes, it does not wait for the lease.
    await waitFor(
      'the unconfirmed claim released',
      async () => {
        const r = await db.query<{ lease_until: Date }>('SELECT lease_until FROM request_replays WHERE app_id = $1 AND request_id = $2', [
          k.appId,
          k.requestId,
        ]);
        return r.rows[0]!.lease_until.getTime() < clock.now();
      },
      5000,
    );
    const before = c.count();
    assert.deepEqual(await begin(other.open(k, render)), { kind: 'execute' });
    assert.equal(c.count() - before, 3, 'claim, read, take over: no wait');
  });
});
