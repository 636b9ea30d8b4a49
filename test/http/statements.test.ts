/**
 * The merchant's statement through the signed open API (docs/statements.md): a day of payments
 * (succeeded, closed, failed) and refunds (succeeded, failed) matches the ledger to the fen, rows
 * and totals; the summary's SHA-256 and size are the file's, and the file's answer is signed over
 * them; gzip is the same CSV; the day must be closed and not too old; another app sees none of
 * it; a payment of the last instant of the day before and one of the first instant of the day after
 * are in their own days' statements, not in this one; the gate answers the new paths in its order.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { gunzipSync } from 'node:zlib';
import pg from 'pg';
import { verifyResponseSignature } from '@mps/sdk';
import { STATEMENT_COLUMNS, STATEMENT_HEADER } from '../../src/domain/statements.ts';
import { REFUND_SETTLE_MS } from '../../src/providers/sandbox/sandbox.ts';
import { type Merchant, type TestApp, call, orderBody, provision, startTestApp } from '../helpers/app.ts';
import { FakeClock, waitFor } from '../helpers/events.ts';

const clock = new FakeClock();
let t: TestApp;
let m: Merchant;
let other: Merchant;
let platformKeys: Record<string, string>;
let db: pg.Client;

const H = 3600_000;
/** 12:00 Asia/Shanghai of the day after today: the day the test's ledger is made on. */
const dayStartMs = (() => {
  const tomorrow = new Date(Date.now() + 8 * H + 24 * H).toISOString().slice(0, 10);
  return Date.parse(`${tomorrow}T00:00:00+08:00`);
})();
const DAY = new Date(dayStartMs + 8 * H).toISOString().slice(0, 10);
const PREVIOUS_DAY = new Date(dayStartMs - 24 * H + 8 * H).toISOString().slice(0, 10);
const NEXT_DAY = new Date(dayStartMs + 24 * H + 8 * H).toISOString().slice(0, 10);
/** The shop's payments of the neighbouring days: 23:59:59.999 of the day before, 00:00:00.000 of the day after. */
const EVE_MS = dayStartMs - 1;
const MORROW_MS = dayStartMs + 24 * H;
let eve: { outTradeNo: string; openOrderId: string };
let morrow: { outTradeNo: string; openOrderId: string };
/** The SHA-256 of the day's file when first asked for. */
let daySha256: string;

const api = (mch: Merchant, method: string, url: string, body?: unknown, requestId?: string) =>
  call(t, mch, method, url, body, { timestamp: String(Math.floor(clock.now() / 1000)), ...(requestId ? { requestId } : {}) });

interface LedgerRow {
  type: string;
  openOrderId: string;
  outTradeNo: string;
  refundAttemptId: string;
  outRefundNo: string;
  state: string;
  amountFen: number;
}

before(async () => {
  clock.advanceTo(EVE_MS - 60_000);
  t = await startTestApp({}, { clock });
  m = await provision(t, { name: 'Statement Shop' });
  other = await provision(t, { name: 'Other Shop' });
  const k = await t.admin('GET', '/platform-keys');
  platformKeys = Object.fromEntries((k.json().keys as { keyId: string; publicKeyPem: string }[]).map((x) => [x.keyId, x.publicKeyPem]));
  db = new pg.Client({ connectionString: t.config.databaseUrl! });
  await db.connect();
  await makeLedger();
});
after(async () => {
  await db.end();
  await t.stop();
});

async function create(mch: Merchant, o: Record<string, unknown> = {}) {
  const body = orderBody(o);
  const r = await api(mch, 'POST', '/api/open/v1/payments', body);
  assert.equal(r.statusCode, 201, r.body);
  return { outTradeNo: body.outTradeNo as string, openOrderId: r.json().openOrderId as string };
}

/**
 * Runs `fn` with the clock stopped at `atMs` (what it stamps is stamped at exactly that instant),
 * then lets the clock run on from there.
 */
async function stoppedAt<T>(atMs: number, fn: () => Promise<T>): Promise<T> {
  assert.ok(clock.now() <= atMs, 'the clock never goes back');
  clock.advanceTo(atMs);
  const running = clock.now;
  clock.now = () => atMs;
  try {
    return await fn();
  } finally {
    clock.now = running;
  }
}

/** The buyer pays the order at exactly `atMs`; answers once the ledger has it SUCCEEDED. */
async function paidAt(o: { openOrderId: string }, atMs: number): Promise<void> {
  await stoppedAt(atMs, async () => {
    assert.equal((await t.sandbox('POST', `/payments/${o.openOrderId}/pay`)).statusCode, 200);
    await waitFor('the payment to be applied', async () => {
      const r = await db.query(`SELECT status FROM orders WHERE id = $1`, [o.openOrderId]);
      return r.rows[0].status === 'SUCCEEDED';
    });
  });
  const e = await db.query(`SELECT created_at FROM events WHERE order_id = $1 AND event_type = 'PAYMENT_SUCCEEDED'`, [o.openOrderId]);
  assert.equal((e.rows[0].created_at as Date).getTime(), atMs, 'the payment is stamped at the instant asked');
}

/**
 * The day's ledger of the shop: paid, closed, failed, refunded (settled and failed), and orders
 * still open; and a payment at each edge of the day, in the neighbouring days.
 */
async function makeLedger(): Promise<void> {
  // The last instant of the day before.
  eve = await create(m, { amountFen: 31 });
  await paidAt(eve, EVE_MS);

  clock.advanceTo(dayStartMs + 12 * H);
  const paid = [];
  for (const amountFen of [1, 999, 12_345, 10_000_000, 77]) {
    const o = await create(m, { amountFen, channel: amountFen % 2 ? 'ALIPAY_H5' : 'WECHAT_H5' });
    assert.equal((await t.sandbox('POST', `/payments/${o.openOrderId}/pay`)).statusCode, 200);
    paid.push(o);
  }
  const closed = await create(m, { amountFen: 500 });
  assert.equal((await api(m, 'POST', `/api/open/v1/payments/${closed.outTradeNo}/close`)).statusCode, 200);
  const failed = await create(m, { amountFen: 600 });
  assert.equal((await t.sandbox('POST', `/payments/${failed.openOrderId}/fail`)).statusCode, 200);
  await create(m, { amountFen: 700 }); // still PAYING: not in the statement
  const refund = (outTradeNo: string, outRefundNo: string, refundAmountFen: number) =>
    api(m, 'POST', '/api/open/v1/refunds', { outTradeNo, outRefundNo, refundAmountFen });
  assert.equal((await refund(paid[2]!.outTradeNo, 'RF_STMT_1', 345)).statusCode, 201);
  assert.equal((await refund(paid[3]!.outTradeNo, 'RF_STMT_2', 10_000_000)).statusCode, 201);
  assert.equal((await t.sandbox('POST', '/faults', { operation: 'REFUND', outcome: 'REJECT' })).statusCode, 201);
  assert.equal((await refund(paid[4]!.outTradeNo, 'RF_STMT_3', 7)).statusCode, 502); // FAILED
  // The sandbox's time passes the refunds' settlement, and it sends their notices.
  clock.advance(REFUND_SETTLE_MS);
  await t.svc.sandbox!.sendDueRefundNotices(1000);
  await waitFor('the refunds to settle', async () => {
    const r = await db.query(`SELECT count(*)::int AS n FROM refunds WHERE app_id = $1 AND state = 'SUCCEEDED'`, [m.appId]);
    return r.rows[0].n === 2;
  });
  // The other shop's day: one paid order.
  const o = await create(other, { amountFen: 4242 });
  assert.equal((await t.sandbox('POST', `/payments/${o.openOrderId}/pay`)).statusCode, 200);

  // The first instant of the day after (the order made half a minute before).
  clock.advanceTo(MORROW_MS - 30_000);
  morrow = await create(m, { amountFen: 53 });
  await paidAt(morrow, MORROW_MS);
}

/** The Asia/Shanghai day [start, end) of `day`. */
const period = (day: string) => {
  const start = new Date(`${day}T00:00:00+08:00`);
  return { start, end: new Date(start.getTime() + 24 * H) };
};

/**
 * The ledger's view of the day, from the orders and refunds themselves (not from the events the
 * statement reads): those whose final state was reached in the day (a paid order's `paid_at`, the
 * last change of a closed or failed order and of a refund).
 */
async function ledger(appId: string, day: string): Promise<LedgerRow[]> {
  const { start, end } = period(day);
  const r = await db.query<LedgerRow>(
    `SELECT 'PAYMENT' AS type, id AS "openOrderId", out_trade_no AS "outTradeNo", '' AS "refundAttemptId", '' AS "outRefundNo",
            status AS state, amount_fen AS "amountFen"
       FROM orders WHERE app_id = $1 AND status IN ('SUCCEEDED', 'CLOSED', 'FAILED')
        AND CASE WHEN status = 'SUCCEEDED' THEN paid_at ELSE updated_at END >= $2
        AND CASE WHEN status = 'SUCCEEDED' THEN paid_at ELSE updated_at END < $3
     UNION ALL
     SELECT 'REFUND', o.id, o.out_trade_no, r.id, r.out_refund_no, r.state, r.amount_fen
       FROM refunds r JOIN orders o ON o.id = r.order_id WHERE r.app_id = $1 AND r.state IN ('SUCCEEDED', 'FAILED')
        AND r.updated_at >= $2 AND r.updated_at < $3`,
    [appId, start, end],
  );
  return r.rows.map((x) => ({ ...x, amountFen: Number(x.amountFen) }));
}

type CsvRow = Record<(typeof STATEMENT_COLUMNS)[number], string>;

function parseCsv(text: string): CsvRow[] {
  assert.ok(text.startsWith(STATEMENT_HEADER), 'the documented header first');
  assert.ok(text.endsWith('\r\n'));
  const lines = text.slice(0, -2).split('\r\n');
  const header = lines.shift()!.split(',');
  assert.deepEqual(header, [...STATEMENT_COLUMNS]);
  return lines.map((l) => Object.fromEntries(l.split(',').map((v, i) => [header[i]!, v])) as CsvRow);
}

const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');

function verified(r: { statusCode: number; headers: Record<string, unknown>; rawPayload: Buffer }, requestId?: string) {
  const v = verifyResponseSignature({
    status: r.statusCode,
    headers: r.headers as Record<string, string>,
    body: r.rawPayload,
    platformPublicKeys: platformKeys,
    ...(requestId ? { expectedRequestId: requestId } : {}),
  });
  assert.equal(v.signed, true, 'the answer is signed');
}

describe('a closed day', () => {
  before(() => clock.advanceTo(dayStartMs + 24 * H + 10 * 60_000 + 1000));

  test('the summary and the file match the ledger to the fen, and the file is the one the summary describes', async () => {
    const s = await api(m, 'GET', `/api/open/v1/statements/${DAY}`);
    assert.equal(s.statusCode, 200, s.body);
    verified(s);
    const summary = s.json();
    assert.equal(summary.settlementDate, DAY);
    assert.equal(summary.timeZone, 'Asia/Shanghai');
    assert.equal(summary.periodStart, new Date(dayStartMs).toISOString());
    assert.equal(summary.periodEnd, new Date(MORROW_MS).toISOString());
    assert.equal(summary.compression, 'NONE');
    assert.equal(summary.filePath, `/api/open/v1/statements/${DAY}/file`);

    const f = await api(m, 'GET', summary.filePath);
    assert.equal(f.statusCode, 200);
    assert.equal(f.headers['content-type'], 'text/csv; charset=utf-8');
    assert.equal(Number(f.headers['content-length']), summary.sizeBytes);
    assert.match(String(f.headers['content-disposition']), new RegExp(`filename="statement-${m.appId}-${DAY}.csv"`));
    verified(f);
    assert.equal(f.rawPayload.length, summary.sizeBytes);
    assert.equal(sha256(f.rawPayload), summary.sha256);
    daySha256 = summary.sha256;

    const rows = parseCsv(f.rawPayload.toString('utf8'));
    assert.equal(rows.length, summary.rowCount);
    const want = await ledger(m.appId, DAY);
    assert.equal(want.length, 10, 'the day: 7 payments and 3 refunds, none of the neighbouring days');
    const key = (r: { type: string; openOrderId: string; refundAttemptId: string }) => `${r.type}:${r.openOrderId}:${r.refundAttemptId}`;
    assert.deepEqual(
      rows.map((r) => [key(r), r.outTradeNo, r.outRefundNo, r.state, Number(r.amountFen)]).sort(),
      want.map((r) => [key(r), r.outTradeNo, r.outRefundNo, r.state, r.amountFen]).sort(),
    );
    // Fee projections of the paid orders, as the orders hold them.
    for (const r of rows.filter((x) => x.type === 'PAYMENT' && x.state === 'SUCCEEDED')) {
      const o = await db.query('SELECT fee_projection, channel, amount_fen FROM orders WHERE id = $1', [r.openOrderId]);
      const fee = o.rows[0].fee_projection;
      assert.equal(Number(r.companyServiceFeeFen), fee.companyServiceFeeFen);
      assert.equal(Number(r.merchantSettlementFen), fee.merchantSettlementFen);
      assert.equal(Number(r.companyServiceFeeFen) + Number(r.merchantSettlementFen), Number(o.rows[0].amount_fen));
      assert.equal(r.channel, o.rows[0].channel);
    }
    for (const r of rows.filter((x) => !(x.type === 'PAYMENT' && x.state === 'SUCCEEDED'))) assert.equal(r.companyServiceFeeFen, '');
    // Ordered by time, then event id.
    const order = rows.map((r) => `${r.occurredAt}|${r.eventId}`);
    assert.deepEqual(order, [...order].sort());

    // Totals, from the ledger.
    const sum = (f: (r: LedgerRow) => boolean) => ({
      count: want.filter(f).length,
      amountFen: want.filter(f).reduce((a, r) => a + r.amountFen, 0),
    });
    const totals = summary.totals;
    for (const [bucket, type, state] of [
      ['paymentsSucceeded', 'PAYMENT', 'SUCCEEDED'],
      ['paymentsClosed', 'PAYMENT', 'CLOSED'],
      ['paymentsFailed', 'PAYMENT', 'FAILED'],
      ['refundsSucceeded', 'REFUND', 'SUCCEEDED'],
      ['refundsFailed', 'REFUND', 'FAILED'],
    ] as const) {
      assert.deepEqual(
        totals[bucket],
        sum((r) => r.type === type && r.state === state),
        bucket,
      );
    }
    assert.deepEqual(totals.paymentsSucceeded, { count: 5, amountFen: 1 + 999 + 12_345 + 10_000_000 + 77 });
    assert.deepEqual(totals.refundsSucceeded, { count: 2, amountFen: 10_000_345 });
    assert.equal(totals.netAmountFen, totals.paymentsSucceeded.amountFen - totals.refundsSucceeded.amountFen);
    const fees = await db.query(
      `SELECT sum((fee_projection->>'companyServiceFeeFen')::bigint)::bigint AS fee, sum((fee_projection->>'merchantSettlementFen')::bigint)::bigint AS net
         FROM orders WHERE app_id = $1 AND status = 'SUCCEEDED' AND paid_at >= $2 AND paid_at < $3`,
      [m.appId, period(DAY).start, period(DAY).end],
    );
    assert.equal(totals.companyServiceFeeFen, Number(fees.rows[0].fee));
    assert.equal(totals.merchantSettlementFen, Number(fees.rows[0].net));
    assert.equal(totals.rowCount, rows.length);
  });

  test('gzip: the same CSV, its own digest and size; the same request again gives the same bytes', async () => {
    const plain = (await api(m, 'GET', `/api/open/v1/statements/${DAY}/file`)).rawPayload;
    const s = (await api(m, 'GET', `/api/open/v1/statements/${DAY}?compression=gzip`)).json();
    assert.equal(s.compression, 'GZIP');
    assert.equal(s.filePath, `/api/open/v1/statements/${DAY}/file?compression=gzip`);
    const f = await api(m, 'GET', s.filePath);
    assert.equal(f.statusCode, 200);
    assert.equal(f.headers['content-type'], 'application/gzip');
    verified(f);
    assert.equal(sha256(f.rawPayload), s.sha256);
    assert.deepEqual(gunzipSync(f.rawPayload), plain);
    // A GET is answered from current state, afresh each time: the same request id gets the same
    // bytes because the day's file does not change, not because an answer was kept.
    const id = 'req_statement_again_1';
    const a = await api(m, 'GET', s.filePath, undefined, id);
    const b = await api(m, 'GET', s.filePath, undefined, id);
    verified(a, id);
    verified(b, id);
    assert.deepEqual(a.rawPayload, f.rawPayload);
    assert.deepEqual(b.rawPayload, f.rawPayload);
    assert.notEqual(a.headers['x-svc-response-nonce'], b.headers['x-svc-response-nonce']);
  });

  test('another app sees only its own day: none of the first shop rows', async () => {
    const s = await api(other, 'GET', `/api/open/v1/statements/${DAY}`);
    assert.equal(s.statusCode, 200);
    assert.equal(s.json().rowCount, 1);
    assert.equal(s.json().totals.paymentsSucceeded.amountFen, 4242);
    const f = await api(other, 'GET', `/api/open/v1/statements/${DAY}/file`);
    const text = f.rawPayload.toString('utf8');
    for (const r of await ledger(m.appId, DAY)) assert.ok(!text.includes(r.openOrderId), 'no row of the other app');
  });

  test('a payment at 23:59:59.999 of the day before and one at 00:00:00.000 of the day after: in neither rows nor totals', async () => {
    const s = (await api(m, 'GET', `/api/open/v1/statements/${DAY}`)).json();
    const text = (await api(m, 'GET', s.filePath)).rawPayload.toString('utf8');
    const rows = parseCsv(text);
    for (const o of [eve, morrow]) {
      assert.ok(!text.includes(o.openOrderId), `${o.outTradeNo}: not in the day's file`);
      assert.ok(!text.includes(o.outTradeNo));
    }
    assert.ok(rows.every((r) => r.occurredAt >= s.periodStart && r.occurredAt < s.periodEnd));
    assert.deepEqual(s.totals.paymentsSucceeded, { count: 5, amountFen: 1 + 999 + 12_345 + 10_000_000 + 77 }, 'neither 31 nor 53 fen');
    assert.equal(s.totals.rowCount, 10);
    assert.equal(s.totals.netAmountFen, 1 + 999 + 12_345 + 10_000_000 + 77 - 10_000_345);
  });

  test('a day with nothing has the header only', async () => {
    const shop = await provision(t, { name: 'Quiet Shop' });
    const s = (await api(shop, 'GET', `/api/open/v1/statements/${DAY}`)).json();
    assert.equal(s.rowCount, 0);
    assert.equal(s.sizeBytes, Buffer.byteLength(STATEMENT_HEADER));
    const f = await api(shop, 'GET', s.filePath);
    assert.equal(f.rawPayload.toString(), STATEMENT_HEADER);
  });
});

describe('the neighbouring days', () => {
  before(() => clock.advanceTo(MORROW_MS + 24 * H + 10 * 60_000 + 1000));

  test('each edge payment is in the statement of its own day, at its instant', async () => {
    for (const [day, o, atMs, amountFen] of [
      [PREVIOUS_DAY, eve, EVE_MS, 31],
      [NEXT_DAY, morrow, MORROW_MS, 53],
    ] as const) {
      const s = await api(m, 'GET', `/api/open/v1/statements/${day}`);
      assert.equal(s.statusCode, 200, s.body);
      const summary = s.json();
      assert.equal(summary.rowCount, 1, day);
      assert.deepEqual(summary.totals.paymentsSucceeded, { count: 1, amountFen });
      const rows = parseCsv((await api(m, 'GET', summary.filePath)).rawPayload.toString('utf8'));
      assert.deepEqual(
        rows.map((r) => [r.type, r.openOrderId, r.outTradeNo, r.state, Number(r.amountFen), r.occurredAt]),
        [['PAYMENT', o.openOrderId, o.outTradeNo, 'SUCCEEDED', amountFen, new Date(atMs).toISOString()]],
      );
      assert.deepEqual(
        (await ledger(m.appId, day)).map((r) => r.openOrderId),
        [o.openOrderId],
      );
    }
    // The next day's first instant is its periodStart, the day's periodEnd.
    assert.equal((await api(m, 'GET', `/api/open/v1/statements/${NEXT_DAY}`)).json().periodStart, new Date(MORROW_MS).toISOString());
  });

  test("the day's file is still the same bytes", async () => {
    assert.equal((await api(m, 'GET', `/api/open/v1/statements/${DAY}`)).json().sha256, daySha256);
  });
});

describe('days that cannot be given', () => {
  test('a day not closed yet: 409 OPEN_API_STATE_INVALID saying when it is; summary and file alike', async () => {
    const today = new Date(clock.now() + 8 * H).toISOString().slice(0, 10);
    for (const path of [
      `/api/open/v1/statements/${today}`,
      `/api/open/v1/statements/${today}/file`,
      '/api/open/v1/statements/2999-01-01',
    ]) {
      const r = await api(m, 'GET', path);
      assert.equal(r.statusCode, 409, r.body);
      assert.equal(r.json().code, 'OPEN_API_STATE_INVALID');
      if (path.includes(today)) assert.match(r.json().message, /available from \d{4}-\d\d-\d\dT16:10:00\.000Z/);
      verified(r);
    }
  });

  test('too old, or not a date: the neutral 404', async () => {
    for (const day of ['2020-01-01', '2026-02-30', '2026-1-01', '20260101', 'yesterday', '%ZZ']) {
      const r = await api(m, 'GET', `/api/open/v1/statements/${day}`);
      assert.equal(r.statusCode, 404, `${day}: ${r.body}`);
      assert.deepEqual(Object.keys(r.json()).sort(), ['code', 'message', 'requestId']);
      assert.equal(r.json().code, 'OPEN_API_NOT_FOUND');
    }
  });

  test('a query outside its constraint: 400 OPEN_API_BODY_INVALID naming the parameter', async () => {
    for (const [q, field] of [
      ['compression=zip', 'compression'],
      ['compression=GZIP', 'compression'],
      ['compression=gzip&compression=none', 'compression'],
      ['format=json', 'format'],
    ]) {
      const r = await api(m, 'GET', `/api/open/v1/statements/${DAY}/file?${q}`);
      assert.equal(r.statusCode, 400, r.body);
      assert.equal(r.json().code, 'OPEN_API_BODY_INVALID');
      assert.equal(r.json().details.field, field);
      verified(r);
    }
  });
});
