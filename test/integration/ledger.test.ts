/**
 * A year of history in the ledger (bench/lib/ledger.ts, docs/performance.md "A year of data"):
 * the service reads the bulk-loaded rows as its own (an old order, its refund, its events, a day's
 * statement, a day's reconciliation without a finding), and each read of the console, the portal,
 * the statements, the reconciliation, the event log and the purges walks an index: EXPLAIN (FORMAT
 * JSON) of the very statements the repositories send, on the filled database, has no sequential scan
 * of a large table.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { type LedgerResult, fillLedger } from '../../bench/lib/ledger.ts';
import type { Queryable } from '../../src/store/db.ts';
import { dashboardFigures, hourlyOrders, listRefunds, searchOrders } from '../../src/store/back-office-reads.ts';
import { listAuditEntries } from '../../src/store/audit.ts';
import { getAppEvent, listAppEvents, purgeDeliveryLog } from '../../src/store/events.ts';
import { addLedgerOnlyLines, listLines } from '../../src/store/reconciliation.ts';
import { purgeRequestIds } from '../../src/store/replays.ts';
import { purgeRecreateRequests } from '../../src/store/recreate-requests.ts';
import { statementLines } from '../../src/store/sandbox-books.ts';
import { statementPage } from '../../src/store/statements.ts';
import { type Merchant, type TestApp, call, merchantKeyPair, startTestApp } from '../helpers/app.ts';
import { FakeClock, waitFor } from '../helpers/events.ts';

const ORDERS = Number(process.env.LEDGER_TEST_ORDERS ?? 60_000);
const clock = new FakeClock();
const DAY_MS = 86_400_000;
/**
 * Tables the fill made large (20,000 rows and more): none of them may be read whole. A smaller one
 * (the refunds of a small fill, the audit log, the request ids a day keeps) may be, as the planner
 * sees fit: at a larger size the same statement reads it by its index.
 */
const LARGE = new Set<string>();
const LARGE_ROWS = 20_000;

let t: TestApp;
let fill: LedgerResult;
let mch: Merchant;

const api = (method: string, url: string, body?: unknown) =>
  call(t, mch, method, url, body, { timestamp: String(Math.floor(clock.now() / 1000)) });

/** The instant a Shanghai day starts. */
const dayStart = (day: string) => new Date(`${day}T00:00:00+08:00`);
const dayAfter = (day: string, n: number) => new Date(dayStart(day).getTime() + n * DAY_MS + 8 * 3600_000).toISOString().slice(0, 10);

before(async () => {
  t = await startTestApp({}, { clock });
  fill = await fillLedger(t.config.databaseUrl!, { orders: ORDERS, now: new Date(clock.now()) });
  const keyId = 'key-ledger';
  const k = await t.admin('POST', `/apps/${fill.sample.appId}/keys`, { keyId, publicKeyPem: merchantKeyPair().publicKeyPem });
  assert.equal(k.statusCode, 201, k.body);
  mch = { merchantId: fill.sample.merchantId, appId: fill.sample.appId, keyId, privateKeyPem: merchantKeyPair().privateKeyPem };
});

after(async () => {
  await t?.stop();
});

describe('a year of history, bulk-loaded', () => {
  test('the fill is what it says: a year of orders with what comes with them', () => {
    assert.equal(fill.rows.orders, ORDERS);
    assert.ok(fill.rows.attempts > ORDERS, 'second attempts');
    assert.ok(fill.rows.refunds > ORDERS * 0.05 && fill.rows.refunds < ORDERS * 0.1, `refunds ${fill.rows.refunds}`);
    assert.ok(fill.rows.events > ORDERS, 'an event per order and per refund');
    assert.ok(fill.rows.event_deliveries > fill.rows.events, 'some deliveries failed once');
    assert.ok(fill.rows.duplicate_payments > 0, 'duplicate payments');
    assert.ok(fill.rows.provider_trades > 0, 'provider trades');
    assert.ok(fill.rows.audit_log > 0 && fill.rows.statement_files > 0 && fill.rows.reconciliation_runs >= 365);
    assert.equal(dayAfter(fill.firstDay, 365), dayAfter(fill.lastDay, 1));
  });

  test('an old order, its refund and its events read through the open API as the service wrote them', async () => {
    const r = await t.svc.db.query<{ out_trade_no: string; id: string; amount_fen: string; out_refund_no: string; refund_fen: string }>(
      `SELECT o.out_trade_no, o.id, o.amount_fen, r.out_refund_no, r.amount_fen AS refund_fen
         FROM orders o JOIN refunds r ON r.order_id = o.id
        WHERE o.app_id = $1 AND o.created_at < $2 ORDER BY o.created_at LIMIT 1`,
      [mch.appId, new Date(clock.now() - 200 * DAY_MS)],
    );
    const old = r.rows[0]!;
    const q = await api('GET', `/api/open/v1/payments/${old.out_trade_no}`);
    assert.equal(q.statusCode, 200, q.body);
    assert.equal(q.json().openOrderId, old.id);
    assert.equal(q.json().status, 'SUCCEEDED');
    assert.equal(q.json().amountFen, Number(old.amount_fen));
    const rf = await api('GET', `/api/open/v1/refunds/${old.out_refund_no}`);
    assert.equal(rf.statusCode, 200, rf.body);
    assert.equal(rf.json().state, 'SUCCEEDED');
    assert.equal(rf.json().amountFen, Number(old.refund_fen));
    // A close of an order paid long ago is refused as the contract says, and changes nothing.
    const c = await api('POST', `/api/open/v1/payments/${old.out_trade_no}/close`, {});
    assert.ok(c.statusCode >= 200 && c.statusCode < 500, c.body);
    assert.equal((await api('GET', `/api/open/v1/payments/${old.out_trade_no}`)).json().status, 'SUCCEEDED');
    // Its events in the event log, with their delivery.
    const ev = await t.svc.db.query<{ id: string }>(`SELECT id FROM events WHERE order_id = $1 ORDER BY state_version`, [old.id]);
    assert.equal(ev.rows.length, 2);
    for (const { id } of ev.rows) {
      const e = await api('GET', `/api/open/v1/events/${id}`);
      assert.equal(e.statusCode, 200, e.body);
      assert.equal(e.json().status, 'DELIVERED');
      assert.ok(e.json().deliveries.length >= 1);
      assert.equal(e.json().payload.eventId, id);
      assert.equal(e.json().payload.outTradeNo, old.out_trade_no);
    }
    const list = await api('GET', '/api/open/v1/events?limit=5');
    assert.equal(list.statusCode, 200, list.body);
    assert.equal(list.json().events.length, 5);
  });

  test("an old day's statement counts the day's events of the app", async () => {
    const day = dayAfter(fill.firstDay, 120);
    const s = await api('GET', `/api/open/v1/statements/${day}`);
    assert.equal(s.statusCode, 200, s.body);
    const n = await t.svc.db.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM events WHERE app_id = $1 AND created_at >= $2 AND created_at < $3',
      [mch.appId, dayStart(day), new Date(dayStart(day).getTime() + DAY_MS)],
    );
    assert.ok(n.rows[0]!.n > 0);
    assert.equal(s.json().rowCount, n.rows[0]!.n);
  });

  test("a day's reconciliation against the sandbox's books (the fill writes the last 40 days of them) finds nothing", async () => {
    const day = dayAfter(fill.firstDay, 340);
    const r = await t.admin('POST', '/reconciliation/runs', { day, provider: 'sandbox' });
    assert.equal(r.statusCode, 202, r.body);
    const runId = r.json().runs[0].runId as string;
    const run = await waitFor(
      'the run to finish',
      async () => {
        await t.workers.tick();
        const x = (await t.admin('GET', `/reconciliation/runs/${runId}`)).json();
        return x.status === 'COMPLETED' || x.status === 'FAILED' ? x : null;
      },
      60_000,
    );
    assert.equal(run.status, 'COMPLETED', JSON.stringify(run));
    assert.ok(run.providerLines > 0);
    assert.equal(run.discrepancies, 0, JSON.stringify(run));
    assert.equal(run.matched, run.providerLines);
  });
});

// --- plans ----------------------------------------------------------------------------------------

interface PlanNode {
  'Node Type': string;
  'Relation Name'?: string;
  'Index Name'?: string;
  Plans?: PlanNode[];
}

function nodes(p: PlanNode): PlanNode[] {
  return [p, ...(p.Plans ?? []).flatMap(nodes)];
}

/**
 * A Queryable that answers every statement with its plan: EXPLAIN (FORMAT JSON) of the statement
 * the repository sends, with its parameters (a custom plan, as the pool's unnamed statements get).
 */
function explainer(plans: PlanNode[]): Queryable {
  const q = async (cfg: string | { text: string; values?: unknown[] }, values?: unknown[]) => {
    const text = typeof cfg === 'string' ? cfg : cfg.text;
    const vals = typeof cfg === 'string' ? values : (cfg.values ?? values);
    if (!/^\s*(SELECT|WITH|DELETE|UPDATE|INSERT)/i.test(text)) return { rows: [], rowCount: 0 };
    const r = await t.svc.db.query<{ 'QUERY PLAN': [{ Plan: PlanNode }] }>(`EXPLAIN (FORMAT JSON) ${text}`, vals as unknown[]);
    plans.push(r.rows[0]!['QUERY PLAN'][0].Plan);
    // The app's merchant (searchOrders' first statement) answered for real.
    if (/^SELECT merchant_id AS m FROM apps/.test(text)) return t.svc.db.query(text, vals as unknown[]);
    return { rows: [], rowCount: 0 };
  };
  return { query: q } as unknown as Queryable;
}

async function planOf(what: string, fn: (db: Queryable) => Promise<unknown>): Promise<PlanNode[]> {
  const plans: PlanNode[] = [];
  await fn(explainer(plans));
  assert.ok(plans.length > 0, `${what}: no statement`);
  const all = plans.flatMap(nodes);
  const seq = all.filter((n) => n['Node Type'] === 'Seq Scan' && LARGE.has(n['Relation Name'] ?? ''));
  assert.deepEqual(
    seq.map((n) => n['Relation Name']),
    [],
    `${what} reads a large table whole:\n${JSON.stringify(plans, null, 1).slice(0, 4000)}`,
  );
  return all;
}

function usesIndex(all: PlanNode[], index: string): boolean {
  const used = all.some((n) => n['Index Name'] === index);
  if (!used) console.log(all.map((n) => `${n['Node Type']} ${n['Relation Name'] ?? ''} ${n['Index Name'] ?? ''}`).join('\n'));
  return used;
}

describe('each read walks an index at any ledger size (EXPLAIN on the filled database)', () => {
  before(async () => {
    await t.svc.db.query('ANALYZE');
    const r = await t.svc.db.query<{ relname: string }>(
      `SELECT relname FROM pg_class WHERE relkind = 'r' AND relnamespace = 'public'::regnamespace AND reltuples >= $1`,
      [LARGE_ROWS],
    );
    for (const x of r.rows) LARGE.add(x.relname);
    assert.ok(LARGE.has('orders') && LARGE.has('events') && LARGE.has('attempts'), [...LARGE].join());
  });

  test("a merchant's statement of a day: the app's events of that day", async () => {
    const day = dayAfter(fill.firstDay, 150);
    const all = await planOf('statement page', (db) =>
      statementPage(db, {
        appId: mch.appId,
        start: dayStart(day),
        end: new Date(dayStart(day).getTime() + DAY_MS),
        after: null,
        limit: 1000,
      }),
    );
    assert.ok(usesIndex(all, 'events_app_created'));
  });

  test("a day's reconciliation: the provider's lines of the day, the ledger's settled events of the day, the run's lines", async () => {
    const day = dayAfter(fill.firstDay, 150);
    const start = dayStart(day);
    const end = new Date(start.getTime() + DAY_MS);
    const now = new Date(clock.now());
    await planOf('sandbox statement (payments)', (db) => statementLines(db, 'PAYMENT', { start, end, now, after: null, limit: 1000 }));
    await planOf('sandbox statement (refunds)', (db) => statementLines(db, 'REFUND', { start, end, now, after: null, limit: 1000 }));
    const runId = (await t.svc.db.query<{ id: string }>(`SELECT id::text FROM reconciliation_runs WHERE day = $1`, [day])).rows[0]!.id;
    const all = await planOf('ledger-only lines', (db) => addLedgerOnlyLines(db, runId, 'sandbox', start, end, 1_000_000));
    assert.ok(usesIndex(all, 'events_settled_created'));
    await planOf('run lines page', (db) => listLines(db, runId, { outcome: null, afterLineNo: 0, limit: 100 }));
    await planOf('run lines of an outcome', (db) => listLines(db, runId, { outcome: 'AMOUNT_MISMATCH', afterLineNo: 0, limit: 100 }));
  });

  test("the console's and the portal's searches", async () => {
    const base = {
      openOrderId: null,
      outTradeNo: null,
      appId: null,
      status: null,
      channel: null,
      from: null,
      to: null,
      before: null,
      limit: 50,
    };
    assert.ok(usesIndex(await planOf('newest orders', (db) => searchOrders(db, base)), 'orders_created'));
    await planOf('by order id', (db) => searchOrders(db, { ...base, openOrderId: fill.sample.openOrderId }));
    const byNo = await planOf('by order number', (db) => searchOrders(db, { ...base, outTradeNo: fill.sample.outTradeNo }));
    assert.ok(usesIndex(byNo, 'orders_app_id_out_trade_no_key'));
    await planOf('by app', (db) => searchOrders(db, { ...base, appId: mch.appId }));
    await planOf('by status', (db) => searchOrders(db, { ...base, status: 'SUCCEEDED' }));
    const day = dayAfter(fill.firstDay, 90);
    await planOf('a day', (db) => searchOrders(db, { ...base, from: dayStart(day), to: new Date(dayStart(day).getTime() + DAY_MS) }));
    // The largest merchant's page: read newest first among all (a third of them are its own); a small one's by its index.
    await planOf("the largest merchant's orders (portal)", (db) => searchOrders(db, { ...base, merchantId: mch.merchantId }));
    const small = (await t.svc.db.query<{ m: string }>('SELECT merchant_id AS m FROM orders GROUP BY 1 ORDER BY count(*) LIMIT 1')).rows[0]!
      .m;
    const portal = await planOf("a small merchant's orders (portal)", (db) => searchOrders(db, { ...base, merchantId: small }));
    assert.ok(usesIndex(portal, 'orders_merchant_created'));
    await planOf("a merchant's order number (portal)", (db) =>
      searchOrders(db, { ...base, merchantId: mch.merchantId, outTradeNo: fill.sample.outTradeNo }),
    );
    await planOf('refunds', (db) => listRefunds(db, { state: null, appId: null, limit: 50 }));
    await planOf("a merchant's refunds", (db) => listRefunds(db, { state: null, appId: null, limit: 50, merchantId: mch.merchantId }));
    await planOf('dashboard', (db) => dashboardFigures(db, new Date(clock.now() - DAY_MS)));
    await planOf('hourly orders', (db) => hourlyOrders(db, new Date(clock.now())));
    await planOf('audit log', (db) =>
      listAuditEntries(db, {
        operatorName: null,
        action: null,
        entityType: null,
        entityId: null,
        requestId: null,
        from: null,
        to: null,
        beforeId: null,
        limit: 50,
      }),
    );
  });

  test('the event log: a page of the app, one event with its deliveries', async () => {
    const page = await planOf('event log page', (db) =>
      listAppEvents(db, { appId: mch.appId, type: null, status: null, from: null, to: null, before: null, limit: 50 }),
    );
    assert.ok(usesIndex(page, 'events_app_created'));
    const day = dayAfter(fill.firstDay, 30);
    await planOf('event log of a day', (db) =>
      listAppEvents(db, {
        appId: mch.appId,
        type: 'PAYMENT_SUCCEEDED',
        status: null,
        from: dayStart(day),
        to: new Date(dayStart(day).getTime() + DAY_MS),
        before: null,
        limit: 50,
      }),
    );
    const eventId = (await t.svc.db.query<{ id: string }>('SELECT id FROM events WHERE app_id = $1 LIMIT 1', [mch.appId])).rows[0]!.id;
    await planOf('one event', (db) => getAppEvent(db, mch.appId, eventId, 50));
  });

  test('the purges walk their indexes, a batch at a time', async () => {
    const now = clock.now();
    const del = await planOf('delivery log retention', (db) => purgeDeliveryLog(db, new Date(now - 30 * DAY_MS), 5000));
    assert.ok(usesIndex(del, 'event_deliveries_failed'));
    await planOf('request ids', (db) => purgeRequestIds(db, new Date(now - DAY_MS), 5000));
    await planOf('re-create request ids', (db) => purgeRecreateRequests(db, new Date(now - DAY_MS), 5000));
  });
});
