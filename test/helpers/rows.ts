/**
 * Bare rows for store-level tests that need many orders or attempts in a few statements (no fees,
 * links or events). Order n of `key` is `ord_<key>_<n>` with outTradeNo `<KEY>_<n>`; its attempt is
 * `att_<key>_<n>` with cashier token `tok_<key>_<n>`.
 */
import type pg from 'pg';
import type { Queryable } from '../../src/store/db.ts';

/**
 * Runs `call` in a transaction on `c` and returns the rows it read from orders and attempts
 * (sequential and index fetches, from pg_stat_xact_user_tables inside that transaction).
 */
export async function rowsReadIn(
  c: pg.PoolClient,
  call: (c: pg.PoolClient) => Promise<unknown>,
): Promise<{ orders: number; attempts: number }> {
  // The backend's counts not yet reported may include earlier transactions: take a difference.
  const counts = async () => {
    const r = await c.query<{ relname: string; n: string }>(
      `SELECT relname, (coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0))::text AS n
         FROM pg_stat_xact_user_tables WHERE relname IN ('orders', 'attempts')`,
    );
    const n = Object.fromEntries(r.rows.map((x) => [x.relname, Number(x.n)]));
    return { orders: n.orders ?? 0, attempts: n.attempts ?? 0 };
  };
  await c.query('BEGIN');
  const before = await counts();
  await call(c);
  const after = await counts();
  await c.query('COMMIT');
  return { orders: after.orders - before.orders, attempts: after.attempts - before.attempts };
}

export interface RowRange {
  key: string;
  appId: string;
  merchantId: string;
  from: number;
  to: number;
}

export async function insertOrders(q: Queryable, r: RowRange & { status: string }): Promise<void> {
  await q.query(
    `INSERT INTO orders(id, app_id, merchant_id, out_trade_no, channel, amount_fen, currency, subject, payer_client_ip, digest,
                        links, status, expire_at, fee_projection)
     SELECT 'ord_' || $1 || '_' || g, $2, $3, upper($1) || '_' || g, 'ALIPAY_H5', 100, 'CNY', 's', '8.8.8.8', 'd',
            '{}', $4, now() + interval '1 hour', '{}'
       FROM generate_series($5::int, $6::int) g`,
    [r.key, r.appId, r.merchantId, r.status, r.from, r.to],
  );
}

export async function insertAttempts(q: Queryable, r: Pick<RowRange, 'key' | 'from' | 'to'> & { state: string }): Promise<void> {
  await q.query(
    `INSERT INTO attempts(id, order_id, seq, state, cashier_token, expire_at)
     SELECT 'att_' || $1 || '_' || g, 'ord_' || $1 || '_' || g, 1, $2, 'tok_' || $1 || '_' || g, now() + interval '1 hour'
       FROM generate_series($3::int, $4::int) g`,
    [r.key, r.state, r.from, r.to],
  );
}

/**
 * A closed day of `n` paid orders of an app, spread evenly over `day` (Asia/Shanghai), each with its
 * PAYMENT_SUCCEEDED event, as the service writes them: what a statement reads. Order g is
 * `ord_<key><g, 8 digits>` with outTradeNo `<KEY>_<g, 8 digits>`; its event is `evt_<key><g, 8
 * digits>`, or with `hashedEventIds` `evt_<key><md5 of g>` (ids that compress as real ones do).
 */
export async function insertPaidDay(
  q: Queryable | pg.Client,
  o: { key: string; appId: string; merchantId: string; day: string; n: number; hashedEventIds?: boolean },
): Promise<void> {
  const start = Date.parse(`${o.day}T00:00:00+08:00`);
  const step = Math.floor(86_000_000 / o.n);
  await q.query(
    `INSERT INTO orders(id, app_id, merchant_id, out_trade_no, channel, amount_fen, currency, subject, payer_client_ip, digest, links,
                        status, expire_at, fee_projection, state_version, paid_attempt_id, paid_at, created_at, updated_at)
     SELECT 'ord_' || $1 || lpad(g::text, 8, '0'), $2, $3, upper($1) || '_' || lpad(g::text, 8, '0'), 'ALIPAY_H5', 100 + g, 'CNY', 's',
            '8.8.8.8', 'd', ARRAY['ALIPAY_AGGREGATION_NATIVE'], 'SUCCEEDED', t + interval '15 minutes',
            json_build_object('companyServiceFeeFen', 1, 'companyServiceFeeRateBps', 60, 'merchantRateBps', 60,
                              'merchantSettlementFen', 99 + g, 'ruleVersion', 0, 'thresholdFen', 10000000, 'tier', 'STANDARD'),
            3, 'att_' || $1 || g, t, t, t
       FROM generate_series(1, $4::int) g, LATERAL (SELECT to_timestamp(($5::bigint + g::bigint * $6::bigint) / 1000.0) AS t) x`,
    [o.key, o.appId, o.merchantId, o.n, start, step],
  );
  await q.query(
    `INSERT INTO events(id, app_id, order_id, event_type, state_version, payload, status, attempts, next_attempt_at, created_at, delivered_at)
     SELECT 'evt_' || $1 || CASE WHEN $6 THEN md5(g::text) ELSE lpad(g::text, 8, '0') END, $2, 'ord_' || $1 || lpad(g::text, 8, '0'),
            'PAYMENT_SUCCEEDED', 3, '{}'::json, 'DELIVERED', 1, t, t, t
       FROM generate_series(1, $3::int) g, LATERAL (SELECT to_timestamp(($4::bigint + g::bigint * $5::bigint) / 1000.0) AS t) x`,
    [o.key, o.appId, o.n, start, step, o.hashedEventIds === true],
  );
}
