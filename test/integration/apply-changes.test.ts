/**
 * Decide, then apply on the real database (src/store/changes.ts, mps_apply_changes): several
 * changes in one statement, each applied only if its order's records are still as they were read;
 * one whose records moved on meanwhile writes nothing, and the others are not held back by it.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { decideTradeMade } from '../../src/domain/attempt-decisions.ts';
import { decidePaymentNotice } from '../../src/domain/payment-decisions.ts';
import { applyChanges, readRecords } from '../../src/store/changes.ts';
import { type Db, createPool, migrate } from '../../src/store/db.ts';
import { type TestDatabase, createTestDatabase } from '../helpers/db.ts';
import { insertAttempts, insertOrders } from '../helpers/rows.ts';

describe('mps_apply_changes', () => {
  let tdb: TestDatabase;
  let db: Db;
  before(async () => {
    tdb = await createTestDatabase();
    db = createPool(tdb.url, 2);
    await migrate(db);
    await insertOrders(db, { key: 'x', appId: 'app_x', merchantId: 'mch_x', status: 'PAYING', from: 1, to: 2 });
    await insertAttempts(db, { key: 'x', state: 'ACCEPTED', from: 1, to: 2 });
    await insertOrders(db, { key: 'y', appId: 'app_x', merchantId: 'mch_x', status: 'PAYING', from: 1, to: 1 });
    await insertAttempts(db, { key: 'y', state: 'ACCEPTED', from: 1, to: 1 });
    await db.query(
      `INSERT INTO provider_trades(id, attempt_id, order_id, provider, product, payer, handle, state, created_at, updated_at)
       VALUES ('trd_y_1', 'att_y_1', 'ord_y_1', 'sandbox', 'NATIVE', '', NULL, 'NEW', now(), now())`,
    );
  });
  after(async () => {
    await db.end();
    await tdb.drop();
  });

  test('a change is applied with its event only if the records are as read; a stale one writes nothing', async () => {
    const now = new Date();
    const read = await readRecords(db, [
      { by: 'tradeNo', key: 'att_x_1' },
      { by: 'order', key: 'ord_x_2' },
      { by: 'order', key: 'ord_none' },
    ]);
    assert.equal(read[2], null);
    const [one, two] = [read[0]!, read[1]!];
    assert.equal(one.order.id, 'ord_x_1');
    // The second order's attempt moves on after the decision read it.
    await db.query(`UPDATE attempts SET state = 'UNKNOWN' WHERE id = 'att_x_2'`);
    const paid = (tradeNo: string) => ({ tradeNo, state: 'PAID' as const, providerRef: null, reason: null });
    const out = await applyChanges(
      db,
      [
        { records: one, change: decidePaymentNotice(one, paid('att_x_1'), now) },
        { records: two, change: decidePaymentNotice(two, paid('att_x_2'), now) },
      ],
      now,
    );
    assert.deepEqual(
      out.map((o) => o.applied),
      [true, false],
    );
    assert.equal(out[0]!.order.status, 'SUCCEEDED');
    assert.equal(out[0]!.order.stateVersion, one.order.stateVersion + 1);
    const rows = await db.query<{
      id: string;
      status: string;
      state_version: number;
      a_state: string;
      events: number;
      payload_version: number | null;
    }>(
      `SELECT o.id, o.status, o.state_version, a.state AS a_state,
              (SELECT count(*)::int FROM events e WHERE e.order_id = o.id) AS events,
              (SELECT (e.payload->>'stateVersion')::int FROM events e WHERE e.order_id = o.id) AS payload_version
         FROM orders o JOIN attempts a ON a.order_id = o.id WHERE o.id LIKE 'ord_x_%' ORDER BY o.id`,
    );
    assert.deepEqual(rows.rows, [
      {
        id: 'ord_x_1',
        status: 'SUCCEEDED',
        state_version: one.order.stateVersion + 1,
        a_state: 'PAID',
        events: 1,
        payload_version: one.order.stateVersion + 1,
      },
      { id: 'ord_x_2', status: 'PAYING', state_version: two.order.stateVersion, a_state: 'UNKNOWN', events: 0, payload_version: null },
    ]);
    // Decided again from the records as they are now, it applies.
    const again = (await readRecords(db, [{ by: 'order', key: 'ord_x_2' }]))[0]!;
    const [applied] = await applyChanges(db, [{ records: again, change: decidePaymentNotice(again, paid('att_x_2'), now) }], now);
    assert.equal(applied!.applied, true);
    assert.equal(applied!.order.status, 'SUCCEEDED');
  });

  test("a trade's material is written with its move (migrations/0102), only over the state it was decided from", async () => {
    const now = new Date();
    const later = new Date(now.getTime() + 3_600_000);
    const trade = async () =>
      (await db.query<{ state: string; material: string | null }>(`SELECT state, material FROM provider_trades WHERE id = 'trd_y_1'`))
        .rows[0];
    const closeJobs = async () => (await db.query(`SELECT 1 FROM jobs WHERE kind = 'CLOSE_TRADE' AND subject_id = 'trd_y_1'`)).rowCount;
    const make = async (material: string) => {
      const rec = (await readRecords(db, [{ by: 'order', key: 'ord_y_1' }]))[0]!;
      return { rec, change: decideTradeMade(rec, 'trd_y_1', material, later, now).change };
    };
    // NEW -> OPEN with its material; answered again, OPEN -> OPEN takes the new material.
    for (const material of ['code_1', 'code_2']) {
      const { rec, change } = await make(material);
      assert.equal((await applyChanges(db, [{ records: rec, change }], now))[0]!.applied, true);
      assert.deepEqual(await trade(), { state: 'OPEN', material });
    }
    assert.equal(await closeJobs(), 0, 'payable: left open');
    // Closed after the decision read it: nothing written; decided again, it is closed at the provider.
    const stale = await make('code_3');
    await db.query(`UPDATE provider_trades SET state = 'CLOSED' WHERE id = 'trd_y_1'`);
    assert.equal((await applyChanges(db, [{ records: stale.rec, change: stale.change }], now))[0]!.applied, false);
    assert.deepEqual(await trade(), { state: 'CLOSED', material: 'code_2' });
    const again = await make('code_3');
    assert.deepEqual(again.change.trades, []);
    assert.equal((await applyChanges(db, [{ records: again.rec, change: again.change }], now))[0]!.applied, true);
    assert.deepEqual(await trade(), { state: 'CLOSED', material: 'code_2' });
    assert.equal(await closeJobs(), 1);
  });
});
