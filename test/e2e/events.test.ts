/**
 * Event notifications end to end (decisions.md section 7, docs/events.md): a real receiver on
 * 127.0.0.1, events produced through the signed open API and the sandbox, delivered by the
 * service's workers (or a dispatcher with test options), time walked with a fake clock.
 */
import assert from 'node:assert/strict';
import { verify } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { notificationSigningString } from '@mps/sdk/signing';
import { verifyNotification } from '@mps/sdk';
import { MAX_ATTEMPTS, RETRY_DELAYS_MS, createDispatcher } from '../../src/events/dispatcher.ts';
import { rescheduleAppEvents } from '../../src/store/events.ts';
import { webhookEventSchema } from '../../src/domain/response-schemas.ts';
import { validate } from '../../src/domain/schema.ts';
import { type Merchant, type TestApp, call, orderBody, provision, startTestApp } from '../helpers/app.ts';
import { REFUND_SETTLE_MS } from '../../src/providers/sandbox/sandbox.ts';
import { FakeClock, type Received, Receiver, reopenApp, waitFor } from '../helpers/events.ts';

const PAYLOAD_FIELDS = [
  'appId',
  'attach',
  'eventAmountFen',
  'eventId',
  'eventType',
  'feeProjection',
  'grossAmountFen',
  'occurredAt',
  'outRefundNo',
  'outTradeNo',
  'reason',
  'stateVersion',
  'status',
];

const clock = new FakeClock();
let t: TestApp;
let rx: Receiver;
let platformKeys: { keyId: string; publicKeyPem: string }[];

before(async () => {
  rx = await Receiver.start();
  t = await startTestApp({}, { clock });
  const k = await t.admin('GET', '/platform-keys');
  assert.equal(k.statusCode, 200, k.body);
  platformKeys = k.json().keys;
});
after(async () => {
  await t.stop();
  await rx.close();
});

interface Shop {
  m: Merchant;
  path: string;
}

let shops = 0;
async function shop(): Promise<Shop> {
  const path = `/hook/${++shops}`;
  return { m: await provision(t, { app: { notifyUrl: rx.url(path) } }), path };
}

/** Events of an app leased to a delivery now (on the fake clock). */
async function leased(appId: string): Promise<number> {
  const r = await t.svc.db.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM events WHERE app_id = $1 AND status = 'PENDING' AND locked_until > $2`,
    [appId, new Date(clock.now())],
  );
  return r.rows[0]!.n;
}

/** The sandbox's time passes its refunds' settlement; it sends their settlement notices. */
async function settleRefunds(): Promise<void> {
  clock.advance(REFUND_SETTLE_MS);
  await t.svc.sandbox!.sendDueRefundNotices(1000);
}

/** Signed open-API call stamped with the fake clock (the gate checks the timestamp against it). */
const api = (m: Merchant, method: string, url: string, body?: unknown) =>
  call(t, m, method, url, body, { timestamp: String(Math.floor(clock.now() / 1000)) });

async function createOrder(m: Merchant, o: Record<string, unknown> = {}) {
  const body = orderBody(o);
  const r = await api(m, 'POST', '/api/open/v1/payments', body);
  assert.equal(r.statusCode, 201, r.body);
  return { body, order: r.json() as { openOrderId: string; feeProjection: unknown } };
}

async function paidOrder(m: Merchant, o: Record<string, unknown> = {}) {
  const c = await createOrder(m, o);
  const pay = await t.sandbox('POST', `/payments/${c.order.openOrderId}/pay`);
  assert.equal(pay.statusCode, 200, pay.body);
  return c;
}

interface EventRow {
  eventId: string;
  eventType: string;
  stateVersion: number;
  status: string;
  attempts: number;
  nextAttemptAt: string;
}

async function eventsOf(openOrderId: string): Promise<EventRow[]> {
  const r = await t.admin('GET', `/orders/${openOrderId}`);
  assert.equal(r.statusCode, 200, r.body);
  return r.json().events;
}

interface Delivery {
  attemptNo: number;
  attemptedAt: string;
  statusCode: number | null;
  error: string | null;
  durationMs: number;
}

async function eventView(eventId: string): Promise<EventRow & { lastError: string | null; deliveries: Delivery[]; payload: unknown }> {
  const r = await t.admin('GET', `/events/${eventId}`);
  assert.equal(r.statusCode, 200, r.body);
  return r.json();
}

/** Rebuilds the signing string (decisions.md section 7) and checks it with the published key. */
function assertSigned(rec: Received, keys = platformKeys): void {
  const h = rec.headers as Record<string, string>;
  assert.equal(h['content-type'], 'application/json');
  assert.match(h['x-svc-notify-nonce']!, /^[A-Za-z0-9]{32}$/);
  assert.match(h['x-svc-notify-timestamp']!, /^\d{10}$/);
  const key = keys.find((k) => k.keyId === h['x-svc-notify-key-id']);
  assert.ok(key, 'X-SVC-Notify-Key-Id names a published platform key');
  const signingString = notificationSigningString({
    timestamp: h['x-svc-notify-timestamp']!,
    nonce: h['x-svc-notify-nonce']!,
    eventId: h['x-svc-event-id']!,
    body: rec.body,
  });
  assert.ok(
    verify('sha256', Buffer.from(signingString), key.publicKeyPem, Buffer.from(h['x-svc-notify-sign']!, 'base64')),
    'signature verifies',
  );
  assert.equal(JSON.parse(rec.body).eventId, h['x-svc-event-id']);
}

function payloadOf(rec: Received): Record<string, unknown> {
  const p = JSON.parse(rec.body) as Record<string, unknown>;
  assert.deepEqual(Object.keys(p).sort(), PAYLOAD_FIELDS);
  const v = validate(webhookEventSchema, p);
  assert.equal(v, null, `the payload conforms to the published schema: ${JSON.stringify(v)}`);
  return p;
}

/**
 * Runs the workers until `n` notifications have reached `path`: the events of an order go out one
 * after the other, and on a loaded machine a delivery may outlast one run's wait for it.
 */
async function deliveredTo(path: string, n: number): Promise<Received[]> {
  return waitFor(`${n} notifications at ${path}`, async () => {
    await t.workers.tick();
    return rx.at(path).length >= n && rx.at(path);
  });
}

describe('delivery and payload', () => {
  test('PAYMENT_SUCCEEDED arrives signed with the platform key, with the 13 fields', async () => {
    const s = await shop();
    const { body, order } = await paidOrder(s.m, { attach: 'cart=42', amountFen: 1000 });
    assert.equal(rx.at(s.path).length, 0, 'nothing is sent before the dispatcher runs');
    await t.workers.tick();
    const got = rx.at(s.path);
    assert.equal(got.length, 1);
    const rec = got[0]!;
    assertSigned(rec);
    // The SDK's verifier agrees (it also checks the timestamp against the same clock).
    const viaSdk = verifyNotification({
      headers: rec.headers,
      rawBody: rec.body,
      platformPublicKeys: Object.fromEntries(platformKeys.map((k) => [k.keyId, k.publicKeyPem])),
      now: () => clock.now(),
    });
    const p = payloadOf(rec);
    assert.deepEqual(viaSdk, p);
    assert.equal(p.eventType, 'PAYMENT_SUCCEEDED');
    assert.equal(p.appId, s.m.appId);
    assert.equal(p.outTradeNo, body.outTradeNo);
    assert.equal(p.attach, 'cart=42');
    assert.equal(p.eventAmountFen, 1000);
    assert.equal(p.grossAmountFen, 1000);
    assert.equal(p.status, 'SUCCEEDED');
    assert.equal(p.reason, null);
    assert.equal(p.outRefundNo, null);
    assert.deepEqual(p.feeProjection, order.feeProjection);
    assert.ok(Number.isInteger(p.stateVersion));
    assert.match(p.occurredAt as string, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);

    const [ev] = await eventsOf(order.openOrderId);
    assert.equal(ev!.eventId, p.eventId);
    assert.equal(ev!.status, 'DELIVERED');
    const v = await eventView(ev!.eventId);
    assert.deepEqual(v.payload, p, 'the stored payload is what was sent');
    assert.equal(v.deliveries.length, 1);
    assert.deepEqual(
      { ...v.deliveries[0], attemptedAt: undefined, durationMs: undefined },
      {
        attemptNo: 1,
        attemptedAt: undefined,
        statusCode: 200,
        error: null,
        durationMs: undefined,
      },
    );
    assert.ok(v.deliveries[0]!.durationMs >= 0);

    await t.workers.tick();
    assert.equal(rx.at(s.path).length, 1, 'a delivered event is not sent again');
  });

  test('REFUND_SUCCEEDED after the sandbox settles: refund amount, order amount, outRefundNo, higher stateVersion', async () => {
    const s = await shop();
    const { body, order } = await paidOrder(s.m, { amountFen: 1000 });
    const rf = await api(s.m, 'POST', '/api/open/v1/refunds', {
      outTradeNo: body.outTradeNo,
      outRefundNo: 'RF_refund_event_1',
      refundAmountFen: 400,
      reason: 'damaged',
    });
    assert.equal(rf.statusCode, 201, rf.body);
    await settleRefunds();
    assert.equal((await eventsOf(order.openOrderId)).length, 2, 'the refund settled');
    const got = (await deliveredTo(s.path, 2)).map(payloadOf);
    assert.deepEqual(
      got.map((p) => p.eventType),
      ['PAYMENT_SUCCEEDED', 'REFUND_SUCCEEDED'],
    );
    const [pay, refund] = got as [Record<string, unknown>, Record<string, unknown>];
    assert.equal(refund.eventAmountFen, 400);
    assert.equal(refund.grossAmountFen, 1000);
    assert.equal(refund.outRefundNo, 'RF_refund_event_1');
    assert.equal(refund.outTradeNo, body.outTradeNo);
    assert.equal(refund.status, 'SUCCEEDED');
    assert.equal(refund.reason, 'damaged');
    assert.equal(refund.feeProjection, null);
    assert.ok((refund.stateVersion as number) > (pay.stateVersion as number));
    for (const r of rx.at(s.path)) assertSigned(r);
  });

  test('PAYMENT_CLOSED after the open-API close, reason CLOSE_REQUESTED', async () => {
    const s = await shop();
    const { body } = await createOrder(s.m, { amountFen: 2500 });
    const c = await api(s.m, 'POST', `/api/open/v1/payments/${body.outTradeNo}/close`);
    assert.equal(c.statusCode, 200, c.body);
    await t.workers.tick();
    const [rec] = rx.at(s.path);
    assert.ok(rec);
    assertSigned(rec);
    const p = payloadOf(rec);
    assert.equal(p.eventType, 'PAYMENT_CLOSED');
    assert.equal(p.status, 'CLOSED');
    assert.equal(p.reason, 'CLOSE_REQUESTED');
    assert.equal(p.eventAmountFen, 2500);
    assert.equal(p.grossAmountFen, 2500);
    assert.equal(p.outRefundNo, null);
    assert.equal(p.feeProjection, null);
  });
});

describe('delivered without waiting for the next worker pass', () => {
  test('every change that writes an event wakes the workers: a payment, a close, a refund settled by its notice, a refund refused', async () => {
    const s = await shop();
    const wakes: string[] = [];
    const wakeWorkers = t.svc.wakeWorkers;
    let step = '';
    t.svc.wakeWorkers = () => wakes.push(step);
    try {
      step = 'pay';
      const { body } = await paidOrder(s.m);
      step = 'close';
      const open = await createOrder(s.m);
      assert.equal((await api(s.m, 'POST', `/api/open/v1/payments/${String(open.body.outTradeNo)}/close`)).statusCode, 200);
      step = 'refund settled';
      const rf = await api(s.m, 'POST', '/api/open/v1/refunds', {
        outTradeNo: body.outTradeNo,
        outRefundNo: 'RF_wake_1',
        refundAmountFen: 1,
      });
      assert.equal(rf.statusCode, 201, rf.body);
      await settleRefunds();
      step = 'refund refused';
      assert.equal((await t.sandbox('POST', '/faults', { operation: 'REFUND', outcome: 'REJECT', times: 1 })).statusCode, 201);
      const no = await api(s.m, 'POST', '/api/open/v1/refunds', {
        outTradeNo: body.outTradeNo,
        outRefundNo: 'RF_wake_2',
        refundAmountFen: 1,
      });
      assert.equal(no.statusCode, 502, no.body);
      for (const x of ['pay', 'close', 'refund settled', 'refund refused'])
        assert.ok(wakes.includes(x), `${x} woke the workers (${wakes.join(', ')})`);
    } finally {
      t.svc.wakeWorkers = wakeWorkers;
    }
  });
});

describe('payloads of the other event types', () => {
  test('PAYMENT_FAILED: status FAILED, the failure reason, no fee projection', async () => {
    const s = await shop();
    const { body, order } = await createOrder(s.m, { amountFen: 1200 });
    assert.equal((await t.sandbox('POST', `/payments/${order.openOrderId}/fail`)).statusCode, 200);
    await t.workers.tick();
    const [rec] = rx.at(s.path);
    assert.ok(rec);
    assertSigned(rec);
    const p = payloadOf(rec);
    assert.equal(p.eventType, 'PAYMENT_FAILED');
    assert.equal(p.status, 'FAILED');
    assert.equal(typeof p.reason, 'string');
    assert.ok((p.reason as string).length > 0);
    assert.equal(p.eventAmountFen, 1200);
    assert.equal(p.outTradeNo, body.outTradeNo);
    assert.equal(p.outRefundNo, null);
    assert.equal(p.feeProjection, null);
  });

  test('PAYMENT_CLOSED by expiry: reason EXPIRED', async () => {
    const s = await shop();
    const { order } = await createOrder(s.m, { amountFen: 1300 });
    assert.equal((await t.sandbox('POST', `/payments/${order.openOrderId}/expire`)).statusCode, 200);
    const p = payloadOf((await deliveredTo(s.path, 1))[0]!);
    assert.equal(p.eventType, 'PAYMENT_CLOSED');
    assert.equal(p.status, 'CLOSED');
    assert.equal(p.reason, 'EXPIRED');
    assert.equal(p.eventAmountFen, 1300);
  });

  test('PAYMENT_CLOSED by the provider (its own timeout): reason PROVIDER_CLOSED; the buyer can no longer pay', async () => {
    const s = await shop();
    const { body, order } = await createOrder(s.m, { amountFen: 1400 });
    const closed = await t.sandbox('POST', `/payments/${order.openOrderId}/provider-close`);
    assert.equal(closed.statusCode, 200, closed.body);
    assert.equal(closed.json().status, 'CLOSED');
    const p = payloadOf((await deliveredTo(s.path, 1))[0]!);
    assert.equal(p.eventType, 'PAYMENT_CLOSED');
    assert.equal(p.status, 'CLOSED');
    assert.equal(p.reason, 'PROVIDER_CLOSED');
    assert.equal(p.eventAmountFen, 1400);
    const q = await api(s.m, 'GET', `/api/open/v1/payments/${body.outTradeNo}`);
    assert.equal(q.statusCode, 200, q.body);
    assert.equal(q.json().status, 'CLOSED');
    assert.equal(q.json().closedReason, 'PROVIDER_CLOSED');
    assert.equal(q.json().latestAttempt.state, 'CLOSED');
    // Nothing open is left: neither the buyer nor the provider can act on it again.
    assert.equal((await t.sandbox('POST', `/payments/${order.openOrderId}/pay`)).statusCode, 409);
    assert.equal((await t.sandbox('POST', `/payments/${order.openOrderId}/provider-close`)).statusCode, 409);
    const again = await api(s.m, 'POST', `/api/open/v1/payments/${body.outTradeNo}/close`);
    assert.equal(again.statusCode, 200, again.body);
    assert.equal(again.json().closeState, 'ALREADY_CLOSED');
  });

  test('REFUND_FAILED: the refund amount, status FAILED, the failure reason, a higher stateVersion', async () => {
    const s = await shop();
    const { body, order } = await paidOrder(s.m, { amountFen: 1000 });
    assert.equal((await t.sandbox('POST', '/faults', { operation: 'REFUND', outcome: 'REJECT', times: 1 })).statusCode, 201);
    const rf = await api(s.m, 'POST', '/api/open/v1/refunds', {
      outTradeNo: body.outTradeNo,
      outRefundNo: 'RF_refund_failed_1',
      refundAmountFen: 300,
    });
    assert.equal(rf.statusCode, 502, rf.body);
    await waitFor('both events', async () => (await eventsOf(order.openOrderId)).length === 2);
    const got = (await deliveredTo(s.path, 2)).map(payloadOf);
    assert.deepEqual(
      got.map((p) => p.eventType),
      ['PAYMENT_SUCCEEDED', 'REFUND_FAILED'],
    );
    const refund = got[1]!;
    assert.equal(refund.status, 'FAILED');
    assert.equal(refund.eventAmountFen, 300);
    assert.equal(refund.grossAmountFen, 1000);
    assert.equal(refund.outRefundNo, 'RF_refund_failed_1');
    assert.equal(typeof refund.reason, 'string');
    assert.ok((refund.stateVersion as number) > (got[0]!.stateVersion as number));
  });
});

describe('retries', () => {
  test('a receiver failing 3 times gets the event 4 times with the same eventId, on the schedule', async () => {
    const s = await shop();
    rx.on(s.path, (res, n) => res.writeHead(n <= 3 ? 500 : 204).end());
    const { order } = await paidOrder(s.m);
    const [ev] = await eventsOf(order.openOrderId);
    for (let attempt = 1; attempt <= 4; attempt++) {
      await t.workers.tick();
      assert.equal(rx.at(s.path).length, attempt);
      const v = await eventView(ev!.eventId);
      if (attempt === 4) break;
      assert.equal(v.status, 'PENDING');
      assert.equal(v.attempts, attempt);
      assert.equal(v.lastError, 'HTTP 500');
      const wait = Date.parse(v.nextAttemptAt) - Date.parse(v.deliveries.at(-1)!.attemptedAt);
      const base = RETRY_DELAYS_MS[attempt - 1]!;
      assert.ok(wait >= base - 50 && wait <= base * 1.1 + 1000, `wait ${wait} ms after attempt ${attempt} (base ${base})`);
      // Not due yet: nothing is sent.
      clock.advance(base - 2000);
      await t.workers.tick();
      assert.equal(rx.at(s.path).length, attempt, 'not retried before its time');
      clock.advanceTo(Date.parse(v.nextAttemptAt) + 1);
    }
    const got = rx.at(s.path);
    assert.deepEqual(new Set(got.map((r) => r.headers['x-svc-event-id'])), new Set([ev!.eventId]));
    assert.equal(new Set(got.map((r) => r.body)).size, 1, 'the same bytes every time');
    assert.equal(new Set(got.map((r) => r.headers['x-svc-notify-nonce'])).size, 4, 'a fresh nonce every time');
    for (const r of got) assertSigned(r);
    const v = await eventView(ev!.eventId);
    assert.equal(v.status, 'DELIVERED');
    assert.equal(v.lastError, null);
    assert.deepEqual(
      v.deliveries.map((d) => [d.attemptNo, d.statusCode]),
      [
        [1, 500],
        [2, 500],
        [3, 500],
        [4, 204],
      ],
    );
  });

  test("the sandbox makes an event's next attempt its last: failed, it is DEAD at once; then redelivered", async () => {
    const s = await shop();
    rx.on(s.path, (res) => res.writeHead(503).end('down'));
    const { order } = await paidOrder(s.m);
    await t.workers.tick();
    const [ev] = await eventsOf(order.openOrderId);
    await waitFor('the first attempt', async () => (await eventView(ev!.eventId)).deliveries.length === 1);
    assert.equal((await eventView(ev!.eventId)).status, 'PENDING');
    const last = await t.sandbox('POST', `/events/${ev!.eventId}/last-attempt`);
    assert.equal(last.statusCode, 200, last.body);
    assert.deepEqual(last.json(), { eventId: ev!.eventId, status: 'PENDING', attempts: MAX_ATTEMPTS - 1 });
    await t.workers.tick();
    await waitFor('DEAD after the last attempt', async () => (await eventView(ev!.eventId)).status === 'DEAD');
    const v = await eventView(ev!.eventId);
    assert.equal(v.deliveries.length, 2, 'one more attempt, not twelve');
    // Only a pending event; an unknown one is 404.
    const again = await t.sandbox('POST', `/events/${ev!.eventId}/last-attempt`);
    assert.equal(again.statusCode, 409, again.body);
    assert.equal((await t.sandbox('POST', '/events/evt_nope/last-attempt')).statusCode, 404);
    rx.on(s.path, (res) => res.writeHead(200).end());
    assert.equal((await t.admin('POST', `/events/${ev!.eventId}/redeliver`)).statusCode, 202);
    await t.workers.tick();
    await waitFor('delivered after the redelivery', async () => (await eventView(ev!.eventId)).status === 'DELIVERED');
  });

  test('a receiver that never answers 2xx: DEAD after the 12 retries, then redelivered from the back office', async () => {
    const s = await shop();
    rx.on(s.path, (res) => res.writeHead(503).end('down'));
    const { order } = await paidOrder(s.m);
    const [ev] = await eventsOf(order.openOrderId);
    for (let attempt = 1; attempt <= MAX_ATTEMPTS; attempt++) {
      await t.workers.tick();
      assert.equal(rx.at(s.path).length, attempt);
      const v = await eventView(ev!.eventId);
      if (attempt < MAX_ATTEMPTS) clock.advanceTo(Date.parse(v.nextAttemptAt) + 1);
    }
    assert.equal(MAX_ATTEMPTS, 13);
    let v = await eventView(ev!.eventId);
    assert.equal(v.status, 'DEAD');
    assert.equal(v.attempts, 13);
    assert.equal(v.lastError, 'HTTP 503');
    assert.equal(v.deliveries.length, 13);
    const gaps = v.deliveries.slice(1).map((d, i) => Date.parse(d.attemptedAt) - Date.parse(v.deliveries[i]!.attemptedAt));
    gaps.forEach((g, i) => assert.ok(g >= RETRY_DELAYS_MS[i]! && g <= RETRY_DELAYS_MS[i]! * 1.1 + 2000, `gap ${i + 1}: ${g} ms`));
    const total = Date.parse(v.deliveries.at(-1)!.attemptedAt) - Date.parse(v.deliveries[0]!.attemptedAt);
    assert.ok(total >= 47 * 3600_000 && total <= 53 * 3600_000, `about 48 h in all (${total / 3600_000} h)`);

    clock.advance(48 * 3600_000);
    await t.workers.tick();
    assert.equal(rx.at(s.path).length, 13, 'a dead event is not sent again by itself');
    const dead = await t.admin('GET', `/events?status=DEAD&appId=${s.m.appId}`);
    assert.deepEqual(
      dead.json().events.map((e: EventRow) => e.eventId),
      [ev!.eventId],
    );

    rx.on(s.path, (res) => res.writeHead(200).end());
    const re = await t.admin('POST', `/events/${ev!.eventId}/redeliver`);
    assert.equal(re.statusCode, 202, re.body);
    assert.deepEqual(re.json(), { eventId: ev!.eventId, status: 'PENDING' });
    const again = await t.admin('POST', `/events/${ev!.eventId}/redeliver`);
    assert.equal(again.statusCode, 409, 'already queued');
    await t.workers.tick();
    assert.equal(rx.at(s.path).length, 14);
    assertSigned(rx.at(s.path)[13]!);
    v = await eventView(ev!.eventId);
    assert.equal(v.status, 'DELIVERED');
    assert.equal(v.deliveries.length, 14);
    assert.deepEqual([v.deliveries[13]!.attemptNo, v.deliveries[13]!.statusCode], [14, 200]);
  });

  test('an app without notifyUrl: attempts fail with NO_NOTIFY_URL on the schedule; delivered once a URL is set', async () => {
    const m = await provision(t, { app: {} });
    const { order } = await paidOrder(m);
    const [ev] = await eventsOf(order.openOrderId);
    await t.workers.tick();
    let v = await eventView(ev!.eventId);
    assert.equal(v.status, 'PENDING');
    assert.equal(v.lastError, 'NO_NOTIFY_URL');
    assert.deepEqual(
      v.deliveries.map((d) => [d.statusCode, d.error]),
      [[null, 'NO_NOTIFY_URL']],
    );
    // The back office can make them due at once (e.g. when the URL is set) instead of at the next retry.
    assert.equal(await rescheduleAppEvents(t.svc.db, m.appId, new Date(clock.now())), 1);
    await t.workers.tick();
    v = await eventView(ev!.eventId);
    assert.deepEqual(
      v.deliveries.map((d) => d.error),
      ['NO_NOTIFY_URL', 'NO_NOTIFY_URL'],
    );
    assert.equal(v.attempts, 2);
    const path = '/hook/late-url';
    const p = await t.admin('PATCH', `/apps/${m.appId}`, { notifyUrl: rx.url(path) });
    assert.equal(p.statusCode, 200, p.body);
    clock.advanceTo(Date.parse(v.nextAttemptAt) + 1);
    await t.workers.tick();
    assert.equal(rx.at(path).length, 1);
    assertSigned(rx.at(path)[0]!);
    v = await eventView(ev!.eventId);
    assert.equal(v.status, 'DELIVERED');
  });
  test('an unavailable platform signing key sends nothing and costs no attempt', async () => {
    const s = await shop();
    const { order } = await paidOrder(s.m);
    const [ev] = await eventsOf(order.openOrderId);
    t.svc.keys.unavailable = true;
    try {
      await t.workers.tick();
    } finally {
      t.svc.keys.unavailable = false;
    }
    assert.equal(rx.at(s.path).length, 0);
    let v = await eventView(ev!.eventId);
    assert.equal(v.status, 'PENDING');
    assert.equal(v.attempts, 0);
    assert.equal(v.lastError, 'SIGNING_KEY_UNAVAILABLE');
    assert.deepEqual(v.deliveries, []);
    clock.advanceTo(Date.parse(v.nextAttemptAt) + 1);
    await t.workers.tick();
    assert.equal(rx.at(s.path).length, 1);
    v = await eventView(ev!.eventId);
    assert.equal(v.status, 'DELIVERED');
    assert.equal(v.deliveries.length, 1);
  });
});

describe('safety and isolation', () => {
  test('a redirect is not followed: the 3xx is a failed attempt', async () => {
    const s = await shop();
    const target = `${s.path}/moved`;
    rx.on(s.path, (res) => res.writeHead(302, { location: rx.url(target) }).end());
    const { order } = await paidOrder(s.m);
    await t.workers.tick();
    assert.equal(rx.at(s.path).length, 1);
    assert.equal(rx.at(target).length, 0, 'the Location is never requested');
    const [ev] = await eventsOf(order.openOrderId);
    const v = await eventView(ev!.eventId);
    assert.equal(v.status, 'PENDING');
    assert.equal(v.attempts, 1);
    assert.deepEqual(
      v.deliveries.map((d) => [d.statusCode, d.error]),
      [[302, 'REDIRECT_NOT_FOLLOWED']],
    );
    rx.on(s.path, (res) => res.writeHead(200).end());
    clock.advanceTo(Date.parse(v.nextAttemptAt) + 1);
    await t.workers.tick();
    assert.equal((await eventView(ev!.eventId)).status, 'DELIVERED');
  });

  test('a slow receiver times out (a failed attempt) without holding up other apps', async () => {
    const slow = await shop();
    const fast = await shop();
    rx.hold(slow.path);
    const { order } = await paidOrder(slow.m);
    await paidOrder(fast.m);
    const d = createDispatcher(t.svc, { timeoutMs: 400, maxWaitMs: 5_000 });
    await d.run();
    assert.equal(rx.at(fast.path).length, 1);
    assert.equal(rx.at(slow.path).length, 1);
    const [ev] = await eventsOf(order.openOrderId);
    const v = await eventView(ev!.eventId);
    assert.equal(v.status, 'PENDING');
    assert.deepEqual(
      v.deliveries.map((x) => [x.statusCode, x.error]),
      [[null, 'TIMEOUT']],
    );
    assert.ok(v.deliveries[0]!.durationMs >= 350, 'the attempt lasted until its timeout');
    rx.release();
    rx.on(slow.path, (res) => res.writeHead(200).end());
    clock.advanceTo(Date.parse(v.nextAttemptAt) + 1);
    await t.workers.tick();
    assert.equal((await eventView(ev!.eventId)).status, 'DELIVERED');
  });

  test('a retry starts on its step, not up to a tick (or the wait for a hanging receiver) later: the workers are woken when it comes due', async () => {
    const slow = await shop();
    const flaky = await shop();
    rx.hold(slow.path);
    rx.on(flaky.path, (res, n) => res.writeHead(n === 1 ? 500 : 200).end());
    const { order } = await paidOrder(flaky.m);
    await paidOrder(slow.m);
    const maxWaitMs = 2_500;
    const d = createDispatcher(t.svc, { timeoutMs: 20_000, maxWaitMs });
    const wakes: number[] = [];
    const wakeWorkers = t.svc.wakeWorkers;
    t.svc.wakeWorkers = () => wakes.push(clock.now());
    try {
      await d.run(); // the flaky app's first attempt fails; the slow app's hangs
      await waitFor(
        'the failed first attempt recorded',
        async () => (await eventView((await eventsOf(order.openOrderId))[0]!.eventId)).deliveries.length === 1,
      );
      const [ev] = await eventsOf(order.openOrderId);
      const due = Date.parse((await eventView(ev!.eventId)).nextAttemptAt);
      clock.advanceTo(due - 400); // the retry comes due in 400 ms (real time)
      wakes.length = 0;
      const ended = await Promise.race([
        d.run().then(() => 'when the retry came due'),
        new Promise((r) => setTimeout(r, maxWaitMs).unref()).then(() => 'after maxWaitMs'),
      ]);
      assert.equal(ended, 'when the retry came due', 'the run ended when the retry came due, not after maxWaitMs');
      // Only the dispatcher's timer wakes the workers here (no tick runs): a wake, at the due time or after.
      await waitFor('the wake at the due time', async () => wakes.length > 0, 2000);
      assert.ok(wakes[0]! >= due, `woken ${wakes[0]! - due} ms after the due time`);
      await d.run();
      await waitFor('the retry', async () => rx.at(flaky.path).length === 2);
      const v = await eventView(ev!.eventId);
      assert.equal(v.status, 'DELIVERED');
      assert.ok(Date.parse(v.deliveries[1]!.attemptedAt) >= due, 'the retry started on its step, not before');
      assert.equal(rx.heldCount, 1, 'the slow receiver still hangs meanwhile');
    } finally {
      t.svc.wakeWorkers = wakeWorkers;
      rx.on(slow.path, (res) => res.writeHead(200).end());
      rx.release();
      await d.idle();
    }
  });

  test('a notifyUrl change while an attempt hangs on the old URL: the event goes to the new URL as soon as that attempt ends', async () => {
    const s = await shop();
    rx.hold(s.path);
    const { order } = await paidOrder(s.m);
    const d = createDispatcher(t.svc, { timeoutMs: 400, maxWaitMs: 100 });
    await d.run();
    await waitFor('the attempt on the old URL', async () => rx.heldCount === 1);
    const moved = `${s.path}/moved`;
    const p = await t.admin('PATCH', `/apps/${s.m.appId}`, { notifyUrl: rx.url(moved) });
    assert.equal(p.statusCode, 200, p.body);
    // The attempt on the old URL times out; the event is due at once (not at the next retry step),
    // and the dispatcher's pump sends it to the new URL right away.
    await d.idle();
    const [ev] = await eventsOf(order.openOrderId);
    const v = await eventView(ev!.eventId);
    assert.deepEqual(
      v.deliveries.map((x) => x.error),
      ['TIMEOUT', null],
    );
    assert.equal(rx.at(moved).length, 1);
    assertSigned(rx.at(moved)[0]!);
    assert.equal(v.status, 'DELIVERED');
    rx.release();
  });

  test('at most 4 events of one app in flight; a run returns while they hang and other apps are served', async () => {
    const slow = await shop();
    const fast = await shop();
    rx.hold(slow.path);
    for (let i = 0; i < 6; i++) await paidOrder(slow.m);
    for (let i = 0; i < 2; i++) await paidOrder(fast.m);
    const d = createDispatcher(t.svc, { timeoutMs: 10_000, maxWaitMs: 300 });
    await d.run();
    // Had the run waited for the slow receiver, its attempts would have ended (timed out) and let go of their events.
    assert.ok((await leased(slow.m.appId)) > 0, 'the run returned while the slow receiver holds its attempts');
    await waitFor('the fast app', async () => rx.at(fast.path).length === 2);
    await waitFor('4 slow requests', async () => rx.heldCount === 4);
    // A run claims before it returns: what it did not lease, it will not send.
    await d.run();
    assert.equal(await leased(slow.m.appId), 4, 'no fifth event leased while 4 are in flight');
    // A second instance respects the same per-app limit (leases are in the database).
    const other = createDispatcher(t.svc, { timeoutMs: 10_000, maxWaitMs: 300 });
    await other.run();
    assert.equal(await leased(slow.m.appId), 4);
    assert.equal(rx.at(slow.path).length, 4);

    rx.on(slow.path, (res) => res.writeHead(200).end());
    rx.release();
    await d.idle();
    await d.run();
    await d.idle();
    assert.equal(rx.at(slow.path).length, 6);
    const ids = rx.at(slow.path).map((r) => r.headers['x-svc-event-id']);
    assert.equal(new Set(ids).size, 6, 'each event sent once');
  });

  test('an app whose receiver failed twice and hangs on one delivery: its new events and its retries keep their times', async () => {
    const s = await shop();
    const held: import('node:http').ServerResponse[] = [];
    // The first request hangs, the next two fail (the app's limit halves twice), the rest succeed.
    rx.on(s.path, (res, n) => {
      if (n === 1) held.push(res);
      else res.writeHead(n <= 3 ? 500 : 200).end();
    });
    for (let i = 0; i < 3; i++) await paidOrder(s.m);
    const d = createDispatcher(t.svc, { timeoutMs: 20_000, maxWaitMs: 300 });
    try {
      await d.run();
      await waitFor('one hanging, two failed', async () => rx.at(s.path).length === 3);
      await paidOrder(s.m);
      await d.run();
      await waitFor('a new event sent while the first hangs', async () => rx.at(s.path).length === 4, 3000);
      clock.advance(RETRY_DELAYS_MS[0]! + 1);
      await d.run();
      await waitFor('both retries sent on their step while the first still hangs', async () => rx.at(s.path).length === 6, 3000);
      assert.equal(held.filter((r) => !r.writableEnded).length, 1, 'the first delivery still hangs');
    } finally {
      for (const r of held) if (!r.writableEnded) r.writeHead(200).end();
      rx.on(s.path, (res) => res.writeHead(200).end());
      await d.idle();
    }
  });

  test('five apps whose receivers hang hold 20 slots: an app whose event comes due meanwhile is served at once', async () => {
    const hanging: Shop[] = [];
    for (let i = 0; i < 5; i++) {
      const s = await shop();
      rx.hold(s.path);
      for (let j = 0; j < 4; j++) await paidOrder(s.m);
      hanging.push(s);
    }
    const d = createDispatcher(t.svc, { timeoutMs: 10_000, maxWaitMs: 300 });
    await d.run();
    await waitFor('20 attempts hanging', async () => rx.heldCount === 20);
    const healthy = await shop();
    await paidOrder(healthy.m);
    await d.run();
    await waitFor('the healthy app served while the others hang', async () => rx.at(healthy.path).length === 1, 3000);
    assert.equal(rx.heldCount, 20);
    for (const s of hanging) rx.on(s.path, (res) => res.writeHead(200).end());
    rx.release();
    await d.idle();
  });

  test('events of one order arrive in increasing stateVersion, even when an earlier one needs a retry', async () => {
    const s = await shop();
    rx.on(s.path, (res, n) => res.writeHead(n === 1 ? 500 : 200).end());
    const { body, order } = await paidOrder(s.m);
    for (const [no, amount] of [
      ['RF_order_seq_1', 100],
      ['RF_order_seq_2', 200],
    ] as const) {
      const r = await api(s.m, 'POST', '/api/open/v1/refunds', { outTradeNo: body.outTradeNo, outRefundNo: no, refundAmountFen: amount });
      assert.equal(r.statusCode, 201, r.body);
    }
    await settleRefunds();
    assert.equal((await eventsOf(order.openOrderId)).length, 3, 'both refunds settled');
    await t.workers.tick();
    assert.equal(rx.at(s.path).length, 1, 'only the first event is attempted while it is pending');
    await t.workers.tick();
    assert.equal(rx.at(s.path).length, 1, 'later events wait for the earlier one');
    const [first] = await eventsOf(order.openOrderId);
    clock.advanceTo(Date.parse(first!.nextAttemptAt) + 1);
    for (let i = 0; i < 5 && rx.at(s.path).length < 4; i++) await t.workers.tick();
    const versions = rx.at(s.path).map((r) => JSON.parse(r.body).stateVersion as number);
    assert.equal(versions.length, 4);
    assert.equal(versions[0], versions[1], 'the retried first event');
    assert.ok(versions[1]! < versions[2]! && versions[2]! < versions[3]!, `increasing: ${versions.join(', ')}`);
    assert.deepEqual(
      rx.at(s.path).map((r) => JSON.parse(r.body).eventType),
      ['PAYMENT_SUCCEEDED', 'PAYMENT_SUCCEEDED', 'REFUND_SUCCEEDED', 'REFUND_SUCCEEDED'],
    );
  });

  test('a notifyUrl resolving to a private address is refused at delivery', async () => {
    const m = await provision(t, { app: { notifyUrl: 'https://hooks.private-shop.example/notify' } });
    const { order } = await paidOrder(m);
    const lookups: string[] = [];
    const d = createDispatcher(t.svc, {
      resolver: async (host) => {
        lookups.push(host);
        return host === 'hooks.private-shop.example' ? [{ address: '10.20.30.40', family: 4 }] : [];
      },
    });
    await d.run();
    await d.idle();
    assert.deepEqual(lookups, ['hooks.private-shop.example']);
    const [ev] = await eventsOf(order.openOrderId);
    const v = await eventView(ev!.eventId);
    assert.equal(v.status, 'PENDING');
    assert.equal(v.deliveries.length, 1);
    assert.equal(v.deliveries[0]!.statusCode, null);
    assert.match(v.deliveries[0]!.error!, /^ADDRESS_NOT_ALLOWED: address 10\.20\.30\.40 /);
  });
});

describe('durability', () => {
  test('two instances delivering at once send each event once', async () => {
    const a = await shop();
    const b = await shop();
    for (let i = 0; i < 6; i++) await paidOrder(a.m);
    for (let i = 0; i < 3; i++) await paidOrder(b.m);
    const d1 = createDispatcher(t.svc);
    const d2 = createDispatcher(t.svc);
    for (let round = 0; round < 5 && rx.at(a.path).length + rx.at(b.path).length < 9; round++) {
      await Promise.all([d1.run(), d2.run()]);
    }
    await Promise.all([d1.idle(), d2.idle()]);
    const ids = [...rx.at(a.path), ...rx.at(b.path)].map((r) => r.headers['x-svc-event-id']);
    assert.equal(ids.length, 9);
    assert.equal(new Set(ids).size, 9);
  });

  test('an event committed before a crash is delivered by the next instance; an abandoned lease is taken over', async () => {
    const c2 = new FakeClock();
    const t1 = await startTestApp({}, { clock: c2 });
    try {
      const path = '/hook/restart';
      const m = await provision(t1, { app: { notifyUrl: rx.url(path) } });
      const body = orderBody();
      const r = await call(t1, m, 'POST', '/api/open/v1/payments', body);
      assert.equal(r.statusCode, 201, r.body);
      assert.equal((await t1.sandbox('POST', `/payments/${r.json().openOrderId}/pay`)).statusCode, 200);
      const second = await call(t1, m, 'POST', '/api/open/v1/payments', orderBody());
      assert.equal((await t1.sandbox('POST', `/payments/${second.json().openOrderId}/pay`)).statusCode, 200);
      // The first instance dies with both events committed and undelivered, one of them claimed.
      await t1.svc.db.query(`UPDATE events SET locked_by = 'dsp_crashed.1', locked_until = $2 WHERE order_id = $1`, [
        second.json().openOrderId,
        new Date(c2.now() + 60_000),
      ]);
      await t1.close();
      assert.equal(rx.at(path).length, 0);

      const t2 = await reopenApp(t1, c2);
      try {
        await t2.workers.tick();
        assert.equal(rx.at(path).length, 1, 'the unclaimed event is delivered; the leased one waits for its lease');
        const k = await t2.server.inject({
          method: 'GET',
          url: '/api/admin/v1/platform-keys',
          headers: { authorization: `Bearer ${t2.adminToken}` },
        });
        assertSigned(rx.at(path)[0]!, k.json().keys);
        assert.equal(JSON.parse(rx.at(path)[0]!.body).outTradeNo, body.outTradeNo);
        c2.advance(61_000);
        await t2.workers.tick();
        assert.equal(rx.at(path).length, 2);
        const ev = await t2.svc.db.query(`SELECT status, count(*)::int AS n FROM events GROUP BY status`);
        assert.deepEqual(ev.rows, [{ status: 'DELIVERED', n: 2 }]);
      } finally {
        await t2.close();
      }
    } finally {
      await t1.stop();
    }
  });
});
