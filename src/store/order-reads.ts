/**
 * Repository: the query-order read (an order by merchant number with its latest attempt, one
 * statement), batched per event-loop turn (src/store/batcher.ts).
 */
import type { AttemptState } from '../domain/states.ts';
import type { AttemptRow } from './attempts.ts';
import { TurnBatcher } from './batcher.ts';
import type { Db, Queryable } from './db.ts';
import { ORDER_COLS, type OrderRow } from './orders.ts';

/** The attempt columns of a joined row, prefixed `la_`, with the mapping back to an AttemptRow. */
export const LATEST_COLS = `la.id AS la_id, la.order_id AS la_order_id, la.seq AS la_seq, la.state AS la_state,
  la.cashier_token AS la_cashier_token, la.qr_code AS la_qr_code, la.redirect_url AS la_redirect_url, la.provider_ref AS la_provider_ref, la.provider AS la_provider,
  la.expire_at AS la_expire_at, la.made_at AS la_made_at, la.created_at AS la_created_at, la.updated_at AS la_updated_at`;

export interface LatestCols {
  la_id: string | null;
  la_order_id: string;
  la_seq: number;
  la_state: AttemptState;
  la_cashier_token: string;
  la_qr_code: string | null;
  la_redirect_url: string | null;
  la_provider_ref: string | null;
  la_provider: string;
  la_expire_at: Date;
  la_made_at: Date | null;
  la_created_at: Date;
  la_updated_at: Date;
}

export interface OrderWithLatest {
  order: OrderRow;
  attempt: AttemptRow | null;
}

export function splitLatest(row: OrderRow & LatestCols): OrderWithLatest {
  const {
    la_id,
    la_order_id,
    la_seq,
    la_state,
    la_cashier_token,
    la_qr_code,
    la_redirect_url,
    la_provider_ref,
    la_provider,
    la_expire_at,
    la_made_at,
    la_created_at,
    la_updated_at,
    ...order
  } = row;
  const attempt =
    la_id === null
      ? null
      : {
          id: la_id,
          orderId: la_order_id,
          seq: la_seq,
          state: la_state,
          cashierToken: la_cashier_token,
          qrCode: la_qr_code,
          redirectUrl: la_redirect_url,
          providerRef: la_provider_ref,
          provider: la_provider,
          expireAt: la_expire_at,
          madeAt: la_made_at,
          createdAt: la_created_at,
          updatedAt: la_updated_at,
        };
  return { order, attempt };
}

/** An order by merchant number with its latest attempt, in one statement (the query-order read). */
export async function findOrderWithLatest(db: Queryable, appId: string, outTradeNo: string): Promise<OrderWithLatest | null> {
  const r = await db.query<OrderRow & LatestCols>({
    name: 'order_by_no_with_latest',
    text: `SELECT o.*, ${LATEST_COLS} FROM (SELECT ${ORDER_COLS} FROM orders WHERE app_id = $1 AND out_trade_no = $2) o
      LEFT JOIN LATERAL (SELECT * FROM attempts WHERE order_id = o.id ORDER BY seq DESC LIMIT 1) la ON true`,
    values: [appId, outTradeNo],
  });
  const row = r.rows[0];
  return row ? splitLatest(row) : null;
}

/** findOrderWithLatest for several (app, number) pairs in one statement; answers in their order. */
export async function findOrdersWithLatest(
  db: Queryable,
  keys: { appId: string; outTradeNo: string }[],
): Promise<(OrderWithLatest | null)[]> {
  const r = await db.query<OrderRow & LatestCols & { idx: string }>({
    name: 'orders_by_no_with_latest_batch',
    text: `SELECT i.idx, o.*, ${LATEST_COLS}
      FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS i(app_id, out_trade_no, idx)
      JOIN LATERAL (SELECT ${ORDER_COLS} FROM orders WHERE app_id = i.app_id AND out_trade_no = i.out_trade_no) o ON true
      LEFT JOIN LATERAL (SELECT * FROM attempts WHERE order_id = o.id ORDER BY seq DESC LIMIT 1) la ON true`,
    values: [keys.map((k) => k.appId), keys.map((k) => k.outTradeNo)],
  });
  const out: (OrderWithLatest | null)[] = new Array(keys.length).fill(null);
  for (const row of r.rows) {
    const { idx, ...rest } = row;
    out[Number(idx) - 1] = splitLatest(rest);
  }
  return out;
}

/**
 * The query-order read, batched per event-loop turn (src/store/batcher.ts). Each read sees the
 * database as of its batch's statement, which starts after the read was asked for: every write
 * answered before the read is visible to it, as with a statement of its own.
 */
export class OrderReader {
  readonly #batcher: TurnBatcher<{ appId: string; outTradeNo: string }, OrderWithLatest | null>;
  constructor(db: Db) {
    this.#batcher = new TurnBatcher({
      one: (k) => findOrderWithLatest(db, k.appId, k.outTradeNo),
      many: (ks) => findOrdersWithLatest(db, ks),
    });
  }

  withLatest(appId: string, outTradeNo: string): Promise<OrderWithLatest | null> {
    return this.#batcher.run({ appId, outTradeNo });
  }
}
