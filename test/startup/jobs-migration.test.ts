/**
 * An upgraded database keeps its background work (migrations/0030): the follow-ups, the checks of
 * uncertain attempts and refunds, the unsettled duplicate refunds and the reconciliation runs
 * written before the job queue become jobs, due when they were.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs/promises';
import path from 'node:path';
import { test } from 'node:test';
import { createPool, migrate } from '../../src/store/db.ts';
import { createTestDatabase } from '../helpers/db.ts';
import { insertAttempts, insertOrders } from '../helpers/rows.ts';

const DIR = path.resolve(import.meta.dirname, '../../migrations');

test('the work of a database from before the job queue is carried over as jobs', async () => {
  const tdb = await createTestDatabase();
  const db = createPool(tdb.url, 2);
  try {
    // The schema as it was before 0030.
    await db.query('CREATE TABLE schema_migrations (version text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())');
    for (const f of (await fs.readdir(DIR)).filter((x) => /^\d{4}_.*\.sql$/.test(x) && x < '0030').sort()) {
      await db.query(await fs.readFile(path.join(DIR, f), 'utf8'));
      await db.query('INSERT INTO schema_migrations(version) VALUES ($1)', [f.slice(0, -4)]);
    }
    const due = new Date('2030-01-01T00:00:00Z');
    await insertOrders(db, { key: 'old', appId: 'app_old', merchantId: 'mch_old', status: 'PAYING', from: 1, to: 4 });
    await insertAttempts(db, { key: 'old', from: 1, to: 4, state: 'ACCEPTED' });
    await db.query(`UPDATE attempts SET state = 'UNKNOWN', next_check_at = $1, check_count = 3 WHERE id = 'att_old_1'`, [due]);
    await db.query(`UPDATE attempts SET state = 'PENDING', next_check_at = $1 WHERE id = 'att_old_2'`, [due]);
    await db.query(
      `INSERT INTO follow_ups(kind, subject_id, due_at, tries, last_error, created_at)
       VALUES ('CLOSE_STRAY_ATTEMPT', 'att_old_3', $1, 2, 'x', $1), ('CLOSE_TRADE', 'trd_old_3', $1, 0, NULL, $1)`,
      [due],
    );
    await db.query(
      `INSERT INTO refunds(id, order_id, app_id, out_refund_no, amount_fen, digest, state, next_check_at, check_count)
       VALUES ('rf_old_1', 'ord_old_4', 'app_old', 'RF1', 50, 'd', 'UNKNOWN', $1, 1), ('rf_old_2', 'ord_old_4', 'app_old', 'RF2', 50, 'd', 'SUCCEEDED', NULL, 0)`,
      [due],
    );
    await db.query(
      `INSERT INTO duplicate_payments(id, order_id, attempt_id, trade_no, amount_fen, refund_state)
       VALUES ('dup_old_4', 'ord_old_4', 'att_old_4', 'att_old_4', 100, 'UNKNOWN')`,
    );
    await db.query(`UPDATE orders SET close_pending = 'CLOSE_REQUESTED', worker_lease_until = $1 WHERE id = 'ord_old_1'`, [due]);
    await db.query(
      `INSERT INTO reconciliation_runs(provider, day, trigger, status, tries, due_at, created_at)
       VALUES ('sandbox', '2029-12-30', 'ON_DEMAND', 'QUEUED', 0, $1, $1), ('sandbox', '2029-12-29', 'ON_DEMAND', 'FAILED', 2, $1, $1),
              ('sandbox', '2029-12-28', 'ON_DEMAND', 'FAILED', 6, $1, $1), ('sandbox', '2029-12-27', 'ON_DEMAND', 'COMPLETED', 1, $1, $1)`,
      [due],
    );

    const later = (await fs.readdir(DIR)).filter((x) => /^\d{4}_.*\.sql$/.test(x) && x >= '0030').sort();
    assert.deepEqual(
      await migrate(db),
      later.map((f) => f.slice(0, -4)),
    );
    assert.equal(later[0], '0030_jobs.sql');

    const jobs = await db.query<{ kind: string; subject_id: string; run_at: Date; runs: number }>(
      `SELECT kind, subject_id, run_at, runs FROM jobs`,
    );
    const order = (a: (string | number)[], b: (string | number)[]) => (`${a[0]} ${a[1]}` < `${b[0]} ${b[1]}` ? -1 : 1);
    const runIds = (
      await db.query<{ id: string; day: string }>(`SELECT id::text, to_char(day, 'YYYY-MM-DD') AS day FROM reconciliation_runs`)
    ).rows;
    const run = (day: string) => runIds.find((r) => r.day === day)!.id;
    assert.deepEqual(
      jobs.rows.map((j) => [j.kind, j.subject_id, j.run_at.toISOString(), j.runs]).sort(order),
      [
        ['CHECK_ATTEMPT', 'att_old_1', due.toISOString(), 3],
        ['CHECK_ATTEMPT', 'att_old_2', due.toISOString(), 0],
        ['CHECK_DUPLICATE_REFUND', 'dup_old_4', jobs.rows.find((j) => j.subject_id === 'dup_old_4')!.run_at.toISOString(), 0],
        ['CHECK_REFUND', 'rf_old_1', due.toISOString(), 1],
        ['CLOSE_STRAY_ATTEMPT', 'att_old_3', due.toISOString(), 2],
        ['CLOSE_TRADE', 'trd_old_3', due.toISOString(), 0],
        ['RECONCILE_STATEMENT', run('2029-12-29'), due.toISOString(), 2],
        ['RECONCILE_STATEMENT', run('2029-12-30'), due.toISOString(), 0],
      ].sort(order),
    );
    const held = await db.query(`SELECT close_held_until FROM orders WHERE id = 'ord_old_1'`);
    assert.deepEqual(held.rows[0].close_held_until, due, 'the pending close keeps its hold (FIND_DUE_WORK finds it when it lapses)');
    assert.equal((await db.query(`SELECT to_regclass('follow_ups') AS t`)).rows[0].t, null, 'follow_ups is gone');
  } finally {
    await db.end();
    await tdb.drop();
  }
});
