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
