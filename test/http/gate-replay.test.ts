/**
 * Step 9's first part for the four POST operations: X-SVC-Request-Id replay (seed "Create order"
 * rule 4; decisions.md section 5). Same id and request -> the first status and body byte for byte,
 * freshly signed; another body, path or query -> 409 OPEN_API_REQUEST_ID_CONFLICT; concurrent
 * duplicates execute once; 429 and 503 are not kept; GETs are never replayed.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { type Merchant, type TestApp, call, orderBody, provision, requestId as newRequestId, startTestApp } from '../helpers/app.ts';
import { FakeClock } from '../helpers/events.ts';

const clock = new FakeClock();
import { OPEN, expectRejection, expectSuccess, send } from './gate-kit.test.ts';

let t: TestApp;
let m: Merchant;

const PAYMENTS = `${OPEN}/payments`;

before(async () => {
  t = await startTestApp({ AUTH_FAILURE_LIMIT: '100000' }, { clock });
  m = await provision(t);
});
after(() => t.stop());

async function ordersOf(appId: string, outTradeNo: string): Promise<number> {
  const r = await t.svc.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM orders WHERE app_id = $1 AND out_trade_no = $2`, [
    appId,
    outTradeNo,
  ]);
  return r.rows[0]!.n;
}

describe('same id, same request', () => {
  test('a repeated create returns the first status and body byte for byte, freshly signed', async () => {
    const body = orderBody();
    const requestId = newRequestId();
    const first = await send(t, m, 'POST', PAYMENTS, body, { requestId });
    await expectSuccess(t, first.r, requestId, 201);
    const again = await send(t, m, 'POST', PAYMENTS, body, { requestId });
    await expectSuccess(t, again.r, requestId, 201);
    assert.equal(again.r.body, first.r.body);
    assert.notEqual(again.r.headers['x-svc-response-nonce'], first.r.headers['x-svc-response-nonce']);
    assert.notEqual(again.r.headers['x-svc-response-sign'], first.r.headers['x-svc-response-sign']);
    assert.equal(again.r.headers['content-type'], first.r.headers['content-type']);
    assert.equal(await ordersOf(m.appId, body.outTradeNo as string), 1);
  });

  test('the first response, not the current state: after a close the create id still replays the 201', async () => {
    const body = orderBody();
    const requestId = newRequestId();
    const first = await send(t, m, 'POST', PAYMENTS, body, { requestId });
    assert.equal(first.r.statusCode, 201);
    // Another request id for the same order: the business replay (200, replayed=true).
    const biz = await send(t, m, 'POST', PAYMENTS, body);
    const bb = await expectSuccess(t, biz.r, biz.requestId, 200);
    assert.equal(bb.replayed, true);
    const close = await send(t, m, 'POST', `${PAYMENTS}/${body.outTradeNo}/close`);
    assert.equal(close.r.statusCode, 200);
    const again = await send(t, m, 'POST', PAYMENTS, body, { requestId });
    assert.equal(again.r.statusCode, 201);
    assert.equal(again.r.body, first.r.body);
    assert.equal(again.r.json().status, 'PAYING');
  });

  test('contract failures are kept and replayed too (400 schema, 409 idempotency conflict)', async () => {
    const requestId = newRequestId();
    const bad = { ...orderBody(), amountFen: 1.5 };
    const first = await send(t, m, 'POST', PAYMENTS, bad, { requestId });
    await expectRejection(t, first.r, { status: 400, code: 'OPEN_API_BODY_INVALID', step: 9, sentRequestId: requestId, details: 'any' });
    const again = await send(t, m, 'POST', PAYMENTS, bad, { requestId });
    assert.equal(again.r.statusCode, 400);
    assert.equal(again.r.body, first.r.body);

    const body = orderBody();
    assert.equal((await send(t, m, 'POST', PAYMENTS, body)).r.statusCode, 201);
    const rid = newRequestId();
    const conflict = { ...body, amountFen: 2000 };
    const c1 = await send(t, m, 'POST', PAYMENTS, conflict, { requestId: rid });
    await expectRejection(t, c1.r, { status: 409, code: 'OPEN_API_IDEMPOTENCY_CONFLICT', step: 9, sentRequestId: rid, details: 'any' });
    const c2 = await send(t, m, 'POST', PAYMENTS, conflict, { requestId: rid });
    assert.equal(c2.r.body, c1.r.body);
  });

  test('re-create, close and refund are replayed as well', async () => {
    const body = orderBody();
    assert.equal((await send(t, m, 'POST', PAYMENTS, body)).r.statusCode, 201);
    for (const op of ['attempts', 'close']) {
      const requestId = newRequestId();
      const url = `${PAYMENTS}/${body.outTradeNo}/${op}`;
      const a = await send(t, m, 'POST', url, undefined, { requestId });
      assert.ok(a.r.statusCode === 200 || a.r.statusCode === 201, a.r.body);
      const b = await send(t, m, 'POST', url, undefined, { requestId });
      assert.equal(b.r.statusCode, a.r.statusCode);
      assert.equal(b.r.body, a.r.body, op);
      await expectSuccess(t, b.r, requestId);
    }
    const requestId = newRequestId();
    const refund = { outTradeNo: body.outTradeNo, outRefundNo: `RF_${Date.now()}`, refundAmountFen: 1 };
    const r1 = await send(t, m, 'POST', `${OPEN}/refunds`, refund, { requestId });
    const r2 = await send(t, m, 'POST', `${OPEN}/refunds`, refund, { requestId });
    assert.equal(r2.r.statusCode, r1.r.statusCode);
    assert.equal(r2.r.body, r1.r.body);
  });

  test('a byte-identical retry (same nonce) is a nonce replay: the merchant re-signs with a new nonce', async () => {
    const body = orderBody();
    const requestId = newRequestId();
    const nonce = 'fixed-nonce-for-retry-01';
    const a = await send(t, m, 'POST', PAYMENTS, body, { requestId, nonce });
    assert.equal(a.r.statusCode, 201);
    const b = await send(t, m, 'POST', PAYMENTS, body, { requestId, nonce });
    await expectRejection(t, b.r, { status: 409, code: 'OPEN_API_NONCE_REPLAYED', step: 5, sentRequestId: requestId });
  });

  test('request ids are per app', async () => {
    const other = await provision(t);
    const requestId = newRequestId();
    const a = await send(t, m, 'POST', PAYMENTS, orderBody(), { requestId });
    const b = await send(t, other, 'POST', PAYMENTS, orderBody(), { requestId });
    assert.equal(a.r.statusCode, 201);
    assert.equal(b.r.statusCode, 201);
    assert.notEqual(a.r.json().openOrderId, b.r.json().openOrderId);
  });
});

describe('same id, different request -> 409 OPEN_API_REQUEST_ID_CONFLICT', () => {
  test('another body, path, query or operation', async () => {
    const body = orderBody();
    const requestId = newRequestId();
    assert.equal((await send(t, m, 'POST', PAYMENTS, body, { requestId })).r.statusCode, 201);
    const cases: [string, string, unknown][] = [
      ['another body', PAYMENTS, orderBody()],
      ['same fields, other bytes', PAYMENTS, JSON.stringify(body, null, 1)],
      ['another path', `${PAYMENTS}/${body.outTradeNo}/close`, undefined],
      ['another operation', `${PAYMENTS}/${body.outTradeNo}/attempts`, undefined],
      ['a query', `${PAYMENTS}?x=1`, body],
    ];
    for (const [label, url, b] of cases) {
      const s = await send(t, m, 'POST', url, b, { requestId });
      assert.equal(s.r.statusCode, 409, `${label}: ${s.r.body}`);
      await expectRejection(t, s.r, { status: 409, code: 'OPEN_API_REQUEST_ID_CONFLICT', step: 9, sentRequestId: requestId });
    }
    // The conflicts executed nothing: the order is still open and the original still replays.
    const q = await send(t, m, 'GET', `${PAYMENTS}/${body.outTradeNo}`);
    assert.equal(q.r.json().status, 'PAYING');
    assert.equal((await send(t, m, 'POST', PAYMENTS, body, { requestId })).r.statusCode, 201);
  });

  test('a conflict is not stored: the original keeps replaying after it', async () => {
    const requestId = newRequestId();
    const body = orderBody();
    const first = await send(t, m, 'POST', PAYMENTS, body, { requestId });
    for (let i = 0; i < 3; i++) assert.equal((await send(t, m, 'POST', PAYMENTS, orderBody(), { requestId })).r.statusCode, 409);
    assert.equal((await send(t, m, 'POST', PAYMENTS, body, { requestId })).r.body, first.r.body);
  });
});

describe('concurrency', () => {
  test('20 concurrent duplicates of a create execute once: one order, identical bodies', async () => {
    for (let round = 0; round < 3; round++) {
      const body = orderBody();
      const requestId = newRequestId();
      const rs = await Promise.all(Array.from({ length: 20 }, () => call(t, m, 'POST', PAYMENTS, body, { requestId })));
      const statuses = new Set(rs.map((r) => r.statusCode));
      assert.deepEqual([...statuses], [201], rs.map((r) => `${r.statusCode} ${r.body}`).join('\n'));
      assert.equal(new Set(rs.map((r) => r.body)).size, 1, 'all bodies identical');
      assert.equal(await ordersOf(m.appId, body.outTradeNo as string), 1);
      const attempts = await t.svc.db.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM attempts a JOIN orders o ON o.id = a.order_id WHERE o.app_id = $1 AND o.out_trade_no = $2`,
        [m.appId, body.outTradeNo],
      );
      assert.equal(attempts.rows[0]!.n, 1, 'the provider was asked once');
    }
  });

  test('concurrent duplicates with different bodies: one executes, the others conflict or replay it', async () => {
    const requestId = newRequestId();
    const bodies = Array.from({ length: 10 }, () => orderBody());
    const rs = await Promise.all(bodies.map((b) => call(t, m, 'POST', PAYMENTS, b, { requestId })));
    const created = rs.filter((r) => r.statusCode === 201);
    assert.equal(created.length, 1, rs.map((r) => r.statusCode).join(','));
    assert.equal(rs.filter((r) => r.statusCode === 409).length, 9);
    for (const r of rs.filter((x) => x.statusCode === 409)) assert.equal(r.json().code, 'OPEN_API_REQUEST_ID_CONFLICT');
  });

  test('concurrent re-creates with one id: one new attempt', async () => {
    const body = orderBody();
    assert.equal((await send(t, m, 'POST', PAYMENTS, body)).r.statusCode, 201);
    const requestId = newRequestId();
    const rs = await Promise.all(
      Array.from({ length: 10 }, () => call(t, m, 'POST', `${PAYMENTS}/${body.outTradeNo}/attempts`, undefined, { requestId })),
    );
    assert.equal(new Set(rs.map((r) => `${r.statusCode} ${r.body}`)).size, 1);
    assert.equal(rs[0]!.statusCode, 201);
  });
});

describe('what is not kept or replayed', () => {
  test('a 429 is not kept: the retry executes afresh', async () => {
    const slow = await provision(t, { app: { rateLimitPerSecond: 1 } });
    let limited: { requestId: string; body: Record<string, unknown> } | null = null;
    for (let i = 0; i < 6 && !limited; i++) {
      const body = orderBody();
      const s = await send(t, slow, 'POST', PAYMENTS, body);
      if (s.r.statusCode === 429) limited = { requestId: s.requestId, body };
    }
    assert.ok(limited, 'a 429 at 1 request per second');
    assert.equal(await ordersOf(slow.appId, limited.body.outTradeNo as string), 0);
    clock.advance(1100); // the next second's budget
    const retry = await send(t, slow, 'POST', PAYMENTS, limited.body, { requestId: limited.requestId });
    await expectSuccess(t, retry.r, limited.requestId, 201);
    assert.equal(await ordersOf(slow.appId, limited.body.outTradeNo as string), 1);
  });

  test('GETs are answered from current state, whatever the request id', async () => {
    const body = orderBody();
    const c = await send(t, m, 'POST', PAYMENTS, body);
    const requestId = newRequestId();
    const q1 = await send(t, m, 'GET', `${PAYMENTS}/${body.outTradeNo}`, undefined, { requestId });
    assert.equal(q1.r.json().status, 'PAYING');
    const pay = await t.sandbox('POST', `/payments/${c.r.json().openOrderId}/pay`);
    assert.equal(pay.statusCode, 200, pay.body);
    const q2 = await send(t, m, 'GET', `${PAYMENTS}/${body.outTradeNo}`, undefined, { requestId });
    assert.equal(q2.r.json().status, 'SUCCEEDED');
    // A GET reusing a POST's request id is not a conflict either.
    const q3 = await send(t, m, 'GET', `${PAYMENTS}/${body.outTradeNo}`, undefined, { requestId: c.requestId });
    await expectSuccess(t, q3.r, c.requestId, 200);
  });

  test('a request id first used by a GET is free for a POST', async () => {
    const requestId = newRequestId();
    assert.equal((await send(t, m, 'GET', `${OPEN}/settlement/accounts`, undefined, { requestId })).r.statusCode, 200);
    const c = await send(t, m, 'POST', PAYMENTS, orderBody(), { requestId });
    await expectSuccess(t, c.r, requestId, 201);
  });

  test('rejections before step 9 do not claim the request id', async () => {
    const body = orderBody();
    const requestId = newRequestId();
    const ct = await send(t, m, 'POST', PAYMENTS, body, { requestId, contentType: 'text/plain' });
    assert.equal(ct.r.statusCode, 400);
    const auth = await send(t, m, 'POST', PAYMENTS, orderBody(), { requestId, sign: 'A'.repeat(344) });
    assert.equal(auth.r.statusCode, 401);
    const ok = await send(t, m, 'POST', PAYMENTS, body, { requestId });
    await expectSuccess(t, ok.r, requestId, 201);
  });
});

describe('retention', () => {
  test('purge drops answers older than 24 h and long-dead holders, and keeps the rest', async () => {
    const q = (sql: string, params: unknown[]) => t.svc.db.query(sql, params);
    const app = m.appId;
    const rows: [string, string, string, string][] = [
      ['old-done-0001', 'DONE', "now() - interval '25 hours'", 'NULL'],
      ['new-done-0001', 'DONE', "now() - interval '23 hours'", 'NULL'],
      ['old-dead-0001', 'IN_PROGRESS', "now() - interval '50 hours'", "now() - interval '49 hours'"],
      ['old-live-0001', 'IN_PROGRESS', "now() - interval '25 hours'", "now() + interval '1 minute'"],
    ];
    for (const [id, state, created, lease] of rows) {
      await q(
        `INSERT INTO request_replays(app_id, request_id, method, target, body_sha256, state, lease_until, created_at)
         VALUES ($1, $2, 'POST', '/x', 'h', $3, ${lease}, ${created})`,
        [app, id, state],
      );
    }
    // The re-creates' request ids are kept as long as the answers.
    await q(
      `INSERT INTO recreate_requests(order_id, request_id, created_at) VALUES ('ord_purge_0001', 'old-rc-0001', now() - interval '25 hours'),
              ('ord_purge_0001', 'new-rc-0001', now() - interval '23 hours')`,
      [],
    );
    await t.svc.units.purge();
    const left = await q(`SELECT request_id FROM request_replays WHERE app_id = $1 AND request_id LIKE '%-0001' ORDER BY 1`, [app]);
    assert.deepEqual(
      left.rows.map((r: { request_id: string }) => r.request_id),
      ['new-done-0001', 'old-live-0001'],
    );
    const rc = await q(`SELECT request_id FROM recreate_requests WHERE order_id = 'ord_purge_0001'`, []);
    assert.deepEqual(
      rc.rows.map((r: { request_id: string }) => r.request_id),
      ['new-rc-0001'],
    );
  });
});
