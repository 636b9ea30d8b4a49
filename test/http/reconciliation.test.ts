/**
 * Reconciliation with the sandbox's statement (docs/reconciliation.md): each planted discrepancy is
 * found (a payment whose notice was lost, converged through the notice path so that the order
 * succeeds and the merchant is notified; a payment of another amount; a refund the provider lost;
 * a payment the provider lost; a refund failed here and settled there; a payment and a refund the
 * ledger never recorded); results per run and per line through the
 * admin API; a rerun is idempotent; the daily run is created and claimed by the workers; metrics.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { verifyNotification } from '@mps/sdk';
import { REFUND_SETTLE_MS } from '../../src/providers/sandbox/sandbox.ts';
import { type Merchant, type TestApp, call, orderBody, provision, startTestApp } from '../helpers/app.ts';
import { FakeClock, Receiver, waitFor } from '../helpers/events.ts';
import { asOperator, createOperator } from '../helpers/operators.ts';

const clock = new FakeClock();
const H = 3600_000;
const dayStartMs = Date.parse(`${new Date(Date.now() + 8 * H + 24 * H).toISOString().slice(0, 10)}T00:00:00+08:00`);
const DAY = new Date(dayStartMs + 8 * H).toISOString().slice(0, 10);

let t: TestApp;
let rx: Receiver;
let shop: Merchant;
let db: pg.Client;
let platformKeys: Record<string, string>;
const planted: Record<string, { outTradeNo: string; openOrderId: string; attemptId: string; refundId?: string }> = {};

const api = (method: string, url: string, body?: unknown) =>
  call(t, shop, method, url, body, { timestamp: String(Math.floor(clock.now() / 1000)) });

async function paidOrder(name: string, o: Record<string, unknown> = {}) {
  const body = orderBody(o);
  const c = await api('POST', '/api/open/v1/payments', body);
  assert.equal(c.statusCode, 201, c.body);
  const pay = await t.sandbox('POST', `/payments/${c.json().openOrderId}/pay`);
  assert.equal(pay.statusCode, 200, pay.body);
  planted[name] = { outTradeNo: body.outTradeNo as string, openOrderId: c.json().openOrderId, attemptId: pay.json().attemptId };
  return planted[name]!;
}

async function fault(operation: string, outcome: string) {
  const r = await t.sandbox('POST', '/faults', { operation, outcome });
  assert.equal(r.statusCode, 201, r.body);
}

async function refund(outTradeNo: string, outRefundNo: string, refundAmountFen: number): Promise<string> {
  const r = await api('POST', '/api/open/v1/refunds', { outTradeNo, outRefundNo, refundAmountFen });
  assert.equal(r.statusCode, 201, r.body);
  return r.json().refundAttemptId;
}

/** Asks for a run of the day and lets the workers run it; answers the finished run. */
async function reconcile(): Promise<Record<string, unknown>> {
  const r = await t.admin('POST', '/reconciliation/runs', { day: DAY, provider: 'sandbox' });
  assert.equal(r.statusCode, 202, r.body);
  return finished(r.json().runs[0].runId as string);
}

/** Lets the workers run the run to its end; answers it. */
function finished(runId: string): Promise<Record<string, unknown>> {
  return waitFor('the run to finish', async () => {
    await t.workers.tick();
    const run = (await t.admin('GET', `/reconciliation/runs/${runId}`)).json();
    return run.status === 'COMPLETED' || run.status === 'FAILED' ? run : null;
  });
}

async function statementDiscrepancies(): Promise<
  { id: string; kind: string; subjectId: string; status: string; expected: unknown; reported: Record<string, unknown> }[]
> {
  const r = await t.admin('GET', '/provider-discrepancies?source=STATEMENT&limit=500');
  assert.equal(r.statusCode, 200, r.body);
  return r.json().discrepancies;
}

before(async () => {
  clock.advanceTo(dayStartMs + 12 * H);
  rx = await Receiver.start();
  t = await startTestApp({}, { clock });
  shop = await provision(t, { app: { notifyUrl: rx.url('/shop') } });
  const k = await t.admin('GET', '/platform-keys');
  platformKeys = Object.fromEntries((k.json().keys as { keyId: string; publicKeyPem: string }[]).map((x) => [x.keyId, x.publicKeyPem]));
  db = new pg.Client({ connectionString: t.config.databaseUrl! });
  await db.connect();

  // A normal day: paid and refunded, matched.
  const fine = await paidOrder('fine', { amountFen: 5000 });
  planted.fine!.refundId = await refund(fine.outTradeNo, 'RF_RECON_FINE', 1200);
  // Paid at the provider, its notice never sent.
  await fault('PAY', 'NOTICE_LOST');
  await paidOrder('untold', { amountFen: 2345 });
  // Opened at the provider for one fen more than the order.
  await fault('CREATE_ATTEMPT', 'AMOUNT_DIFFERS');
  await paidOrder('amount', { amountFen: 7000 });
  // Refunded and notified, then lost by the provider.
  const lost = await paidOrder('lostRefund', { amountFen: 9000 });
  await fault('REFUND', 'LOST');
  planted.lostRefund!.refundId = await refund(lost.outTradeNo, 'RF_RECON_LOST', 9000);
  // The sandbox's time passes the refunds' settlement, and it sends their notices.
  clock.advance(REFUND_SETTLE_MS);
  await t.svc.sandbox!.sendDueRefundNotices(1000);
  await waitFor('the refunds to settle', async () => {
    const r = await db.query(`SELECT count(*)::int AS n FROM refunds WHERE app_id = $1 AND state = 'SUCCEEDED'`, [shop.appId]);
    return r.rows[0].n === 2;
  });
  // What the provider holds that the ledger never recorded: a payment and a refund of its own books.
  const at = new Date(clock.now());
  await db.query(
    `INSERT INTO sandbox_payments(provider_ref, attempt_id, channel, amount_fen, state, paid_at, created_at, updated_at)
     VALUES ('sbx_pay_stranger', 'att_strangerpayment0000', 'ALIPAY_H5', 321, 'PAID', $1, $1, $1)`,
    [at],
  );
  await db.query(
    `INSERT INTO sandbox_refunds(provider_ref, refund_key, payment_ref, amount_fen, state, settle_at, created_at)
     VALUES ('sbx_rf_stranger', 'rf_strangerrefund000000', 'sbx_pay_stranger', 21, 'SUCCEEDED', $1, $1)`,
    [at],
  );
  // Paid here, then lost by the provider: absent from its statement, unknown to its payment query.
  const missing = await paidOrder('missing', { amountFen: 4321 });
  await db.query(`DELETE FROM sandbox_payments WHERE attempt_id = $1`, [missing.attemptId]);
  // A refund the provider refused (FAILED in the ledger, final) that its books then hold as settled.
  const contradicted = await paidOrder('contradicted', { amountFen: 6000 });
  await fault('REFUND', 'REJECT');
  const rejected = await api('POST', '/api/open/v1/refunds', {
    outTradeNo: contradicted.outTradeNo,
    outRefundNo: 'RF_RECON_STATE',
    refundAmountFen: 600,
  });
  assert.equal(rejected.statusCode, 502, rejected.body);
  const failedRefund = await db.query(`SELECT id, state FROM refunds WHERE app_id = $1 AND out_refund_no = 'RF_RECON_STATE'`, [shop.appId]);
  assert.equal(failedRefund.rows[0].state, 'FAILED');
  planted.contradicted!.refundId = failedRefund.rows[0].id as string;
  await db.query(
    `INSERT INTO sandbox_refunds(provider_ref, refund_key, payment_ref, amount_fen, state, settle_at, created_at)
     SELECT 'sbx_rf_contradicted', $1, provider_ref, 600, 'SUCCEEDED', $3, $3 FROM sandbox_payments WHERE attempt_id = $2`,
    [planted.contradicted!.refundId, contradicted.attemptId, new Date(clock.now())],
  );
});
after(async () => {
  await db.end();
  await t.stop();
  await rx.close();
});

describe('the planted discrepancies', () => {
  let run: Record<string, unknown>;
  before(async () => {
    assert.equal(
      (await api('GET', `/api/open/v1/payments/${planted.untold!.outTradeNo}`)).json().status,
      'PAYING',
      'the ledger never heard of the payment',
    );
    run = await reconcile();
  });

  test('the run completes and counts its lines', async () => {
    assert.equal(run.status, 'COMPLETED', JSON.stringify(run));
    assert.equal(run.trigger, 'ON_DEMAND');
    // The provider's lines: 6 payments (fine, untold, amount, lostRefund, stranger, contradicted) and
    // 3 refunds (fine, stranger, contradicted).
    assert.equal(run.providerLines, 9);
    // The lines' statistics were taken once the provider's lines were stored (never analyzed: -1),
    // so that their matching is planned for the lines the run has.
    const stats = await db.query<{ n: number }>(`SELECT reltuples::integer AS n FROM pg_class WHERE relname = 'reconciliation_lines'`);
    assert.ok(stats.rows[0]!.n >= 9, `the statistics count ${stats.rows[0]!.n} lines`);
    assert.equal(run.ledgerLines, 2, 'the lost refund and the lost payment: in the ledger, not in the statement');
    assert.equal(run.matched, 4);
    assert.equal(run.converged, 1);
    assert.equal(run.discrepancies, 6);
    assert.deepEqual(run.outcomes, {
      MATCHED: 4,
      CONVERGED: 1,
      AMOUNT_MISMATCH: 1,
      PAYMENT_NOT_RECORDED: 1,
      REFUND_NOT_RECORDED: 1,
      REFUND_MISSING_AT_PROVIDER: 1,
      MISSING_AT_PROVIDER: 1,
      STATE_MISMATCH: 1,
    });
  });

  test('paid but never told: converged through the notice path, the order SUCCEEDED and the merchant notified', async () => {
    const q = await api('GET', `/api/open/v1/payments/${planted.untold!.outTradeNo}`);
    assert.equal(q.json().status, 'SUCCEEDED');
    const d = (await statementDiscrepancies()).find((x) => x.kind === 'PAID_NOT_NOTIFIED')!;
    assert.equal(d.subjectId, planted.untold!.attemptId);
    assert.equal(d.status, 'RESOLVED', 'found and resolved at once: the ledger now agrees');
    assert.deepEqual(
      { ...d.reported, at: undefined, providerRef: undefined },
      {
        inStatement: true,
        day: DAY,
        runId: run.runId,
        amountFen: 2345,
        state: 'PAID',
        at: undefined,
        providerRef: undefined,
      },
    );
    const sent = await waitFor('the PAYMENT_SUCCEEDED event', async () => {
      await t.workers.tick();
      return rx.at('/shop').find((x) => {
        const b = JSON.parse(x.body) as { outTradeNo: string; eventType: string };
        return b.outTradeNo === planted.untold!.outTradeNo && b.eventType === 'PAYMENT_SUCCEEDED';
      });
    });
    const event = verifyNotification({
      headers: sent.headers as Record<string, string>,
      rawBody: Buffer.from(sent.body),
      platformPublicKeys: platformKeys,
      now: () => clock.now(),
    });
    assert.equal(event.status, 'SUCCEEDED');
    assert.equal(event.eventAmountFen, 2345);
  });

  test('a payment of another amount, a refund the provider lost, and what the ledger never recorded: kept open for the operator', async () => {
    const ds = await statementDiscrepancies();
    const of = (kind: string) => ds.filter((x) => x.kind === kind);
    const amount = of('AMOUNT_MISMATCH');
    assert.equal(amount.length, 1);
    assert.equal(amount[0]!.subjectId, planted.amount!.attemptId);
    assert.equal(amount[0]!.status, 'OPEN');
    assert.deepEqual(amount[0]!.expected, { amountFen: 7000, attemptState: 'PAID', provider: 'sandbox' });
    assert.equal(amount[0]!.reported.amountFen, 7001);
    const lostRefund = of('REFUND_MISSING_AT_PROVIDER');
    assert.equal(lostRefund.length, 1);
    assert.equal(lostRefund[0]!.subjectId, planted.lostRefund!.refundId);
    assert.equal(lostRefund[0]!.reported.inStatement, false);
    assert.deepEqual(
      of('PAYMENT_NOT_RECORDED').map((x) => [x.subjectId, x.status, x.expected]),
      [['att_strangerpayment0000', 'OPEN', null]],
    );
    assert.deepEqual(
      of('REFUND_NOT_RECORDED').map((x) => [x.subjectId, x.status]),
      [['rf_strangerrefund000000', 'OPEN']],
    );
    // The ledger kept what it had: the amount's order is still the merchant's 7000 fen.
    assert.equal((await api('GET', `/api/open/v1/payments/${planted.amount!.outTradeNo}`)).json().amountFen, 7000);
  });

  test('paid here but lost by the provider, and a refund failed here but settled there: kept open for the operator', async () => {
    const ds = await statementDiscrepancies();
    const of = (kind: string) => ds.filter((x) => x.kind === kind);
    const missing = of('MISSING_AT_PROVIDER');
    assert.deepEqual(
      missing.map((x) => [x.subjectId, x.status, x.expected, x.reported]),
      [
        [
          planted.missing!.attemptId,
          'OPEN',
          { amountFen: 4321, attemptState: 'PAID', provider: 'sandbox' },
          { inStatement: false, day: DAY, runId: run.runId },
        ],
      ],
    );
    const state = of('STATE_MISMATCH');
    assert.equal(state.length, 1);
    assert.equal(state[0]!.subjectId, planted.contradicted!.refundId);
    assert.equal(state[0]!.status, 'OPEN');
    assert.deepEqual(state[0]!.expected, { amountFen: 600, refundState: 'FAILED', provider: 'sandbox' });
    assert.deepEqual(
      { ...state[0]!.reported, at: undefined },
      {
        inStatement: true,
        day: DAY,
        runId: run.runId,
        amountFen: 600,
        state: 'SUCCEEDED',
        providerRef: 'sbx_rf_contradicted',
        at: undefined,
      },
    );
    // The ledger kept what it had: the order is still paid, the failed refund stays failed, and the
    // merchant was told nothing new about it.
    assert.equal((await api('GET', `/api/open/v1/payments/${planted.missing!.outTradeNo}`)).json().status, 'SUCCEEDED');
    const r = await db.query(`SELECT state FROM refunds WHERE id = $1`, [planted.contradicted!.refundId]);
    assert.equal(r.rows[0].state, 'FAILED');
    const settled = await db.query(`SELECT count(*)::int AS n FROM events WHERE refund_id = $1 AND event_type = 'REFUND_SUCCEEDED'`, [
      planted.contradicted!.refundId,
    ]);
    assert.equal(settled.rows[0].n, 0);
  });

  test('per line: every line with its outcome and its discrepancy', async () => {
    const r = await t.admin('GET', `/reconciliation/runs/${run.runId}/lines?limit=100`);
    assert.equal(r.statusCode, 200, r.body);
    const lines = r.json().lines as {
      origin: string;
      kind: string;
      subjectId: string;
      state: string;
      outcome: string;
      discrepancyId: string | null;
    }[];
    assert.equal(lines.length, 11);
    const byOutcome = (o: string) => lines.filter((l) => l.outcome === o);
    assert.ok(byOutcome('MATCHED').every((l) => l.discrepancyId === null));
    assert.ok(lines.filter((l) => l.outcome !== 'MATCHED').every((l) => l.discrepancyId !== null));
    assert.deepEqual(
      byOutcome('REFUND_MISSING_AT_PROVIDER').map((l) => l.origin),
      ['LEDGER'],
    );
    assert.deepEqual(
      byOutcome('MISSING_AT_PROVIDER').map((l) => [l.origin, l.kind, l.subjectId]),
      [['LEDGER', 'PAYMENT', planted.missing!.attemptId]],
    );
    assert.deepEqual(
      byOutcome('STATE_MISMATCH').map((l) => [l.origin, l.kind, l.subjectId, l.state]),
      [['PROVIDER', 'REFUND', planted.contradicted!.refundId, 'SUCCEEDED']],
    );
    const flagged = await t.admin('GET', `/reconciliation/runs/${run.runId}/lines?outcome=AMOUNT_MISMATCH`);
    assert.deepEqual(
      flagged.json().lines.map((l: { subjectId: string }) => l.subjectId),
      [planted.amount!.attemptId],
    );
  });

  test('a rerun finds the same, applies nothing twice and adds no discrepancy; the earlier lines are dropped', async () => {
    const before = await statementDiscrepancies();
    const events = async () =>
      (await db.query(`SELECT count(*)::int AS n FROM events WHERE order_id = $1`, [planted.untold!.openOrderId])).rows[0].n as number;
    const eventsBefore = await events();
    const again = await reconcile();
    assert.equal(again.status, 'COMPLETED');
    assert.deepEqual(
      again.outcomes,
      {
        MATCHED: 5,
        AMOUNT_MISMATCH: 1,
        PAYMENT_NOT_RECORDED: 1,
        REFUND_NOT_RECORDED: 1,
        REFUND_MISSING_AT_PROVIDER: 1,
        MISSING_AT_PROVIDER: 1,
        STATE_MISMATCH: 1,
      },
      'the converged payment now matches; the rest is found again',
    );
    const after = await statementDiscrepancies();
    assert.deepEqual(after.map((x) => [x.id, x.kind, x.status]).sort(), before.map((x) => [x.id, x.kind, x.status]).sort());
    assert.equal(await events(), eventsBefore, 'no second event');
    const old = await t.admin('GET', `/reconciliation/runs/${run.runId}/lines`);
    assert.deepEqual(old.json().lines, [], "the earlier run's lines are dropped; its counts stay");
    assert.equal((await t.admin('GET', `/reconciliation/runs/${run.runId}`)).json().providerLines, 9);
  });

  test('a finding the provider then corrects is resolved by the next run', async () => {
    await db.query(`UPDATE sandbox_payments SET amount_fen = 7000 WHERE attempt_id = $1`, [planted.amount!.attemptId]);
    const third = await reconcile();
    assert.equal(third.status, 'COMPLETED');
    const d = (await statementDiscrepancies()).find((x) => x.kind === 'AMOUNT_MISMATCH')!;
    assert.equal(d.status, 'RESOLVED');
  });

  test('the metrics: discrepancies found, open and resolved; the last run', async () => {
    const m = await t.server.inject({ method: 'GET', url: '/metrics', headers: { authorization: `Bearer ${t.adminToken}` } });
    assert.equal(m.statusCode, 200);
    assert.match(
      m.body,
      /mps_provider_discrepancies\{provider="sandbox",source="STATEMENT",kind="PAID_NOT_NOTIFIED",status="RESOLVED"\} 1/,
    );
    assert.match(
      m.body,
      /mps_provider_discrepancies\{provider="sandbox",source="STATEMENT",kind="REFUND_MISSING_AT_PROVIDER",status="OPEN"\} 1/,
    );
    assert.match(m.body, /mps_provider_discrepancies\{provider="sandbox",source="STATEMENT",kind="AMOUNT_MISMATCH",status="RESOLVED"\} 1/);
    assert.match(m.body, /mps_provider_discrepancies\{provider="sandbox",source="STATEMENT",kind="MISSING_AT_PROVIDER",status="OPEN"\} 1/);
    assert.match(m.body, /mps_provider_discrepancies\{provider="sandbox",source="STATEMENT",kind="STATE_MISMATCH",status="OPEN"\} 1/);
    assert.match(m.body, /mps_provider_discrepancies_open\{provider="sandbox",kind="MISSING_AT_PROVIDER"\} 1/);
    assert.match(m.body, /mps_provider_discrepancies_open\{provider="sandbox",kind="STATE_MISMATCH"\} 1/);
    assert.match(m.body, /mps_reconciliation_last_completed_seconds\{provider="sandbox"\} \d+/);
    // The third run's findings: the payment and refund never recorded, the lost refund, the lost
    // payment and the contradicted refund (the amount was corrected).
    assert.match(m.body, /mps_reconciliation_last_discrepancies\{provider="sandbox"\} 5/);
  });
});

describe('the runs', () => {
  test('the daily run of yesterday is created from 10:00 Asia/Shanghai and run by the workers, once', async () => {
    clock.advanceTo(dayStartMs + 24 * H + 10 * H + 1000);
    const done = await waitFor('the daily run', async () => {
      await t.workers.tick();
      const runs = (await t.admin('GET', `/reconciliation/runs?day=${DAY}&provider=sandbox`)).json().runs as {
        trigger: string;
        status: string;
      }[];
      return runs.find((r) => r.trigger === 'SCHEDULED' && r.status === 'COMPLETED');
    });
    assert.ok(done);
    await t.workers.tick();
    const scheduled = (await t.admin('GET', `/reconciliation/runs?day=${DAY}`))
      .json()
      .runs.filter((r: { trigger: string }) => r.trigger === 'SCHEDULED');
    assert.equal(scheduled.length, 1);
  });

  test('asking: a day later than today, not a date, or a provider without statements is refused', async () => {
    const today = new Date(clock.now() + 8 * H).toISOString().slice(0, 10);
    const tomorrow = new Date(clock.now() + 32 * H).toISOString().slice(0, 10);
    for (const [body, status] of [
      [{ day: tomorrow }, 400],
      [{ day: '2026-02-30' }, 400],
      [{ day: '0000-01-01' }, 400],
      [{ day: today, provider: 'paypal' }, 400],
      [{ day: today, extra: 1 }, 400],
      [{}, 400],
    ] as const) {
      const r = await t.admin('POST', '/reconciliation/runs', body);
      assert.equal(r.statusCode, status, `${JSON.stringify(body)}: ${r.body}`);
      assert.equal(r.json().code, 'ADMIN_VALIDATION_FAILED');
    }
    assert.equal((await t.admin('GET', '/reconciliation/runs/999999')).statusCode, 404);
    assert.equal((await t.admin('GET', '/reconciliation/runs/abc')).statusCode, 404);
    assert.equal((await t.admin('GET', '/reconciliation/runs?limit=0')).statusCode, 400);
    assert.equal((await t.admin('GET', '/reconciliation/runs?bad=1')).statusCode, 400);
    // A day that is no date, in the list's filter too: 400, never the database's error.
    for (const d of ['2026-02-30', '2026-04-31', '1900-02-29', '0000-01-01', '2026-13-01']) {
      const r = await t.admin('GET', `/reconciliation/runs?day=${d}`);
      assert.equal(r.statusCode, 400, `${d}: ${r.body}`);
      assert.equal(r.json().code, 'ADMIN_VALIDATION_FAILED');
    }
  });

  test('who may ask: finance, with an audit entry per run; support reads the runs and is refused the rest', async () => {
    const fiona = await createOperator(t, 'fiona', 'finance');
    const sam = await createOperator(t, 'sam', 'support');
    const day = new Date(clock.now() + 8 * H - 24 * H).toISOString().slice(0, 10);
    const refused = await asOperator(t, sam, 'POST', '/reconciliation/runs', { day });
    assert.equal(refused.statusCode, 403, refused.body);
    assert.equal(refused.json().code, 'ADMIN_FORBIDDEN');
    assert.equal((await asOperator(t, sam, 'GET', '/reconciliation/runs')).statusCode, 200);
    const open = (await t.admin('GET', '/provider-discrepancies?status=OPEN&source=STATEMENT')).json().discrepancies as { id: string }[];
    assert.equal((await asOperator(t, sam, 'POST', `/provider-discrepancies/${open[0]!.id}/resolve`)).statusCode, 403);

    const asked = await asOperator(t, fiona, 'POST', '/reconciliation/runs', { day, provider: 'sandbox' });
    assert.equal(asked.statusCode, 202, asked.body);
    const runId = asked.json().runs[0].runId as string;
    const audit = (await t.admin('GET', `/audit?action=reconciliation.request&entityId=${runId}`)).json().entries;
    assert.equal(audit.length, 1);
    assert.equal(audit[0].operatorName, 'fiona');
    assert.equal(audit[0].entityType, 'reconciliation_run');
    assert.deepEqual(audit[0].after, { provider: 'sandbox', day });
    assert.equal((await finished(runId)).status, 'COMPLETED');
  });
});
