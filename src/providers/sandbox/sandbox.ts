/**
 * The sandbox provider: a full, deterministic PaymentProvider with programmable faults
 * (decisions.md section 8). It keeps its own books in the sandbox_* tables, as a real provider
 * keeps its own; the service reaches them only through this interface. Buyer actions (pay, fail)
 * come back to the service as signed notifications through the same path a real provider's would.
 */
import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Clock } from '../../domain/clock.ts';
import { systemClock } from '../../domain/clock.ts';
import { TurnBatcher } from '../../store/batcher.ts';
import type { Db } from '../../store/db.ts';
import * as books from '../../store/sandbox-books.ts';
import { settingOnce } from '../../store/settings.ts';
import {
  type CallOptions,
  type CloseResult,
  type CreateAttemptInput,
  type CreateAttemptResult,
  type CreateTradeInput,
  type CreateTradeResult,
  type BuyerIdentity,
  type JsapiPayment,
  type NotificationAck,
  type PaymentProvider,
  type PaymentQueryResult,
  type ProviderNotification,
  type ProviderStatementLine,
  ProviderNotificationError,
  ProviderRejectedError,
  ProviderUncertainError,
  type RefundInput,
  type RefundQuery,
  type RefundQueryResult,
  type RefundResult,
} from '../provider.ts';

export const FAULT_OPERATIONS = ['CREATE_ATTEMPT', 'CLOSE', 'REFUND', 'PAY'] as const;
export const FAULT_OUTCOMES = ['REJECT', 'TIMEOUT', 'PAID', 'DELAY_MS', 'AMOUNT_DIFFERS', 'NOTICE_LOST', 'LOST'] as const;
export type FaultOperation = (typeof FAULT_OPERATIONS)[number];
export type FaultOutcome = (typeof FAULT_OUTCOMES)[number];

/**
 * The faults that make the sandbox's books differ from the service's ledger, for reconciliation
 * (docs/reconciliation.md): each goes only with its operation.
 *  - PAY / NOTICE_LOST: the buyer's next payment is taken, and its notice is never sent.
 *  - CREATE_ATTEMPT / AMOUNT_DIFFERS: the next payment is opened for one fen more than asked.
 *  - REFUND / LOST: the next refund settles and is notified, then the sandbox loses its record
 *    (absent from its statement, unknown to its refund query).
 * The others (REJECT, TIMEOUT, PAID, DELAY_MS) go with CREATE_ATTEMPT, CLOSE and REFUND.
 */
export const LEDGER_FAULTS: Readonly<Partial<Record<FaultOutcome, FaultOperation>>> = {
  NOTICE_LOST: 'PAY',
  AMOUNT_DIFFERS: 'CREATE_ATTEMPT',
  LOST: 'REFUND',
};

/** Whether the outcome goes with the operation. */
export function faultFits(operation: FaultOperation, outcome: FaultOutcome): boolean {
  const only = LEDGER_FAULTS[outcome];
  if (only !== undefined) return only === operation;
  return operation !== 'PAY';
}

/** How long the sandbox takes to settle an accepted refund. */
export const REFUND_SETTLE_MS = 1000;

/** Lines of the sandbox's statement read per statement of its books. */
const STATEMENT_PAGE_LINES = 5000;

/**
 * A payment notice the service has not acknowledged is sent again, as a real provider's is: first
 * NOTICE_FIRST_RETRY_SECONDS after the buyer's action, then at growing intervals (x3, at most an
 * hour), NOTICE_MAX_TRIES times in all (about a day).
 */
export const NOTICE_FIRST_RETRY_SECONDS = 10;
export const NOTICE_MAX_TRIES = 30;

/** What the sandbox's buyer (or the provider itself) does with an open payment: pays it, fails it, or the provider closes it (its own timeout, as Alipay's TRADE_CLOSED). */
export type BuyerAction = 'PAY' | 'FAIL' | 'CLOSE';

export type NotificationSink = (rawBody: Buffer, headers: Record<string, string>) => Promise<void>;

const sleep = (ms: number) => new Promise<void>((res) => setTimeout(res, ms));

/** The one WeChat user of the sandbox's web authorization. */
export const SANDBOX_OPENID = 'oSandboxBuyer0000000000000000';
/** The code the sandbox's authorization hands back (the sandbox has no authorize page: the cashier's callback is reached at once). */
const SANDBOX_OAUTH_CODE = 'sandbox-code';

export class SandboxProvider implements PaymentProvider {
  readonly name = 'sandbox';
  readonly channels = ['ALIPAY_H5', 'WECHAT_H5'] as const;
  /**
   * The same products as WeChat Pay (docs/cashier.md): JSAPI (its paySign is not checked by anyone:
   * the sandbox's buyer pays with the page's buttons) and NATIVE (a code to scan, paid with the
   * buttons too). Trades take no programmed fault (faults are for the open API's calls).
   */
  readonly tradeProducts = ['JSAPI', 'NATIVE'] as const;
  /** WeChat's web authorization, stood in for: straight back to the cashier, as one sandbox WeChat user. */
  readonly buyerIdentity: BuyerIdentity = {
    authorizeUrl: (redirectUri, state) =>
      `${redirectUri}${redirectUri.includes('?') ? '&' : '?'}code=${SANDBOX_OAUTH_CODE}&state=${encodeURIComponent(state)}`,
    openIdOf: async (code) => {
      if (code !== SANDBOX_OAUTH_CODE) throw new ProviderRejectedError('OAUTH_40029');
      return SANDBOX_OPENID;
    },
  };
  readonly #db: Db;
  readonly #clock: Clock;
  #secret: Buffer | null = null;
  #sink: NotificationSink | null = null;
  readonly #log: (msg: string, err?: unknown) => void;

  /** Acknowledged payment notices, one statement per event-loop turn. */
  readonly #acks: TurnBatcher<string, void>;
  /** Payments opened by concurrent createAttempt calls, one statement per event-loop turn. */
  readonly #opens: TurnBatcher<books.OpenPayment, books.OpenOutcome>;

  constructor(db: Db, o: { log?: (msg: string, err?: unknown) => void; clock?: Clock } = {}) {
    this.#db = db;
    this.#log = o.log ?? (() => {});
    this.#clock = o.clock ?? systemClock;
    this.#acks = new TurnBatcher({
      one: (id) => books.noticesAcknowledged(db, [id]),
      many: async (ids) => {
        await books.noticesAcknowledged(db, ids);
        return ids.map(() => undefined);
      },
    });
    this.#opens = new TurnBatcher({
      one: (p) => books.openPaymentTakingFault(db, p, this.#now()),
      many: async (ps) => {
        const states = await books.openPayments(db, ps, this.#now());
        if (states !== null) return states.map((state) => ({ outcome: null, delay_ms: null, state }));
        // A fault is programmed: each call on its own, in arrival order, taking the faults in turn.
        const out: books.OpenOutcome[] = [];
        for (const p of ps) out.push(await books.openPaymentTakingFault(db, p, this.#now()));
        return out;
      },
    });
  }

  #now(): Date {
    return new Date(this.#clock.now());
  }

  /** Where the sandbox sends its notifications (the service's provider-notification handler). */
  setNotificationSink(sink: NotificationSink): void {
    this.#sink = sink;
  }

  async #key(): Promise<Buffer> {
    // Shared by all instances on one database, so any instance verifies any instance's notices.
    this.#secret ??= Buffer.from(await settingOnce(this.#db, 'sandbox_notify_secret', randomBytes(32).toString('hex')), 'hex');
    return this.#secret;
  }

  programFault(operation: FaultOperation, outcome: FaultOutcome, times: number, delayMs: number | null): Promise<void> {
    return books.addFault(this.#db, operation, outcome, times, delayMs, this.#now());
  }

  clearFaults(): Promise<void> {
    return books.clearFaults(this.#db);
  }

  listFaults(): Promise<{ operation: string; outcome: string; delayMs: number | null; remaining: number }[]> {
    return books.listFaults(this.#db);
  }

  async createAttempt(input: CreateAttemptInput): Promise<CreateAttemptResult> {
    const ref = `sbx_pay_${input.attemptId.slice(4)}`;
    const payment: books.OpenPayment = {
      ref,
      attemptId: input.attemptId,
      channel: input.channel,
      amountFen: input.amountFen,
      expireAt: input.expireAt,
    };
    const r = await this.#opens.run(payment);
    const { outcome, delay_ms } = r;
    let state = r.state;
    if (outcome === 'REJECT') throw new ProviderRejectedError('SANDBOX_REJECTED');
    if (outcome === 'DELAY_MS') {
      await sleep(delay_ms ?? 0);
      state = await books.openPayment(this.#db, payment, this.#now());
    }
    // TIMEOUT: the provider did the work, but the answer is lost on the way back.
    if (outcome === 'TIMEOUT') throw new ProviderUncertainError('sandbox: create attempt timed out');
    if (state === 'PAID') return { outcome: 'PAID', providerRef: ref };
    return { outcome: 'ACCEPTED', providerRef: ref, material: this.#material(input.channel, ref) };
  }

  /** A trade of an attempt (JSAPI, NATIVE): a payment of its own in the sandbox's books, under the trade's number. */
  async createTrade(input: CreateTradeInput): Promise<CreateTradeResult> {
    const suffix = input.tradeNo.replace(/^[a-z]+_/, '');
    const ref = `sbx_pay_${suffix}`;
    const state = await books.openPayment(
      this.#db,
      { ref, attemptId: input.tradeNo, channel: 'WECHAT_H5', amountFen: input.amountFen, expireAt: input.expireAt },
      this.#now(),
    );
    if (state === 'PAID') return { outcome: 'PAID', providerRef: ref };
    if (state !== 'OPEN') throw new ProviderRejectedError('SANDBOX_TRADE_CLOSED');
    return {
      outcome: 'ACCEPTED',
      material: input.product === 'JSAPI' ? `sbx_prepay_${suffix}` : `weixin://wxpay/bizpayurl?pr=sbx${suffix}`,
    };
  }

  /** The JSAPI parameters in WeChat's form; `paySign` is a digest, not a signature (nobody in the sandbox checks it). */
  jsapiPayment(prepayId: string): JsapiPayment {
    const timeStamp = String(Math.floor(this.#clock.now() / 1000));
    const nonceStr = randomBytes(16).toString('hex');
    const pkg = `prepay_id=${prepayId}`;
    const paySign = createHash('sha256').update(`sandbox\n${timeStamp}\n${nonceStr}\n${pkg}\n`).digest('base64');
    return { appId: 'wxsandbox', timeStamp, nonceStr, package: pkg, signType: 'RSA', paySign };
  }

  /** The sandbox's buyer acts on the cashier page itself: no provider page to send the buyer to. */
  #material(channel: string, ref: string): { qrCode: string | null; redirectUrl: string | null } {
    return channel === 'ALIPAY_H5'
      ? { qrCode: `https://qr.sandbox.invalid/alipay/${ref}`, redirectUrl: null }
      : { qrCode: null, redirectUrl: null };
  }

  async queryPayment(attemptId: string): Promise<PaymentQueryResult> {
    const row = await books.getPayment(this.#db, attemptId);
    if (!row) return { state: 'NOT_FOUND', providerRef: null, material: null, amountFen: null };
    return {
      state: row.state,
      providerRef: row.providerRef,
      material: row.state === 'OPEN' ? this.#material(row.channel, row.providerRef) : null,
      amountFen: row.amountFen,
    };
  }

  async closePayment(attemptId: string, opts: CallOptions = {}): Promise<CloseResult> {
    // The fault (unless in the background) and the close, in one statement of the books.
    const r = await books.closePaymentTakingFault(this.#db, attemptId, !opts.background, this.#now());
    if (r.outcome === 'REJECT') throw new ProviderRejectedError('SANDBOX_REJECTED');
    let state = r.state;
    if (r.outcome === 'DELAY_MS') {
      await sleep(r.delay_ms ?? 0);
      await books.movePayment(this.#db, attemptId, 'CLOSED', this.#now());
      state = (await books.getPayment(this.#db, attemptId))?.state ?? null;
    }
    if (r.outcome === 'TIMEOUT') throw new ProviderUncertainError('sandbox: close timed out');
    return state === 'PAID' ? { outcome: 'PAID' } : { outcome: 'CLOSED' };
  }

  async refund(input: RefundInput, opts: CallOptions = {}): Promise<RefundResult> {
    const now = this.#now();
    const booking = {
      key: input.refundId,
      ref: `sbx_rf_${input.refundId.replace(/^[a-z]+_/, '')}`,
      attemptId: input.paidAttemptId,
      amountFen: input.amountFen,
      settleAt: new Date(now.getTime() + REFUND_SETTLE_MS),
    };
    // The fault (unless in the background) and the booking, in one call of the books.
    const taken = await books.bookRefundTakingFault(this.#db, { ...booking, takeFault: !opts.background }, now);
    const fault = taken.outcome;
    if (fault === 'REJECT') throw new ProviderRejectedError('SANDBOX_REJECTED');
    let r = taken.result;
    if (fault === 'DELAY_MS') {
      await sleep(taken.delayMs ?? 0);
      r = (await books.bookRefundTakingFault(this.#db, { ...booking, takeFault: false }, this.#now())).result;
    }
    if (r === null) throw new Error('sandbox: refund not booked');
    if ('refused' in r) throw new ProviderRejectedError(r.refused);
    if (fault === 'TIMEOUT') throw new ProviderUncertainError('sandbox: refund timed out');
    return { outcome: r.row.state, providerRef: r.row.provider_ref };
  }

  /**
   * Sends the settlement notices of refunds that settled by now (at most `limit`), as a real
   * provider notifies a refund's outcome; run by the service's workers, so a test moves the clock
   * and runs a pass instead of waiting. Returns how many were claimed.
   */
  async sendDueRefundNotices(limit = 20): Promise<number> {
    const due = await books.claimDueRefundNotices(this.#db, limit, this.#now());
    for (const r of due) {
      if (r.state !== 'SUCCEEDED') continue;
      try {
        await this.#notify({ kind: 'REFUND', refundId: r.refundKey, state: 'SUCCEEDED', reason: null });
      } catch (err) {
        this.#log('sandbox refund settlement notice failed; the provider check will converge it', err);
      }
    }
    return due.length;
  }

  async queryRefund(q: RefundQuery): Promise<RefundQueryResult> {
    const r = await books.refundState(this.#db, q.refundId, this.#now());
    // A refund the sandbox lost (a programmed fault) is unknown to it once settled.
    if (!r || (r.lost && r.state === 'SUCCEEDED')) return { state: 'NOT_FOUND', amountFen: null };
    return { state: r.state, amountFen: r.amountFen };
  }

  /**
   * The sandbox's statement of a day, from its own books: the payments paid that day and the
   * refunds settled that day (not those it lost), a page at a time.
   */
  async downloadStatement(day: string): Promise<AsyncIterable<ProviderStatementLine>> {
    const start = new Date(Date.parse(`${day}T00:00:00+08:00`));
    const end = new Date(start.getTime() + 86_400_000);
    const db = this.#db;
    const now = this.#now();
    async function* lines(): AsyncGenerator<ProviderStatementLine> {
      for (const kind of ['PAYMENT', 'REFUND'] as const) {
        let after: { at: Date; id: string } | null = null;
        for (;;) {
          const page = await books.statementLines(db, kind, { start, end, now, after, limit: STATEMENT_PAGE_LINES });
          for (const l of page) {
            yield {
              kind,
              subjectId: l.subjectId,
              providerRef: l.providerRef,
              amountFen: l.amountFen,
              state: kind === 'PAYMENT' ? 'PAID' : 'SUCCEEDED',
              at: l.at,
            };
          }
          if (page.length < STATEMENT_PAGE_LINES) break;
          const last = page[page.length - 1]!;
          after = { at: last.at, id: last.subjectId };
        }
      }
    }
    return lines();
  }

  /**
   * The buyer pays (or fails) the payment of an attempt, or the provider closes it of itself, then the service is notified. Only an
   * OPEN payment within its expiry: once the payment window has ended the buyer can do nothing
   * with it, as at a real provider (the service's expiry worker closes it). The payment and the
   * notice it owes are recorded in one statement; the notice is sent at once and marked
   * acknowledged when the service has applied it. A notice the service did not acknowledge (it
   * failed, or the process was cut off) is sent again by redeliverNotices().
   */
  async buyerAction(attemptId: string, action: BuyerAction): Promise<'OK' | 'NOT_FOUND' | 'NOT_OPEN' | 'EXPIRED'> {
    const now = this.#now();
    const to = action === 'PAY' ? 'PAID' : action === 'FAIL' ? 'FAILED' : 'CLOSED';
    const noticeDueAt = new Date(now.getTime() + NOTICE_FIRST_RETRY_SECONDS * 1000);
    // The buyer's action and the PAY fault it takes, in one statement of the books.
    const acted = await books.buyerActsTakingFault(this.#db, attemptId, to, noticeDueAt, now);
    if (!acted.moved) {
      const e = await books.paymentStanding(this.#db, attemptId, now);
      if (!e) return 'NOT_FOUND';
      // Paying an already-paid payment again re-sends the notice (idempotent for the service).
      if (!(action === 'PAY' && e.state === 'PAID')) return e.state === 'OPEN' && e.expired ? 'EXPIRED' : 'NOT_OPEN';
    } else if (acted.fault === 'NOTICE_LOST') {
      // A payment whose notice is lost (PAY / NOTICE_LOST), taken only by a payment that took
      // place: nothing owed (its first retry is seconds away) and nothing sent.
      await books.noticesAcknowledged(this.#db, [attemptId]);
      return 'OK';
    }
    try {
      await this.#notify({ kind: 'PAYMENT', attemptId, state: to, reason: to === 'FAILED' ? 'BUYER_PAYMENT_FAILED' : null });
      // Acknowledged: the service applied it (its handler returned). Recorded off the buyer's
      // path, with the acknowledgements of concurrent notices: one lost only sends the notice again.
      this.#acks.run(attemptId).catch((err: unknown) => this.#log('sandbox notice acknowledgement not recorded; sent again later', err));
    } catch (err) {
      // The buyer's action stands at the provider whatever the service made of the notice.
      this.#log('sandbox payment notice not acknowledged; sent again later', err);
    }
    return 'OK';
  }

  async #sendPaymentNotice(attemptId: string, state: 'PAID' | 'FAILED' | 'CLOSED'): Promise<void> {
    await this.#notify({ kind: 'PAYMENT', attemptId, state, reason: state === 'FAILED' ? 'BUYER_PAYMENT_FAILED' : null });
    // Acknowledged: the service applied it (its handler returned).
    await this.#acks.run(attemptId);
  }

  /**
   * Sends again the payment notices that fell due unacknowledged (at most `limit`); run by the
   * service's workers. Returns how many were claimed.
   */
  async redeliverNotices(limit = 20): Promise<number> {
    const rows = await books.claimDueNotices(
      this.#db,
      { limit, maxTries: NOTICE_MAX_TRIES, firstRetrySeconds: NOTICE_FIRST_RETRY_SECONDS },
      this.#now(),
    );
    for (const row of rows) {
      // A payment the service closed owes no notice (none is due for it); one the provider closed does.
      if (row.state !== 'PAID' && row.state !== 'FAILED' && row.state !== 'CLOSED') continue;
      try {
        await this.#sendPaymentNotice(row.attempt_id, row.state);
      } catch (err) {
        this.#log(`sandbox payment notice not acknowledged (try ${row.notice_tries} of ${NOTICE_MAX_TRIES}); sent again later`, err);
      }
    }
    return rows.length;
  }

  /** Ends the payments of these attempts now (with the service's test lever that ends an order's window). */
  expirePayments(attemptIds: string[], expireAt: Date): Promise<void> {
    return books.expirePayments(this.#db, attemptIds, expireAt, this.#now());
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
    const body = ok ? { received: true } : { received: false, ...(message !== undefined ? { error: message } : {}) };
    return { status: ok ? 200 : 400, contentType: 'application/json; charset=utf-8', body: JSON.stringify(body) };
  }
}
