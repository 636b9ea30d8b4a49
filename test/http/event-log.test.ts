/**
 * The merchant's event log through the signed open API (docs/events.md, "Your event log"): the
 * app's events newest first with filters and cursor pages, each with its payload as delivered and
 * its delivery attempts (status, error, a short excerpt of the answer); asking for one to be
 * delivered again (the same eventId and body, signed afresh; request-id replay; rate-limited);
 * another app's events are the neutral 404.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { verifyNotification, verifyResponseSignature } from '@mps/sdk';
import { type Merchant, type TestApp, call, orderBody, provision, requestId, startTestApp } from '../helpers/app.ts';
import { FakeClock, Receiver, waitFor } from '../helpers/events.ts';

const clock = new FakeClock();
let t: TestApp;
let rx: Receiver;
let shop: Merchant;
let other: Merchant;
let platformKeys: Record<string, string>;
const paid: { outTradeNo: string; openOrderId: string }[] = [];

const api = (m: Merchant, method: string, url: string, o: { requestId?: string } = {}) =>
  call(t, m, method, url, undefined, { timestamp: String(Math.floor(clock.now() / 1000)), ...o });

type Json = Record<string, unknown> & { events: Record<string, unknown>[]; nextCursor: string | null };

before(async () => {
  rx = await Receiver.start();
  t = await startTestApp({}, { clock });
  const k = await t.admin('GET', '/platform-keys');
  platformKeys = Object.fromEntries((k.json().keys as { keyId: string; publicKeyPem: string }[]).map((x) => [x.keyId, x.publicKeyPem]));
  shop = await provision(t, { app: { notifyUrl: rx.url('/shop') } });
  other = await provision(t, { app: { notifyUrl: rx.url('/other') } });
  // The first attempt of each event is refused with a long answer, the second acknowledged.
  const tries = new Map<string, number>();
  rx.on('/shop', (res, _n, req) => {
    const id = String(req.headers['x-svc-event-id']);
    tries.set(id, (tries.get(id) ?? 0) + 1);
    if (tries.get(id) === 1) res.writeHead(500).end(`refused: ${'x'.repeat(5000)}`);
    else res.writeHead(200).end('ok');
  });
  for (let i = 0; i < 5; i++) {
    const body = orderBody({ amountFen: 100 + i });
    const c = await call(t, shop, 'POST', '/api/open/v1/payments', body, { timestamp: String(Math.floor(clock.now() / 1000)) });
    assert.equal(c.statusCode, 201, c.body);
    assert.equal((await t.sandbox('POST', `/payments/${c.json().openOrderId}/pay`)).statusCode, 200);
    paid.push({ outTradeNo: body.outTradeNo as string, openOrderId: c.json().openOrderId });
    clock.advance(1000);
  }
  const closed = orderBody();
  await call(t, shop, 'POST', '/api/open/v1/payments', closed, { timestamp: String(Math.floor(clock.now() / 1000)) });
  await call(t, shop, 'POST', `/api/open/v1/payments/${closed.outTradeNo}/close`, undefined, {
    timestamp: String(Math.floor(clock.now() / 1000)),
  });
  const o = orderBody();
  const c = await call(t, other, 'POST', '/api/open/v1/payments', o, { timestamp: String(Math.floor(clock.now() / 1000)) });
  await t.sandbox('POST', `/payments/${c.json().openOrderId}/pay`);
  // First attempts (refused), then, 15 s later, the retries (acknowledged); at most 4 events of an
  // app are in flight at once, so a pass may not send them all.
  const sent = (n: number) => async () => {
    await t.workers.tick();
    return rx.at('/shop').length >= n;
  };
  await waitFor('the first attempts', sent(6));
  clock.advance(16_000);
  await waitFor('the retries', sent(12));
});
after(async () => {
  await t.stop();
  await rx.close();
});

function signed(r: { statusCode: number; headers: Record<string, unknown>; rawPayload: Buffer }): void {
  const v = verifyResponseSignature({
    status: r.statusCode,
    headers: r.headers as Record<string, string>,
    body: r.rawPayload,
    platformPublicKeys: platformKeys,
  });
  assert.equal(v.signed, true);
}

describe('the list', () => {
  test('newest first, each with its payload as delivered and its last attempt', async () => {
    const r = await api(shop, 'GET', '/api/open/v1/events?limit=100');
    assert.equal(r.statusCode, 200, r.body);
    signed(r);
    const b = r.json() as Json;
    assert.equal(b.events.length, 6);
    assert.equal(b.nextCursor, null);
    const times = b.events.map((e) => `${e.occurredAt}|${e.eventId}`);
    assert.deepEqual(times, [...times].sort().reverse());
    const first = b.events.find((e) => e.eventType === 'PAYMENT_SUCCEEDED')!;
    assert.equal(first.status, 'DELIVERED');
    assert.equal(first.deliveryAttempts, 2);
    assert.deepEqual(
      { ...(first.lastAttempt as object), attemptedAt: undefined, durationMs: undefined },
      {
        attemptNo: 2,
        attemptedAt: undefined,
        httpStatus: 200,
        error: null,
        durationMs: undefined,
        responseExcerpt: 'ok',
      },
    );
    const delivered = rx.at('/shop').find((x) => x.headers['x-svc-event-id'] === first.eventId)!;
    assert.deepEqual(first.payload, JSON.parse(delivered.body));
    assert.ok(b.events.every((e) => (e.payload as { appId: string }).appId === shop.appId));
  });

  test('filters: type, status, time range', async () => {
    const byType = (await api(shop, 'GET', '/api/open/v1/events?type=PAYMENT_CLOSED')).json() as Json;
    assert.deepEqual(
      byType.events.map((e) => e.eventType),
      ['PAYMENT_CLOSED'],
    );
    const dead = (await api(shop, 'GET', '/api/open/v1/events?status=DEAD')).json() as Json;
    assert.equal(dead.events.length, 0);
    const all = ((await api(shop, 'GET', '/api/open/v1/events?limit=100')).json() as Json).events;
    const mid = all[3]!.occurredAt as string;
    const newer = (await api(shop, 'GET', `/api/open/v1/events?from=${encodeURIComponent(mid)}&limit=100`)).json() as Json;
    const older = (await api(shop, 'GET', `/api/open/v1/events?to=${encodeURIComponent(mid)}&limit=100`)).json() as Json;
    assert.ok(newer.events.every((e) => (e.occurredAt as string) >= mid));
    assert.ok(older.events.every((e) => (e.occurredAt as string) < mid));
    assert.equal(newer.events.length + older.events.length, all.length);
    // RFC 3339 as it comes: lower case, a fraction past the millisecond (rounded up: the events'
    // times are whole milliseconds).
    const list = async (q: string) => {
      const r = await api(shop, 'GET', `/api/open/v1/events?${q}&limit=100`);
      assert.equal(r.statusCode, 200, `${q}: ${r.body}`);
      return ((r.json() as Json).events as { eventId: string }[]).map((e) => e.eventId);
    };
    const ids = (j: Json) => (j.events as { eventId: string }[]).map((e) => e.eventId);
    assert.deepEqual(await list(`from=${encodeURIComponent(mid.replace('Z', '000Z'))}`), ids(newer));
    assert.deepEqual(await list(`from=${encodeURIComponent(mid.replace('T', 't').replace('Z', 'z'))}`), ids(newer));
    const atMid = all.filter((e) => e.occurredAt === mid).length;
    assert.equal((await list(`from=${encodeURIComponent(mid.replace('Z', '001Z'))}`)).length, newer.events.length - atMid);
    assert.deepEqual(
      await list(`to=${encodeURIComponent(mid.replace('Z', '000001Z'))}`),
      [...ids(older), ...all.filter((e) => e.occurredAt === mid).map((e) => e.eventId as string)].sort(
        (a, b) => all.findIndex((e) => e.eventId === a) - all.findIndex((e) => e.eventId === b),
      ),
    );
  });

  test('cursor pages cover every event once, in order', async () => {
    const seen: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const r = await api(shop, 'GET', `/api/open/v1/events?limit=4${cursor ? `&cursor=${cursor}` : ''}`);
      assert.equal(r.statusCode, 200, r.body);
      const b = r.json() as Json;
      seen.push(...b.events.map((e) => e.eventId as string));
      cursor = b.nextCursor;
      pages++;
    } while (cursor !== null);
    assert.equal(pages, 2);
    const all = ((await api(shop, 'GET', '/api/open/v1/events?limit=100')).json() as Json).events.map((e) => e.eventId);
    assert.deepEqual(seen, all);
  });

  test('a query outside its form: 400 OPEN_API_BODY_INVALID naming the parameter', async () => {
    for (const [q, field] of [
      ['type=PAYMENT', 'type'],
      ['status=SENT', 'status'],
      ['from=yesterday', 'from'],
      ['from=2026-11-22T24:00:00Z', 'from'],
      ['to=2026-11-22T24:00:00.000%2B08:00', 'to'],
      ['from=2026-02-30T00:00:00Z', 'from'],
      ['to=2026-11-22T10:00:00%2B24:00', 'to'],
      ['from=2026-01-02T00:00:00Z&to=2026-01-01T00:00:00Z', 'to'],
      ['limit=0', 'limit'],
      ['limit=101', 'limit'],
      ['limit=1.5', 'limit'],
      ['cursor=abc', 'cursor'],
      // the form of a cursor, with a day its month has not
      [`cursor=${Buffer.from('2026-02-30T00:00:00.000Z|evt_0000000000000000000000').toString('base64url')}`, 'cursor'],
      ['limit=5&limit=6', 'limit'],
      ['page=2', 'page'],
    ]) {
      const r = await api(shop, 'GET', `/api/open/v1/events?${q}`);
      assert.equal(r.statusCode, 400, `${q}: ${r.body}`);
      assert.equal(r.json().code, 'OPEN_API_BODY_INVALID');
      assert.equal(r.json().details.field, field, q);
      signed(r);
    }
  });
});

describe('one event', () => {
  test('its delivery attempts: time, status or error, an excerpt of the answer and nothing more', async () => {
    const list = ((await api(shop, 'GET', '/api/open/v1/events?type=PAYMENT_SUCCEEDED&limit=1')).json() as Json).events;
    const r = await api(shop, 'GET', `/api/open/v1/events/${list[0]!.eventId}`);
    assert.equal(r.statusCode, 200, r.body);
    signed(r);
    const e = r.json();
    assert.equal(e.deliveries.length, 2);
    const [refused, acked] = e.deliveries;
    assert.equal(refused.attemptNo, 1);
    assert.equal(refused.httpStatus, 500);
    assert.equal(refused.error, null, 'an answer came back: its status says it all');
    assert.equal(refused.responseExcerpt, `refused: ${'x'.repeat(191)}`);
    assert.equal([...refused.responseExcerpt].length, 200);
    assert.equal(acked.httpStatus, 200);
    assert.equal(acked.error, null);
    assert.ok(Date.parse(acked.attemptedAt) > Date.parse(refused.attemptedAt));
  });

  test("another app's event, or an id that is not one: the neutral 404", async () => {
    const mine = ((await api(shop, 'GET', '/api/open/v1/events?limit=1')).json() as Json).events[0]!.eventId as string;
    const theirs = ((await api(other, 'GET', '/api/open/v1/events')).json() as Json).events;
    assert.equal(theirs.length, 1, 'the other app lists only its own event');
    assert.notEqual(theirs[0]!.eventId, mine);
    for (const [m, path] of [
      [other, `/api/open/v1/events/${mine}`],
      [other, `/api/open/v1/events/${mine}/redeliveries`],
      [shop, '/api/open/v1/events/evt_nope'],
      [shop, '/api/open/v1/events/ord_0123456789abcdef'],
      [shop, '/api/open/v1/events/%ZZ'],
    ] as const) {
      const r = await api(m, path.endsWith('redeliveries') ? 'POST' : 'GET', path);
      assert.equal(r.statusCode, 404, `${path}: ${r.body}`);
      assert.deepEqual(Object.keys(r.json()).sort(), ['code', 'message', 'requestId']);
      assert.equal(r.json().code, 'OPEN_API_NOT_FOUND');
    }
  });
});

describe('delivering an event again', () => {
  test('the same eventId and body, signed afresh; the answer replayed for the same request id; then rate-limited', async () => {
    const e = ((await api(shop, 'GET', '/api/open/v1/events?type=PAYMENT_SUCCEEDED&limit=1')).json() as Json).events[0]!;
    const before = rx.at('/shop').filter((x) => x.headers['x-svc-event-id'] === e.eventId);
    const id = requestId();
    const r = await api(shop, 'POST', `/api/open/v1/events/${e.eventId}/redeliveries`, { requestId: id });
    assert.equal(r.statusCode, 202, r.body);
    signed(r);
    assert.deepEqual(Object.keys(r.json()).sort(), ['eventId', 'nextAttemptAt', 'requestId', 'status']);
    assert.equal(r.json().status, 'PENDING');
    // The same request id: the first answer, byte for byte (a POST's request-id replay), nothing queued twice.
    const again = await api(shop, 'POST', `/api/open/v1/events/${e.eventId}/redeliveries`, { requestId: id });
    assert.equal(again.statusCode, 202);
    assert.equal(again.body, r.body);
    // A new request within the minute: 429 with Retry-After.
    const soon = await api(shop, 'POST', `/api/open/v1/events/${e.eventId}/redeliveries`);
    assert.equal(soon.statusCode, 429, soon.body);
    assert.equal(soon.json().code, 'OPEN_API_RATE_LIMITED');
    assert.ok(Number(soon.headers['retry-after']) >= 1 && Number(soon.headers['retry-after']) <= 60);
    signed(soon);

    await t.workers.tick();
    const sent = await waitFor('the redelivery', async () => {
      const now = rx.at('/shop').filter((x) => x.headers['x-svc-event-id'] === e.eventId);
      return now.length > before.length ? now : null;
    });
    const last = sent[sent.length - 1]!;
    assert.equal(last.body, before[0]!.body, 'the same body');
    const payload = verifyNotification({
      headers: last.headers as Record<string, string>,
      rawBody: Buffer.from(last.body),
      platformPublicKeys: platformKeys,
      now: () => clock.now(),
    });
    assert.equal(payload.eventId, e.eventId);
    const detail = (await api(shop, 'GET', `/api/open/v1/events/${e.eventId}`)).json();
    assert.equal(detail.deliveries.length, 3);
    assert.equal(detail.status, 'DELIVERED');

    clock.advance(61_000);
    assert.equal((await api(shop, 'POST', `/api/open/v1/events/${e.eventId}/redeliveries`)).statusCode, 202, 'a minute later');
  });

  test('at most 20 events of an app a minute', async () => {
    const busy = await provision(t, { name: 'Busy Shop' });
    const ts = () => ({ timestamp: String(Math.floor(clock.now() / 1000)) });
    for (let i = 0; i < 21; i++) {
      const o = orderBody();
      assert.equal((await call(t, busy, 'POST', '/api/open/v1/payments', o, ts())).statusCode, 201);
      assert.equal((await call(t, busy, 'POST', `/api/open/v1/payments/${o.outTradeNo}/close`, undefined, ts())).statusCode, 200);
    }
    const ids = ((await api(busy, 'GET', '/api/open/v1/events?limit=100')).json() as Json).events.map((e) => e.eventId as string);
    assert.equal(ids.length, 21);
    const answers = [];
    for (const id of ids) answers.push((await api(busy, 'POST', `/api/open/v1/events/${id}/redeliveries`)).statusCode);
    assert.deepEqual(answers, [...Array(20).fill(202), 429]);
    clock.advance(61_000);
    assert.equal((await api(busy, 'POST', `/api/open/v1/events/${ids[20]}/redeliveries`)).statusCode, 202, 'a minute later');
  });
});
