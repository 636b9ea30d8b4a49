/**
 * What grows is bounded (docs/configuration.md, "What is kept, for how long"): a week of traffic,
 * the service's clock moved two hours at a time (no sleeps), the workers' purges run as they come
 * due. The tables retention covers stop growing after their window (nonces, request-id records,
 * daily counters, the job queue), while every answer about the orders of the week stays as it was;
 * a month on, the failed delivery attempts of delivered events are gone and each event keeps its
 * acknowledged delivery, which the event log still shows as its last attempt.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { type Merchant, type TestApp, call, makeJobDue, orderBody, provision, requestId, startTestApp } from '../helpers/app.ts';
import { FakeClock, Receiver } from '../helpers/events.ts';

const clock = new FakeClock();
const H = 3600_000;
const STEP = 2 * H;
const COVERED = ['nonces', 'request_replays', 'app_daily_amounts', 'jobs', 'recreate_requests'] as const;

let t: TestApp;
let rx: Receiver;
let mch: Merchant;

const api = (method: string, url: string, body?: unknown, rid?: string) =>
  call(t, mch, method, url, body, { timestamp: String(Math.floor(clock.now() / 1000)), ...(rid ? { requestId: rid } : {}) });

before(async () => {
  rx = await Receiver.start();
  // Every other notification is answered 500 first: delivered on its retry, with a failed attempt in its log.
  rx.on('/hook', (res, n) => res.writeHead(n % 2 === 1 ? 500 : 200).end(n % 2 === 1 ? 'busy' : 'ok'));
  t = await startTestApp({}, { clock });
  mch = await provision(t, { app: { notifyUrl: rx.url('/hook') } });
});

after(async () => {
  await t?.stop();
  await rx?.close();
});

async function counts(): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const table of [...COVERED, 'orders', 'events', 'event_deliveries']) {
    out[table] = (await t.svc.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${table}`)).rows[0]!.n;
  }
  return out;
}

/** The workers' passes after the clock moved: due work, deliveries, then the purges as they come due. */
async function workersCatchUp(): Promise<void> {
  for (let i = 0; i < 4; i++) await t.workers.tick();
  await makeJobDue(t, 'FIND_DUE_WORK');
  for (let i = 0; i < 4; i++) await t.workers.tick();
}

/** An answer with the request's own identity taken out. */
function answer(r: { statusCode: number; body: string }): string {
  const { requestId: _r, ...rest } = JSON.parse(r.body) as Record<string, unknown>;
  return `${r.statusCode} ${JSON.stringify(rest)}`;
}

test('a week of traffic: the covered tables stop growing, the answers stay as they were', async () => {
  const orders: { outTradeNo: string; openOrderId: string }[] = [];
  const daily: Record<string, number>[] = [];
  for (let step = 0; step < (7 * 24 * H) / STEP; step++) {
    for (let i = 0; i < 4; i++) {
      const body = orderBody();
      const c = await api('POST', '/api/open/v1/payments', body, requestId());
      assert.equal(c.statusCode, 201, c.body);
      orders.push({ outTradeNo: body.outTradeNo as string, openOrderId: c.json().openOrderId });
    }
    // One of them paid, two queried; the others expire.
    const paid = orders.at(-1)!;
    const pay = await t.sandbox('POST', `/payments/${paid.openOrderId}/pay`);
    assert.equal(pay.statusCode, 200, pay.body);
    for (const o of orders.slice(-3, -1)) assert.equal((await api('GET', `/api/open/v1/payments/${o.outTradeNo}`)).statusCode, 200);
    clock.advance(STEP);
    await workersCatchUp();
    if ((step + 1) % 12 === 0) daily.push(await counts());
  }
  // Each covered table holds what its window keeps: no more on the seventh day than on the third.
  for (const table of COVERED) {
    const window = daily.slice(2).map((d) => d[table]!);
    assert.ok(Math.max(...window) <= Math.max(daily[1]![table]!, daily[2]![table]!) + 4, `${table} grows: ${daily.map((d) => d[table])}`);
  }
  assert.ok(daily[6]!.request_replays! < orders.length / 3, `request ids: ${daily.map((d) => d.request_replays)}`);
  assert.ok(daily[6]!.orders === orders.length, 'every order is kept');

  // The orders of the first day, the events of a paid one: the same answers after every purge of the week.
  const first = orders.slice(0, 12);
  const paidOne = orders[3]!;
  const paidEvent = (
    await t.svc.db.query<{ eventId: string }>(
      `SELECT id AS "eventId" FROM events WHERE order_id = $1 AND event_type = 'PAYMENT_SUCCEEDED'`,
      [paidOne.openOrderId],
    )
  ).rows[0]!;
  assert.ok(paidEvent, 'the first paid order has its event');
  const seen = async () => ({
    orders: await Promise.all(first.map(async (o) => answer(await api('GET', `/api/open/v1/payments/${o.outTradeNo}`)))),
    event: JSON.parse((await api('GET', `/api/open/v1/events/${paidEvent.eventId}`)).body) as Record<string, unknown>,
  });
  const before = await seen();
  assert.equal((before.event as { status: string }).status, 'DELIVERED');
  await makeJobDue(t, 'PURGE');
  await makeJobDue(t, 'PURGE_HISTORY');
  await workersCatchUp();
  assert.deepEqual((await seen()).orders, before.orders);

  // A month on: the failed attempts of the delivered events are gone, the acknowledged ones kept.
  const failedBefore = (
    await t.svc.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM event_deliveries WHERE status_code IS DISTINCT FROM 200`)
  ).rows[0]!.n;
  assert.ok(failedBefore > 0, 'some deliveries failed');
  clock.advance(31 * 24 * H);
  await workersCatchUp(); // the last events still due are delivered
  await makeJobDue(t, 'PURGE_HISTORY');
  await t.workers.tick();
  const left = await t.svc.db.query<{ failed: number; delivered_without_ack: number }>(
    `SELECT (SELECT count(*)::int FROM event_deliveries d JOIN events e ON e.id = d.event_id
              WHERE e.status = 'DELIVERED' AND d.status_code IS DISTINCT FROM 200) AS failed,
            (SELECT count(*)::int FROM events e WHERE e.status = 'DELIVERED'
              AND NOT EXISTS (SELECT 1 FROM event_deliveries d WHERE d.event_id = e.id AND d.status_code = 200)) AS delivered_without_ack`,
  );
  assert.deepEqual(left.rows[0], { failed: 0, delivered_without_ack: 0 });
  const after = await seen();
  assert.deepEqual(after.orders, before.orders);
  // The event itself, its count of attempts and its last attempt are as they were; only the failed attempts left its log.
  const { deliveries: d0, requestId: _r0, ...e0 } = before.event;
  const { deliveries: d1, requestId: _r1, ...e1 } = after.event;
  assert.deepEqual(e1, e0);
  assert.deepEqual(
    d1,
    (d0 as { httpStatus: number | null }[]).filter((x) => x.httpStatus === 200),
  );
});
