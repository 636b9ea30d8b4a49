/**
 * The job kinds are listed in one place (src/domain/jobs.ts): every kind has its handler
 * (src/workers.ts), its row in docs/architecture.md, and the kinds the migrations write are among
 * them; the one backoff rule. That no other module lists kinds is checked by
 * test/unit/architecture.test.ts.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import { JOB_KINDS, JOB_KIND_NAMES, RECURRING_KINDS, retryDelayMs } from '../../src/domain/jobs.ts';
import { HANDLERS } from '../../src/workers.ts';

const root = path.resolve(import.meta.dirname, '../..');

describe('job kinds', () => {
  test('every kind has a handler, and every handler a kind', () => {
    assert.deepEqual(Object.keys(HANDLERS).sort(), [...JOB_KIND_NAMES].sort());
  });

  test('docs/architecture.md lists exactly the kinds, in the order of src/domain/jobs.ts', () => {
    const doc = fs.readFileSync(path.join(root, 'docs/architecture.md'), 'utf8');
    const section = doc.slice(doc.indexOf('## Background work'));
    const rows = [...section.matchAll(/^\| `([A-Z_]+)` \|/gm)].map((m) => m[1]);
    assert.deepEqual(rows, JOB_KIND_NAMES);
  });

  test('the kinds the migrations write into jobs are listed', () => {
    const dir = path.join(root, 'migrations');
    const named = new Set<string>();
    for (const f of fs.readdirSync(dir)) {
      const sql = fs.readFileSync(path.join(dir, f), 'utf8');
      for (const m of sql.matchAll(/INSERT INTO jobs[^;]*?SELECT\s+'([A-Z_]+)'/g)) named.add(m[1]!);
    }
    assert.ok(named.size > 0, 'the carry-over of 0030 was read');
    for (const k of named) assert.ok(JOB_KIND_NAMES.includes(k as never), `${k} is a listed kind`);
  });

  test('the recurring kinds are the ones with a period', () => {
    assert.deepEqual(RECURRING_KINDS, ['SCHEDULE_RECONCILIATION', 'FIND_DUE_WORK', 'PURGE']);
  });
});

describe('the one backoff rule', () => {
  test('2 s, 4 s, 8 s ... up to 5 minutes for the provider checks and follow-ups', () => {
    assert.deepEqual(
      [1, 2, 3, 4, 5, 6, 8, 9, 20].map((n) => retryDelayMs('CLOSE_STRAY_ATTEMPT', n)),
      [2000, 4000, 8000, 16_000, 32_000, 64_000, 256_000, 300_000, 300_000],
    );
    for (const k of ['CHECK_ATTEMPT', 'CHECK_REFUND', 'EXPIRE_ORDER', 'REFUND_DUPLICATE'] as const) {
      assert.equal(retryDelayMs(k, 1), 2000);
      assert.equal(retryDelayMs(k, 1000), 300_000, 'never dropped');
    }
  });

  test('a reconciliation run is tried again an hour later, 6 runs in all', () => {
    assert.deepEqual(
      [1, 2, 5].map((n) => retryDelayMs('RECONCILE_STATEMENT', n)),
      [3_600_000, 3_600_000, 3_600_000],
    );
    assert.equal(retryDelayMs('RECONCILE_STATEMENT', 6), null);
    assert.equal(JOB_KINDS.RECONCILE_STATEMENT.maxRuns, 6);
  });
});
