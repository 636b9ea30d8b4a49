/**
 * Statement batching across requests (src/store/batcher.ts): the batcher itself, then the two
 * batched writes of create order on the real database, held to the answers each item would have
 * had on its own: new orders with their first attempts (and their request-id claims), and the
 * accepted outcomes.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { newId } from '../../src/domain/ids.ts';
import { TurnBatcher } from '../../src/store/batcher.ts';
import { type Db, createPool, migrate } from '../../src/store/db.ts';
import { AttemptAcceptor } from '../../src/store/attempt-acceptance.ts';
import { getAttempt } from '../../src/store/attempts.ts';
import { type NewOrder, OrderInserter, type OrderInsert, purgeDailyAmounts } from '../../src/store/order-inserts.ts';
import { OrderReader } from '../../src/store/order-reads.ts';
import { getOrder } from '../../src/store/orders.ts';
import { ACCEPT_TRANSITIONS } from '../../src/usecases/attempts.ts';
import { type TestDatabase, createTestDatabase } from '../helpers/db.ts';

function recorder() {
  const calls: string[] = [];
  const b = new TurnBatcher<number, string>({
    one: async (n) => {
      calls.push(`one ${n}`);
      if (n < 0) throw new Error(`bad ${n}`);
      return `=${n}`;
    },
    many: async (ns) => {
      calls.push(`many ${ns.join(',')}`);
      if (ns.includes(13)) throw new pg.DatabaseError('deadlock detected', 0, 'error');
      if (ns.includes(99)) throw new Error('connection terminated');
      return ns.map((n) => `=${n}`);
    },
    compare: (a, b) => a - b,
    key: (n) => (n >= 100 ? 'same' : null),
    maxBatch: 4,
  });
  return { b, calls };
}

describe('TurnBatcher', () => {
  test('the calls of one turn go in one statement, sorted, split at maxBatch, answered each with its own result', async () => {
    const { b, calls } = recorder();
    const r = await Promise.all([5, 3, 1, 4, 2].map((n) => b.run(n)));
    assert.deepEqual(r, ['=5', '=3', '=1', '=4', '=2']);
    assert.deepEqual(calls, ['many 1,2,3,4', 'one 5']);
  });

  test('a call alone is sent on its own', async () => {
    const { b, calls } = recorder();
    assert.equal(await b.run(7), '=7');
    assert.deepEqual(calls, ['one 7']);
  });

  test('a batch PostgreSQL refused is sent again item by item, each with its own answer', async () => {
    const { b, calls } = recorder();
    const r = await Promise.allSettled([13, 2, -1].map((n) => b.run(n)));
    assert.equal(r[0]!.status, 'fulfilled');
    assert.equal(r[1]!.status, 'fulfilled');
    assert.equal(r[2]!.status, 'rejected');
    assert.equal(calls[0], 'many -1,2,13');
    assert.deepEqual(calls.slice(1).sort(), ['one -1', 'one 13', 'one 2']);
  });

  test('a connection failure (outcome unknown) fails every item and sends nothing again', async () => {
    const { b, calls } = recorder();
    const r = await Promise.allSettled([99, 1].map((n) => b.run(n)));
    assert.deepEqual(
      r.map((x) => x.status),
      ['rejected', 'rejected'],
    );
    assert.deepEqual(calls, ['many 1,99']);
  });

  test('items with one key: the first is batched, the others follow on their own, in turn', async () => {
    const { b, calls } = recorder();
    const r = await Promise.all([100, 1, 101, 2].map((n) => b.run(n)));
    assert.deepEqual(r, ['=100', '=1', '=101', '=2']);
    assert.deepEqual(calls, ['many 1,2,100', 'one 101']);
  });
});

describe('TurnBatcher: one flush in flight', () => {
  function gated() {
    const calls: string[] = [];
    let release: () => void = () => {};
    let gate = new Promise<void>((res) => (release = res));
    const b = new TurnBatcher<number, string>({
      one: async (n) => {
        calls.push(`one ${n}`);
        await gate;
        return `=${n}`;
      },
      many: async (ns) => {
        calls.push(`many ${ns.join(',')}`);
        await gate;
        return ns.map((n) => `=${n}`);
      },
    });
    return {
      b,
      calls,
      open() {
        release();
        gate = Promise.resolve();
      },
    };
  }
  const turn = () => new Promise((res) => setImmediate(res));

  test('calls made while a flush is in flight wait for it, then go together in one statement', async () => {
    const { b, calls, open } = gated();
    const first = b.run(1);
    await turn();
    await turn();
    assert.deepEqual(calls, ['one 1'], 'alone, a call is sent at once');
    const later = [b.run(2)];
    await turn();
    later.push(b.run(3));
    await turn();
    assert.deepEqual(calls, ['one 1'], 'nothing else is sent while the first is in flight');
    open();
    assert.deepEqual(await Promise.all([first, ...later]), ['=1', '=2', '=3']);
    assert.deepEqual(calls, ['one 1', 'many 2,3']);
  });

  test('a failed flush does not stop the next one', async () => {
    const calls: string[] = [];
    const b = new TurnBatcher<number, string>({
      one: async (n) => {
        calls.push(`one ${n}`);
        if (n === 1) throw new Error('connection terminated');
        return `=${n}`;
      },
      many: async (ns) => ns.map((n) => `=${n}`),
    });
    const r = await Promise.allSettled([b.run(1)]);
    assert.equal(r[0]!.status, 'rejected');
    assert.equal(await b.run(2), '=2');
    assert.deepEqual(calls, ['one 1', 'one 2']);
  });
});

describe('batched create-order writes on PostgreSQL', () => {
  let tdb: TestDatabase;
  let db: Db;
  const appId = 'svcop_BATCHtest0000001';
  const merchantId = 'mch_batchtest';
  before(async () => {
    tdb = await createTestDatabase();
    db = createPool(tdb.url, 8);
    await migrate(db);
    await db.query(`INSERT INTO merchants(id, name, entity_type) VALUES ($1, 'Batch', 'CORPORATE')`, [merchantId]);
    await db.query(
      `INSERT INTO apps(id, merchant_id, channels, trade_scopes, payment_window_seconds, rate_limit_per_second)
       VALUES ($1, $2, '{ALIPAY_H5,WECHAT_H5}', '{}', 900, 1000)`,
      [appId, merchantId],
    );
  });
  after(async () => {
    await db.end();
    await tdb.drop();
  });

  function item(outTradeNo: string, requestId: string | null, over: Partial<NewOrder> = {}): OrderInsert {
    const now = new Date();
    return {
      order: {
        id: newId.order(),
        appId,
        merchantId,
        outTradeNo,
        channel: 'ALIPAY_H5',
        tradeScope: null,
        amountFen: 1234,
        currency: 'CNY',
        subject: 'Coffee',
        description: null,
        attach: ' keep my spaces ',
        returnUrl: null,
        payerClientIp: '8.8.8.8',
        digest: 'd'.repeat(64),
        links: ['ALIPAY_AGGREGATION_NATIVE'],
        expireAt: new Date(now.getTime() + 900_000),
        feeProjection: {
          companyServiceFeeFen: 7,
          companyServiceFeeRateBps: 60,
          merchantRateBps: 0,
          merchantSettlementFen: 1227,
          ruleVersion: 1,
          thresholdFen: 100000,
          tier: 'STANDARD',
        },
        createdAt: now,
        ...over,
      },
      attempt: { id: newId.attempt(), cashierToken: newId.cashierToken(), provider: 'sandbox', createdBy: 'ins_test' },
      claim:
        requestId === null
          ? null
          : {
              appId,
              requestId,
              method: 'POST',
              target: '/api/open/v1/payments',
              bodySha256: 'b'.repeat(64),
              holder: `holder-${requestId}`,
              holderInstance: 'ins_test',
              leaseUntil: new Date(Date.now() + 120_000),
            },
    };
  }

  function counting(pool: Db): { names: string[]; restore: () => void } {
    const names: string[] = [];
    const orig = pool.query.bind(pool);
    (pool as unknown as { query: unknown }).query = (q: unknown, v?: unknown) => {
      names.push(typeof q === 'string' ? q.slice(0, 20) : ((q as { name?: string }).name ?? '?'));
      return (orig as (a: unknown, b?: unknown) => unknown)(q, v);
    };
    return { names, restore: () => ((pool as unknown as { query: unknown }).query = orig) };
  }

  test('orders of one turn are written in one statement, each with its own row, attempt and claim, exactly as given', async () => {
    const ins = new OrderInserter(db);
    const items = Array.from({ length: 20 }, (_, i) =>
      item(`BATCH_${String(i).padStart(3, '0')}`, i % 2 === 0 ? `req-batch-${i}` : null, {
        channel: i % 3 === 0 ? 'WECHAT_H5' : 'ALIPAY_H5',
        links: i % 3 === 0 ? [] : ['ALIPAY_AGGREGATION_NATIVE'],
        tradeScope: i % 4 === 0 ? 'CARD_VIRTUAL' : null,
        description: i % 5 === 0 ? 'with "quotes", {braces} and \\ backslash' : null,
      }),
    );
    const c = counting(db);
    let r;
    try {
      r = await Promise.all(items.map((it) => ins.insert(it)));
    } finally {
      c.restore();
    }
    assert.deepEqual(c.names, ['order_insert_with_attempt_batch']);
    for (const [i, res] of r.entries()) {
      const it = items[i]!;
      assert.equal(res.claimed, true);
      assert.ok(res.created);
      assert.equal(res.created.order.id, it.order.id);
      assert.equal(res.created.order.outTradeNo, it.order.outTradeNo);
      assert.equal(res.created.order.status, 'CREATED');
      assert.equal(res.created.order.channel, it.order.channel);
      assert.equal(res.created.order.tradeScope, it.order.tradeScope);
      assert.equal(res.created.order.description, it.order.description);
      assert.equal(res.created.order.attach, ' keep my spaces ');
      assert.deepEqual(res.created.order.links, it.order.links);
      assert.deepEqual(res.created.order.feeProjection, it.order.feeProjection);
      assert.equal(res.created.order.expireAt.getTime(), it.order.expireAt.getTime());
      assert.equal(res.created.attempt.id, it.attempt.id);
      assert.equal(res.created.attempt.orderId, it.order.id);
      assert.equal(res.created.attempt.state, 'PENDING');
      // The stored row reads back the same (JSON field order included).
      const stored = await getOrder(db, it.order.id);
      assert.equal(JSON.stringify(stored!.feeProjection), JSON.stringify(it.order.feeProjection));
    }
    const claims = await db.query(`SELECT count(*)::int AS n FROM request_replays WHERE request_id LIKE 'req-batch-%'`);
    assert.equal(claims.rows[0].n, 10);
  });

  test('under a daily ceiling: one statement per batch, each order kept if it fits what is left (in batch order), the counter advanced by what was kept; a missing counter is started first; old counters purged', async () => {
    const ins = new OrderInserter(db);
    // A day without orders of this app (the counter is started from that day's orders).
    const day = '2020-01-06';
    const quota = { day, ceilingFen: 5000, singleExceeded: false };
    const q = (no: string, amountFen: number, rid: string | null = null, single = false) => ({
      ...item(no, rid, { amountFen }),
      quota: { ...quota, singleExceeded: single },
    });
    // No counter yet: it is started from the day's orders (none here), then the batch is written.
    const first = await Promise.all(
      [q('CEIL_A', 3000), q('CEIL_B', 2500, 'req-ceil-b'), q('CEIL_C', 1500), q('CEIL_D', 400, null, true)].map((it) => ins.insert(it)),
    );
    assert.deepEqual(
      first.map((r) => [r.created !== null, r.refused ?? null, r.claimed]),
      [
        [true, null, true],
        [false, ['DAILY_AMOUNT'], true], // 3000 + 2500 > 5000: refused; its claim stands
        [true, null, true], // 3000 + 1500 fits: a larger one before it does not block it
        [false, ['SINGLE_AMOUNT'], true], // above the single-order ceiling (it would fit the day)
      ],
    );
    const counter = async () =>
      (await db.query<{ n: string }>(`SELECT amount_fen::text AS n FROM app_daily_amounts WHERE app_id = $1 AND day = $2`, [appId, day]))
        .rows[0]?.n;
    assert.equal(await counter(), '4500');
    const kept = await db.query(`SELECT out_trade_no FROM orders WHERE out_trade_no LIKE 'CEIL_%' ORDER BY 1`);
    assert.deepEqual(
      kept.rows.map((r) => r.out_trade_no),
      ['CEIL_A', 'CEIL_C'],
    );
    const claim = await db.query(`SELECT 1 FROM request_replays WHERE request_id = 'req-ceil-b'`);
    assert.equal(claim.rowCount, 1);

    // With the counter there: one statement for the batch.
    const c = counting(db);
    let second;
    try {
      second = await Promise.all([q('CEIL_E', 400), q('CEIL_F', 200), q('CEIL_B', 100)].map((it) => ins.insert(it)));
    } finally {
      c.restore();
    }
    assert.deepEqual(c.names, ['order_insert_with_attempt_batch_quota']);
    assert.deepEqual(
      second.map((r) => [r.created !== null, r.refused ?? null]),
      [
        [true, null],
        [false, ['DAILY_AMOUNT']],
        [true, null],
      ],
      'sorted by order number: CEIL_B 100 and CEIL_E 400 fit (5000 exactly), CEIL_F does not',
    );
    assert.equal(await counter(), '5000');

    assert.equal(await purgeDailyAmounts(db, '2020-01-06'), 0);
    assert.equal(await purgeDailyAmounts(db, '2020-01-07'), 1);
    assert.equal(await counter(), undefined);
  });

  test('one order number twice in one turn: one order; a request id twice in one turn: claimed once', async () => {
    const ins = new OrderInserter(db);
    const sameNo = [item('SAME_NO_1', 'req-same-no-a'), item('SAME_NO_1', 'req-same-no-b'), item('OTHER_NO_1', null)];
    const r = await Promise.all(sameNo.map((it) => ins.insert(it)));
    assert.equal(r.filter((x) => x.created !== null && x.created.order.outTradeNo === 'SAME_NO_1').length, 1);
    assert.ok(r[2]!.created);
    assert.deepEqual(
      r.map((x) => x.claimed),
      [true, true, true],
    );

    const sameId = [item('SAME_ID_1', 'req-same-id'), item('SAME_ID_2', 'req-same-id'), item('SAME_ID_3', 'req-other-id')];
    const s = await Promise.all(sameId.map((it) => ins.insert(it)));
    assert.deepEqual(
      s.map((x) => x.claimed),
      [true, false, true],
    );
    assert.equal(s[1]!.created, null, 'nothing is written for a request id already held');
    const n = await db.query(`SELECT count(*)::int AS n FROM orders WHERE out_trade_no = 'SAME_ID_2'`);
    assert.equal(n.rows[0].n, 0);
  });

  test('an order number already taken (earlier, or by a concurrent batch) is not written again', async () => {
    const ins1 = new OrderInserter(db);
    const ins2 = new OrderInserter(db);
    for (let round = 0; round < 5; round++) {
      const nos = Array.from({ length: 12 }, (_, i) => `RACE_${round}_${i}`);
      const [a, b] = await Promise.all([
        Promise.all(nos.map((no) => ins1.insert(item(no, null)))),
        Promise.all([...nos].reverse().map((no) => ins2.insert(item(no, null)))),
      ]);
      const made = [...a, ...b].filter((x) => x.created !== null).length;
      assert.equal(made, nos.length, 'one order per number across two racing inserters');
    }
  });

  test('accepted outcomes of one turn in one transaction; an order no longer CREATED is left as it is', async () => {
    const ins = new OrderInserter(db);
    const made = await Promise.all(Array.from({ length: 6 }, (_, i) => ins.insert(item(`ACCEPT_${i}`, `req-accept-${i}`))));
    const orders = made.map((m) => m.created!);
    // One of them was closed meanwhile.
    await db.query(`UPDATE orders SET status = 'CLOSED', closed_reason = 'CLOSE_REQUESTED' WHERE id = $1`, [orders[2]!.order.id]);
    const acc = new AttemptAcceptor(db, ACCEPT_TRANSITIONS);
    const c = counting(db);
    let applied: boolean[];
    try {
      applied = (
        await Promise.all(
          orders.map((o, i) =>
            acc.accept(
              {
                orderId: o.order.id,
                attemptId: o.attempt.id,
                providerRef: `ref_${i}`,
                qrCode: i % 2 === 0 ? `qr_${i}` : null,
                redirectUrl: null,
                answer: { appId, requestId: `req-accept-${i}`, holder: `holder-req-accept-${i}`, status: 201, body: `{"n":${i}}` },
              },
              new Date(),
            ),
          ),
        )
      ).map((r) => r.applied);
    } finally {
      c.restore();
    }
    assert.deepEqual(c.names, ['accept_attempts']);
    assert.deepEqual(applied, [true, true, false, true, true, true]);
    for (const [i, o] of orders.entries()) {
      const order = (await getOrder(db, o.order.id))!;
      const attempt = (await getAttempt(db, o.attempt.id))!;
      const replay = await db.query(`SELECT state, status_code, response_body FROM request_replays WHERE request_id = $1`, [
        `req-accept-${i}`,
      ]);
      if (i === 2) {
        assert.equal(order.status, 'CLOSED');
        assert.equal(attempt.state, 'PENDING');
        assert.equal(replay.rows[0].state, 'IN_PROGRESS');
        continue;
      }
      assert.equal(order.status, 'PAYING');
      assert.equal(order.stateVersion, o.order.stateVersion + 1);
      assert.equal(attempt.state, 'ACCEPTED');
      assert.equal(attempt.providerRef, `ref_${i}`);
      assert.equal(attempt.qrCode, i % 2 === 0 ? `qr_${i}` : null);
      assert.deepEqual(replay.rows[0], { state: 'DONE', status_code: 201, response_body: `{"n":${i}}` });
    }
  });
  test('query reads of one turn in one statement: each its own order and latest attempt, unknown or other-app numbers null', async () => {
    const ins = new OrderInserter(db);
    const made = await Promise.all(['READ_1', 'READ_2', 'READ_3'].map((no) => ins.insert(item(no, null))));
    // A second attempt of READ_2 is its latest.
    await db.query(`UPDATE attempts SET state = 'CLOSED' WHERE order_id = $1`, [made[1]!.created!.order.id]);
    await db.query(
      `INSERT INTO attempts(id, order_id, seq, state, cashier_token, expire_at) SELECT 'att_second', id, 2, 'ACCEPTED', 'tok_second', expire_at FROM orders WHERE id = $1`,
      [made[1]!.created!.order.id],
    );
    const reader = new OrderReader(db);
    const c = counting(db);
    let r;
    try {
      r = await Promise.all([
        reader.withLatest(appId, 'READ_3'),
        reader.withLatest(appId, 'NO_SUCH_ORDER'),
        reader.withLatest('svcop_OTHERapp000000001', 'READ_1'),
        reader.withLatest(appId, 'READ_2'),
        reader.withLatest(appId, 'READ_1'),
      ]);
    } finally {
      c.restore();
    }
    assert.deepEqual(c.names, ['orders_by_no_with_latest_batch']);
    assert.equal(r[0]!.order.id, made[2]!.created!.order.id);
    assert.equal(r[0]!.attempt!.id, made[2]!.created!.attempt.id);
    assert.equal(r[1], null);
    assert.equal(r[2], null);
    assert.equal(r[3]!.order.outTradeNo, 'READ_2');
    assert.equal(r[3]!.attempt!.id, 'att_second');
    assert.equal(r[4]!.order.outTradeNo, 'READ_1');
  });
});
