/**
 * Bare rows for store-level tests that need many orders or attempts in a few statements (no fees,
 * links or events). Order n of `key` is `ord_<key>_<n>` with outTradeNo `<KEY>_<n>`; its attempt is
 * `att_<key>_<n>` with cashier token `tok_<key>_<n>`.
 */
import type { Queryable } from '../../src/store/db.ts';

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
