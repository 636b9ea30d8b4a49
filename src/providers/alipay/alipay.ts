/**
 * The Alipay provider: ALIPAY_H5, Alipay's mobile-web payment (alipay.trade.wap.pay) with its
 * official collection code (alipay.trade.precreate), over Alipay's OpenAPI 2.0 gateway with RSA2
 * signatures, in public-key or certificate mode (docs/providers-alipay.md).
 *
 * Requests are signed, the mobile-web page URL is built, certificate SNs are computed and
 * signatures are checked by Alipay's own Node.js SDK (`alipay-sdk`). The HTTP exchange, the reading
 * of answers (which text a signature covers) and of notifications (form parsing, which parameters
 * a signature covers) are this module's: docs/providers-alipay.md says which defects of the SDK's own
 * versions that avoids, each measured.
 *
 * The adapter keeps no state: every call is addressed by our ids (the attempt id is Alipay's
 * out_trade_no, the refund id its out_request_no), so a repeated call is the same call at Alipay.
 */
import { AlipaySdk, type AlipaySdkConfig } from 'alipay-sdk';
import {
  type CallOptions,
  type CloseResult,
  type CreateAttemptInput,
  type CreateAttemptResult,
  type NotificationAck,
  type PaymentProvider,
  type PaymentQueryResult,
  type ProviderNotification,
  ProviderNotificationError,
  type ProviderStatementLine,
  ProviderRejectedError,
  ProviderUncertainError,
  type RefundInput,
  type RefundQuery,
  type RefundQueryResult,
  type RefundResult,
} from '../provider.ts';
import { BILL_TIMEOUT_MS, readCapped } from '../http-read.ts';
import { emptyStatement } from '../statement-parsing.ts';
import { ALIPAY_MAX_TRADE_FEN, fenToYuan, yuanToFen } from './amount.ts';
import { alipayBillLines, parseAlipayTradeBill } from './bill.ts';
import type { AlipayConfig } from './config.ts';
import { type AnswerMeaning, answerRow } from './mapping.ts';
import { type GatewayAnswer, notificationSignContent, parseForm, readGatewayAnswer, shanghaiDateTime } from './wire.ts';

export { type AlipayConfig, alipayConfigFromEnv } from './config.ts';

export interface AlipayProviderOptions {
  /** Where Alipay posts its notifications: `{PUBLIC_BASE_URL}/api/provider/v1/notifications/alipay`. */
  notifyUrl: string;
  /** The clock the request timestamps are read from. */
  now?: () => Date;
}

/** A gateway answer's body is read up to this size; a larger one is not an answer. */
export const MAX_ANSWER_BYTES = 1024 * 1024;

/** A bill archive is read up to this size (it is held whole: a ZIP's directory is at its end). */
export const MAX_BILL_BYTES = 512 * 1024 * 1024;

/** Bounds on a notification's form body (Alipay's longest values, fund_bill_list and the like, are far below). */
export const NOTIFICATION_LIMITS = { maxParams: 100, maxNameChars: 64, maxValueChars: 4096 } as const;

/** Alipay's subject is at most 256 characters and may not carry `/`, `=` or `&` (alipay.trade.precreate). */
const SUBJECT_MAX_CHARS = 256;

/** A verified answer of the gateway. */
type Answer = Extract<GatewayAnswer, { ok: true }>;

export class AlipayProvider implements PaymentProvider {
  readonly name = 'alipay';
  readonly channels = ['ALIPAY_H5'] as const;
  readonly #config: AlipayConfig;
  readonly #sdk: AlipaySdk;
  readonly #notifyUrl: string;
  readonly #now: () => Date;
  /** Certificate mode: the SN of the Alipay certificate whose key verifies (answers carry theirs). */
  readonly #alipayCertSn: string | null;

  constructor(config: AlipayConfig, opts: AlipayProviderOptions) {
    this.#config = config;
    this.#notifyUrl = opts.notifyUrl;
    this.#now = opts.now ?? (() => new Date());
    const base: AlipaySdkConfig = {
      appId: config.appId,
      privateKey: config.privateKey.export({ type: 'pkcs1', format: 'pem' }).toString(),
      keyType: 'PKCS1',
      signType: 'RSA2',
      gateway: config.gatewayUrl,
      timeout: config.timeoutMs,
      camelcase: false,
    };
    const m = config.mode;
    this.#sdk = new AlipaySdk(
      m.kind === 'PUBLIC_KEY'
        ? { ...base, alipayPublicKey: m.alipayPublicKey.export({ type: 'spki', format: 'pem' }).toString() }
        : {
            ...base,
            appCertContent: m.appCertPem,
            alipayPublicCertContent: m.alipayPublicCertPem,
            alipayRootCertContent: m.alipayRootCertPem,
          },
    );
    this.#alipayCertSn = m.kind === 'CERT' ? this.#sdk.config.alipayCertSn : null;
  }

  /** Certificate mode: the SNs requests carry and answers are checked against (null in public-key mode). */
  get certSns(): { appCertSn: string; alipayRootCertSn: string; alipayCertSn: string } | null {
    const c = this.#sdk.config;
    return this.#config.mode.kind === 'CERT'
      ? { appCertSn: c.appCertSn, alipayRootCertSn: c.alipayRootCertSn, alipayCertSn: c.alipayCertSn }
      : null;
  }

  async createAttempt(input: CreateAttemptInput): Promise<CreateAttemptResult> {
    if (input.channel !== 'ALIPAY_H5') throw new ProviderRejectedError('CHANNEL_NOT_SERVED');
    if (input.currency !== 'CNY') throw new ProviderRejectedError('CURRENCY_NOT_SERVED');
    if (!Number.isSafeInteger(input.amountFen) || input.amountFen < 1 || input.amountFen > ALIPAY_MAX_TRADE_FEN) {
      throw new ProviderRejectedError('AMOUNT_OUT_OF_RANGE');
    }
    // The QR code (precreate) and the mobile-web page (wap.pay) name one trade: the same
    // out_trade_no, amount, subject and expiry, so whichever the buyer uses first creates it and
    // the other refers to it; one attempt can never be paid twice (docs/providers-alipay.md).
    const trade = {
      out_trade_no: input.attemptId,
      total_amount: fenToYuan(input.amountFen),
      subject: alipaySubject(input.subject, input.openOrderId),
      time_expire: shanghaiDateTime(input.expireAt),
    };
    const a = await this.#call('alipay.trade.precreate', trade, { notify_url: this.#notifyUrl });
    const meaning = this.#meaning(a);
    if (meaning === 'PAID') {
      const q = await this.queryPayment(input.attemptId);
      if (q.state === 'PAID') return { outcome: 'PAID', providerRef: q.providerRef ?? input.attemptId };
      throw new ProviderUncertainError(`alipay precreate: ${a.subCode}, but the trade queries as ${q.state}`);
    }
    if (meaning !== 'SUCCESS') throw this.#notSuccess('precreate', a, meaning);
    this.#sameTrade('precreate', a, input.attemptId);
    const qr = a.body.qr_code;
    if (typeof qr !== 'string' || !/^https?:\/\/\S+$/.test(qr))
      throw new ProviderUncertainError('alipay precreate: the answer carries no qr_code');
    return {
      outcome: 'ACCEPTED',
      // Alipay's trade_no does not exist yet: precreate answers carry none (the trade is made when
      // the buyer scans or opens the page). Every call addresses the trade by out_trade_no.
      providerRef: input.attemptId,
      material: { qrCode: qr, redirectUrl: this.#wapPayUrl(trade, input.returnUrl) },
    };
  }

  /** The signed URL of Alipay's mobile-web payment page for this trade (a GET the buyer's browser makes). */
  #wapPayUrl(trade: Record<string, string>, returnUrl: string | null): string {
    const params: Record<string, unknown> = {
      bizContent: { ...trade, product_code: 'QUICK_WAP_WAY', ...(returnUrl ? { quit_url: returnUrl } : {}) },
      notifyUrl: this.#notifyUrl,
      timestamp: shanghaiDateTime(this.#now()),
    };
    if (returnUrl) params.returnUrl = returnUrl;
    return this.#sdk.pageExecute('alipay.trade.wap.pay', 'GET', params);
  }

  async queryPayment(attemptId: string): Promise<PaymentQueryResult> {
    const a = await this.#call('alipay.trade.query', { out_trade_no: attemptId });
    const meaning = this.#meaning(a);
    if (meaning === 'NOT_FOUND') return { state: 'NOT_FOUND', providerRef: null, material: null, amountFen: null };
    if (meaning !== 'SUCCESS') throw this.#notSuccess('query', a, meaning);
    this.#sameTrade('query', a, attemptId);
    const amountFen = yuanToFen(String(a.body.total_amount));
    if (amountFen === null) throw new ProviderUncertainError('alipay query: the answer carries no valid total_amount');
    const tradeNo = typeof a.body.trade_no === 'string' && a.body.trade_no !== '' ? a.body.trade_no : null;
    const state = tradeState(a.body);
    if (state === null) throw new ProviderUncertainError(`alipay query: unknown trade_status '${String(a.body.trade_status)}'`);
    // Alipay's query gives neither the QR code nor the page back: material is returned by createAttempt only.
    return { state, providerRef: tradeNo ?? attemptId, material: null, amountFen };
  }

  async closePayment(attemptId: string, _opts?: CallOptions): Promise<CloseResult> {
    const a = await this.#call('alipay.trade.close', { out_trade_no: attemptId });
    const meaning = this.#meaning(a);
    if (meaning === 'SUCCESS') {
      this.#sameTrade('close', a, attemptId);
      return { outcome: 'CLOSED' };
    }
    if (meaning === 'NOT_FOUND') return { outcome: 'CLOSED' };
    if (meaning === 'STATUS' || meaning === 'PAID') {
      // Refused because of the trade's state: paid (then the answer is PAID), or closed already.
      const q = await this.queryPayment(attemptId);
      if (q.state === 'PAID') return { outcome: 'PAID' };
      if (q.state === 'CLOSED' || q.state === 'NOT_FOUND') return { outcome: 'CLOSED' };
      throw new ProviderRejectedError(a.subCode ?? a.code);
    }
    throw this.#notSuccess('close', a, meaning);
  }

  async refund(input: RefundInput, _opts?: CallOptions): Promise<RefundResult> {
    if (!Number.isSafeInteger(input.amountFen) || input.amountFen < 1 || input.amountFen > ALIPAY_MAX_TRADE_FEN) {
      throw new ProviderRejectedError('AMOUNT_OUT_OF_RANGE');
    }
    const biz: Record<string, string> = {
      out_trade_no: input.paidAttemptId,
      refund_amount: fenToYuan(input.amountFen),
      out_request_no: input.refundId,
    };
    const reason = input.reason === null ? '' : alipayText(input.reason, SUBJECT_MAX_CHARS);
    if (reason !== '') biz.refund_reason = reason;
    const a = await this.#call('alipay.trade.refund', biz);
    const meaning = this.#meaning(a);
    // A refund of a trade Alipay does not know, or cannot refund, is a refusal: nothing was refunded.
    if (meaning === 'NOT_FOUND' || meaning === 'STATUS' || meaning === 'PAID') throw new ProviderRejectedError(a.subCode ?? a.code);
    if (meaning !== 'SUCCESS') throw this.#notSuccess('refund', a, meaning);
    this.#sameTrade('refund', a, input.paidAttemptId);
    const providerRef = typeof a.body.trade_no === 'string' && a.body.trade_no !== '' ? a.body.trade_no : input.paidAttemptId;
    // fund_change Y: this call moved the money. N: it did not (a repeat, or not yet): the refund
    // query says whether the refund has succeeded (Alipay's advice for fund_change N).
    if (a.body.fund_change === 'Y') return { outcome: 'SUCCEEDED', providerRef };
    try {
      const q = await this.queryRefund({ refundId: input.refundId, paidAttemptId: input.paidAttemptId });
      if (q.state === 'SUCCEEDED') return { outcome: 'SUCCEEDED', providerRef };
    } catch {
      // The refund was accepted; whether it has settled is asked again later.
    }
    return { outcome: 'PENDING', providerRef };
  }

  async queryRefund(q: RefundQuery): Promise<RefundQueryResult> {
    const a = await this.#call('alipay.trade.fastpay.refund.query', { out_trade_no: q.paidAttemptId, out_request_no: q.refundId });
    const meaning = this.#meaning(a);
    if (meaning === 'NOT_FOUND') return { state: 'NOT_FOUND', amountFen: null };
    if (meaning !== 'SUCCESS') throw this.#notSuccess('refund query', a, meaning);
    this.#sameTrade('refund query', a, q.paidAttemptId);
    // Alipay answers 10000 for a refund it does not know too, without the refund's fields.
    const requestNo = a.body.out_request_no;
    if (requestNo === undefined || requestNo === '' || a.body.refund_amount === undefined) return { state: 'NOT_FOUND', amountFen: null };
    if (requestNo !== q.refundId) throw new ProviderUncertainError('alipay refund query: the answer is about another refund');
    const amountFen = yuanToFen(String(a.body.refund_amount));
    if (amountFen === null) throw new ProviderUncertainError('alipay refund query: the answer carries no valid refund_amount');
    // REFUND_SUCCESS is the only state Alipay reports; a known refund without it has not succeeded (yet).
    return { state: a.body.refund_status === 'REFUND_SUCCESS' ? 'SUCCEEDED' : 'PENDING', amountFen };
  }

  /**
   * The trade bill of a Beijing day: `alipay.data.dataservice.bill.downloadurl.query` names the
   * archive's address (valid 30 seconds; an answer signed by Alipay, so the address is Alipay's
   * word), the archive is fetched (at most MAX_BILL_BYTES) and its detail file read row by row
   * (src/providers/alipay/bill.ts). `isp.bill_not_exist` (no bill for the day) is an empty
   * statement: whatever the ledger has that day is then asked of Alipay trade by trade, so a bill
   * not made yet cannot make a finding by itself.
   */
  async downloadStatement(day: string): Promise<AsyncIterable<ProviderStatementLine>> {
    const method = 'alipay.data.dataservice.bill.downloadurl.query';
    const a = await this.#call(method, { bill_type: 'trade', bill_date: day });
    if (a.subCode === 'isp.bill_not_exist') return emptyStatement();
    const meaning = this.#meaning(a);
    if (meaning !== 'SUCCESS') throw this.#notSuccess('bill download address', a, meaning);
    const link = a.body.bill_download_url;
    const schemes = new URL(this.#config.gatewayUrl).protocol === 'http:' ? ['https:', 'http:'] : ['https:'];
    if (typeof link !== 'string' || !URL.canParse(link) || !schemes.includes(new URL(link).protocol)) {
      throw new ProviderUncertainError('alipay bill download address: the answer carries no bill_download_url');
    }
    const signal = AbortSignal.timeout(BILL_TIMEOUT_MS);
    let zip: Uint8Array;
    try {
      const res = await fetch(link, { method: 'GET', redirect: 'manual', signal });
      if (res.status !== 200) {
        await res.body?.cancel().catch(() => {});
        throw new ProviderUncertainError(`alipay bill: HTTP ${res.status}`);
      }
      zip = await readCapped(res, MAX_BILL_BYTES, () => tooLarge('bill', MAX_BILL_BYTES));
    } catch (err) {
      if (err instanceof ProviderUncertainError) throw err;
      throw new ProviderUncertainError(
        `alipay bill: ${signal.aborted ? `not fetched within ${BILL_TIMEOUT_MS} ms` : (err as Error).message}`,
      );
    }
    try {
      return parseAlipayTradeBill(alipayBillLines(Buffer.from(zip)));
    } catch (err) {
      throw err instanceof ProviderUncertainError ? err : new ProviderUncertainError(`alipay bill: ${(err as Error).message}`);
    }
  }

  async parseNotification(rawBody: Buffer, _headers: Record<string, string | string[] | undefined>): Promise<ProviderNotification> {
    const form = parseForm(rawBody, NOTIFICATION_LIMITS);
    if (!form.ok) throw new ProviderNotificationError(`alipay notification: ${form.reason}`);
    const p = form.params;
    // Verification before anything else is read.
    const sign = p.get('sign');
    if (sign === undefined || !/^[A-Za-z0-9+/]+={0,2}$/.test(sign))
      throw new ProviderNotificationError('alipay notification: missing or malformed sign');
    const signType = p.get('sign_type');
    if (signType !== undefined && signType !== 'RSA2') throw new ProviderNotificationError('alipay notification: sign_type is not RSA2');
    if (!this.#verify(notificationSignContent(p), sign)) throw new ProviderNotificationError('alipay notification: bad signature');
    if (p.get('app_id') !== this.#config.appId) throw new ProviderNotificationError('alipay notification: app_id is not ours');
    const charset = p.get('charset');
    if (charset !== undefined && charset.toLowerCase() !== 'utf-8')
      throw new ProviderNotificationError('alipay notification: charset is not utf-8');
    const notifyType = p.get('notify_type');
    if (notifyType !== undefined && notifyType !== 'trade_status_sync') {
      throw new ProviderNotificationError(`alipay notification: unknown notify_type '${notifyType}'`);
    }
    const attemptId = p.get('out_trade_no');
    if (!attemptId) throw new ProviderNotificationError('alipay notification: no out_trade_no');
    const tradeNo = p.get('trade_no') || null;
    const refundNo = p.get('out_biz_no');
    if (refundNo) {
      // A refund: Alipay notifies the trade's notify_url with the refund's out_request_no as
      // out_biz_no. refund_fee is the trade's total refunded, not this refund's amount.
      if (!p.get('gmt_refund') && !p.get('refund_fee'))
        throw new ProviderNotificationError('alipay notification: out_biz_no without a refund');
      return { kind: 'REFUND', refundId: refundNo, state: 'SUCCEEDED', reason: null, providerRef: tradeNo };
    }
    const status = p.get('trade_status');
    const state = status === 'TRADE_SUCCESS' || status === 'TRADE_FINISHED' ? 'PAID' : status === 'TRADE_CLOSED' ? 'CLOSED' : null;
    if (state === null) throw new ProviderNotificationError(`alipay notification: unknown trade_status '${status ?? ''}'`);
    const total = p.get('total_amount');
    const amountFen = total === undefined ? null : yuanToFen(total);
    if (amountFen === null) throw new ProviderNotificationError('alipay notification: no valid total_amount');
    if (state === 'PAID' && tradeNo === null) throw new ProviderNotificationError('alipay notification: a payment without trade_no');
    return { kind: 'PAYMENT', attemptId, state, reason: null, amountFen, currency: p.get('trans_currency') || null, providerRef: tradeNo };
  }

  notificationAck(ok: boolean, _message?: string): NotificationAck {
    // Alipay reads exactly `success`; anything else and it sends the notice again (4 m, 10 m, 10 m, 1 h, 2 h, 6 h, 15 h).
    return { status: 200, contentType: 'text/plain; charset=utf-8', body: ok ? 'success' : 'fail' };
  }

  #verify(content: string, sign: string): boolean {
    try {
      return this.#sdk.rsaCheck(content, sign, 'RSA2');
    } catch {
      return false;
    }
  }

  #meaning(a: Answer): AnswerMeaning {
    return answerRow(a.code, a.subCode).meaning;
  }

  #notSuccess(call: string, a: Answer, meaning: AnswerMeaning): Error {
    if (meaning === 'REJECTED') return new ProviderRejectedError(a.subCode ?? a.code);
    return new ProviderUncertainError(`alipay ${call}: code ${a.code}${a.subCode ? ` ${a.subCode}` : ''}`);
  }

  /** An answer about another trade than the one asked about cannot be taken for an answer. */
  #sameTrade(call: string, a: Answer, attemptId: string): void {
    const o = a.body.out_trade_no;
    if (o !== undefined && o !== attemptId) throw new ProviderUncertainError(`alipay ${call}: the answer is about another trade`);
  }

  /**
   * One gateway call: the SDK signs the parameters; the answer must arrive within the deadline,
   * be HTTP 200, JSON without duplicate names, and carry the method's response member signed by
   * Alipay. Anything else is ProviderUncertainError.
   */
  async #call(method: string, bizContent: Record<string, string>, publicParams: Record<string, string> = {}): Promise<Answer> {
    const body = this.#sdk.sdkExecute(method, {
      bizContent,
      ...camel(publicParams),
      timestamp: shanghaiDateTime(this.#now()),
    });
    const answer = readGatewayAnswer(await this.#post(method, body), method, (text, sign) => this.#verify(text, sign), this.#alipayCertSn);
    if (!answer.ok) throw new ProviderUncertainError(`alipay ${method}: ${answer.reason}`);
    return answer;
  }

  /** POSTs the signed form; one deadline for the whole exchange, no redirect followed, the body read up to MAX_ANSWER_BYTES. */
  async #post(method: string, form: string): Promise<Uint8Array> {
    const timeoutMs = this.#config.timeoutMs;
    const signal = AbortSignal.timeout(timeoutMs);
    try {
      const res = await fetch(this.#config.gatewayUrl, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded;charset=utf-8', accept: 'application/json' },
        body: form,
        redirect: 'manual',
        signal,
      });
      if (res.status !== 200) {
        await res.body?.cancel().catch(() => {});
        throw new ProviderUncertainError(`alipay ${method}: HTTP ${res.status}`);
      }
      return await readCapped(res, MAX_ANSWER_BYTES, () => tooLarge(method, MAX_ANSWER_BYTES));
    } catch (err) {
      if (err instanceof ProviderUncertainError) throw err;
      if (signal.aborted) throw new ProviderUncertainError(`alipay ${method}: no answer within ${timeoutMs} ms`);
      throw new ProviderUncertainError(`alipay ${method}: ${(err as Error).message}`);
    }
  }
}

/** An answer read no further than `max` bytes (src/providers/http-read.ts). */
function tooLarge(method: string, max: number): ProviderUncertainError {
  return new ProviderUncertainError(`alipay ${method}: the answer is over ${max} bytes`);
}

/** `notify_url` -> `notifyUrl`: the SDK takes public parameters in camel case and writes them in snake case. */
function camel(params: Record<string, string>): Record<string, string> {
  return Object.fromEntries(Object.entries(params).map(([k, v]) => [k.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase()), v]));
}

/** A trade's state from a verified query answer; null for a trade_status this adapter does not know. */
function tradeState(body: Record<string, unknown>): PaymentQueryResult['state'] | null {
  switch (body.trade_status) {
    case 'WAIT_BUYER_PAY':
      return 'OPEN';
    case 'TRADE_SUCCESS':
    case 'TRADE_FINISHED':
      return 'PAID';
    case 'TRADE_CLOSED':
      // A paid trade refunded in full is TRADE_CLOSED too; send_pay_date (when the money went to
      // the merchant) tells it from a trade closed unpaid. It was paid: that is what we report.
      return typeof body.send_pay_date === 'string' && body.send_pay_date !== '' ? 'PAID' : 'CLOSED';
    default:
      return null;
  }
}

/** Text Alipay takes in subject and refund_reason: no `/`, `=`, `&` or control characters, at most `max` characters. */
function alipayText(s: string, max: number): string {
  return [...s.replace(/[/=&\p{Cc}]/gu, ' ').trim()].slice(0, max).join('').trim();
}

function alipaySubject(subject: string, openOrderId: string): string {
  return alipayText(subject, SUBJECT_MAX_CHARS) || `Order ${openOrderId}`;
}
