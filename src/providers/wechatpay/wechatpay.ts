/**
 * WeChat Pay API v3 for WECHAT_H5, as a PaymentProvider: node:crypto and Node's fetch, no SDK
 * (docs/providers-wechatpay.md says why). An attempt is an H5 order (out_trade_no = the attempt
 * id); the cashier adds trades of the attempt where H5 cannot be paid: a JSAPI order inside WeChat
 * (for the buyer's openid, from the official account's web authorization, oauth.ts) and a Native
 * order on a computer, each with its own out_trade_no (WeChat Pay refuses a number used again with
 * another product). Our refund id is its out_refund_no, so every call is idempotent at WeChat Pay.
 * What each answer means is in mapping.ts, one table per call.
 *
 * providerRef of a payment: WeChat Pay knows an unpaid order only by (mchid, out_trade_no), and
 * gives its transaction_id once it is paid. So the reference is the out_trade_no (our attempt id)
 * while the order is unpaid or closed, and the transaction_id once it is paid (queries, the PAID
 * outcomes and the payment notification). A refund's reference is WeChat Pay's refund_id.
 */
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
  ProviderRejectedError,
  ProviderUncertainError,
  StatementUnavailableError,
  type RefundInput,
  type RefundQuery,
  type RefundQueryResult,
  type RefundResult,
} from '../provider.ts';
import { createHash } from 'node:crypto';
import { Readable } from 'node:stream';
import { createGunzip } from 'node:zlib';
import { type Clock, systemClock } from '../../domain/clock.ts';
import { textLines } from '../../lib/lines.ts';
import { BILL_TIMEOUT_MS } from '../http-read.ts';
import { emptyStatement } from '../statement-parsing.ts';
import { parseWechatTradeBill } from './bill.ts';
import { type Answer, type HttpOptions, openSignedFile, sendSigned, verifiedAnswer } from './client.ts';
import type { WechatPayConfig } from './config.ts';
import {
  BILL_ERRORS,
  CLOSE_ERRORS,
  CREATE_ERRORS,
  type ErrorTable,
  type Outcome,
  QUERY_ERRORS,
  REFUND_ERRORS,
  REFUND_QUERY_ERRORS,
  REFUND_STATES,
  TRADE_STATES,
  classify,
} from './mapping.ts';
import { parseWechatPayNotification } from './notifications.ts';
import { WechatOAuth } from './oauth.ts';
import { CertificatePlatform, type PlatformKeys, PublicKeyPlatform } from './platform-keys.ts';
import { jsapiPayMessage, newNonce, rfc3339Beijing, signMessage } from './protocol.ts';

export interface WechatPayProviderOptions {
  /** Where WeChat Pay posts notifications: `{PUBLIC_BASE_URL}/api/provider/v1/notifications/wechatpay` (no query string). */
  notifyUrl: string;
  clock?: Clock;
  /** The HTTP client (tests); Node's fetch by default. */
  fetch?: typeof fetch;
  log?: (msg: string, err?: unknown) => void;
  /** Certificate mode: how old the certificate list may grow before it is fetched again (default 12 h). */
  certificateRefreshMs?: number;
}

/** The bytes as they pass, their SHA-1 checked against the bill's once the last one has. */
async function* sha1Checked(bytes: AsyncIterable<Buffer>, expected: string): AsyncGenerator<Buffer> {
  const h = createHash('sha1');
  for await (const chunk of bytes) {
    h.update(chunk);
    yield chunk;
  }
  if (h.digest('hex') !== expected) throw new ProviderUncertainError('wechatpay: the bill file does not match its SHA-1');
}

/** WeChat Pay's limits on free text: description 127 characters, refund reason 80. */
function clip(s: string, max: number): string {
  const cps = Array.from(s);
  return cps.length <= max ? s : cps.slice(0, max).join('');
}

function validAmount(fen: number): boolean {
  return Number.isSafeInteger(fen) && fen >= 1;
}

function str(v: unknown): string | null {
  return typeof v === 'string' && v !== '' ? v : null;
}

function fenOrNull(o: unknown, key: string): number | null {
  const v = (o as Record<string, unknown> | null)?.[key];
  return typeof v === 'number' && Number.isSafeInteger(v) && v >= 0 ? v : null;
}

/** The h5_url with the page the buyer returns to, as WeChat Pay's H5 guide describes (`redirect_url`, URL-encoded). */
function h5RedirectUrl(h5Url: string, returnUrl: string | null): string {
  if (returnUrl === null) return h5Url;
  return `${h5Url}${h5Url.includes('?') ? '&' : '?'}redirect_url=${encodeURIComponent(returnUrl)}`;
}

/** The order call of each trade product, and the field of its answer that holds the material. */
const TRADE_CALLS = {
  JSAPI: { path: '/v3/pay/transactions/jsapi', field: 'prepay_id', check: (v: string) => /^[\w-]{1,64}$/.test(v) },
  NATIVE: { path: '/v3/pay/transactions/native', field: 'code_url', check: (v: string) => /^weixin:\/\/\S{1,200}$/.test(v) },
} as const;

export class WechatPayProvider implements PaymentProvider {
  readonly name = 'wechatpay';
  readonly channels = ['WECHAT_H5'] as const;
  readonly tradeProducts = ['JSAPI', 'NATIVE'] as const;
  /** The h5_url is valid 5 minutes (H5下单: "h5_url有效期为5分钟"). */
  readonly pageTtlMs = 5 * 60_000;
  readonly buyerIdentity: BuyerIdentity | null;
  readonly #c: WechatPayConfig;
  readonly #http: HttpOptions;
  readonly #keys: PlatformKeys;
  readonly #clock: Clock;
  readonly #notifyUrl: string;

  constructor(config: WechatPayConfig, opts: WechatPayProviderOptions) {
    let u: URL | null;
    try {
      u = new URL(opts.notifyUrl);
    } catch {
      u = null;
    }
    if (!u || (u.protocol !== 'https:' && u.protocol !== 'http:') || u.search !== '' || u.hash !== '') {
      throw new TypeError('WechatPayProvider: notifyUrl must be an http(s) URL without a query string');
    }
    this.#c = config;
    this.#notifyUrl = opts.notifyUrl;
    this.#clock = opts.clock ?? systemClock;
    this.#http = {
      mchId: config.mchId,
      certSerial: config.certSerial,
      privateKey: config.privateKey,
      baseUrl: config.baseUrl,
      timeoutMs: config.timeoutMs,
      clock: this.#clock,
      fetch: opts.fetch ?? fetch,
    };
    this.#keys =
      config.platform.mode === 'publicKey'
        ? new PublicKeyPlatform(config.platform.publicKeyId, config.platform.publicKey)
        : new CertificatePlatform({
            apiV3Key: config.apiV3Key,
            clock: this.#clock,
            refreshMs: opts.certificateRefreshMs,
            log: opts.log,
            download: () => sendSigned(this.#http, 'GET', '/v3/certificates', undefined, null),
          });
    this.buyerIdentity =
      config.appSecret === null
        ? null
        : new WechatOAuth({
            appId: config.appId,
            appSecret: config.appSecret,
            oauthUrl: config.oauthUrl,
            snsUrl: config.snsUrl,
            timeoutMs: config.timeoutMs,
            fetch: this.#http.fetch,
          });
  }

  /** One signed call; the verified answer, or ProviderUncertainError. */
  async #call(method: 'GET' | 'POST', path: string, body?: unknown): Promise<Answer> {
    const what = `${method} ${path.split('?')[0]}`;
    const raw = await sendSigned(this.#http, method, path, body, this.#keys.acceptSerial());
    return verifiedAnswer(raw, this.#keys, this.#clock.now(), what);
  }

  /** The outcome of an error answer; throws for REJECTED and UNCERTAIN. */
  #outcome(table: ErrorTable, a: Answer, what: string): Exclude<Outcome, 'REJECTED' | 'UNCERTAIN'> {
    const o = classify(table, a.status, a.code);
    if (o === 'REJECTED') throw new ProviderRejectedError(a.code!);
    if (o === 'UNCERTAIN') throw new ProviderUncertainError(`wechatpay: ${what}: HTTP ${a.status} ${a.code ?? ''}`.trim());
    return o;
  }

  /**
   * One order call (H5, JSAPI or Native) under `no`, with the payment's parameters and the
   * product's own (`extra`): the material the answer's `field` carries, or the payment when the
   * number turns out paid already. The same parameters each time, so a repeat is the identical
   * order, which WeChat Pay answers with the same material.
   */
  async #order(
    what: string,
    path: string,
    no: string,
    p: { subject: string; openOrderId: string; expireAt: Date; amountFen: number; currency: 'CNY' },
    extra: Record<string, unknown>,
    field: string,
    valid: (v: string) => boolean,
  ): Promise<{ material: string } | { paidRef: string }> {
    const body = {
      appid: this.#c.appId,
      mchid: this.#c.mchId,
      description: clip(p.subject || p.openOrderId, 127),
      out_trade_no: no,
      time_expire: rfc3339Beijing(p.expireAt),
      notify_url: this.#notifyUrl,
      amount: { total: p.amountFen, currency: p.currency },
      ...extra,
    };
    const a = await this.#call('POST', path, body);
    if (a.status === 200) {
      const material = str(a.json?.[field]);
      if (material === null || !valid(material)) throw new ProviderUncertainError(`wechatpay: ${what} answered without a valid ${field}`);
      return { material };
    }
    this.#outcome(CREATE_ERRORS, a, what);
    // CHECK: an order of this number exists already; only a paid one is an outcome.
    const q = await this.queryPayment(no);
    if (q.state === 'PAID') return { paidRef: q.providerRef ?? no };
    throw new ProviderRejectedError(a.code!);
  }

  async createAttempt(input: CreateAttemptInput): Promise<CreateAttemptResult> {
    if (input.channel !== 'WECHAT_H5') throw new ProviderRejectedError('CHANNEL_NOT_SUPPORTED');
    if (!validAmount(input.amountFen)) throw new ProviderRejectedError('AMOUNT_INVALID');
    if (input.payerClientIp === '') throw new ProviderRejectedError('PAYER_CLIENT_IP_REQUIRED');
    const r = await this.#order(
      'H5 order',
      '/v3/pay/transactions/h5',
      input.attemptId,
      input,
      { scene_info: { payer_client_ip: input.payerClientIp, h5_info: { type: 'Wap' } } },
      'h5_url',
      (v) => /^https?:\/\//.test(v),
    );
    if ('paidRef' in r) return { outcome: 'PAID', providerRef: r.paidRef };
    return {
      outcome: 'ACCEPTED',
      providerRef: input.attemptId,
      material: { qrCode: null, redirectUrl: h5RedirectUrl(r.material, input.returnUrl) },
    };
  }

  /**
   * A trade of an attempt under its own number: a JSAPI order for the buyer's openid
   * (`/v3/pay/transactions/jsapi`: a prepay_id), or a Native order (`/v3/pay/transactions/native`:
   * a code_url). Its parameters are the attempt's (amount, description, time_expire: the order's
   * window).
   */
  async createTrade(input: CreateTradeInput): Promise<CreateTradeResult> {
    if (!validAmount(input.amountFen)) throw new ProviderRejectedError('AMOUNT_INVALID');
    if (input.product === 'JSAPI' && !input.payerOpenId) throw new ProviderRejectedError('PAYER_OPENID_REQUIRED');
    const call = TRADE_CALLS[input.product];
    const extra = {
      ...(input.product === 'JSAPI' ? { payer: { openid: input.payerOpenId } } : {}),
      scene_info: { payer_client_ip: input.payerClientIp },
    };
    const r = await this.#order(`${input.product} order`, call.path, input.tradeNo, input, extra, call.field, call.check);
    return 'paidRef' in r ? { outcome: 'PAID', providerRef: r.paidRef } : { outcome: 'ACCEPTED', material: r.material };
  }

  /**
   * The parameters of `WeixinJSBridge.invoke('getBrandWCPayRequest', ...)` for a prepay_id, signed
   * with the merchant's API private key over `appId\ntimeStamp\nnonceStr\npackage\n` (SHA256 with
   * RSA, base64): JSAPI调起支付, pay.weixin.qq.com/doc/v3/merchant/4012791857. A fresh timestamp
   * and nonce each time.
   */
  jsapiPayment(prepayId: string): JsapiPayment {
    const timeStamp = String(Math.floor(this.#clock.now() / 1000));
    const nonceStr = newNonce();
    const pkg = `prepay_id=${prepayId}`;
    return {
      appId: this.#c.appId,
      timeStamp,
      nonceStr,
      package: pkg,
      signType: 'RSA',
      paySign: signMessage(jsapiPayMessage(this.#c.appId, timeStamp, nonceStr, pkg), this.#c.privateKey),
    };
  }

  async queryPayment(attemptId: string): Promise<PaymentQueryResult> {
    const a = await this.#call('GET', `/v3/pay/transactions/out-trade-no/${encodeURIComponent(attemptId)}?mchid=${this.#c.mchId}`);
    if (a.status !== 200) {
      this.#outcome(QUERY_ERRORS, a, 'order query');
      return { state: 'NOT_FOUND', providerRef: null, material: null, amountFen: null };
    }
    const j = a.json ?? {};
    if (j.out_trade_no !== attemptId || j.mchid !== this.#c.mchId)
      throw new ProviderUncertainError('wechatpay: order query answered for another order');
    const state = TRADE_STATES[j.trade_state as keyof typeof TRADE_STATES];
    if (state === undefined) throw new ProviderUncertainError(`wechatpay: order query: unknown trade_state`);
    const amount = (j.amount ?? null) as Record<string, unknown> | null;
    if (amount !== null && amount.currency !== undefined && amount.currency !== 'CNY') {
      throw new ProviderUncertainError('wechatpay: order query: the order is not in CNY');
    }
    return {
      state,
      providerRef: state === 'PAID' ? (str(j.transaction_id) ?? attemptId) : attemptId,
      // WeChat Pay's query does not give the h5_url again (it is valid 5 minutes): the creation's stands.
      material: null,
      amountFen: fenOrNull(amount, 'total'),
    };
  }

  async closePayment(attemptId: string, _opts?: CallOptions): Promise<CloseResult> {
    const a = await this.#call('POST', `/v3/pay/transactions/out-trade-no/${encodeURIComponent(attemptId)}/close`, {
      mchid: this.#c.mchId,
    });
    if (a.status === 204 || a.status === 200) return { outcome: 'CLOSED' };
    if (this.#outcome(CLOSE_ERRORS, a, 'close') === 'CLOSED') return { outcome: 'CLOSED' };
    // CHECK: refused; paid meanwhile (ORDERPAID), or still open.
    const q = await this.queryPayment(attemptId);
    if (q.state === 'PAID') return { outcome: 'PAID' };
    if (q.state === 'CLOSED' || q.state === 'NOT_FOUND') return { outcome: 'CLOSED' };
    throw new ProviderRejectedError(a.code!);
  }

  async refund(input: RefundInput, _opts?: CallOptions): Promise<RefundResult> {
    if (!validAmount(input.amountFen)) throw new ProviderRejectedError('AMOUNT_INVALID');
    const body: Record<string, unknown> = {
      out_trade_no: input.paidAttemptId,
      out_refund_no: input.refundId,
      notify_url: this.#notifyUrl,
      amount: { refund: input.amountFen, total: input.paymentAmountFen, currency: 'CNY' },
    };
    if (input.reason) body.reason = clip(input.reason, 80);
    const a = await this.#call('POST', '/v3/refund/domestic/refunds', body);
    if (a.status !== 200) {
      this.#outcome(REFUND_ERRORS, a, 'refund');
      throw new ProviderUncertainError(`wechatpay: refund: HTTP ${a.status} ${a.code ?? ''}`.trim());
    }
    const j = a.json ?? {};
    const ref = str(j.refund_id);
    if (ref === null || j.out_refund_no !== input.refundId)
      throw new ProviderUncertainError('wechatpay: refund answered without its refund');
    const state = REFUND_STATES[j.status as keyof typeof REFUND_STATES];
    if (state === undefined) throw new ProviderUncertainError('wechatpay: refund: unknown status');
    // CLOSED: a refund of this number that WeChat Pay closed unpaid; nothing was refunded.
    if (state === 'FAILED') throw new ProviderRejectedError('REFUND_CLOSED');
    return { outcome: state, providerRef: ref };
  }

  async queryRefund(q: RefundQuery): Promise<RefundQueryResult> {
    const a = await this.#call('GET', `/v3/refund/domestic/refunds/${encodeURIComponent(q.refundId)}`);
    if (a.status !== 200) {
      this.#outcome(REFUND_QUERY_ERRORS, a, 'refund query');
      return { state: 'NOT_FOUND', amountFen: null };
    }
    const j = a.json ?? {};
    if (j.out_refund_no !== q.refundId) throw new ProviderUncertainError('wechatpay: refund query answered for another refund');
    const state = REFUND_STATES[j.status as keyof typeof REFUND_STATES];
    if (state === undefined) throw new ProviderUncertainError('wechatpay: refund query: unknown status');
    return { state, amountFen: fenOrNull(j.amount, 'refund') };
  }

  /**
   * The trade bill (ALL) of a Beijing day: `GET /v3/bill/tradebill` names the file and its SHA-1,
   * the file is fetched (gzip) with a signed GET of that address on the API's own host, and read
   * row by row as it arrives (src/providers/wechatpay/bill.ts); its SHA-1, over the uncompressed
   * bill, is checked once the last row is read (a mismatch fails the reconciliation run, which drops
   * what it stored).
   */
  async downloadStatement(day: string): Promise<AsyncIterable<ProviderStatementLine>> {
    const a = await this.#call('GET', `/v3/bill/tradebill?bill_date=${encodeURIComponent(day)}&bill_type=ALL&tar_type=GZIP`);
    if (a.status !== 200) {
      if (a.code === 'STATEMENT_CREATING') throw new StatementUnavailableError('wechatpay: the trade bill is still being made');
      if (this.#outcome(BILL_ERRORS, a, 'trade bill') === 'NOT_FOUND') return emptyStatement();
      throw new ProviderUncertainError(`wechatpay: trade bill: HTTP ${a.status} ${a.code ?? ''}`.trim());
    }
    const j = a.json ?? {};
    const hash = str(j.hash_value);
    const link = str(j.download_url);
    if (j.hash_type !== 'SHA1' || hash === null || !/^[0-9a-fA-F]{40}$/.test(hash) || link === null) {
      throw new ProviderUncertainError('wechatpay: trade bill: the answer names no file and digest');
    }
    let url: URL;
    try {
      url = new URL(link);
    } catch {
      throw new ProviderUncertainError('wechatpay: trade bill: the download_url is not a URL');
    }
    // The file is fetched with our signature: only from the API's own host.
    if (url.origin !== new URL(this.#c.baseUrl).origin)
      throw new ProviderUncertainError('wechatpay: trade bill: the download_url is on another host');
    const res = await openSignedFile(this.#http, url.pathname + url.search, BILL_TIMEOUT_MS);
    if (res.status !== 200 || res.body === null) {
      await res.body?.cancel().catch(() => {});
      throw new ProviderUncertainError(`wechatpay: bill file: HTTP ${res.status}`);
    }
    const gzip = Readable.fromWeb(res.body as import('node:stream/web').ReadableStream<Uint8Array>).pipe(createGunzip());
    return parseWechatTradeBill(textLines(sha1Checked(gzip, hash.toLowerCase()), 'utf-8'));
  }

  parseNotification(rawBody: Buffer, headers: Record<string, string | string[] | undefined>): Promise<ProviderNotification> {
    return parseWechatPayNotification(rawBody, headers, {
      mchId: this.#c.mchId,
      appId: this.#c.appId,
      apiV3Key: this.#c.apiV3Key,
      keys: this.#keys,
      nowMs: this.#clock.now(),
    });
  }

  /** WeChat Pay's notification answers: 204 with no body when received; 4xx/5xx with `{"code":"FAIL"}` to have it sent again. */
  notificationAck(ok: boolean, message?: string): NotificationAck {
    if (ok) return { status: 204, contentType: 'text/plain; charset=utf-8', body: '' };
    return {
      status: 500,
      contentType: 'application/json; charset=utf-8',
      body: JSON.stringify({ code: 'FAIL', message: clip(message ?? 'FAIL', 200) }),
    };
  }
}
