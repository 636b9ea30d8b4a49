/**
 * The event dispatcher's claim (src/store/events.ts, CLAIM_SQL; migrations/0006) reads what
 * one poll can take, not the backlog: with thousands of PENDING events (due and not yet due) it
 * touches a few dozen event rows, and still takes each app's oldest due events, the per-app limit
 * at most, round-robin across apps.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { CLAIM_SQL } from '../../src/store/events.ts';
import { type Db, createPool, migrate } from '../../src/store/db.ts';
import { type TestDatabase, createTestDatabase } from '../helpers/db.ts';
import { insertOrders } from '../helpers/rows.ts';

const BACKLOG = 3000;
/** The setting the function mps_claim_events runs with (migrations/0015), for the claims run as text here. */
const SEQSCAN_OFF = 'SET LOCAL enable_seqscan = off';

interface PlanNode {
  'Relation Name'?: string;
  'Index Name'?: string;
  'Actual Rows'?: number;
  'Actual Loops'?: number;
  'Rows Removed by Filter'?: number;
  'Rows Removed by Index Recheck'?: number;
  Plans?: PlanNode[];
}

/**
 * Rows of a table read by the plan: returned plus filtered out, over all loops; with `indexes`,
 * the entries its index scans returned too (a bitmap index scan reads entries, not rows).
 */
function rowsRead(node: PlanNode, table: string, indexes = false): number {
  let n = 0;
  if (node['Relation Name'] === table || (indexes && node['Index Name']?.startsWith(`${table}_`))) {
    const loops = node['Actual Loops'] ?? 1;
    n += ((node['Actual Rows'] ?? 0) + (node['Rows Removed by Filter'] ?? 0) + (node['Rows Removed by Index Recheck'] ?? 0)) * loops;
  }
  for (const child of node.Plans ?? []) n += rowsRead(child, table, indexes);
  return n;
}

/** Runs `fn` on one connection in a transaction that is then rolled back, planned as the function runs. */
async function undone<T>(db: Db, fn: (c: pg.PoolClient) => Promise<T>): Promise<T> {
  const c = await (db as pg.Pool).connect();
  try {
    await c.query('BEGIN');
    await c.query(SEQSCAN_OFF);
    return await fn(c);
  } finally {
    await c.query('ROLLBACK');
    c.release();
  }
}

/** The claim's plan with what it read (EXPLAIN ANALYZE claims too: run it where that is undone). */
async function explainClaim(c: pg.PoolClient, params: unknown[]): Promise<PlanNode> {
  const plan = await c.query<{ 'QUERY PLAN': { Plan: PlanNode }[] }>(`EXPLAIN (ANALYZE, FORMAT JSON) ${CLAIM_SQL}`, params);
  return plan.rows[0]!['QUERY PLAN'][0]!.Plan;
}

const claimedIds = async (c: pg.PoolClient, params: unknown[]) =>
  (await c.query<{ id: string }>(CLAIM_SQL, params)).rows.map((r) => r.id).sort();

describe('event claim cost', () => {
  let tdb: TestDatabase;
  let db: Db;
  before(async () => {
    tdb = await createTestDatabase();
    db = createPool(tdb.url, 2);
    await migrate(db);
    await db.query(`INSERT INTO merchants(id, name, entity_type) VALUES ('mch_ev', 'm', 'CORPORATE')`);
    await db.query(
      `INSERT INTO apps(id, merchant_id, channels, trade_scopes, payment_window_seconds, rate_limit_per_second)
       VALUES ('app_backlog', 'mch_ev', '{}', '{}', 900, 100), ('app_quiet', 'mch_ev', '{}', '{}', 900, 100)`,
    );
    // Many apps with nothing to deliver: they must cost a poll nothing.
    await db.query(
      `INSERT INTO apps(id, merchant_id, channels, trade_scopes, payment_window_seconds, rate_limit_per_second)
       SELECT 'app_idle_' || g, 'mch_ev', '{}', '{}', 900, 100 FROM generate_series(1, 2000) g`,
    );
    // One order per event (no event waits for an earlier one of its order).
    await insertOrders(db, { key: 'ev', appId: 'app_backlog', merchantId: 'mch_ev', status: 'CLOSED', from: 0, to: 2 * BACKLOG });
    // app_backlog: BACKLOG events overdue (oldest first by number) and BACKLOG not due for an hour;
    // app_quiet: one due event, newer than all of them.
    await db.query(
      `INSERT INTO events(id, app_id, order_id, event_type, state_version, payload, next_attempt_at)
       SELECT 'evt_due_' || lpad(g::text, 5, '0'), 'app_backlog', 'ord_ev_' || g, 'PAYMENT_CLOSED', 2, '{}',
              now() - interval '1 hour' + g * interval '1 ms'
         FROM generate_series(1, $1) g`,
      [BACKLOG],
    );
    await db.query(
      `INSERT INTO events(id, app_id, order_id, event_type, state_version, payload, next_attempt_at)
       SELECT 'evt_later_' || g, 'app_backlog', 'ord_ev_' || (g + $1), 'PAYMENT_CLOSED', 2, '{}', now() + interval '1 hour'
         FROM generate_series(1, $1) g`,
      [BACKLOG],
    );
    await db.query(
      `INSERT INTO events(id, app_id, order_id, event_type, state_version, payload, next_attempt_at)
       VALUES ('evt_quiet', 'app_quiet', 'ord_ev_0', 'PAYMENT_CLOSED', 2, '{}', now() - interval '1 minute')`,
    );
    await db.query('ANALYZE events');
  });
  after(async () => {
    await db.end();
    await tdb.drop();
  });

  test('a poll over a backlog of 6,001 PENDING events and 2,000 idle apps reads a few hundred rows and takes the oldest due of each app', async () => {
    const now = new Date();
    const params = [now, 4, 16, [], 'tok_test', new Date(now.getTime() + 60_000), [], [], 4];
    const root = await undone(db, (c) => explainClaim(c, params));
    const events = rowsRead(root, 'events');
    const apps = rowsRead(root, 'apps');
    // The due sample (256 events, full here: a backlog), then a few per app.
    assert.ok(events < 300, `event rows read: ${events}`);
    assert.ok(apps < 20, `app rows read: ${apps} (of 2,002 apps)`);
    assert.deepEqual(await undone(db, (c) => claimedIds(c, params)), [
      'evt_due_00001',
      'evt_due_00002',
      'evt_due_00003',
      'evt_due_00004',
      'evt_quiet',
    ]);
  });

  test('1,500 apps with only events not yet due, and two due: the poll reads the due ones, not one row per app', async () => {
    const { root, claimed } = await undone(db, async (c) => {
      await c.query(`DELETE FROM events WHERE id LIKE 'evt_due_%' AND id <> 'evt_due_00001'`);
      await c.query(
        `INSERT INTO events(id, app_id, order_id, event_type, state_version, payload, next_attempt_at)
         SELECT 'evt_idle_' || g, 'app_idle_' || g, 'ord_ev_' || g, 'PAYMENT_CLOSED', 2, '{}', now() + interval '1 hour'
           FROM generate_series(1, 1500) g`,
      );
      const now = new Date();
      const params = [now, 4, 16, [], 'tok_test', new Date(now.getTime() + 60_000), [], [], 4];
      await c.query('SAVEPOINT explained'); // EXPLAIN ANALYZE claims too: undone before the real claim
      const plan = await explainClaim(c, params);
      await c.query('ROLLBACK TO SAVEPOINT explained');
      return { root: plan, claimed: await claimedIds(c, params) };
    });
    const events = rowsRead(root, 'events');
    assert.ok(events < 100, `event rows read: ${events}`);
    assert.deepEqual(claimed, ['evt_due_00001', 'evt_quiet']);
  });

  test('leases held count against the per-app limit', async () => {
    const now = new Date();
    const claimed = await undone(db, async (c) => {
      await c.query(
        `UPDATE events SET locked_by = 'other', locked_until = $1 WHERE id IN ('evt_due_00001', 'evt_due_00002', 'evt_due_00003')`,
        [new Date(now.getTime() + 60_000)],
      );
      return claimedIds(c, [now, 4, 16, [], 'tok_test', new Date(now.getTime() + 60_000), [], [], 4]);
    });
    assert.deepEqual(claimed, ['evt_due_00004', 'evt_quiet']);
  });

  test('the claim the dispatcher runs (the function mps_claim_events) is this text, planned with sequential scans off', async () => {
    const r = await db.query<{ src: string; config: string[] | null }>(
      `SELECT prosrc AS src, proconfig AS config FROM pg_proc WHERE proname = 'mps_claim_events'`,
    );
    assert.equal(r.rows.length, 1);
    assert.equal(r.rows[0]!.src.trim(), CLAIM_SQL.trim(), 'migrations/0015 and src/store/events.ts agree');
    assert.deepEqual(r.rows[0]!.config, ['enable_seqscan=off']);
  });
});

describe('event claim on a young table (never analyzed)', () => {
  let tdb: TestDatabase;
  let db: Db;
  before(async () => {
    tdb = await createTestDatabase();
    db = createPool(tdb.url, 2);
    await migrate(db);
    // What a new deployment's first backlog meets: no statistics on events yet.
    await db.query('ALTER TABLE events SET (autovacuum_enabled = false)');
    await db.query(`INSERT INTO merchants(id, name, entity_type) VALUES ('mch_young', 'm', 'CORPORATE')`);
    await db.query(
      `INSERT INTO apps(id, merchant_id, channels, trade_scopes, payment_window_seconds, rate_limit_per_second)
       VALUES ('app_young', 'mch_young', '{}', '{}', 900, 100)`,
    );
    await insertOrders(db, { key: 'yg', appId: 'app_young', merchantId: 'mch_young', status: 'SUCCEEDED', from: 1, to: 2500 });
    // Two events per order, the second held back while the first is PENDING: 5,000 PENDING.
    for (const [type, version, offset] of [
      ['PAYMENT_SUCCEEDED', 2, 0],
      ['REFUND_SUCCEEDED', 3, 1],
    ] as const) {
      await db.query(
        `INSERT INTO events(id, app_id, order_id, event_type, state_version, payload, next_attempt_at)
         SELECT 'evt_' || $1 || '_' || lpad(g::text, 5, '0'), 'app_young', 'ord_yg_' || g, $1, $2, '{}',
                now() - interval '1 hour' + (2 * g + $3) * interval '1 ms'
           FROM generate_series(1, 2500) g`,
        [type, version, offset],
      );
    }
  });
  after(async () => {
    await db.end();
    await tdb.drop();
  });

  test("an order's earlier events are probed through events_order alone, not ANDed with every PENDING event of the app", async () => {
    const now = new Date();
    const params = [now, 4, 32, [], 'tok_test', new Date(now.getTime() + 60_000), ['app_young'], [64], 64];
    const touched = rowsRead(await undone(db, (c) => explainClaim(c, params)), 'events', true);
    // The due sample, the app's first ready events and their orders' probes: a few thousand rows
    // at most (the whole partial index per probe was ~245,000).
    assert.ok(touched < 15_000, `event rows and index entries read: ${touched}`);
    const claimed = await undone(db, (c) => claimedIds(c, params));
    assert.equal(claimed.length, 32);
    assert.ok(
      claimed.every((id) => id.startsWith('evt_PAYMENT_SUCCEEDED_')),
      'no refund event ahead of its payment',
    );
  });
});
