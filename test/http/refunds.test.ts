/**
 * Create refund and query refund over signed HTTP (seed "Create refund", "Query refund",
 * "States and transitions"; decisions.md sections 4-7): strict schema, state rule, neutral 404,
 * the RefundProjection, outRefundNo idempotency, the cumulative limit (also under concurrency on
 * PostgreSQL), the provider faults (REJECT -> 502 and FAILED, TIMEOUT -> UNKNOWN then converged,
 * PAID -> settled at once) and the order's shared stateVersion.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { LightMyRequestResponse } from 'fastify';
import {
  type Merchant,
  type TestApp,
  call,
  merchantKeyPair,
  orderBody,
  provision,
  requestId,
  makeJobDue,
  startTestApp,
  tradeNo,
} from '../helpers/app.ts';
import { handleProviderNotification } from '../../src/usecases/notifications.ts';
import { REFUND_SETTLE_MS } from '../../src/providers/sandbox/sandbox.ts';
import { refundDigest } from '../../src/domain/order-input.ts';
import { reserveRefund as reserveRefundRow } from '../../src/store/refunds.ts';
import { FakeClock } from '../helpers/events.ts';

const REFUNDS = '/api/open/v1/refunds';
const RFC3339_MS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const PROJECTION_KEYS = [
  'amountFen',
  'createdAt',
  'openOrderId',
  'outRefundNo',
  'outTradeNo',
  'reason',
  'refundAttemptId',
  'replayed',
  'requestId',
  'state',
  'unknown',
  'updatedAt',
];

let t: TestApp;
const clock = new FakeClock();
let m: Merchant;
/** Another merchant (its own app). */
let other: Merchant;
/** A second app of the same merchant as `m`. */
let sibling: Merchant;

before(async () => {
  t = await startTestApp({}, { clock });
  // A high rate limit: the concurrency tests fire dozens of requests at once.
  m = await provision(t, { app: { rateLimitPerSecond: 100_000 } });
  other = await provision(t);
  const a = await t.admin('POST', `/merchants/${m.merchantId}/apps`, {});
  assert.equal(a.statusCode, 201, a.body);
  const appId = a.json().appId as string;
  const k = await t.admin('POST', `/apps/${appId}/keys`, { keyId: m.keyId, publicKeyPem: merchantKeyPair().publicKeyPem });
  assert.equal(k.statusCode, 201, k.body);
  sibling = { ...m, appId };
});
after(() => t.stop());

let refundSeq = 0;
function refundNo(prefix = 'RF'): string {
  return `${prefix}_${Date.now().toString(36)}_${(refundSeq++).toString(36)}`;
}

/** Creates an order and has the sandbox buyer pay it; returns the order snapshot. */
async function paidOrder(amountFen = 1000, mch: Merchant = m): Promise<{ outTradeNo: string; openOrderId: string }> {
  const body = orderBody({ amountFen });
  const r = await call(t, mch, 'POST', '/api/open/v1/payments', body);
  assert.equal(r.statusCode, 201, r.body);
  const openOrderId = r.json().openOrderId as string;
  const pay = await t.sandbox('POST', `/payments/${openOrderId}/pay`);
  assert.equal(pay.statusCode, 200, pay.body);
  assert.equal(pay.json().status, 'SUCCEEDED');
  return { outTradeNo: body.outTradeNo as string, openOrderId };
}

function refund(body: unknown, mch: Merchant = m, o: Parameters<typeof call>[5] = {}): Promise<LightMyRequestResponse> {
  return call(t, mch, 'POST', REFUNDS, body, o);
}

function queryRefund(outRefundNo: string, mch: Merchant = m): Promise<LightMyRequestResponse> {
  return call(t, mch, 'GET', `${REFUNDS}/${outRefundNo}`);
}

async function adminOrder(openOrderId: string): Promise<{
  stateVersion: number;
  refunds: { state: string; amountFen: number }[];
  events: { eventType: string; stateVersion: number }[];
}> {
  const r = await t.admin('GET', `/orders/${openOrderId}`);
  assert.equal(r.statusCode, 200, r.body);
  return r.json();
}

async function fault(operation: string, outcome: string, times = 1, delayMs?: number): Promise<void> {
  const r = await t.sandbox('POST', '/faults', { operation, outcome, times, ...(delayMs !== undefined ? { delayMs } : {}) });
  assert.equal(r.statusCode, 201, r.body);
}

/**
 * The sandbox's time passes its refunds' settlement (REFUND_SETTLE_MS after acceptance) and it
 * sends their settlement notices; answers the refund as queried then, asserted SUCCEEDED.
 */
async function settleRefund(outRefundNo: string): Promise<Record<string, unknown>> {
  clock.advance(REFUND_SETTLE_MS);
  await t.svc.sandbox!.sendDueRefundNotices(1000);
  const q = await queryRefund(outRefundNo);
  assert.equal(q.statusCode, 200, q.body);
  assert.equal(q.json().state, 'SUCCEEDED', `refund ${outRefundNo} settled`);
  return q.json();
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

function withoutRequestId(body: string): Record<string, unknown> {
  const { requestId: _omit, ...rest } = JSON.parse(body) as Record<string, unknown>;
  return rest;
}

function assertFailure(r: LightMyRequestResponse, status: number, code: string): Record<string, unknown> {
  assert.equal(r.statusCode, status, r.body);
  const b = r.json();
  assert.equal(b.code, code, r.body);
  assert.equal(typeof b.message, 'string');
  assert.equal(b.requestId, r.headers['x-svc-request-id'], 'the failure carries the request id in body and header');
  return b;
}

describe('create refund: strict schema (400 OPEN_API_BODY_INVALID, nothing changes)', () => {
  test('every violated constraint is a 400 and leaves the order and the refund number untouched', async () => {
    const o = await paidOrder(1000);
    const before = await adminOrder(o.openOrderId);
    const no = refundNo();
    const ok = { outTradeNo: o.outTradeNo, outRefundNo: no, refundAmountFen: 100, reason: 'damaged' };
    const { outTradeNo: _a, ...noTrade } = ok;
    const { outRefundNo: _b, ...noRefundNo } = ok;
    const { refundAmountFen: _c, ...noAmount } = ok;
    const bad: [string, unknown][] = [
      ['unknown field', { ...ok, currency: 'CNY' }],
      ['unknown nested-looking field', { ...ok, 'refund.amount': 1 }],
      ['missing outTradeNo', noTrade],
      ['missing outRefundNo', noRefundNo],
      ['missing refundAmountFen', noAmount],
      ['empty object', {}],
      ['array body', [ok]],
      ['refundAmountFen 0', { ...ok, refundAmountFen: 0 }],
      ['refundAmountFen -1', { ...ok, refundAmountFen: -1 }],
      ['refundAmountFen 1.5', { ...ok, refundAmountFen: 1.5 }],
      ['refundAmountFen 1.0 (decimal literal)', JSON.stringify(ok).replace('"refundAmountFen":100', '"refundAmountFen":1.0')],
      ['refundAmountFen 1e2 (exponent literal)', JSON.stringify(ok).replace('"refundAmountFen":100', '"refundAmountFen":1e2')],
      ['refundAmountFen "100"', { ...ok, refundAmountFen: '100' }],
      ['refundAmountFen null', { ...ok, refundAmountFen: null }],
      ['outRefundNo of 5 characters', { ...ok, outRefundNo: 'RF123' }],
      ['outRefundNo of 65 characters', { ...ok, outRefundNo: 'R'.repeat(65) }],
      ['outRefundNo with a space', { ...ok, outRefundNo: 'RF 12345' }],
      ['outRefundNo with a dot', { ...ok, outRefundNo: 'RF.12345' }],
      ['outRefundNo with non-ASCII', { ...ok, outRefundNo: 'RF_12345é' }],
      ['outRefundNo as a number', { ...ok, outRefundNo: 12345678 }],
      ['outTradeNo with a slash', { ...ok, outTradeNo: 'T/123456' }],
      ['reason of 257 code points', { ...ok, reason: '退'.repeat(257) }],
      ['reason of 257 astral code points', { ...ok, reason: '😀'.repeat(257) }],
      ['reason with U+0000', { ...ok, reason: 'a\u0000b' }],
      ['reason as a number', { ...ok, reason: 42 }],
      ['reason null', { ...ok, reason: null }],
    ];
    for (const [name, body] of bad) {
      const r = await refund(body);
      assertFailure(r, 400, 'OPEN_API_BODY_INVALID');
      assert.equal(r.headers['x-svc-response-sign'] !== undefined, true, `${name}: a schema rejection is signed`);
    }
    const after = await adminOrder(o.openOrderId);
    assert.equal(after.stateVersion, before.stateVersion, 'a 400 changes nothing');
    assert.deepEqual(after.refunds, []);
    assertFailure(await queryRefund(no), 404, 'OPEN_API_NOT_FOUND');
    // The full amount is still refundable, with the very refund number the 400s carried.
    const r = await refund({ ...ok, refundAmountFen: 1000 });
    assert.equal(r.statusCode, 201, r.body);
  });

  test('boundaries that are allowed: 6 and 64 characters, reason of 256 code points (astral), amount 1', async () => {
    const o = await paidOrder(1000);
    const six = `R${Date.now().toString(36).slice(-5)}`;
    assert.equal(six.length, 6);
    const sixtyFour = `${refundNo('R64')}_`.padEnd(64, 'x');
    const a = await refund({ outTradeNo: o.outTradeNo, outRefundNo: six, refundAmountFen: 1 });
    assert.equal(a.statusCode, 201, a.body);
    const reason = '😀'.repeat(256);
    const b = await refund({ outTradeNo: o.outTradeNo, outRefundNo: sixtyFour, refundAmountFen: 2, reason });
    assert.equal(b.statusCode, 201, b.body);
    assert.equal(b.json().reason, reason);
    assert.equal(b.json().outRefundNo, sixtyFour);
  });

  test('Content-Type other than application/json is refused before the body', async () => {
    const o = await paidOrder(1000);
    const r = await refund({ outTradeNo: o.outTradeNo, outRefundNo: refundNo(), refundAmountFen: 1 }, m, { contentType: 'text/plain' });
    assertFailure(r, 400, 'OPEN_API_CONTENT_TYPE_INVALID');
    assert.deepEqual((await adminOrder(o.openOrderId)).refunds, []);
  });
});

describe('create refund: which orders', () => {
  test('only SUCCEEDED orders: CREATED, PAYING, UNKNOWN and CLOSED give 409 OPEN_API_STATE_INVALID', async () => {
    // PAYING: a fresh order with a live attempt.
    const paying = orderBody();
    assert.equal((await call(t, m, 'POST', '/api/open/v1/payments', paying)).statusCode, 201);
    // CLOSED: closed through the API.
    const closed = orderBody();
    assert.equal((await call(t, m, 'POST', '/api/open/v1/payments', closed)).statusCode, 201);
    const c = await call(t, m, 'POST', `/api/open/v1/payments/${closed.outTradeNo}/close`);
    assert.equal(c.statusCode, 200, c.body);
    assert.equal(c.json().status, 'CLOSED');
    // CREATED: the provider refused the first attempt.
    await fault('CREATE_ATTEMPT', 'REJECT');
    const created = orderBody();
    assert.equal((await call(t, m, 'POST', '/api/open/v1/payments', created)).statusCode, 502);
    // UNKNOWN: the first attempt's answer was lost.
    await fault('CREATE_ATTEMPT', 'TIMEOUT');
    const unknown = orderBody();
    assert.equal((await call(t, m, 'POST', '/api/open/v1/payments', unknown)).statusCode, 201);
    const expected: [Record<string, unknown>, string][] = [
      [paying, 'PAYING'],
      [closed, 'CLOSED'],
      [created, 'CREATED'],
      [unknown, 'UNKNOWN'],
    ];
    for (const [order, status] of expected) {
      const q = await call(t, m, 'GET', `/api/open/v1/payments/${order.outTradeNo}`);
      assert.equal(q.json().status, status);
      const no = refundNo();
      const r = await refund({ outTradeNo: order.outTradeNo, outRefundNo: no, refundAmountFen: 1 });
      const b = assertFailure(r, 409, 'OPEN_API_STATE_INVALID');
      assert.deepEqual(Object.keys(b).sort(), ['code', 'message', 'requestId']);
      assertFailure(await queryRefund(no), 404, 'OPEN_API_NOT_FOUND');
    }
  });

  test('unknown order, another app of the same merchant, another merchant: the same neutral 404', async () => {
    const mine = await paidOrder(1000);
    const theirs = await paidOrder(1000, other);
    const cases: [Merchant, string][] = [
      [m, tradeNo('NOPE')],
      [m, theirs.outTradeNo],
      [other, mine.outTradeNo],
      [sibling, mine.outTradeNo],
    ];
    const bodies: Record<string, unknown>[] = [];
    for (const [who, outTradeNo] of cases) {
      const r = await refund({ outTradeNo, outRefundNo: refundNo(), refundAmountFen: 1 }, who);
      assertFailure(r, 404, 'OPEN_API_NOT_FOUND');
      bodies.push(withoutRequestId(r.body));
    }
    for (const b of bodies) assert.deepEqual(b, bodies[0]);
    assert.deepEqual((await adminOrder(mine.openOrderId)).refunds, []);
    assert.deepEqual((await adminOrder(theirs.openOrderId)).refunds, []);
  });
});

describe('create refund: 201 and the RefundProjection', () => {
  test('201 PENDING with exactly the projection fields; the sandbox settles it about 1 s later', async () => {
    const o = await paidOrder(1000);
    const no = refundNo();
    const t0 = Date.now();
    const r = await refund({ outTradeNo: o.outTradeNo, outRefundNo: no, refundAmountFen: 400, reason: 'size does not fit' });
    assert.equal(r.statusCode, 201, r.body);
    const b = r.json();
    assert.deepEqual(Object.keys(b).sort(), PROJECTION_KEYS, 'every field of the RefundProjection');
    assert.equal(b.unknown, false, 'unknown is false when the state is certain');
    assert.equal(b.requestId, r.headers['x-svc-request-id']);
    assert.match(b.refundAttemptId, /^\S+$/);
    assert.equal(b.outRefundNo, no);
    assert.equal(b.outTradeNo, o.outTradeNo);
    assert.equal(b.openOrderId, o.openOrderId);
    assert.equal(b.amountFen, 400);
    assert.equal(b.state, 'PENDING');
    assert.equal(b.reason, 'size does not fit');
    assert.match(b.createdAt, RFC3339_MS);
    assert.match(b.updatedAt, RFC3339_MS);
    assert.ok(Date.parse(b.updatedAt) >= Date.parse(b.createdAt));
    assert.ok(Math.abs(Date.parse(b.createdAt) - t0) < 60_000);
    assert.equal(b.replayed, false);
    for (const h of ['x-svc-response-sign', 'x-svc-response-key-id', 'x-svc-response-timestamp', 'x-svc-response-nonce']) {
      assert.ok(r.headers[h], `${h} present`);
    }

    clock.advance(REFUND_SETTLE_MS / 2);
    await t.svc.sandbox!.sendDueRefundNotices(1000);
    assert.equal((await queryRefund(no)).json().state, 'PENDING', 'not settled before its settlement time');
    const settled = await settleRefund(no);
    assert.deepEqual(Object.keys(settled).sort(), PROJECTION_KEYS);
    assert.equal(settled.refundAttemptId, b.refundAttemptId);
    assert.equal(settled.replayed, true, 'a query projection always says replayed=true');
    assert.equal(settled.createdAt, b.createdAt);
    assert.ok(Date.parse(settled.updatedAt as string) > Date.parse(b.updatedAt));

    const events = (await adminOrder(o.openOrderId)).events;
    const paid = events.find((e) => e.eventType === 'PAYMENT_SUCCEEDED')!;
    const done = events.find((e) => e.eventType === 'REFUND_SUCCEEDED')!;
    assert.ok(paid && done);
    assert.ok(done.stateVersion > paid.stateVersion, 'the refund event carries a higher stateVersion than the payment event');
  });

  test('reason is optional and projected as null', async () => {
    const o = await paidOrder(1000);
    const r = await refund({ outTradeNo: o.outTradeNo, outRefundNo: refundNo(), refundAmountFen: 1 });
    assert.equal(r.statusCode, 201, r.body);
    assert.equal(r.json().reason, null);
    assert.ok('reason' in r.json());
  });

  test('query refund: local state only, replayed=true, no internal material or digest', async () => {
    const o = await paidOrder(1000);
    const no = refundNo();
    const r = await refund({ outTradeNo: o.outTradeNo, outRefundNo: no, refundAmountFen: 10 });
    assert.equal(r.statusCode, 201);
    const faults = await t.sandbox('GET', '/faults');
    const q = await queryRefund(no);
    assert.equal(q.statusCode, 200, q.body);
    const b = q.json();
    assert.deepEqual(Object.keys(b).sort(), PROJECTION_KEYS);
    assert.equal(b.replayed, true);
    assert.equal(b.requestId, q.headers['x-svc-request-id']);
    for (const k of ['digest', 'providerRef', 'failureReason', 'orderId', 'appId', 'material', 'qrCode', 'payUrl']) assert.ok(!(k in b), k);
    assert.doesNotMatch(q.body, /sbx_/, 'no provider reference leaks');
    // A query changes nothing: no fault consumed, no state version moved.
    const v = (await adminOrder(o.openOrderId)).stateVersion;
    await queryRefund(no);
    assert.equal((await adminOrder(o.openOrderId)).stateVersion, v);
    assert.deepEqual((await t.sandbox('GET', '/faults')).json(), faults.json());
  });

  test('query refund: missing, another app, another merchant and malformed numbers give identical 404 bodies', async () => {
    const o = await paidOrder(1000);
    const no = refundNo();
    assert.equal((await refund({ outTradeNo: o.outTradeNo, outRefundNo: no, refundAmountFen: 10 })).statusCode, 201);
    const answers = [
      await queryRefund(refundNo('MISSING')),
      await queryRefund(no, other),
      await queryRefund(no, sibling),
      await queryRefund('abc'),
      await queryRefund('R'.repeat(65)),
      await queryRefund('RF.123456'),
      await queryRefund('RF%20123456'),
      await queryRefund('%E9%80%80%E6%AC%BE%E5%8D%95%E5%8F%B7'),
    ];
    const first = withoutRequestId(answers[0]!.body);
    for (const a of answers) {
      assertFailure(a, 404, 'OPEN_API_NOT_FOUND');
      assert.deepEqual(withoutRequestId(a.body), first);
    }
    assert.deepEqual(Object.keys(first).sort(), ['code', 'message']);
  });
});

describe('create refund: outRefundNo idempotency', () => {
  test('same content: 200 replay with replayed=true, also after it settled; one refund row', async () => {
    const o = await paidOrder(1000);
    const no = refundNo();
    const body = { outTradeNo: o.outTradeNo, outRefundNo: no, refundAmountFen: 300, reason: 'late delivery' };
    const first = await refund(body);
    assert.equal(first.statusCode, 201, first.body);
    const again = await refund(body);
    assert.equal(again.statusCode, 200, again.body);
    assert.equal(again.json().replayed, true);
    assert.equal(again.json().refundAttemptId, first.json().refundAttemptId);
    assert.deepEqual(Object.keys(again.json()).sort(), PROJECTION_KEYS);
    await settleRefund(no);
    const late = await refund(body);
    assert.equal(late.statusCode, 200, late.body);
    assert.equal(late.json().replayed, true);
    assert.equal(late.json().state, 'SUCCEEDED');
    assert.equal(late.json().refundAttemptId, first.json().refundAttemptId);
    // Key order in the request body is not content.
    const reordered = await refund({ reason: 'late delivery', refundAmountFen: 300, outRefundNo: no, outTradeNo: o.outTradeNo });
    assert.equal(reordered.statusCode, 200, reordered.body);
    const rows = (await adminOrder(o.openOrderId)).refunds;
    assert.equal(rows.length, 1);
  });

  test('other content (amount, reason, reason added or dropped, another order): 409 OPEN_API_IDEMPOTENCY_CONFLICT', async () => {
    const o = await paidOrder(1000);
    const o2 = await paidOrder(1000);
    const no = refundNo();
    const body = { outTradeNo: o.outTradeNo, outRefundNo: no, refundAmountFen: 300, reason: 'late delivery' };
    assert.equal((await refund(body)).statusCode, 201);
    const { reason: _r, ...withoutReason } = body;
    const variants = [
      { ...body, refundAmountFen: 301 },
      { ...body, reason: 'Late delivery' },
      { ...body, reason: '' },
      withoutReason,
      { ...body, outTradeNo: o2.outTradeNo },
      // Refund identity is (app, outRefundNo): a used number is a conflict even naming no order at all.
      { ...body, outTradeNo: 'T_no_such_order_0001' },
    ];
    for (const v of variants) {
      const r = await refund(v);
      const b = assertFailure(r, 409, 'OPEN_API_IDEMPOTENCY_CONFLICT');
      assert.deepEqual(Object.keys(b).sort(), ['code', 'message', 'requestId']);
    }
    assert.equal((await adminOrder(o.openOrderId)).refunds.length, 1);
    assert.deepEqual((await adminOrder(o2.openOrderId)).refunds, []);
    // The same number is free in another app: refund identity is (appId, outRefundNo).
    const theirs = await paidOrder(1000, other);
    const r = await refund({ ...body, outTradeNo: theirs.outTradeNo }, other);
    assert.equal(r.statusCode, 201, r.body);
  });

  test('a repeat with the same X-SVC-Request-Id returns the first response, not the current state', async () => {
    const o = await paidOrder(1000);
    const no = refundNo();
    const rid = requestId();
    const body = { outTradeNo: o.outTradeNo, outRefundNo: no, refundAmountFen: 5 };
    const first = await refund(body, m, { requestId: rid });
    assert.equal(first.statusCode, 201, first.body);
    await settleRefund(no);
    const again = await refund(body, m, { requestId: rid });
    assert.equal(again.statusCode, 201);
    assert.equal(again.body, first.body);
    const other = await refund({ ...body, refundAmountFen: 6 }, m, { requestId: rid });
    assertFailure(other, 409, 'OPEN_API_REQUEST_ID_CONFLICT');
  });
});

describe('create refund: the cumulative limit', () => {
  test('sum == paid is allowed, one more fen is 422 REFUND_CUMULATIVE naming the outRefundNo', async () => {
    const o = await paidOrder(1000);
    const a = await refund({ outTradeNo: o.outTradeNo, outRefundNo: refundNo(), refundAmountFen: 300 });
    assert.equal(a.statusCode, 201, a.body);
    const over = refundNo();
    const r = await refund({ outTradeNo: o.outTradeNo, outRefundNo: over, refundAmountFen: 701 });
    const b = assertFailure(r, 422, 'OPEN_API_LIMIT_EXCEEDED');
    assert.deepEqual(b.details, { scope: 'REFUND_CUMULATIVE', outRefundNo: over });
    assert.deepEqual(Object.keys(b).sort(), ['code', 'details', 'message', 'requestId']);
    assertFailure(await queryRefund(over), 404, 'OPEN_API_NOT_FOUND');
    const exact = await refund({ outTradeNo: o.outTradeNo, outRefundNo: refundNo(), refundAmountFen: 700 });
    assert.equal(exact.statusCode, 201, exact.body);
    const one = refundNo();
    const r2 = await refund({ outTradeNo: o.outTradeNo, outRefundNo: one, refundAmountFen: 1 });
    assert.deepEqual(assertFailure(r2, 422, 'OPEN_API_LIMIT_EXCEEDED').details, { scope: 'REFUND_CUMULATIVE', outRefundNo: one });
    // Settled refunds keep counting.
    const rows = (await adminOrder(o.openOrderId)).refunds;
    assert.equal(rows.length, 2);
    assert.equal(
      rows.reduce((s, x) => s + x.amountFen, 0),
      1000,
    );
  });

  test('a single refund above the amount paid is 422, not 400, however large', async () => {
    const o = await paidOrder(1000);
    const no = refundNo();
    const r = await refund({ outTradeNo: o.outTradeNo, outRefundNo: no, refundAmountFen: 1001 });
    assert.deepEqual(assertFailure(r, 422, 'OPEN_API_LIMIT_EXCEEDED').details, { scope: 'REFUND_CUMULATIVE', outRefundNo: no });
    const ok = { outTradeNo: o.outTradeNo, outRefundNo: 'RF_PLACEHOLDER', refundAmountFen: 100 };
    // Integers past 2^53 - 1 (not read exactly) and past the largest double (read as Infinity) too.
    for (const amount of [
      '10000000000',
      '10000000001',
      '99999999999',
      '9007199254740991',
      '9007199254740992',
      '1' + '0'.repeat(20),
      '9'.repeat(400),
    ]) {
      const n = refundNo();
      const body = JSON.stringify({ ...ok, outRefundNo: n }).replace('"refundAmountFen":100', `"refundAmountFen":${amount}`);
      const big = await refund(body);
      assert.deepEqual(assertFailure(big, 422, 'OPEN_API_LIMIT_EXCEEDED').details, { scope: 'REFUND_CUMULATIVE', outRefundNo: n }, amount);
    }
    // Nothing was held: the whole amount is still refundable.
    assert.equal((await refund({ outTradeNo: o.outTradeNo, outRefundNo: refundNo(), refundAmountFen: 1000 })).statusCode, 201);
  });

  test('a refund whose limit check failed can be retried with the same number once there is room', async () => {
    const o = await paidOrder(500);
    const no = refundNo();
    assert.equal((await refund({ outTradeNo: o.outTradeNo, outRefundNo: no, refundAmountFen: 600 })).statusCode, 422);
    const r = await refund({ outTradeNo: o.outTradeNo, outRefundNo: no, refundAmountFen: 500 });
    assert.equal(r.statusCode, 201, r.body);
  });
});

describe('create refund: provider outcomes', () => {
  test('provider REJECT: 502 failure envelope, the refund is FAILED and does not use up the amount', async () => {
    const o = await paidOrder(1000);
    const no = refundNo();
    const v0 = (await adminOrder(o.openOrderId)).stateVersion;
    await fault('REFUND', 'REJECT');
    const r = await refund({ outTradeNo: o.outTradeNo, outRefundNo: no, refundAmountFen: 1000, reason: 'test reject' });
    const b = assertFailure(r, 502, 'OPEN_API_PROVIDER_REJECTED');
    assert.deepEqual(Object.keys(b).sort(), ['code', 'message', 'requestId']);
    assert.ok(r.headers['x-svc-response-sign'], 'a provider rejection is signed');
    const q = await queryRefund(no);
    assert.equal(q.statusCode, 200, q.body);
    assert.equal(q.json().state, 'FAILED');
    assert.equal(q.json().amountFen, 1000);
    assert.equal(q.json().replayed, true);
    assert.equal(q.json().unknown, false);
    const ord = await adminOrder(o.openOrderId);
    assert.ok(ord.stateVersion > v0);
    assert.ok(ord.events.some((e) => e.eventType === 'REFUND_FAILED'));
    // The same number with the same content replays the recorded (FAILED) refund.
    const replay = await refund({ outTradeNo: o.outTradeNo, outRefundNo: no, refundAmountFen: 1000, reason: 'test reject' });
    assert.equal(replay.statusCode, 200, replay.body);
    assert.equal(replay.json().state, 'FAILED');
    assert.equal(replay.json().replayed, true);
    // The whole amount is still refundable.
    const full = refundNo();
    const ok = await refund({ outTradeNo: o.outTradeNo, outRefundNo: full, refundAmountFen: 1000 });
    assert.equal(ok.statusCode, 201, ok.body);
    assert.equal(ok.json().state, 'PENDING');
    await settleRefund(full);
  });

  test('provider TIMEOUT: 201 UNKNOWN with unknown=true; it holds the amount and converges to SUCCEEDED', async () => {
    const o = await paidOrder(1000);
    const no = refundNo();
    await fault('REFUND', 'TIMEOUT');
    const r = await refund({ outTradeNo: o.outTradeNo, outRefundNo: no, refundAmountFen: 1000 });
    assert.equal(r.statusCode, 201, r.body);
    assert.equal(r.json().state, 'UNKNOWN');
    assert.equal(r.json().unknown, true);
    assert.equal(r.json().replayed, false);
    assert.deepEqual(Object.keys(r.json()).sort(), PROJECTION_KEYS);
    const q = await queryRefund(no);
    assert.equal(q.json().unknown, true);
    // UNKNOWN counts toward the cumulative limit.
    const one = await refund({ outTradeNo: o.outTradeNo, outRefundNo: refundNo(), refundAmountFen: 1 });
    assert.equal(one.statusCode, 422, one.body);
    // The provider did the work; its settlement notice converges the refund.
    const done = await settleRefund(no);
    assert.equal(done.unknown, false);
  });

  test('provider TIMEOUT with the notice lost: the provider check converges it through the provider refund query', async () => {
    const sandbox = t.svc.sandbox!;
    const o = await paidOrder(1000);
    // Every sandbox notice is lost on the way to the service until the sink is restored.
    sandbox.setNotificationSink(async () => {
      throw new Error('test: notice lost');
    });
    try {
      const no = refundNo();
      await fault('REFUND', 'TIMEOUT');
      const r = await refund({ outTradeNo: o.outTradeNo, outRefundNo: no, refundAmountFen: 250 });
      assert.equal(r.statusCode, 201, r.body);
      assert.equal(r.json().state, 'UNKNOWN');
      // The sandbox settles 1 s after acceptance (its notice is lost); the provider check checks the
      // refund 2 s after the answer (CHECK_REFUND).
      clock.advance(1500);
      await t.workers.tick();
      assert.equal((await queryRefund(no)).json().state, 'UNKNOWN', 'nothing converges it before the provider check checks');
      clock.advance(1000);
      await t.workers.tick();
      assert.equal((await queryRefund(no)).json().state, 'SUCCEEDED', 'the provider check asked the provider');
      const ev = (await adminOrder(o.openOrderId)).events.filter((e) => e.eventType === 'REFUND_SUCCEEDED');
      assert.equal(ev.length, 1);
    } finally {
      sandbox.setNotificationSink(async (raw, headers) => {
        await handleProviderNotification(t.svc, sandbox, raw, headers);
      });
    }
  });

  test('PAID fault on REFUND: the provider settles at once, 201 SUCCEEDED and REFUND_SUCCEEDED written', async () => {
    const o = await paidOrder(1000);
    const no = refundNo();
    await fault('REFUND', 'PAID');
    const r = await refund({ outTradeNo: o.outTradeNo, outRefundNo: no, refundAmountFen: 600 });
    assert.equal(r.statusCode, 201, r.body);
    assert.equal(r.json().state, 'SUCCEEDED');
    assert.equal(r.json().unknown, false);
    assert.equal((await queryRefund(no)).json().state, 'SUCCEEDED');
    const ord = await adminOrder(o.openOrderId);
    assert.equal(ord.events.filter((e) => e.eventType === 'REFUND_SUCCEEDED').length, 1);
    const over = await refund({ outTradeNo: o.outTradeNo, outRefundNo: refundNo(), refundAmountFen: 401 });
    assert.equal(over.statusCode, 422);
  });

  test('DELAY_MS fault on REFUND: the call waits, then proceeds normally', async () => {
    const o = await paidOrder(1000);
    await fault('REFUND', 'DELAY_MS', 1, 1000);
    let answered = false;
    const delayed = refund({ outTradeNo: o.outTradeNo, outRefundNo: refundNo(), refundAmountFen: 10 }).finally(() => (answered = true));
    // The refund waits on the provider: a query of the order sent after it is answered first.
    assert.equal((await call(t, m, 'GET', `/api/open/v1/payments/${o.outTradeNo}`)).statusCode, 200);
    assert.equal(answered, false, 'the refund still waits');
    const r = await delayed;
    assert.equal(r.statusCode, 201, r.body);
    assert.equal(r.json().state, 'PENDING');
  });

  test('a fault programmed for several calls applies to exactly that many refunds', async () => {
    const o = await paidOrder(1000);
    await fault('REFUND', 'REJECT', 2);
    const codes = [];
    for (let i = 0; i < 3; i++)
      codes.push((await refund({ outTradeNo: o.outTradeNo, outRefundNo: refundNo(), refundAmountFen: 10 })).statusCode);
    assert.deepEqual(codes, [502, 502, 201]);
  });
});

describe('create refund: a refund recorded but not yet submitted to the provider', () => {
  test("its first try's answer lost before the provider was asked (a failover): the merchant's retry submits it, 200 replayed, refunded once", async () => {
    const o = await paidOrder(1000);
    const no = refundNo();
    // What a first try leaves when its commit went through but its answer was lost with the
    // primary: the REQUESTED row (holding its amount), and nothing at the provider.
    const row = await t.svc.db.query<{ version: number; provider: string }>(
      `SELECT o.state_version AS version, a.provider FROM orders o JOIN attempts a ON a.id = o.paid_attempt_id WHERE o.id = $1`,
      [o.openOrderId],
    );
    const input = { outTradeNo: o.outTradeNo, outRefundNo: no, refundAmountFen: 700, reason: null };
    const reserved = await reserveRefundRow(
      t.svc.db,
      {
        id: `rf_${Date.now().toString(36)}lostanswer`,
        orderId: o.openOrderId,
        appId: m.appId,
        outRefundNo: no,
        amountFen: 700,
        reason: null,
        digest: refundDigest(input),
        provider: row.rows[0]!.provider,
        createdBy: (await t.svc.db.query<{ id: string }>('SELECT id FROM service_instances LIMIT 1')).rows[0]!.id,
      },
      row.rows[0]!.version,
      new Date(clock.now()),
    );
    assert.ok(reserved.refund, 'the REQUESTED row recorded');
    assert.equal((await t.svc.sandbox!.queryRefund({ refundId: reserved.refund.id, paidAttemptId: '' })).state, 'NOT_FOUND');

    const retry = await refund({ outTradeNo: o.outTradeNo, outRefundNo: no, refundAmountFen: 700 });
    assert.equal(retry.statusCode, 200, retry.body);
    assert.equal(retry.json().replayed, true);
    assert.equal(retry.json().state, 'PENDING', 'submitted now: the provider accepted it');
    assert.equal((await t.svc.sandbox!.queryRefund({ refundId: reserved.refund.id, paidAttemptId: '' })).state, 'PENDING');
    // Another retry does not submit it again, and the amount stays counted once.
    assert.equal((await refund({ outTradeNo: o.outTradeNo, outRefundNo: no, refundAmountFen: 700 })).json().state, 'PENDING');
    assert.equal((await refund({ outTradeNo: o.outTradeNo, outRefundNo: refundNo(), refundAmountFen: 301 })).statusCode, 422);
    await settleRefund(no);
    const ev = (await adminOrder(o.openOrderId)).events.map((e) => e.eventType);
    assert.deepEqual(
      ev.filter((e) => e.startsWith('REFUND')),
      ['REFUND_SUCCEEDED'],
    );
  });

  test('a duplicate arriving while the first try waits on the provider submits it too: the provider refunds it once, both answers agree', async () => {
    const o = await paidOrder(1000);
    const no = refundNo();
    await fault('REFUND', 'DELAY_MS', 1, 1500);
    const first = refund({ outTradeNo: o.outTradeNo, outRefundNo: no, refundAmountFen: 400 });
    let seen = false;
    for (let i = 0; i < 40 && !seen; i++) {
      await sleep(25);
      seen = (await queryRefund(no)).statusCode === 200;
    }
    assert.ok(seen, 'the first try recorded the refund');
    const second = await refund({ outTradeNo: o.outTradeNo, outRefundNo: no, refundAmountFen: 400 });
    assert.equal(second.statusCode, 200, second.body);
    assert.equal(second.json().state, 'PENDING');
    const r = await first;
    assert.equal(r.statusCode, 201, r.body);
    assert.equal(r.json().state, 'PENDING');
    await settleRefund(no);
    const ord = await adminOrder(o.openOrderId);
    assert.deepEqual(
      ord.events.map((e) => e.eventType).filter((e) => e.startsWith('REFUND')),
      ['REFUND_SUCCEEDED'],
    );
    assert.equal(
      ord.refunds.filter((x) => x.state === 'SUCCEEDED').reduce((s, x) => s + x.amountFen, 0),
      400,
    );
  });
});

describe('create refund: a refund judged lost that the provider accepts after all', () => {
  test('the provider word stands: the refund leaves FAILED (NOT_RECEIVED_BY_PROVIDER) for its real state, and the answer says so', async () => {
    const o = await paidOrder(1000);
    const no = refundNo();
    await fault('REFUND', 'DELAY_MS', 1, 1500);
    const pending = refund({ outTradeNo: o.outTradeNo, outRefundNo: no, refundAmountFen: 1000 });
    // While the provider call is slow, the refund is REQUESTED and unknown to the provider. Made
    // to look 6 minutes old, the provider check judges it lost and releases its amount.
    let judged = false;
    for (let i = 0; i < 20 && !judged; i++) {
      await sleep(50);
      const u = await t.svc.db.query(
        `UPDATE refunds SET created_at = now() - interval '6 minutes' WHERE out_refund_no = $1 AND state = 'REQUESTED' RETURNING id`,
        [no],
      );
      if (u.rowCount === 1) {
        // FIND_DUE_WORK finds the refund stalled (REQUESTED for over 60 s) and its check runs (or,
        // once it has run, runs again now).
        await makeJobDue(t, 'FIND_DUE_WORK');
        await makeJobDue(t, 'CHECK_REFUND', u.rows[0].id);
        await t.workers.tick();
        judged = (await queryRefund(no)).json().state === 'FAILED';
      }
    }
    assert.ok(judged, 'the provider check judged the slow refund lost');
    const r = await pending;
    assert.equal(r.statusCode, 201, r.body);
    assert.notEqual(r.json().state, 'FAILED', 'the provider accepted it: the answer is its real state');
    const settled = await settleRefund(no);
    assert.equal(settled.amountFen, 1000);
    const ev = (await adminOrder(o.openOrderId)).events.map((e) => e.eventType);
    assert.deepEqual(
      ev.filter((e) => e.startsWith('REFUND')),
      ['REFUND_FAILED', 'REFUND_SUCCEEDED'],
      'the history is kept',
    );
    // The amount counts again: nothing more can be refunded.
    const more = await refund({ outTradeNo: o.outTradeNo, outRefundNo: refundNo(), refundAmountFen: 1 });
    assert.equal(more.statusCode, 422, more.body);
  });
});

describe('create refund: concurrency on PostgreSQL', () => {
  test('40 parallel refunds of one paid order: exactly what fits is accepted, the rest is 422', async () => {
    const o = await paidOrder(1000);
    const n = 40;
    const answers = await Promise.all(
      Array.from({ length: n }, () => refund({ outTradeNo: o.outTradeNo, outRefundNo: refundNo('PAR'), refundAmountFen: 100 })),
    );
    const codes = answers.map((a) => a.statusCode);
    assert.ok(
      codes.every((c) => c === 201 || c === 422),
      `only 201 or 422: ${codes.join(',')}`,
    );
    assert.equal(codes.filter((c) => c === 201).length, 10);
    for (const a of answers.filter((x) => x.statusCode === 422)) {
      assert.equal(a.json().code, 'OPEN_API_LIMIT_EXCEEDED');
      assert.equal(a.json().details.scope, 'REFUND_CUMULATIVE');
    }
    const rows = (await adminOrder(o.openOrderId)).refunds;
    assert.equal(rows.length, 10);
    assert.equal(
      rows.filter((r) => r.state !== 'FAILED').reduce((s, r) => s + r.amountFen, 0),
      1000,
    );
  });

  test('50 parallel refunds of uneven amounts: the sum never exceeds the amount paid, and every refusal really did not fit', async () => {
    const paidFen = 3000;
    const o = await paidOrder(paidFen);
    const amounts = Array.from({ length: 50 }, (_, i) => 1 + ((i * 37) % 200));
    const answers = await Promise.all(
      amounts.map((a) => refund({ outTradeNo: o.outTradeNo, outRefundNo: refundNo('UNEVEN'), refundAmountFen: a })),
    );
    let accepted = 0;
    for (const [i, a] of answers.entries()) {
      assert.ok(a.statusCode === 201 || a.statusCode === 422, a.body);
      if (a.statusCode === 201) accepted += amounts[i]!;
    }
    assert.ok(accepted <= paidFen);
    for (const [i, a] of answers.entries()) {
      if (a.statusCode === 422) assert.ok(accepted + amounts[i]! > paidFen, `refused ${amounts[i]} fen although it fit`);
    }
    const rows = (await adminOrder(o.openOrderId)).refunds;
    assert.equal(
      rows.reduce((s, r) => s + r.amountFen, 0),
      accepted,
    );
  });

  test('parallel duplicates of one outRefundNo create one refund row; all answers show that refund', async () => {
    const o = await paidOrder(1000);
    const no = refundNo('DUP');
    const body = { outTradeNo: o.outTradeNo, outRefundNo: no, refundAmountFen: 100 };
    const answers = await Promise.all(Array.from({ length: 20 }, () => refund(body)));
    const codes = answers.map((a) => a.statusCode).sort();
    assert.equal(codes.filter((c) => c === 201).length, 1, codes.join(','));
    assert.equal(codes.filter((c) => c === 200).length, 19, codes.join(','));
    const ids = new Set(answers.map((a) => a.json().refundAttemptId));
    assert.equal(ids.size, 1);
    assert.equal((await adminOrder(o.openOrderId)).refunds.length, 1);
  });

  test('the same outRefundNo raced on two different orders: one refund, the other answer is a conflict (never 503)', async () => {
    for (let round = 0; round < 3; round++) {
      const a = await paidOrder(1000);
      const b = await paidOrder(1000);
      const no = refundNo('RACE');
      const answers = await Promise.all([
        refund({ outTradeNo: a.outTradeNo, outRefundNo: no, refundAmountFen: 100 }),
        refund({ outTradeNo: b.outTradeNo, outRefundNo: no, refundAmountFen: 100 }),
        refund({ outTradeNo: a.outTradeNo, outRefundNo: no, refundAmountFen: 100 }),
        refund({ outTradeNo: b.outTradeNo, outRefundNo: no, refundAmountFen: 100 }),
      ]);
      const codes = answers.map((x) => x.statusCode);
      assert.equal(codes.filter((c) => c === 201).length, 1, codes.join(','));
      assert.equal(codes.filter((c) => c === 200).length, 1, codes.join(','));
      assert.equal(codes.filter((c) => c === 409).length, 2, codes.join(','));
      const rows = (await adminOrder(a.openOrderId)).refunds.length + (await adminOrder(b.openOrderId)).refunds.length;
      assert.equal(rows, 1);
    }
  });
});

describe('stateVersion: one counter per order, shared with its refunds', () => {
  test('creating and settling a refund move the order counter up', async () => {
    const o = await paidOrder(1000);
    const v0 = (await adminOrder(o.openOrderId)).stateVersion;
    const no = refundNo();
    assert.equal((await refund({ outTradeNo: o.outTradeNo, outRefundNo: no, refundAmountFen: 100 })).statusCode, 201);
    const v1 = (await adminOrder(o.openOrderId)).stateVersion;
    assert.ok(v1 > v0, `${v1} > ${v0}`);
    await settleRefund(no);
    const ord = await adminOrder(o.openOrderId);
    assert.ok(ord.stateVersion > v1);
    const ev = ord.events.find((e) => e.eventType === 'REFUND_SUCCEEDED')!;
    assert.equal(ev.stateVersion, ord.stateVersion, 'the event carries the counter value of its change');
    // Replays, conflicts and queries do not move it.
    await refund({ outTradeNo: o.outTradeNo, outRefundNo: no, refundAmountFen: 100 });
    await refund({ outTradeNo: o.outTradeNo, outRefundNo: no, refundAmountFen: 101 });
    await queryRefund(no);
    assert.equal((await adminOrder(o.openOrderId)).stateVersion, ord.stateVersion);
  });
});
