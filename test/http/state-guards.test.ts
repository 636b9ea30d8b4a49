/**
 * The machines whose changes the repositories apply only from their source states
 * (src/domain/states.ts, docs/state-machines.md): duplicate-payment refunds, reconciliation runs,
 * request units and event deliveries (their outcome, an operator's and a merchant's redelivery),
 * on a real database. A REFUNDED duplicate is never
 * overwritten, neither by the store nor by a refund's answer that was in flight while a check
 * found the money back.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { type RunState, TransitionError, transition } from '../../src/domain/states.ts';
import { ProviderRejectedError, type PaymentProvider } from '../../src/providers/provider.ts';
import type { ProviderRouter } from '../../src/providers/router.ts';
import { type Tx, withTx } from '../../src/store/db.ts';
import * as events from '../../src/store/events.ts';
import * as recon from '../../src/store/reconciliation.ts';
import * as refunds from '../../src/store/refunds.ts';
import * as replays from '../../src/store/replays.ts';
import type { UseCaseDeps } from '../../src/usecases/deps.ts';
import { checkDuplicateRefund, refundDuplicate } from '../../src/usecases/follow-ups.ts';
import { reconcileStatement } from '../../src/usecases/reconciliation.ts';
import type { Job } from '../../src/usecases/jobs.ts';
import { type Merchant, type TestApp, call, orderBody, provision, startTestApp } from '../helpers/app.ts';
import { FakeClock } from '../helpers/events.ts';

let t: TestApp;
let m: Merchant;
const clock = new FakeClock();
before(async () => {
  t = await startTestApp({}, { clock });
  m = await provision(t);
});
after(() => t.stop());

const now = () => new Date(clock.now());

/** A second payment of a closed order, recorded PENDING with its REFUND_DUPLICATE job (not run). */
async function duplicate(): Promise<string> {
  const created = (await call(t, m, 'POST', '/api/open/v1/payments', orderBody())).json();
  const adm = (await t.admin('GET', `/orders/${created.openOrderId}`)).json();
  const attemptId = adm.attempts[0].attemptId;
  // A close that crossed the payment at the provider: the attempt and the order ended locally only.
  await t.svc.db.query(`UPDATE attempts SET state = 'CLOSED' WHERE id = $1`, [attemptId]);
  await t.svc.db.query(`UPDATE orders SET status = 'CLOSED', closed_reason = 'CLOSE_REQUESTED' WHERE id = $1`, [created.openOrderId]);
  const paid = await t.sandbox('POST', `/payments/${created.openOrderId}/pay`, { attemptId });
  assert.equal(paid.statusCode, 200, paid.body);
  const dups = await refunds.duplicatesOfOrder(t.svc.db, created.openOrderId);
  assert.equal(dups.length, 1);
  assert.equal(dups[0]!.refundState, 'PENDING');
  return dups[0]!.id;
}

const job = (kind: Job['kind'], subjectId: string): Job => ({ id: '0', kind, subjectId, runs: 1, renew: async () => true });

/** The service's dependencies with one provider standing for every name. */
function withProvider(p: Partial<PaymentProvider>): UseCaseDeps {
  const real = t.svc.providers.byName('sandbox');
  const provider = Object.assign(Object.create(real) as PaymentProvider, p);
  return { ...t.svc, providers: { byName: () => provider } as unknown as ProviderRouter };
}

async function listed(id: string): Promise<string> {
  const r = await t.admin('GET', '/duplicate-payments');
  assert.equal(r.statusCode, 200, r.body);
  return r.json().duplicatePayments.find((d: { duplicateId?: string; id?: string }) => (d.duplicateId ?? d.id) === id)?.refundState;
}

describe('duplicate-payment refunds', () => {
  test('the store changes a duplicate only from the transition source: a REFUNDED one stays REFUNDED', async () => {
    const other = await duplicate();
    const unknown = transition('duplicateRefund', 'test', 'PENDING', 'UNKNOWN');
    assert.equal(await refunds.setDuplicateRefundState(t.svc.db, other, unknown, null, now()), true);
    const settled = transition('duplicateRefund', 'test', 'UNKNOWN', 'REFUNDED');
    assert.equal(
      await refunds.setDuplicateRefundState(t.svc.db, other, settled, null, now()),
      true,
      'a settled refund is REFUNDED from UNKNOWN',
    );

    const id = await duplicate();
    const refunded = transition('duplicateRefund', 'test', 'PENDING', 'REFUNDED');
    assert.equal(await refunds.setDuplicateRefundState(t.svc.db, id, refunded, 'R1', now()), true);
    for (const to of ['FAILED', 'UNKNOWN'] as const) {
      const late = transition('duplicateRefund', 'an answer in flight', 'PENDING', to);
      assert.equal(await refunds.setDuplicateRefundState(t.svc.db, id, late, null, now()), false, to);
    }
    const fromUnknown = transition('duplicateRefund', 'test', 'UNKNOWN', 'PENDING');
    assert.equal(await refunds.setDuplicateRefundState(t.svc.db, id, fromUnknown, null, now()), false);
    assert.equal(await refunds.noteDuplicateProviderRef(t.svc.db, id, 'PENDING', 'R2', now()), false);
    assert.equal(await refunds.setDuplicateRefundState(t.svc.db, id, settled, null, now()), false, 'already REFUNDED: nothing changes');
    const row = await refunds.getDuplicate(t.svc.db, id);
    assert.equal(row?.refundState, 'REFUNDED');
    assert.equal(await listed(id), 'REFUNDED');
  });

  test('a refund answer in flight while a check found the money back does not overwrite REFUNDED', async () => {
    const id = await duplicate();
    let release!: () => void;
    const held = new Promise<void>((res) => (release = res));
    let asked!: () => void;
    const calling = new Promise<void>((res) => (asked = res));
    // The refund's request is slow, and the provider finally refuses it (it was refunded already).
    const slow = withProvider({
      refund: async () => {
        asked();
        await held;
        throw new ProviderRejectedError('sandbox: already refunded');
      },
    });
    const running = refundDuplicate(slow, job('REFUND_DUPLICATE', id));
    await calling;
    // Meanwhile a check (another instance's) learns that the refund settled.
    await t.svc.db.query(`UPDATE duplicate_payments SET refund_state = 'UNKNOWN' WHERE id = $1`, [id]);
    const settled = withProvider({ queryRefund: async () => ({ state: 'SUCCEEDED' }) as never });
    assert.equal(await checkDuplicateRefund(settled, job('CHECK_DUPLICATE_REFUND', id)), 'done');
    assert.equal((await refunds.getDuplicate(t.svc.db, id))?.refundState, 'REFUNDED');

    release();
    assert.equal(await running, 'done');
    assert.equal((await refunds.getDuplicate(t.svc.db, id))?.refundState, 'REFUNDED', 'the late refusal changed nothing');
    assert.equal(await listed(id), 'REFUNDED');
    const checks = await t.svc.db.query(`SELECT 1 FROM jobs WHERE kind = 'CHECK_DUPLICATE_REFUND' AND subject_id = $1`, [id]);
    assert.equal(checks.rowCount, 0, 'and scheduled no check');
  });

  test('a refused or refunded duplicate is not asked again', async () => {
    const id = await duplicate();
    let calls = 0;
    const counting = withProvider({
      refund: async () => {
        calls++;
        throw new ProviderRejectedError('sandbox: refused');
      },
    });
    assert.equal(await refundDuplicate(counting, job('REFUND_DUPLICATE', id)), 'done');
    assert.equal((await refunds.getDuplicate(t.svc.db, id))?.refundState, 'FAILED');
    assert.equal(await refundDuplicate(counting, job('REFUND_DUPLICATE', id)), 'done');
    assert.equal(calls, 1, 'FAILED is final: left to the operator');
  });
});

describe('reconciliation runs', () => {
  test('each step is a transition of the tables, applied only from its source state and try', async () => {
    const day = '2026-01-02';
    const counts = { providerLines: 0, ledgerLines: 0, matched: 0, converged: 0, discrepancies: 0 };
    const step = (from: RunState, to: RunState) => transition('run', 'test', from, to);
    const run = await recon.queueRun(t.svc.db, 'sandbox', day, now());
    assert.equal(run.status, 'QUEUED');
    assert.equal(
      await recon.completeRun(t.svc.db, run.id, 0, step('RUNNING', 'COMPLETED'), counts, now()),
      null,
      'QUEUED does not complete',
    );
    assert.equal(await recon.failRun(t.svc.db, run.id, 0, step('RUNNING', 'FAILED'), 'x', now(), now()), false, 'QUEUED does not fail');
    assert.equal(await recon.startRun(t.svc.db, run.id, step('FAILED', 'RUNNING'), now()), null, 'not from a state it is not in');
    assert.equal((await recon.startRun(t.svc.db, run.id, step('QUEUED', 'RUNNING'), now()))?.status, 'RUNNING');
    const again = await recon.startRun(t.svc.db, run.id, step('RUNNING', 'RUNNING'), now());
    assert.equal(again?.tries, 2, 'RUNNING starts again (a holder that stopped)');
    assert.equal(
      await recon.failRun(t.svc.db, run.id, 1, step('RUNNING', 'FAILED'), 'stale holder', now(), now()),
      false,
      'the first try no longer fails it',
    );
    assert.equal(await recon.completeRun(t.svc.db, run.id, 1, step('RUNNING', 'COMPLETED'), counts, now()), null, 'nor completes it');
    assert.equal(await recon.failRun(t.svc.db, run.id, 2, step('RUNNING', 'FAILED'), 'provider down', now(), now()), true);
    assert.equal((await recon.startRun(t.svc.db, run.id, step('FAILED', 'RUNNING'), now()))?.status, 'RUNNING', 'FAILED is tried again');
    assert.equal((await recon.completeRun(t.svc.db, run.id, 3, step('RUNNING', 'COMPLETED'), counts, now()))?.status, 'COMPLETED');
    assert.equal(await recon.failRun(t.svc.db, run.id, 3, step('RUNNING', 'FAILED'), 'late', now(), now()), false, 'COMPLETED is final');
    assert.throws(() => step('COMPLETED', 'RUNNING'), TransitionError, 'the tables refuse to start a completed run');
    assert.equal(await recon.startRun(t.svc.db, run.id, step('RUNNING', 'RUNNING'), now()), null);
    assert.equal((await recon.getRun(t.svc.db, run.id))?.status, 'COMPLETED');
  });

  test('the job of a completed run does not start it again', async () => {
    const run = await recon.queueRun(t.svc.db, 'sandbox', '2026-01-03', now());
    await t.svc.db.query(`UPDATE reconciliation_runs SET status = 'COMPLETED' WHERE id = $1`, [run.id]);
    assert.equal(await reconcileStatement(t.svc, job('RECONCILE_STATEMENT', run.id)), 'done');
    const after = await recon.getRun(t.svc.db, run.id);
    assert.deepEqual([after?.status, after?.tries], ['COMPLETED', run.tries]);
  });
});

describe('request units', () => {
  test('only a unit in progress is answered, taken over or given up; a DONE answer is kept', async () => {
    const key = { appId: m.appId, requestId: `guard-${Date.now()}`, method: 'POST', target: '/x', bodySha256: 'a'.repeat(64) };
    const h = { holder: 'h1', instance: t.svc.instanceId, leaseUntil: new Date(clock.now() + 60_000) };
    assert.equal(await replays.claimRequestId(t.svc.db, key, h, now()), true);
    const answered = transition('requestUnit', 'test', 'IN_PROGRESS', 'DONE');
    assert.equal(await replays.completeRequestId(t.svc.db, key.appId, key.requestId, 'h2', answered, 201, '{}'), false, 'only its holder');
    assert.equal(await replays.completeRequestId(t.svc.db, key.appId, key.requestId, 'h1', answered, 201, '{"a":1}'), true);
    assert.equal(await replays.completeRequestId(t.svc.db, key.appId, key.requestId, 'h1', answered, 503, '{}'), false);
    await replays.abandonRequestId(t.svc.db, key.appId, key.requestId, 'h1');
    const later = new Date(clock.now() + 3_600_000);
    assert.equal(await replays.takeOverRequestId(t.svc.db, key, { ...h, holder: 'h2' }, later, later), false);
    const rec = await replays.readRequestId(t.svc.db, key.appId, key.requestId, later, later);
    assert.deepEqual([rec?.state, rec?.answerStatus, rec?.body, rec?.takeable], ['DONE', 201, '{"a":1}', false]);
  });
});

describe('event deliveries', () => {
  test("a delivery's outcome is a transition from the state its claim read, recorded only over that state", async () => {
    const created = (await call(t, m, 'POST', '/api/open/v1/payments', orderBody())).json();
    const adm = (await t.admin('GET', `/orders/${created.openOrderId}`)).json();
    const paid = await t.sandbox('POST', `/payments/${created.openOrderId}/pay`, { attemptId: adm.attempts[0].attemptId });
    assert.equal(paid.statusCode, 200, paid.body);
    const ev = (await t.svc.db.query<{ id: string }>(`SELECT id FROM events WHERE order_id = $1`, [created.openOrderId])).rows[0]!;
    const record = (token: string, move: events.DeliveryRecord['move']) =>
      events.recordDeliveries(t.svc.db, [
        {
          eventId: ev.id,
          token,
          move,
          attempts: 1,
          nextAttemptAt: null,
          lastError: null,
          now: now(),
          attemptNo: 1,
          startedAt: now(),
          statusCode: 200,
          error: null,
          excerpt: null,
          durationMs: 1,
          notifyUrl: null,
        },
      ]);
    const delivered = transition('delivery', 'test', 'PENDING', 'DELIVERED');
    // The event went DEAD (say) while a holder's lease still named it: neither its delivery nor a retry is recorded over it.
    await t.svc.db.query(`UPDATE events SET status = 'DEAD', locked_by = 'tok-1' WHERE id = $1`, [ev.id]);
    assert.deepEqual(await record('tok-1', delivered), [false]);
    assert.deepEqual(await record('tok-1', null), [false], 'a failed attempt leaves only a PENDING event PENDING');
    assert.equal((await t.svc.db.query(`SELECT status FROM events WHERE id = $1`, [ev.id])).rows[0].status, 'DEAD');
    await t.svc.db.query(`UPDATE events SET status = 'PENDING', locked_by = 'tok-2' WHERE id = $1`, [ev.id]);
    assert.deepEqual(await record('tok-2', delivered), [true]);
    assert.equal((await t.svc.db.query(`SELECT status FROM events WHERE id = $1`, [ev.id])).rows[0].status, 'DELIVERED');
    assert.throws(() => transition('delivery', 'test', 'DELIVERED', 'DEAD'), TransitionError);
  });

  test("an operator's redelivery is a transition from the state read: a PENDING event is refused, a delivered one requeued once", async () => {
    const created = (await call(t, m, 'POST', '/api/open/v1/payments', orderBody())).json();
    const adm = (await t.admin('GET', `/orders/${created.openOrderId}`)).json();
    const paid = await t.sandbox('POST', `/payments/${created.openOrderId}/pay`, { attemptId: adm.attempts[0].attemptId });
    assert.equal(paid.statusCode, 200, paid.body);
    const ev = (await t.svc.db.query<{ id: string }>(`SELECT id FROM events WHERE order_id = $1`, [created.openOrderId])).rows[0]!;
    const status = async () => (await t.svc.db.query(`SELECT status FROM events WHERE id = $1`, [ev.id])).rows[0].status;
    const fromDelivered = transition('delivery', 'test', 'DELIVERED', 'PENDING');
    const fromDead = transition('delivery', 'test', 'DEAD', 'PENDING');
    // The store applies a requeue only over its source state.
    assert.equal(await events.requeueEvent(t.svc.db, ev.id, fromDelivered, now()), false, 'PENDING stays as it is');
    await t.svc.db.query(`UPDATE events SET status = 'DELIVERED', delivered_at = $2 WHERE id = $1`, [ev.id, now()]);
    assert.equal(await events.requeueEvent(t.svc.db, ev.id, fromDead, now()), false, 'not DEAD: left as it is');
    assert.equal(await status(), 'DELIVERED');
    assert.equal(await events.requeueEvent(t.svc.db, ev.id, fromDelivered, now()), true);
    assert.equal(await events.requeueEvent(t.svc.db, ev.id, fromDelivered, now()), false);
    // Through the admin API: refused while PENDING, requeued from DEAD once.
    const redeliver = () => t.admin('POST', `/events/${ev.id}/redeliver`);
    assert.equal((await redeliver()).statusCode, 409);
    await t.svc.db.query(`UPDATE events SET status = 'DEAD' WHERE id = $1`, [ev.id]);
    const r = await redeliver();
    assert.equal(r.statusCode, 202, r.body);
    assert.equal(await status(), 'PENDING');
    assert.equal((await redeliver()).statusCode, 409);
  });

  test("a merchant's redelivery is recorded only over the state it was decided from", async () => {
    const created = (await call(t, m, 'POST', '/api/open/v1/payments', orderBody())).json();
    const adm = (await t.admin('GET', `/orders/${created.openOrderId}`)).json();
    const paid = await t.sandbox('POST', `/payments/${created.openOrderId}/pay`, { attemptId: adm.attempts[0].attemptId });
    assert.equal(paid.statusCode, 200, paid.body);
    const ev = (await t.svc.db.query<{ id: string }>(`SELECT id FROM events WHERE order_id = $1`, [created.openOrderId])).rows[0]!;
    await t.svc.db.query(`UPDATE events SET status = 'DELIVERED', delivered_at = $2 WHERE id = $1`, [ev.id, now()]);
    const fromDead = transition('delivery', 'test', 'DEAD', 'PENDING');
    const tx = <T>(f: (tx: Tx) => Promise<T>) => withTx(t.svc.db, f);
    assert.equal(await tx((c) => events.redeliver(c, ev.id, fromDead, now())), null, 'not DEAD: nothing recorded');
    assert.equal(await tx((c) => events.redeliver(c, ev.id, null, now())), null, 'not PENDING: nothing recorded');
    const fromDelivered = transition('delivery', 'test', 'DELIVERED', 'PENDING');
    assert.ok(await tx((c) => events.redeliver(c, ev.id, fromDelivered, now())));
    assert.equal((await t.svc.db.query(`SELECT status FROM events WHERE id = $1`, [ev.id])).rows[0].status, 'PENDING');
  });
});
