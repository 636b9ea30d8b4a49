/**
 * The sandbox provider: a full, deterministic PaymentProvider with programmable faults
 * (decisions.md section 8). It keeps its own books in the sandbox_* tables, as a real provider
 * keeps its own; the service reaches them only through this interface. Buyer actions (pay, fail)
 * come back to the service as signed notifications through the same path a real provider's would.
 */
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { TurnBatcher } from '../../store/batcher.ts';
import { ASYNC_COMMIT, type Db, withTx } from '../../store/db.ts';
import {
  type CallOptions,
  type CloseResult,
  type CreateAttemptInput,
  type CreateAttemptResult,
  type PaymentProvider,
  type PaymentQueryResult,
  type NotificationAck,
  type ProviderNotification,
  ProviderNotificationError,
  type ProviderRefundState,
  ProviderRejectedError,
  ProviderUncertainError,
  type RefundInput,
  type RefundQuery,
  type RefundQueryResult,
  type RefundResult,
} from '../provider.ts';

export const FAULT_OPERATIONS = ['CREATE_ATTEMPT', 'CLOSE', 'REFUND'] as const;
export const FAULT_OUTCOMES = ['REJECT', 'TIMEOUT', 'PAID', 'DELAY_MS'] as const;
export type FaultOperation = (typeof FAULT_OPERATIONS)[number];
export type FaultOutcome = (typeof FAULT_OUTCOMES)[number];

/** How long the sandbox takes to settle an accepted refund. */
export const REFUND_SETTLE_MS = 1000;

/**
 * A payment notice the service has not acknowledged is sent again, as a real provider's is: first
 * NOTICE_FIRST_RETRY_SECONDS after the buyer's action, then at growing intervals (x3, at most an
 * hour), NOTICE_MAX_TRIES times in all (about a day).
 */
export const NOTICE_FIRST_RETRY_SECONDS = 10;
export const NOTICE_MAX_TRIES = 30;

interface OpenPayment {
  ref: string;
  input: CreateAttemptInput;
}

interface OpenOutcome {
  outcome: FaultOutcome | null;
  delay_ms: number | null;
  state: string | null;
}

export type NotificationSink = (rawBody: Buffer, headers: Record<string, string>) => Promise<void>;

export class SandboxProvider implements PaymentProvider {
  readonly name = 'sandbox';
  readonly channels = ['ALIPAY_H5', 'WECHAT_H5'] as const;
  readonly #db: Db;
  #secret: Buffer | null = null;
  #sink: NotificationSink | null = null;
  readonly #timers = new Set<NodeJS.Timeout>();
  readonly #log: (msg: string, err?: unknown) => void;

  /** Payments opened by concurrent createAttempt calls, one statement per event-loop turn. */
  readonly #opens: TurnBatcher<OpenPayment, OpenOutcome>;

  constructor(db: Db, log: (msg: string, err?: unknown) => void = () => {}) {
    this.#db = db;
    this.#log = log;
    this.#opens = new TurnBatcher({ one: (o) => this.#openOne(o), many: (os) => this.#openMany(os) });
  }

  /*
   * Both statements that open payments commit asynchronously (ASYNC_COMMIT). Safe: the service's
   * next write (the accepted attempt) commits synchronously, so the payment is on disk before the
   * service acts on it. A crash of PostgreSQL between the two forgets the payment; the service
   * then holds only the PENDING attempt it recorded before calling, and its reconciler finds the
   * payment NOT_FOUND: an attempt the provider never received (src/workers.ts). A real provider
   * is a network call here instead.
   */

  /**
   * One statement: take the next programmed fault, if any, and open the payment unless the fault
   * says otherwise (REJECT: nothing opened; PAID: opened as paid; DELAY_MS: opened after the
   * delay, by the caller).
   */
  async #openOne({ ref, input }: OpenPayment): Promise<OpenOutcome> {
    const r = await this.#db.query<OpenOutcome>({
      name: 'sandbox_create_attempt',
      text: `WITH f AS (
          UPDATE sandbox_faults SET remaining = remaining - 1
           WHERE id = (SELECT id FROM sandbox_faults WHERE operation = 'CREATE_ATTEMPT' AND remaining > 0 ORDER BY id LIMIT 1 FOR UPDATE)
          RETURNING outcome, delay_ms),
        p AS (
          INSERT INTO sandbox_payments(provider_ref, attempt_id, channel, amount_fen, state, expire_at)
          SELECT $1, $2, $3, $4, CASE WHEN (SELECT outcome FROM f) = 'PAID' THEN 'PAID' ELSE 'OPEN' END, $5
           WHERE NOT EXISTS (SELECT 1 FROM f WHERE outcome IN ('REJECT', 'DELAY_MS'))
          ON CONFLICT (attempt_id) DO UPDATE SET updated_at = now() RETURNING state)
        SELECT (SELECT outcome FROM f) AS outcome, (SELECT delay_ms FROM f) AS delay_ms, (SELECT state FROM p) AS state FROM ${ASYNC_COMMIT}`,
      values: [ref, input.attemptId, input.channel, input.amountFen, input.expireAt],
    });
    return r.rows[0]!;
  }

  /**
   * Several payments in one statement while no CREATE_ATTEMPT fault is programmed; otherwise
   * nothing is written and each call goes on its own, in arrival order, taking the faults in turn.
   */
  async #openMany(os: OpenPayment[]): Promise<OpenOutcome[]> {
    const r = await this.#db.query<{ faulted: boolean; attempt_id: string | null; state: string | null }>({
      name: 'sandbox_create_attempt_batch',
      text: `WITH f AS (SELECT 1 FROM sandbox_faults WHERE operation = 'CREATE_ATTEMPT' AND remaining > 0 LIMIT 1),
        p AS (
          INSERT INTO sandbox_payments(provider_ref, attempt_id, channel, amount_fen, state, expire_at)
          SELECT r, a, c, m, 'OPEN', x FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::timestamptz[]) AS t(r, a, c, m, x)
           WHERE NOT EXISTS (SELECT 1 FROM f)
          ON CONFLICT (attempt_id) DO UPDATE SET updated_at = now() RETURNING attempt_id, state)
        SELECT EXISTS (SELECT 1 FROM f) AS faulted, p.attempt_id, p.state FROM ${ASYNC_COMMIT} CROSS JOIN (SELECT 1) one LEFT JOIN p ON true`,
      values: [
        os.map((o) => o.ref),
        os.map((o) => o.input.attemptId),
        os.map((o) => o.input.channel),
        os.map((o) => o.input.amountFen),
        os.map((o) => o.input.expireAt),
      ],
    });
    if (r.rows[0]!.faulted) {
      const out: OpenOutcome[] = [];
      for (const o of os) out.push(await this.#openOne(o));
      return out;
    }
    const state = new Map(r.rows.map((row) => [row.attempt_id, row.state]));
    return os.map((o) => ({ outcome: null, delay_ms: null, state: state.get(o.input.attemptId) ?? null }));
  }

  /** Where the sandbox sends its notifications (the service's provider-notification handler). */
  setNotificationSink(sink: NotificationSink): void {
    this.#sink = sink;
  }

  async #key(): Promise<Buffer> {
    if (this.#secret) return this.#secret;
    // Shared by all instances on one database, so any instance verifies any instance's notices.
    const candidate = randomBytes(32).toString('hex');
    await this.#db.query(
      `INSERT INTO platform_settings(name, value) VALUES ('sandbox_notify_secret', to_jsonb($1::text)) ON CONFLICT (name) DO NOTHING`,
      [candidate],
    );
    const r = await this.#db.query<{ v: string }>(`SELECT value #>> '{}' AS v FROM platform_settings WHERE name = 'sandbox_notify_secret'`);
    this.#secret = Buffer.from(r.rows[0]!.v, 'hex');
    return this.#secret;
  }

  async programFault(operation: FaultOperation, outcome: FaultOutcome, times: number, delayMs: number | null): Promise<void> {
    await this.#db.query('INSERT INTO sandbox_faults(operation, outcome, delay_ms, remaining) VALUES ($1, $2, $3, $4)', [
      operation,
      outcome,
      delayMs,
      times,
    ]);
  }

  async clearFaults(): Promise<void> {
    await this.#db.query('DELETE FROM sandbox_faults');
  }

  async listFaults(): Promise<{ operation: string; outcome: string; delayMs: number | null; remaining: number }[]> {
    const r = await this.#db.query(
      'SELECT operation, outcome, delay_ms AS "delayMs", remaining FROM sandbox_faults WHERE remaining > 0 ORDER BY id',
    );
    return r.rows;
  }

  /** Takes one programmed fault for the operation, if any. DELAY_MS waits and then proceeds normally. */
  async #fault(operation: FaultOperation): Promise<'REJECT' | 'TIMEOUT' | 'PAID' | null> {
    const r = await this.#db.query<{ outcome: FaultOutcome; delay_ms: number | null }>(
      `UPDATE sandbox_faults SET remaining = remaining - 1
        WHERE id = (SELECT id FROM sandbox_faults WHERE operation = $1 AND remaining > 0 ORDER BY id LIMIT 1 FOR UPDATE)
        RETURNING outcome, delay_ms`,
      [operation],
    );
    const f = r.rows[0];
    if (!f) return null;
    if (f.outcome === 'DELAY_MS') {
      await new Promise((res) => setTimeout(res, f.delay_ms ?? 0));
      return null;
    }
    return f.outcome;
  }

  async createAttempt(input: CreateAttemptInput): Promise<CreateAttemptResult> {
    const ref = `sbx_pay_${input.attemptId.slice(4)}`;
    const r = await this.#opens.run({ ref, input });
    const { outcome, delay_ms } = r;
    let state = r.state;
    if (outcome === 'REJECT') throw new ProviderRejectedError('SANDBOX_REJECTED');
    if (outcome === 'DELAY_MS') {
      await new Promise((res) => setTimeout(res, delay_ms ?? 0));
      state = await this.#openPayment(ref, input);
    }
    // TIMEOUT: the provider did the work, but the answer is lost on the way back.
    if (outcome === 'TIMEOUT') throw new ProviderUncertainError('sandbox: create attempt timed out');
    if (state === 'PAID') return { outcome: 'PAID', providerRef: ref };
    return { outcome: 'ACCEPTED', providerRef: ref, material: this.#material(input.channel, ref) };
  }

  async #openPayment(ref: string, input: CreateAttemptInput): Promise<string> {
    const r = await this.#db.query<{ state: string }>(
      `INSERT INTO sandbox_payments(provider_ref, attempt_id, channel, amount_fen, state) VALUES ($1, $2, $3, $4, 'OPEN')
       ON CONFLICT (attempt_id) DO UPDATE SET updated_at = now() RETURNING state`,
      [ref, input.attemptId, input.channel, input.amountFen],
    );
    return r.rows[0]!.state;
  }

  /** The sandbox's buyer acts on the cashier page itself: no provider page to send the buyer to. */
  #material(channel: string, ref: string): { qrCode: string | null; redirectUrl: string | null } {
    return channel === 'ALIPAY_H5'
      ? { qrCode: `https://qr.sandbox.invalid/alipay/${ref}`, redirectUrl: null }
      : { qrCode: null, redirectUrl: null };
  }

  async queryPayment(attemptId: string): Promise<PaymentQueryResult> {
    const r = await this.#db.query<{
      provider_ref: string;
      channel: string;
      state: 'OPEN' | 'PAID' | 'CLOSED' | 'FAILED';
      amount_fen: number;
    }>('SELECT provider_ref, channel, state, amount_fen FROM sandbox_payments WHERE attempt_id = $1', [attemptId]);
    const row = r.rows[0];
    if (!row) return { state: 'NOT_FOUND', providerRef: null, material: null, amountFen: null };
    return {
      state: row.state,
      providerRef: row.provider_ref,
      material: row.state === 'OPEN' ? this.#material(row.channel, row.provider_ref) : null,
      amountFen: row.amount_fen,
    };
  }

  async closePayment(attemptId: string, opts: CallOptions = {}): Promise<CloseResult> {
    const fault = opts.background ? null : await this.#fault('CLOSE');
    if (fault === 'REJECT') throw new ProviderRejectedError('SANDBOX_REJECTED');
    if (fault === 'PAID') {
      await this.#db.query(`UPDATE sandbox_payments SET state = 'PAID', updated_at = now() WHERE attempt_id = $1 AND state = 'OPEN'`, [
        attemptId,
      ]);
    }
    await this.#db.query(`UPDATE sandbox_payments SET state = 'CLOSED', updated_at = now() WHERE attempt_id = $1 AND state = 'OPEN'`, [
      attemptId,
    ]);
    if (fault === 'TIMEOUT') throw new ProviderUncertainError('sandbox: close timed out');
    const r = await this.#db.query<{ state: string }>('SELECT state FROM sandbox_payments WHERE attempt_id = $1', [attemptId]);
    return r.rows[0]?.state === 'PAID' ? { outcome: 'PAID' } : { outcome: 'CLOSED' };
  }

  async refund(input: RefundInput, opts: CallOptions = {}): Promise<RefundResult> {
    const fault = opts.background ? null : await this.#fault('REFUND');
    if (fault === 'REJECT') throw new ProviderRejectedError('SANDBOX_REJECTED');
    const immediate = fault === 'PAID';
    // One transaction with the payment row locked: concurrent refunds of one payment cannot
    // together exceed it, as at a real provider.
    const r = await withTx(this.#db, async (tx) => {
      const pay = await tx.query<{ provider_ref: string; state: string; amount_fen: number }>(
        'SELECT provider_ref, state, amount_fen FROM sandbox_payments WHERE attempt_id = $1 FOR UPDATE',
        [input.paidAttemptId],
      );
      const p = pay.rows[0];
      if (!p || p.state !== 'PAID') throw new ProviderRejectedError('PAYMENT_NOT_PAID');
      const existing = await tx.query<{ state: 'PENDING' | 'SUCCEEDED'; provider_ref: string }>(
        'SELECT state, provider_ref FROM sandbox_refunds WHERE refund_key = $1',
        [input.refundId],
      );
      if (existing.rows[0]) return { row: existing.rows[0], fresh: false };
      const done = await tx.query<{ total: number }>(
        `SELECT COALESCE(SUM(amount_fen), 0)::bigint AS total FROM sandbox_refunds WHERE payment_ref = $1 AND state <> 'FAILED'`,
        [p.provider_ref],
      );
      if (done.rows[0]!.total + input.amountFen > p.amount_fen) throw new ProviderRejectedError('REFUND_EXCEEDS_PAYMENT');
      const ref = `sbx_rf_${input.refundId.replace(/^[a-z]+_/, '')}`;
      const ins = await tx.query<{ state: 'PENDING' | 'SUCCEEDED'; provider_ref: string }>(
        `INSERT INTO sandbox_refunds(provider_ref, refund_key, payment_ref, amount_fen, state, settle_at)
         VALUES ($1, $2, $3, $4, $5, now() + make_interval(secs => $6)) RETURNING state, provider_ref`,
        [
          ref,
          input.refundId,
          p.provider_ref,
          input.amountFen,
          immediate ? 'SUCCEEDED' : 'PENDING',
          immediate ? 0 : REFUND_SETTLE_MS / 1000,
        ],
      );
      return { row: ins.rows[0]!, fresh: true };
    });
    if (r.fresh && r.row.state === 'PENDING') this.#scheduleRefundSettlement(input.refundId);
    if (fault === 'TIMEOUT') throw new ProviderUncertainError('sandbox: refund timed out');
    return { outcome: r.row.state, providerRef: r.row.provider_ref };
  }

  #scheduleRefundSettlement(refundId: string): void {
    const t = setTimeout(() => {
      this.#timers.delete(t);
      void this.#refundState(refundId)
        .then(({ state }) =>
          state === 'SUCCEEDED' ? this.#notify({ kind: 'REFUND', refundId, state: 'SUCCEEDED', reason: null }) : undefined,
        )
        .catch((err) => this.#log('sandbox refund settlement notice failed; the reconciler will converge it', err));
    }, REFUND_SETTLE_MS + 50);
    t.unref();
    this.#timers.add(t);
  }

  queryRefund(q: RefundQuery): Promise<RefundQueryResult> {
    return this.#refundState(q.refundId);
  }

  async #refundState(refundId: string): Promise<RefundQueryResult> {
    // Settlement is a function of time: a pending refund is settled once settle_at has passed.
    const r = await this.#db.query<{ state: ProviderRefundState; amount_fen: number }>(
      `UPDATE sandbox_refunds SET state = CASE WHEN state = 'PENDING' AND settle_at <= now() THEN 'SUCCEEDED' ELSE state END
        WHERE refund_key = $1 RETURNING state, amount_fen`,
      [refundId],
    );
    const row = r.rows[0];
    return row ? { state: row.state, amountFen: row.amount_fen } : { state: 'NOT_FOUND', amountFen: null };
  }

  /**
   * Buyer action: pays (or fails) one attempt's payment, then notifies the service. The payment
   * and the notice it owes are recorded in one statement; the notice is sent at once and marked
   * acknowledged when the service has applied it. A notice the service did not acknowledge (it
   * failed, or the process was cut off) is sent again by redeliverNotices().
   */
  /**
   * The buyer pays (or fails) the payment of an attempt. Only an OPEN payment within its expiry:
   * once the payment window has ended the buyer can do nothing with it, as at a real provider
   * (the service's expiry worker closes it).
   */
  async buyerAction(attemptId: string, action: 'PAY' | 'FAIL'): Promise<'OK' | 'NOT_FOUND' | 'NOT_OPEN' | 'EXPIRED'> {
    const r = await this.#db.query<{ state: string }>(
      `UPDATE sandbox_payments SET state = $2, updated_at = now(), notice_tries = 0,
              notice_due_at = now() + make_interval(secs => $3)
        WHERE attempt_id = $1 AND state = 'OPEN' AND (expire_at IS NULL OR expire_at > now()) RETURNING state`,
      [attemptId, action === 'PAY' ? 'PAID' : 'FAILED', NOTICE_FIRST_RETRY_SECONDS],
    );
    if (r.rowCount === 0) {
      const e = await this.#db.query<{ state: string; expired: boolean }>(
        'SELECT state, expire_at <= now() AS expired FROM sandbox_payments WHERE attempt_id = $1',
        [attemptId],
      );
      if (!e.rows[0]) return 'NOT_FOUND';
      // Paying an already-paid payment again re-sends the notice (idempotent for the service).
      if (!(action === 'PAY' && e.rows[0].state === 'PAID'))
        return e.rows[0].state === 'OPEN' && e.rows[0].expired ? 'EXPIRED' : 'NOT_OPEN';
    }
    try {
      await this.#sendPaymentNotice(attemptId, action === 'PAY' ? 'PAID' : 'FAILED');
    } catch (err) {
      // The buyer's action stands at the provider whatever the service made of the notice.
      this.#log('sandbox payment notice not acknowledged; sent again later', err);
    }
    return 'OK';
  }

  async #sendPaymentNotice(attemptId: string, state: 'PAID' | 'FAILED'): Promise<void> {
    await this.#notify({ kind: 'PAYMENT', attemptId, state, reason: state === 'FAILED' ? 'BUYER_PAYMENT_FAILED' : null });
    // Acknowledged: the service applied it (its handler returned).
    await this.#db.query('UPDATE sandbox_payments SET notice_due_at = NULL, notice_tries = 0 WHERE attempt_id = $1', [attemptId]);
  }

  /**
   * Sends again the payment notices that fell due unacknowledged (at most `limit`); run by the
   * service's workers. Each is claimed first by moving its due time on (the next retry), so two
   * instances do not send one notice at once. Returns how many were claimed.
   */
  async redeliverNotices(limit = 20): Promise<number> {
    const r = await this.#db.query<{ attempt_id: string; state: string; notice_tries: number }>(
      `UPDATE sandbox_payments SET notice_tries = notice_tries + 1,
              notice_due_at = CASE WHEN notice_tries + 1 >= $2 THEN NULL
                              ELSE now() + make_interval(secs => LEAST(3600, $3 * power(3, notice_tries + 1))) END
        WHERE attempt_id IN (SELECT attempt_id FROM sandbox_payments WHERE notice_due_at <= now()
                              ORDER BY notice_due_at LIMIT $1 FOR UPDATE SKIP LOCKED)
        RETURNING attempt_id, state, notice_tries`,
      [limit, NOTICE_MAX_TRIES, NOTICE_FIRST_RETRY_SECONDS],
    );
    for (const row of r.rows) {
      if (row.state !== 'PAID' && row.state !== 'FAILED') continue;
      try {
        await this.#sendPaymentNotice(row.attempt_id, row.state);
      } catch (err) {
        this.#log(`sandbox payment notice not acknowledged (try ${row.notice_tries} of ${NOTICE_MAX_TRIES}); sent again later`, err);
      }
    }
    return r.rows.length;
  }

  async #notify(n: ProviderNotification): Promise<void> {
    if (!this.#sink) throw new Error('sandbox: no notification sink');
    const raw = Buffer.from(JSON.stringify(n));
    const sig = createHmac('sha256', await this.#key())
      .update(raw)
      .digest('hex');
    await this.#sink(raw, { 'content-type': 'application/json', 'x-sandbox-signature': sig });
  }

  async parseNotification(rawBody: Buffer, headers: Record<string, string | string[] | undefined>): Promise<ProviderNotification> {
    const sig = headers['x-sandbox-signature'];
    if (typeof sig !== 'string' || !/^[0-9a-f]{64}$/.test(sig)) throw new ProviderNotificationError('missing or malformed signature');
    const expected = createHmac('sha256', await this.#key())
      .update(rawBody)
      .digest();
    if (!timingSafeEqual(expected, Buffer.from(sig, 'hex'))) throw new ProviderNotificationError('bad signature');
    let n: unknown;
    try {
      n = JSON.parse(rawBody.toString('utf8'));
    } catch {
      throw new ProviderNotificationError('body is not JSON');
    }
    if (typeof n !== 'object' || n === null || Array.isArray(n)) throw new ProviderNotificationError('body is not a JSON object');
    const o = n as Record<string, unknown>;
    if (o.kind === 'PAYMENT' && typeof o.attemptId === 'string' && (o.state === 'PAID' || o.state === 'FAILED' || o.state === 'CLOSED')) {
      return { kind: 'PAYMENT', attemptId: o.attemptId, state: o.state, reason: typeof o.reason === 'string' ? o.reason : null };
    }
    if (o.kind === 'REFUND' && typeof o.refundId === 'string' && (o.state === 'SUCCEEDED' || o.state === 'FAILED')) {
      return { kind: 'REFUND', refundId: o.refundId, state: o.state, reason: typeof o.reason === 'string' ? o.reason : null };
    }
    throw new ProviderNotificationError('unknown notification');
  }

  notificationAck(ok: boolean, message?: string): NotificationAck {
    return ok
      ? { status: 200, contentType: 'application/json; charset=utf-8', body: JSON.stringify({ received: true }) }
      : {
          status: 400,
          contentType: 'application/json; charset=utf-8',
          body: JSON.stringify({ received: false, error: message ?? 'refused' }),
        };
  }

  close(): void {
    for (const t of this.#timers) clearTimeout(t);
    this.#timers.clear();
  }
}
