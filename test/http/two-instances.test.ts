/**
 * Two service instances on one database, requests raced across both: every decision that must
 * hold across instances is made from the database, never from one process's memory. One order per
 * number, one attempt per burst of re-creates, one execution per request id, refunds never above
 * the amount paid, no more passwords judged than the sign-in throttle allows.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { LightMyRequestResponse } from 'fastify';
import { type BuiltApp, buildApp } from '../../src/app.ts';
import { type Merchant, type TestApp, orderBody, provision, requestId, signedHeaders, startTestApp } from '../helpers/app.ts';
import { PASSWORD, createOperator } from '../helpers/operators.ts';

let a: TestApp;
let b: BuiltApp;
let m: Merchant;
before(async () => {
  // Sign-ins raced below are the throttle's case: the instance's cap on sign-ins in progress
  // (test/http/sign-in-capacity.test.ts) set above the burst, so that every attempt reaches it.
  a = await startTestApp({ SIGN_IN_MAX_CONCURRENT: '64' });
  b = await buildApp(a.config);
  m = await provision(a);
});
after(async () => {
  await b.close();
  await a.stop();
});

/** A signed request to instance `n` (0: a, 1: b). */
function send(n: number, method: string, url: string, body?: unknown, rid?: string, mch: Merchant = m): Promise<LightMyRequestResponse> {
  const raw = body === undefined ? '' : JSON.stringify(body);
  const server = n % 2 === 0 ? a.server : b.server;
  return server.inject({
    method: method as 'POST',
    url,
    headers: signedHeaders(mch, method, url, raw, rid === undefined ? {} : { requestId: rid }),
    payload: raw === '' ? undefined : raw,
    remoteAddress: '127.0.0.1',
  });
}

describe('two instances on one database', () => {
  test('concurrent re-creates of one order, half on each instance: one 201, every other answer that winner', async () => {
    for (let round = 0; round < 3; round++) {
      const body = orderBody();
      assert.equal((await send(0, 'POST', '/api/open/v1/payments', body)).statusCode, 201);
      const url = `/api/open/v1/payments/${String(body.outTradeNo)}/attempts`;
      const rs = await Promise.all(Array.from({ length: 20 }, (_, i) => send(i, 'POST', url)));
      const created = rs.filter((r) => r.statusCode === 201);
      assert.equal(created.length, 1, rs.map((r) => `${r.statusCode}`).join(','));
      const winner = created[0]!.json().payUrl;
      for (const r of rs) {
        assert.equal(r.statusCode === 201 || r.statusCode === 200, true, r.body);
        assert.equal(r.json().payUrl, winner, 'every answer carries the winner material');
      }
      const q = await send(1, 'GET', `/api/open/v1/payments/${String(body.outTradeNo)}`);
      assert.equal(q.json().status, 'PAYING');
    }
  });

  test('creates raced on both instances never take the created amount above the daily ceiling', async () => {
    const ceiling = 20_000;
    const mch = await provision(a, { app: { dailyAmountCeilingFen: ceiling } });
    const bodies = Array.from({ length: 100 }, (_, i) => orderBody({ amountFen: 100 + ((i * 7919) % 900) }));
    const rs = await Promise.all(bodies.map((body, i) => send(i, 'POST', '/api/open/v1/payments', body, undefined, mch)));
    let created = 0;
    const refused: number[] = [];
    rs.forEach((r, i) => {
      if (r.statusCode === 201) created += bodies[i]!.amountFen as number;
      else {
        assert.equal(r.statusCode, 422, r.body);
        assert.deepEqual(r.json().details, { scopes: ['DAILY_AMOUNT'] });
        refused.push(bodies[i]!.amountFen as number);
      }
    });
    assert.ok(created <= ceiling, `created ${created} > ceiling ${ceiling}`);
    assert.ok(refused.length > 0, 'the ceiling was reached');
    for (const amt of refused) assert.ok(amt > ceiling - created, `${amt} refused with ${ceiling - created} left`);
    // The orders kept are exactly the ones answered 201.
    const kept = await Promise.all(
      bodies.map((body, i) => send(i + 1, 'GET', `/api/open/v1/payments/${String(body.outTradeNo)}`, undefined, undefined, mch)),
    );
    kept.forEach((q, i) => assert.equal(q.statusCode, rs[i]!.statusCode === 201 ? 200 : 404, q.body));
  });

  test('concurrent creates of one order number on both instances make one order', async () => {
    const body = orderBody();
    const rs = await Promise.all(Array.from({ length: 20 }, (_, i) => send(i, 'POST', '/api/open/v1/payments', body)));
    assert.equal(rs.filter((r) => r.statusCode === 201).length, 1, rs.map((r) => r.statusCode).join(','));
    const ids = new Set(rs.map((r) => r.json().openOrderId));
    assert.equal(ids.size, 1);
  });

  test('one request id sent to both instances at once executes once: every answer is the first, byte for byte', async () => {
    const body = orderBody();
    const rid = requestId();
    const rs = await Promise.all(Array.from({ length: 10 }, (_, i) => send(i, 'POST', '/api/open/v1/payments', body, rid)));
    assert.deepEqual(new Set(rs.map((r) => r.statusCode)), new Set([201]));
    assert.equal(new Set(rs.map((r) => r.body)).size, 1);
  });

  test('concurrent refunds on both instances never refund more than was paid', async () => {
    const body = orderBody({ amountFen: 1000 });
    const o = (await send(0, 'POST', '/api/open/v1/payments', body)).json();
    const pay = await a.sandbox('POST', `/payments/${o.openOrderId}/pay`, {});
    assert.equal(pay.statusCode, 200, pay.body);
    const rs = await Promise.all(
      Array.from({ length: 12 }, (_, i) =>
        send(i, 'POST', '/api/open/v1/refunds', {
          outTradeNo: body.outTradeNo,
          outRefundNo: `RF_${String(body.outTradeNo)}_${i}`,
          refundAmountFen: 300,
        }),
      ),
    );
    assert.equal(rs.filter((r) => r.statusCode === 201).length, 3, rs.map((r) => r.statusCode).join(','));
    assert.ok(rs.every((r) => r.statusCode === 201 || r.json().code === 'OPEN_API_LIMIT_EXCEEDED'));
  });

  test('follow-up work written on instance a is done by the workers of instance b, after the lease of a worker that died', async () => {
    // A duplicate payment, recorded on a: its automatic refund is a job written in the same
    // transaction. a's workers are not running, and nothing here drains it on a.
    const fault = await a.sandbox('POST', '/faults', { operation: 'CREATE_ATTEMPT', outcome: 'TIMEOUT', times: 1 });
    assert.equal(fault.statusCode, 201, fault.body);
    const body = orderBody();
    const no = String(body.outTradeNo);
    const first = (await send(0, 'POST', '/api/open/v1/payments', body)).json();
    assert.equal(first.unknown, true, 'the first attempt is uncertain, so it is kept open');
    const again = await send(0, 'POST', `/api/open/v1/payments/${no}/attempts`);
    assert.equal(again.statusCode, 201, again.body);
    const order = async () => (await a.admin('GET', `/orders/${String(first.openOrderId)}`)).json();
    let adm = await order();
    const [uncertain, live] = adm.attempts.map((x: { attemptId: string }) => x.attemptId);
    for (const attemptId of [live, uncertain]) {
      const paid = await a.sandbox('POST', `/payments/${String(first.openOrderId)}/pay`, { attemptId });
      assert.equal(paid.statusCode, 200, paid.body);
    }
    adm = await order();
    assert.equal(adm.status, 'SUCCEEDED');
    assert.equal(adm.duplicatePayments.length, 1, 'the second payment is recorded');
    const dup = adm.duplicatePayments[0];
    assert.equal(dup.attemptId, uncertain);
    assert.equal(dup.refundState, 'PENDING');

    // A worker (on a) claims the work and dies holding it: its lease keeps the work from b until it lapses.
    const leaseMs = 1500;
    const { claimJobs } = await import('../../src/store/jobs.ts');
    const claimed = await claimJobs(a.svc.db, {
      limit: 100,
      holder: 'worker-that-died',
      instance: a.svc.instanceId,
      now: new Date(),
      leaseUntil: new Date(Date.now() + leaseMs),
    });
    assert.ok(
      claimed.some((f) => f.kind === 'REFUND_DUPLICATE' && f.subjectId === dup.id),
      JSON.stringify(claimed),
    );
    const row = () =>
      a.svc.db.query<{ locked_by: string | null }>(`SELECT locked_by FROM jobs WHERE kind = 'REFUND_DUPLICATE' AND subject_id = $1`, [
        dup.id,
      ]);
    await b.workers.tick();
    assert.deepEqual(
      (await row()).rows.map((r) => r.locked_by),
      ['worker-that-died'],
      'a leased row is left to its holder',
    );
    await new Promise((r) => setTimeout(r, leaseMs + 100));

    // b's workers take the work over and see it through: the provider refunds the duplicate
    // (the provider check on b then finds the refund settled).
    const deadline = Date.now() + 20_000;
    let state = '';
    while (Date.now() < deadline) {
      await b.workers.tick();
      const d = (
        await b.server.inject({
          method: 'GET',
          url: '/api/admin/v1/duplicate-payments',
          headers: { authorization: `Bearer ${a.adminToken}` },
        })
      )
        .json()
        .duplicatePayments.find((x: { id: string }) => x.id === dup.id);
      state = d.refundState;
      if (state === 'REFUNDED') break;
      assert.equal(state, 'PENDING', JSON.stringify(d));
      await new Promise((r) => setTimeout(r, 250));
    }
    assert.equal(state, 'REFUNDED', 'the duplicate payment is refunded by b');
    assert.equal((await row()).rowCount, 0, 'the follow-up is done and gone');
    adm = await order();
    assert.equal(adm.status, 'SUCCEEDED');
    assert.deepEqual(
      adm.duplicatePayments.map((x: { refundState: string }) => x.refundState),
      ['REFUNDED'],
    );
    const q = await send(1, 'GET', `/api/open/v1/payments/${no}`);
    assert.equal(q.json().status, 'SUCCEEDED');
  });

  test("wrong passwords raced on both instances: no more than the throttle's five are judged", async () => {
    await createOperator(a, 'raced', 'support');
    const attempt = (i: number, password: string) =>
      (i % 2 === 0 ? a.server : b.server).inject({
        method: 'POST',
        url: '/console/api/session',
        remoteAddress: `203.0.113.${i + 1}`, // one address each: only the name's limit applies
        headers: { 'content-type': 'application/json' },
        payload: JSON.stringify({ name: 'raced', password }),
      });
    const rs = await Promise.all(Array.from({ length: 30 }, (_, i) => attempt(i, 'wrong password!')));
    for (const r of rs) assert.ok(r.statusCode === 401 || r.statusCode === 429, `${r.statusCode} ${r.body}`);
    const judged = rs.filter((r) => r.statusCode === 401).length;
    // A burst may be refused whole (each attempt counts the others being judged); a refused
    // attempt is dropped, not counted as a failure.
    assert.ok(judged <= 5, `${judged} passwords checked in one window`);
    // What is left of the window is judged, one attempt after another, and no more: no
    // over-refusal after the burst, and no failure of it left uncounted.
    for (let i = 0; i < 5 - judged; i++) {
      const r = await attempt(31 + i, 'wrong password!');
      assert.equal(r.statusCode, 401, `wrong password ${judged + i + 1} of 5 is judged (${judged} in the burst): ${r.body}`);
    }
    const sixth = await attempt(40, 'wrong password!');
    assert.equal(sixth.statusCode, 429, `the window is full: ${sixth.body}`);
    const right = await attempt(41, PASSWORD);
    assert.equal(right.statusCode, 429, `the right password waits for the window: ${right.body}`);
  });
});
