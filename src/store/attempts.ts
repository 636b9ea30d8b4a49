/**
 * Repository: the attempts of orders (each a payment request made to a provider). State changes
 * take a Transition checked against the tables of src/domain/states.ts and apply it only from its
 * source state, with the order's row locked by the caller.
 */
import type { AttemptState } from '../domain/states.ts';
import type { Queryable, Tx } from './db.ts';
import type { OrderRow } from './orders.ts';

export interface AttemptRow {
  id: string;
  orderId: string;
  seq: number;
  state: AttemptState;
  cashierToken: string;
  qrCode: string | null;
  /** The provider's own payment page the cashier sends the buyer to (null for the sandbox). */
  redirectUrl: string | null;
  providerRef: string | null;
  /** The provider that holds the payment (src/providers/router.ts). */
  provider: string;
  expireAt: Date;
  /** When the request that created it recorded its outcome; null while being made or if the provider check settled it. */
  madeAt: Date | null;
  createdAt: Date;
  updatedAt: Date;
}

export const ATTEMPT_COLS = `id, order_id AS "orderId", seq, state, cashier_token AS "cashierToken", qr_code AS "qrCode", redirect_url AS "redirectUrl",
  provider_ref AS "providerRef", provider, expire_at AS "expireAt", made_at AS "madeAt", created_at AS "createdAt", updated_at AS "updatedAt"`;

/** An attempt still PENDING this long after it was created is asked about at the provider (its creation stalled: FIND_DUE_WORK). */
export const PENDING_RECHECK_MS = 150_000;

export async function attemptsOf(db: Queryable, orderId: string): Promise<AttemptRow[]> {
  const r = await db.query<AttemptRow>({
    name: 'attempts_of_order',
    text: `SELECT ${ATTEMPT_COLS} FROM attempts WHERE order_id = $1 ORDER BY seq`,
    values: [orderId],
  });
  return r.rows;
}

export async function latestAttempt(db: Queryable, orderId: string): Promise<AttemptRow | null> {
  const r = await db.query<AttemptRow>({
    name: 'attempt_latest',
    text: `SELECT ${ATTEMPT_COLS} FROM attempts WHERE order_id = $1 ORDER BY seq DESC LIMIT 1`,
    values: [orderId],
  });
  return r.rows[0] ?? null;
}

export async function getAttempt(db: Queryable, id: string): Promise<AttemptRow | null> {
  const r = await db.query<AttemptRow>({ name: 'attempt_by_id', text: `SELECT ${ATTEMPT_COLS} FROM attempts WHERE id = $1`, values: [id] });
  return r.rows[0] ?? null;
}

/** The attempt behind a cashier token, with the highest attempt number of its order. */
export async function findAttemptByCashierToken(db: Queryable, token: string): Promise<{ attempt: AttemptRow; latestSeq: number } | null> {
  const r = await db.query<AttemptRow & { latestSeq: number }>({
    name: 'attempt_by_cashier_token',
    text: `SELECT ${ATTEMPT_COLS}, (SELECT max(l.seq) FROM attempts l WHERE l.order_id = attempts.order_id) AS "latestSeq"
       FROM attempts WHERE cashier_token = $1`,
    values: [token],
  });
  const row = r.rows[0];
  if (!row) return null;
  const { latestSeq, ...attempt } = row;
  return { attempt, latestSeq };
}

/** A new attempt's identifiers, the provider it goes to, and the instance whose request makes it. */
export interface NewAttempt {
  id: string;
  cashierToken: string;
  provider: string;
  createdBy: string;
}

/** A new PENDING attempt of the order (the next number). */
export async function insertAttempt(tx: Tx, order: OrderRow, a: NewAttempt, now: Date): Promise<AttemptRow> {
  const r = await tx.query<AttemptRow>({
    name: 'attempt_insert',
    text: `INSERT INTO attempts(id, order_id, seq, state, cashier_token, provider, created_by, expire_at, created_at, updated_at)
     VALUES ($1, $2, (SELECT COALESCE(MAX(seq), 0) + 1 FROM attempts WHERE order_id = $2), 'PENDING', $3, $4, $7, $5, $6, $6)
     RETURNING ${ATTEMPT_COLS}`,
    values: [a.id, order.id, a.cashierToken, a.provider, order.expireAt, now, a.createdBy],
  });
  return r.rows[0]!;
}

/**
 * A PENDING attempt that never reached the provider (a re-create refused before its provider
 * call): removed, so the order is left exactly as it was. Not a change of state: the attempt
 * never existed for anyone but the request that made it.
 */
export async function withdrawPendingAttempt(tx: Tx, id: string): Promise<void> {
  await tx.query(`DELETE FROM attempts WHERE id = $1 AND state = 'PENDING'`, [id]);
}

/**
 * A fresh address of the provider's own page for an attempt still ACCEPTED (the identical order
 * asked again: WeChat Pay's h5_url lives 5 minutes). Its updated_at tells the page's age.
 */
export async function noteAttemptPage(db: Queryable, id: string, redirectUrl: string, now: Date): Promise<void> {
  await db.query(`UPDATE attempts SET redirect_url = $2, updated_at = $3 WHERE id = $1 AND state = 'ACCEPTED'`, [id, redirectUrl, now]);
}
