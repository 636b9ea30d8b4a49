/**
 * Event delivery that keeps up with a fast receiver (the throughput itself is measured by the
 * benchmark, not here): the per-app limit grows while the receiver acknowledges quickly and is
 * halved when it fails; each order's events still arrive in stateVersion order, each once; one
 * connection serves many events.
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { AppConcurrency, createDispatcher } from '../../src/events/dispatcher.ts';
import { type Merchant, type TestApp, call, orderBody, provision, startTestApp } from '../helpers/app.ts';

describe('AppConcurrency (additive increase, multiplicative decrease)', () => {
  test('grows by one after as many quick acknowledgements as the limit, up to the maximum', () => {
    const c = new AppConcurrency(4, 6);
    for (let i = 0; i < 3; i++) c.outcome('a', true, 5);
    assert.equal(c.limit('a'), 4);
    c.outcome('a', true, 5);
    assert.equal(c.limit('a'), 5);
    for (let i = 0; i < 5 + 6 + 6; i++) c.outcome('a', true, 5);
    assert.equal(c.limit('a'), 6, 'never above the maximum');
    assert.equal(c.limit('b'), 4, 'per app');
    assert.deepEqual(c.overrides(), new Map([['a', 6]]));
  });

  test('a failure or a slow acknowledgement halves it, to the initial limit at least', () => {
    const c = new AppConcurrency(4, 64);
    for (let i = 0; i < 4 + 5 + 6 + 7 + 8; i++) c.outcome('a', true, 5);
    assert.equal(c.limit('a'), 9);
    c.outcome('a', false, 5);
    assert.equal(c.limit('a'), 4);
    c.outcome('a', true, 5_000);
    assert.equal(c.limit('a'), 4, 'never below the initial limit: the app keeps its retries on time');
    c.outcome('a', false, 5);
    assert.equal(c.limit('a'), 4);
    assert.deepEqual(c.overrides(), new Map());
  });
});

describe('delivery to a fast receiver', () => {
  let t: TestApp;
  let m: Merchant;
  let server: http.Server;
  const received: { eventId: string; outTradeNo: string; stateVersion: number; socket: number }[] = [];
  let inFlight = 0;
  let maxInFlight = 0;
  let sockets = 0;

  before(async () => {
    server = http.createServer((req, res) => {
      inFlight++;
      maxInFlight = Math.max(maxInFlight, inFlight);
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const e = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { eventId: string; outTradeNo: string; stateVersion: number };
        received.push({ ...e, socket: (req.socket as { n?: number }).n! });
        // A receiver that answers in a few milliseconds.
        setTimeout(() => {
          inFlight--;
          res.writeHead(200).end('ok');
        }, 3);
      });
    });
    server.on('connection', (s) => ((s as { n?: number }).n = ++sockets));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    t = await startTestApp();
    const port = (server.address() as AddressInfo).port;
    m = await provision(t, { app: { notifyUrl: `http://127.0.0.1:${port}/hook` } });
  });
  after(async () => {
    await t.stop();
    server.closeAllConnections();
    await new Promise<void>((r) => server.close(() => r()));
  });

  test('the per-app limit grows past its start, each order in stateVersion order, each event once, few connections', async () => {
    // 20 paid orders, each with 9 more events of later stateVersions (as refunds would add).
    const orders: string[] = [];
    for (let i = 0; i < 20; i++) {
      const body = orderBody();
      const o = (await call(t, m, 'POST', '/api/open/v1/payments', body)).json();
      assert.equal((await t.sandbox('POST', `/payments/${o.openOrderId}/pay`)).statusCode, 200);
      orders.push(o.openOrderId);
    }
    await t.svc.db.query(
      `INSERT INTO events(id, app_id, order_id, event_type, state_version, payload, next_attempt_at, created_at)
       SELECT 'evt_flow_' || o.id || '_' || v, o.app_id, o.id, 'REFUND_SUCCEEDED', o.state_version + v,
              json_build_object('eventId', 'evt_flow_' || o.id || '_' || v, 'outTradeNo', o.out_trade_no, 'stateVersion', o.state_version + v),
              now(), now()
         FROM orders o CROSS JOIN generate_series(1, 9) AS v WHERE o.id = ANY($1)`,
      [orders],
    );
    const d = createDispatcher(t.svc, { maxWaitMs: 100 });
    for (let i = 0; i < 200 && received.length < 200; i++) {
      await d.run();
      await d.idle();
    }
    assert.equal(received.length, 200);
    assert.equal(new Set(received.map((r) => r.eventId)).size, 200, 'each event once');
    const byOrder = new Map<string, number[]>();
    for (const r of received) byOrder.set(r.outTradeNo, [...(byOrder.get(r.outTradeNo) ?? []), r.stateVersion]);
    for (const [no, versions] of byOrder) {
      assert.deepEqual(
        versions,
        [...versions].sort((a, b) => a - b),
        `${no}: in stateVersion order`,
      );
    }
    assert.ok(maxInFlight > 4, `the limit grew past its start of 4 (at most ${maxInFlight} in flight)`);
    assert.ok(sockets < received.length / 4, `${sockets} connections for ${received.length} events`);
  });
});
