/**
 * Repository: the sandbox provider's own books (sandbox_payments, sandbox_refunds,
 * sandbox_faults). The sandbox is a separate party: only src/providers/sandbox reads and writes
 * these, as a real provider keeps its own records. Time is the sandbox's clock, passed in.
 */
import { ASYNC_COMMIT, type Queryable } from './db.ts';

export type FaultOperation = 'CREATE_ATTEMPT' | 'CLOSE' | 'REFUND' | 'PAY';
export type FaultOutcome = 'REJECT' | 'TIMEOUT' | 'PAID' | 'DELAY_MS' | 'AMOUNT_DIFFERS' | 'NOTICE_LOST' | 'LOST';
export type SandboxPaymentState = 'OPEN' | 'PAID' | 'CLOSED' | 'FAILED';

export interface OpenPayment {
  ref: string;
  attemptId: string;
  channel: string;
  amountFen: number;
  expireAt: Date;
}

export interface OpenOutcome {
  outcome: FaultOutcome | null;
  delay_ms: number | null;
  state: string | null;
}

/*
 * Both statements that open payments commit asynchronously (ASYNC_COMMIT). Safe: the service's
 * next write (the accepted attempt) commits synchronously, so the payment is on disk before the
 * service acts on it. A crash of PostgreSQL between the two forgets the payment; the service
 * then holds only the PENDING attempt it recorded before calling, and its provider check finds the
 * payment NOT_FOUND: an attempt the provider never received. A real provider is a network call
 * here instead.
 */

/**
 * One statement: take the next programmed CREATE_ATTEMPT fault, if any, and open the payment
 * unless the fault says otherwise (REJECT: nothing opened; PAID: opened as paid; DELAY_MS: opened
 * after the delay, by the caller; AMOUNT_DIFFERS: opened for one fen more than asked).
 */
export async function openPaymentTakingFault(db: Queryable, p: OpenPayment, now: Date): Promise<OpenOutcome> {
  const r = await db.query<OpenOutcome>({
    name: 'sandbox_create_attempt',
    text: `WITH f AS (
        UPDATE sandbox_faults SET remaining = remaining - 1
         WHERE id = (SELECT id FROM sandbox_faults WHERE operation = 'CREATE_ATTEMPT' AND remaining > 0 ORDER BY id LIMIT 1 FOR UPDATE)
        RETURNING outcome, delay_ms),
      p AS (
        INSERT INTO sandbox_payments(provider_ref, attempt_id, channel, amount_fen, state, paid_at, expire_at, created_at, updated_at)
        SELECT $1, $2, $3, CASE WHEN (SELECT outcome FROM f) = 'AMOUNT_DIFFERS' THEN $4::bigint + 1 ELSE $4::bigint END,
               CASE WHEN (SELECT outcome FROM f) = 'PAID' THEN 'PAID' ELSE 'OPEN' END,
               CASE WHEN (SELECT outcome FROM f) = 'PAID' THEN $6::timestamptz END, $5, $6, $6
         WHERE NOT EXISTS (SELECT 1 FROM f WHERE outcome IN ('REJECT', 'DELAY_MS'))
        ON CONFLICT (attempt_id) DO UPDATE SET updated_at = $6 RETURNING state)
      SELECT (SELECT outcome FROM f) AS outcome, (SELECT delay_ms FROM f) AS delay_ms, (SELECT state FROM p) AS state FROM ${ASYNC_COMMIT}`,
    values: [p.ref, p.attemptId, p.channel, p.amountFen, p.expireAt, now],
  });
  return r.rows[0]!;
}

/**
 * Several payments in one statement while no CREATE_ATTEMPT fault is programmed. Answers null
 * when a fault is programmed (nothing written: each call then goes on its own, taking the faults
 * in turn), else each payment's state in the items' order.
 */
export async function openPayments(db: Queryable, ps: OpenPayment[], now: Date): Promise<(string | null)[] | null> {
  const r = await db.query<{ faulted: boolean; attempt_id: string | null; state: string | null }>({
    name: 'sandbox_create_attempt_batch',
    text: `WITH f AS (SELECT 1 FROM sandbox_faults WHERE operation = 'CREATE_ATTEMPT' AND remaining > 0 LIMIT 1),
      p AS (
        INSERT INTO sandbox_payments(provider_ref, attempt_id, channel, amount_fen, state, expire_at, created_at, updated_at)
        SELECT r, a, c, m, 'OPEN', x, $6, $6 FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::timestamptz[]) AS t(r, a, c, m, x)
         WHERE NOT EXISTS (SELECT 1 FROM f)
        ON CONFLICT (attempt_id) DO UPDATE SET updated_at = $6 RETURNING attempt_id, state)
      SELECT EXISTS (SELECT 1 FROM f) AS faulted, p.attempt_id, p.state FROM ${ASYNC_COMMIT} CROSS JOIN (SELECT 1) one LEFT JOIN p ON true`,
    values: [
      ps.map((o) => o.ref),
      ps.map((o) => o.attemptId),
      ps.map((o) => o.channel),
      ps.map((o) => o.amountFen),
      ps.map((o) => o.expireAt),
      now,
    ],
  });
  if (r.rows[0]!.faulted) return null;
  const state = new Map(r.rows.map((row) => [row.attempt_id, row.state]));
  return ps.map((o) => state.get(o.attemptId) ?? null);
}

/** Opens a payment (after a DELAY_MS fault); answers its state. */
export async function openPayment(db: Queryable, p: OpenPayment, now: Date): Promise<string> {
  const r = await db.query<{ state: string }>(
    `INSERT INTO sandbox_payments(provider_ref, attempt_id, channel, amount_fen, state, expire_at, created_at, updated_at)
     VALUES ($1, $2, $3, $4, 'OPEN', $5, $6, $6)
     ON CONFLICT (attempt_id) DO UPDATE SET updated_at = $6 RETURNING state`,
    [p.ref, p.attemptId, p.channel, p.amountFen, p.expireAt, now],
  );
  return r.rows[0]!.state;
}

export async function addFault(
  db: Queryable,
  operation: FaultOperation,
  outcome: FaultOutcome,
  times: number,
  delayMs: number | null,
  now: Date,
): Promise<void> {
  await db.query('INSERT INTO sandbox_faults(operation, outcome, delay_ms, remaining, created_at) VALUES ($1, $2, $3, $4, $5)', [
    operation,
    outcome,
    delayMs,
    times,
    now,
  ]);
}

export async function clearFaults(db: Queryable): Promise<void> {
  await db.query('DELETE FROM sandbox_faults');
}

export async function listFaults(
  db: Queryable,
): Promise<{ operation: string; outcome: string; delayMs: number | null; remaining: number }[]> {
  const r = await db.query(
    'SELECT operation, outcome, delay_ms AS "delayMs", remaining FROM sandbox_faults WHERE remaining > 0 ORDER BY id',
  );
  return r.rows;
}

export async function getPayment(
  db: Queryable,
  attemptId: string,
): Promise<{ providerRef: string; channel: string; state: SandboxPaymentState; amountFen: number } | null> {
  const r = await db.query<{ providerRef: string; channel: string; state: SandboxPaymentState; amountFen: number }>(
    'SELECT provider_ref AS "providerRef", channel, state, amount_fen AS "amountFen" FROM sandbox_payments WHERE attempt_id = $1',
    [attemptId],
  );
  return r.rows[0] ?? null;
}

/** Moves an OPEN payment to `to`; answers whether it did. */
export async function movePayment(db: Queryable, attemptId: string, to: 'PAID' | 'CLOSED', now: Date): Promise<boolean> {
  const r = await db.query(
    `UPDATE sandbox_payments SET state = $2, updated_at = $3, paid_at = CASE WHEN $2 = 'PAID' THEN $3::timestamptz END
      WHERE attempt_id = $1 AND state = 'OPEN'`,
    [attemptId, to, now],
  );
  return r.rowCount === 1;
}

/** Ends the payments of these attempts at `expireAt` (the service's test lever to end a payment window). */
export async function expirePayments(db: Queryable, attemptIds: string[], expireAt: Date, now: Date): Promise<void> {
  await db.query('UPDATE sandbox_payments SET expire_at = $2, updated_at = $3 WHERE attempt_id = ANY($1)', [attemptIds, expireAt, now]);
}

export type RefundBookResult = { row: { state: 'PENDING' | 'SUCCEEDED'; provider_ref: string }; fresh: boolean } | { refused: string };

/**
 * A refund's state; settlement is a function of time: a pending refund is settled once settle_at
 * has passed. `lost`: the sandbox loses its record once settled (a programmed fault).
 */
export async function refundState(
  db: Queryable,
  key: string,
  now: Date,
): Promise<{ state: 'PENDING' | 'SUCCEEDED' | 'FAILED'; amountFen: number; lost: boolean } | null> {
  const r = await db.query<{ state: 'PENDING' | 'SUCCEEDED' | 'FAILED'; amountFen: number; lost: boolean }>(
    `UPDATE sandbox_refunds SET state = CASE WHEN state = 'PENDING' AND settle_at <= $2 THEN 'SUCCEEDED' ELSE state END
      WHERE refund_key = $1 RETURNING state, amount_fen AS "amountFen", lost`,
    [key, now],
  );
  return r.rows[0] ?? null;
}

/**
 * Refunds whose settlement fell due by `now` and whose notice is not sent yet (at most `limit`):
 * settled, marked notified, and answered with their state. A notice is sent once; one the service
 * missed is converged by its provider check through the refund query.
 */
export async function claimDueRefundNotices(
  db: Queryable,
  limit: number,
  now: Date,
): Promise<{ refundKey: string; state: 'PENDING' | 'SUCCEEDED' | 'FAILED' }[]> {
  const r = await db.query<{ refundKey: string; state: 'PENDING' | 'SUCCEEDED' | 'FAILED' }>(
    `UPDATE sandbox_refunds SET notice_sent = true, state = CASE WHEN state = 'PENDING' THEN 'SUCCEEDED' ELSE state END
      WHERE provider_ref IN (SELECT provider_ref FROM sandbox_refunds WHERE NOT notice_sent AND settle_at <= $1
                              ORDER BY settle_at LIMIT $2 FOR UPDATE SKIP LOCKED)
      RETURNING refund_key AS "refundKey", state`,
    [now, limit],
  );
  return r.rows;
}

/**
 * buyerActs, and for a payment (`to` PAID) that moved, the next programmed PAY fault taken, in one
 * statement. Answers whether the payment moved and the fault taken.
 */
export async function buyerActsTakingFault(
  db: Queryable,
  attemptId: string,
  to: 'PAID' | 'FAILED' | 'CLOSED',
  noticeDueAt: Date,
  now: Date,
): Promise<{ moved: boolean; fault: FaultOutcome | null }> {
  const r = await db.query<{ moved: boolean; fault: FaultOutcome | null }>({
    name: 'sandbox_buyer_acts',
    text: `WITH p AS (
        UPDATE sandbox_payments SET state = $2, updated_at = $4, notice_tries = 0, notice_due_at = $3,
               paid_at = CASE WHEN $2 = 'PAID' THEN $4::timestamptz END
         WHERE attempt_id = $1 AND state = 'OPEN' AND (expire_at IS NULL OR expire_at > $4) RETURNING state),
      f AS (
        UPDATE sandbox_faults SET remaining = remaining - 1
         WHERE $2 = 'PAID' AND EXISTS (SELECT 1 FROM p)
           AND id = (SELECT id FROM sandbox_faults WHERE operation = 'PAY' AND remaining > 0 ORDER BY id LIMIT 1 FOR UPDATE)
        RETURNING outcome)
      SELECT EXISTS (SELECT 1 FROM p) AS moved, (SELECT outcome FROM f) AS fault`,
    values: [attemptId, to, noticeDueAt, now],
  });
  return r.rows[0]!;
}

/**
 * Acknowledged payment notices, several in one statement, committed asynchronously (ASYNC_COMMIT):
 * an acknowledgement lost in a crash of PostgreSQL only makes the sandbox send the notice again,
 * which the service applies idempotently.
 */
export async function noticesAcknowledged(db: Queryable, attemptIds: string[]): Promise<void> {
  await db.query({
    name: 'sandbox_notices_ack',
    text: `UPDATE sandbox_payments SET notice_due_at = NULL, notice_tries = 0 FROM ${ASYNC_COMMIT} WHERE attempt_id = ANY($1)`,
    values: [attemptIds],
  });
}

/**
 * Closes an OPEN payment with the next programmed CLOSE fault taken (unless `takeFault` is false),
 * in one statement: REJECT and DELAY_MS move nothing (the caller refuses, or waits and closes);
 * PAID pays it instead. Answers the fault and the payment's state after (null: no such payment).
 */
export async function closePaymentTakingFault(
  db: Queryable,
  attemptId: string,
  takeFault: boolean,
  now: Date,
): Promise<{ outcome: FaultOutcome | null; delay_ms: number | null; state: SandboxPaymentState | null }> {
  const r = await db.query<{ outcome: FaultOutcome | null; delay_ms: number | null; state: SandboxPaymentState | null }>({
    name: 'sandbox_close',
    text: `WITH f AS (
        UPDATE sandbox_faults SET remaining = remaining - 1
         WHERE $2 AND id = (SELECT id FROM sandbox_faults WHERE operation = 'CLOSE' AND remaining > 0 ORDER BY id LIMIT 1 FOR UPDATE)
        RETURNING outcome, delay_ms),
      p AS (
        UPDATE sandbox_payments SET updated_at = $3,
               state = CASE WHEN (SELECT outcome FROM f) = 'PAID' THEN 'PAID' ELSE 'CLOSED' END,
               paid_at = CASE WHEN (SELECT outcome FROM f) = 'PAID' THEN $3::timestamptz END
         WHERE attempt_id = $1 AND state = 'OPEN' AND NOT EXISTS (SELECT 1 FROM f WHERE outcome IN ('REJECT', 'DELAY_MS'))
        RETURNING state)
      SELECT (SELECT outcome FROM f) AS outcome, (SELECT delay_ms FROM f) AS delay_ms,
             COALESCE((SELECT state FROM p), (SELECT state FROM sandbox_payments WHERE attempt_id = $1)) AS state`,
    values: [attemptId, takeFault, now],
  });
  return r.rows[0]!;
}

/**
 * A refund with the next programmed REFUND fault taken (unless `takeFault` is false), in one call
 * (mps_sandbox_book_refund, migrations/0090): as bookRefund, after the fault.
 */
export async function bookRefundTakingFault(
  db: Queryable,
  r: { key: string; ref: string; attemptId: string; amountFen: number; settleAt: Date; takeFault: boolean },
  now: Date,
): Promise<{ outcome: FaultOutcome | null; delayMs: number | null; result: RefundBookResult | null }> {
  const q = await db.query<{
    outcome: FaultOutcome | null;
    delay_ms: number | null;
    refused: string | null;
    state: 'PENDING' | 'SUCCEEDED';
    provider_ref: string;
    fresh: boolean;
  }>({
    name: 'sandbox_book_refund',
    text: 'SELECT outcome, delay_ms, refused, state, provider_ref, fresh FROM mps_sandbox_book_refund($1, $2, $3, $4, $5, $6, $7)',
    values: [r.ref, r.key, r.attemptId, r.amountFen, r.settleAt, r.takeFault, now],
  });
  const row = q.rows[0]!;
  const f = { outcome: row.outcome, delayMs: row.delay_ms };
  if (row.outcome === 'REJECT' || row.outcome === 'DELAY_MS') return { ...f, result: null };
  if (row.refused) return { ...f, result: { refused: row.refused } };
  return { ...f, result: { row: { state: row.state, provider_ref: row.provider_ref }, fresh: row.fresh } };
}

/** Why a buyer could not act: the payment's state and whether its window ended. */
export async function paymentStanding(db: Queryable, attemptId: string, now: Date): Promise<{ state: string; expired: boolean } | null> {
  const r = await db.query<{ state: string; expired: boolean }>(
    'SELECT state, expire_at <= $2 AS expired FROM sandbox_payments WHERE attempt_id = $1',
    [attemptId, now],
  );
  return r.rows[0] ?? null;
}

/**
 * Claims the payment notices that fell due unacknowledged (at most `limit`) by moving each due
 * time on to its next retry (x3 from `firstRetrySeconds`, at most an hour; none after `maxTries`),
 * so two instances do not send one notice at once.
 */
export async function claimDueNotices(
  db: Queryable,
  o: { limit: number; maxTries: number; firstRetrySeconds: number },
  now: Date,
): Promise<{ attempt_id: string; state: string; notice_tries: number }[]> {
  const r = await db.query<{ attempt_id: string; state: string; notice_tries: number }>(
    `UPDATE sandbox_payments SET notice_tries = notice_tries + 1,
            notice_due_at = CASE WHEN notice_tries + 1 >= $2 THEN NULL
                            ELSE $4::timestamptz + make_interval(secs => LEAST(3600, $3 * power(3, notice_tries + 1))) END
      WHERE attempt_id IN (SELECT attempt_id FROM sandbox_payments WHERE notice_due_at <= $4
                            ORDER BY notice_due_at LIMIT $1 FOR UPDATE SKIP LOCKED)
      RETURNING attempt_id, state, notice_tries`,
    [o.limit, o.maxTries, o.firstRetrySeconds, now],
  );
  return r.rows;
}

/** A line of the sandbox's statement of a day. */
export interface SandboxStatementLine {
  kind: 'PAYMENT' | 'REFUND';
  /** The payment's attempt id, or the refund's key (our refund or duplicate-payment id). */
  subjectId: string;
  attemptId: string;
  providerRef: string;
  amountFen: number;
  at: Date;
}

/**
 * One page of the sandbox's statement of [start, end): its payments paid in the day, then its
 * refunds settled in the day (not those it lost), each in (time, id) order after `after`.
 */
export async function statementLines(
  db: Queryable,
  kind: 'PAYMENT' | 'REFUND',
  o: { start: Date; end: Date; now: Date; after: { at: Date; id: string } | null; limit: number },
): Promise<SandboxStatementLine[]> {
  const values = [o.after?.at ?? o.start, o.end, o.after?.id ?? '', o.limit];
  const r =
    kind === 'PAYMENT'
      ? await db.query<SandboxStatementLine>(
          `SELECT 'PAYMENT' AS kind, attempt_id AS "subjectId", attempt_id AS "attemptId", provider_ref AS "providerRef",
                  amount_fen AS "amountFen", paid_at AS at
             FROM sandbox_payments
            WHERE state = 'PAID' AND paid_at >= $1 AND paid_at < $2 AND (paid_at > $1 OR attempt_id > $3)
            ORDER BY paid_at, attempt_id LIMIT $4`,
          values,
        )
      : await db.query<SandboxStatementLine>(
          `SELECT 'REFUND' AS kind, r.refund_key AS "subjectId", p.attempt_id AS "attemptId", r.provider_ref AS "providerRef",
                  r.amount_fen AS "amountFen", r.settle_at AS at
             FROM sandbox_refunds r JOIN sandbox_payments p ON p.provider_ref = r.payment_ref
            WHERE r.state <> 'FAILED' AND NOT r.lost AND r.settle_at <= $5
              AND r.settle_at >= $1 AND r.settle_at < $2 AND (r.settle_at > $1 OR r.refund_key > $3)
            ORDER BY r.settle_at, r.refund_key LIMIT $4`,
          [...values, o.now],
        );
  return r.rows;
}
