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
  a = await startTestApp();
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
    assert.ok(judged <= 5, `${judged} passwords checked in one window`);
    if (judged === 5) assert.equal((await attempt(30, PASSWORD)).statusCode, 429, 'the right password waits for the window');
  });
});
