/**
 * A local WeChat Pay API v3 gateway for H5 payment, written from the public API v3 documentation
 * (pay.weixin.qq.com/doc/v3/merchant): the parts a merchant's adapter meets, behaving as the real
 * gateway does where it matters, with test controls. Not the adapter's code: its signing,
 * verification and encryption are its own, so that the two sides are not checked by one hand.
 *
 * - Every API request's `Authorization` (WECHATPAY2-SHA256-RSA2048) is verified with the
 *   merchant's public key: scheme, mchid, certificate serial, timestamp within 5 minutes,
 *   signature over `METHOD\nURL\nTIMESTAMP\nNONCE\nBODY\n`; a bad one gets 401 SIGN_ERROR, unsigned.
 *   The mchid of the body or query and the appid must be the merchant's.
 * - Every other answer is signed (`Wechatpay-*` headers) with WeChat Pay's public key (its id
 *   `PUB_KEY_ID_...`) or the platform certificate's key: the key the request names in its
 *   `Wechatpay-Serial`, else the configured `signWith`. `GET /v3/certificates` lists the platform
 *   certificates encrypted under the APIv3 key and is signed with the newest certificate.
 * - Orders (H5, JSAPI, Native), their query and close, refunds and their query are kept in memory.
 *   An out_trade_no used again with another product or other parameters is `403 OUT_TRADE_NO_USED`
 *   ("商户订单号重复"); the same order again answers the same material. The buyer pays or fails on
 *   the `h5_url` page (refused inside WeChat, as WeChat Pay refuses H5 there), which then goes to
 *   the order's `redirect_url`; scans a Native `code_url` (`scanPay`); or pays a JSAPI order through
 *   a stand-in for WeChat's in-browser payment call (`jsapiPay`), which verifies the page's
 *   `paySign` with the merchant's public key and that the payer is the order's openid.
 * - WeChat's official-account web authorization (OAuth 2.0): `GET /connect/oauth2/authorize`
 *   (inside WeChat only, as the WeChat user of the `sim_wechat_user` cookie) sends the browser back
 *   to `redirect_uri` with a code, single-use and valid 5 minutes, that `GET
 *   /sns/oauth2/access_token` (with the AppSecret) exchanges for the user's openid.
 * - The trade bill of a past Beijing day (`GET /v3/bill/tradebill`, type ALL, gzip on request) from
 *   the orders paid and the refunds accepted that day, in the documented format (a header, rows of
 *   back-quoted fields, a summary), with its SHA-1; the file is fetched with a signed GET of its
 *   `download_url` (valid 30 s; the answer is the file, unsigned).
 * - Notifications (TRANSACTION.SUCCESS, REFUND.SUCCESS / ABNORMAL / CLOSED) carry an
 *   AES-256-GCM-encrypted `resource`, are signed, and are sent again on WeChat Pay's schedule until
 *   answered 2xx.
 * - Test controls: in process (the returned `controls`) and over HTTP under `/__sim/`.
 */
import {
  type KeyObject,
  createCipheriv,
  createHash,
  createPrivateKey,
  createPublicKey,
  generateKeyPairSync,
  randomBytes,
  randomUUID,
  sign,
  verify,
} from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { gzipSync } from 'node:zlib';
import { type SimCertificate, selfSignedCertificate } from './certificate.ts';

/** `create`: the H5 order; `jsapi`, `native`: the JSAPI and Native orders. */
export type Endpoint =
  'create' | 'jsapi' | 'native' | 'query' | 'close' | 'refund' | 'refundQuery' | 'certificates' | 'tradeBill' | 'billFile';
const ENDPOINTS: readonly Endpoint[] = [
  'create',
  'jsapi',
  'native',
  'query',
  'close',
  'refund',
  'refundQuery',
  'certificates',
  'tradeBill',
  'billFile',
];

/** The product of an order (its trade_type). */
export type TradeType = 'MWEB' | 'JSAPI' | 'NATIVE';

/**
 * A programmed fault of one endpoint:
 * - error: answer this error (signed unless `signed: false`); nothing is done;
 * - noAnswer: do the work, then never answer (the client's timeout ends the call);
 * - drop: the request is lost before WeChat Pay acts on it: nothing is done, nothing answered;
 * - badSignature: do the work, answer with a signature that does not verify;
 * - probeSignature: do the work, answer with WeChat Pay's probe signature (`WECHATPAY/SIGNTEST/...`);
 * - delay: wait `ms`, then proceed normally;
 * - paid: create: the order is paid at once (as if the buyer had paid an earlier request of it);
 *   close: the buyer pays just before the close arrives; refund: the refund settles at once.
 */
export type Fault =
  | { kind: 'error'; status: number; code: string; message?: string; signed?: boolean }
  | { kind: 'noAnswer' }
  | { kind: 'drop' }
  | { kind: 'badSignature' }
  | { kind: 'probeSignature' }
  | { kind: 'delay'; ms: number }
  | { kind: 'paid' };

export type TradeState = 'NOTPAY' | 'SUCCESS' | 'REFUND' | 'CLOSED' | 'PAYERROR';
export type RefundStatus = 'PROCESSING' | 'SUCCESS' | 'ABNORMAL' | 'CLOSED';

export interface SimOrder {
  outTradeNo: string;
  tradeType: TradeType;
  appid: string;
  description: string;
  total: number;
  currency: string;
  notifyUrl: string;
  timeExpire: string;
  payerClientIp: string;
  prepayId: string;
  /** MWEB: the buyer's page; '' otherwise. */
  h5Url: string;
  /** NATIVE: the code the buyer scans; null otherwise. */
  codeUrl: string | null;
  /** JSAPI: the openid the order was made for (only that WeChat user can pay it); null otherwise. */
  payerOpenid: string | null;
  tradeState: TradeState;
  transactionId: string | null;
  successTime: string | null;
  /** The request's parameters: a repeat with the same ones gets the same h5_url. */
  fingerprint: string;
  /** The buyer can no longer pay after this (time_expire, or the expire control). */
  payableUntil: number;
}

export interface SimRefund {
  outRefundNo: string;
  refundId: string;
  outTradeNo: string;
  transactionId: string;
  refund: number;
  total: number;
  reason: string | null;
  notifyUrl: string | null;
  status: RefundStatus;
  createTime: string;
  successTime: string | null;
  settleAt: number;
  settleTo: 'SUCCESS' | 'ABNORMAL';
}

export interface SentNotification {
  id: string;
  eventType: string;
  url: string;
  rawBody: Buffer;
  headers: Record<string, string>;
  /** The answer's HTTP status, or null when it was lost or not answered. */
  status: number | null;
}

export type Deliver = (url: string, body: Buffer, headers: Record<string, string>) => Promise<number>;

export interface WechatPaySimulatorOptions {
  port?: number;
  host?: string;
  mchId?: string;
  appId?: string;
  /** The merchant's API public key (PEM or KeyObject); generated with its private key when absent. */
  merchantPublicKey?: string | KeyObject;
  /** The merchant API certificate's serial, required in `Authorization`; generated when absent. */
  merchantCertSerial?: string;
  /** The 32-byte APIv3 key; generated when absent. */
  apiV3Key?: string;
  /** WeChat Pay's signing key of public-key mode (PEM); generated when absent. */
  platformPrivateKey?: string | KeyObject;
  publicKeyId?: string;
  /** The key that signs notifications, and answers to a request that names no key we hold. */
  signWith?: 'publicKey' | 'certificate';
  /** How long an accepted refund takes to settle. */
  refundSettleMs?: number;
  /** Waits between notification deliveries until one is answered 2xx (WeChat Pay's: 15 s, 15 s, 30 s, 3 min, ... 6 h). */
  notifyRetryScheduleMs?: readonly number[];
  /** Sends a notification; POST with a 5 s timeout by default. Answers the HTTP status. */
  deliver?: Deliver;
  /** The official account's AppSecret (for `sns/oauth2/access_token`); generated when absent. */
  appSecret?: string;
  /** How long an OAuth code is valid (WeChat: 5 minutes). */
  oauthCodeTtlMs?: number;
  /** The simulator's clock (ms), for its timestamps and the 5-minute check of requests. */
  now?: () => number;
  log?: (msg: string) => void;
}

/** WeChat Pay's notification schedule: 15s/15s/30s/3m/10m/20m/30m/30m/30m/60m/3h/3h/3h/6h/6h (24h4m). */
export const WECHAT_NOTIFY_SCHEDULE_MS = [15, 15, 30, 180, 600, 1200, 1800, 1800, 1800, 3600, 10800, 10800, 10800, 21600, 21600].map(
  (s) => s * 1000,
);

export interface SimulatorKeys {
  mchId: string;
  appId: string;
  /** The official account's AppSecret. */
  appSecret: string;
  apiV3Key: string;
  merchantCertSerial: string;
  /** PEM, when the simulator generated the merchant's key pair (absent when it was given). */
  merchantPrivateKeyPem: string | null;
  publicKeyId: string;
  platformPublicKeyPem: string;
  certificates: SimCertificate[];
}

export interface SimulatorControls {
  /** The buyer pays; resolves once the notification's first delivery was answered (or lost). */
  pay(outTradeNo: string): Promise<void>;
  /** A WeChat user scans a Native order's code_url and pays it. */
  scanPay(codeUrl: string): Promise<void>;
  /**
   * The stand-in for WeChat's in-browser payment call (`getBrandWCPayRequest`) made by the WeChat
   * user `openid` with the page's parameters: verified (appId, signType RSA, the prepay_id's order,
   * the payer, paySign under the merchant's public key), then paid. Answers WeChat's `err_msg`.
   */
  jsapiPay(params: object, openid: string): Promise<{ err_msg: string; reason?: string }>;
  /** The openid of a WeChat user (by name) under this official account. */
  openIdOf(user: string): string;
  /** The buyer's payment fails (PAYERROR; WeChat Pay sends no notification for it). */
  fail(outTradeNo: string): void;
  /** The order's time to pay ends now: the buyer can no longer pay (it stays NOTPAY until closed). */
  expire(outTradeNo: string): void;
  programFault(endpoint: Endpoint, fault: Fault, times?: number): void;
  clearFaults(): void;
  /** The next notifications: `lose` are never sent, `duplicate` are sent twice, `delayMs` waits before sending. */
  programNotifications(p: { lose?: number; duplicate?: number; delayMs?: number }): void;
  /** How the next `times` refunds settle (default SUCCESS). */
  nextRefundsSettleAs(status: 'SUCCESS' | 'ABNORMAL', times?: number): void;
  /** Settles (or changes) a refund now and notifies: SUCCESS, ABNORMAL or CLOSED. */
  settleRefund(outRefundNo: string, status: 'SUCCESS' | 'ABNORMAL' | 'CLOSED'): Promise<void>;
  /** A new platform certificate, used from now on for signing in certificate mode. */
  rotateCertificate(): SimCertificate;
  sentNotifications(): readonly SentNotification[];
  /** How many authenticated requests each endpoint has received. */
  requestCount(endpoint: Endpoint): number;
  order(outTradeNo: string): SimOrder | null;
  refund(outRefundNo: string): SimRefund | null;
}

export interface WechatPaySimulator {
  url: string;
  keys: SimulatorKeys;
  controls: SimulatorControls;
  close(): Promise<void>;
}

class HttpAnswer {
  readonly status: number;
  readonly body: unknown;
  readonly signed: boolean;
  constructor(status: number, body: unknown = null, signed = true) {
    this.status = status;
    this.body = body;
    this.signed = signed;
  }
}

/** A file answered as it is (a bill), unsigned. */
class FileAnswer extends HttpAnswer {
  readonly bytes: Buffer;
  readonly contentType: string;
  constructor(bytes: Buffer, contentType: string) {
    super(200, null, false);
    this.bytes = bytes;
    this.contentType = contentType;
  }
}

/** The columns of the ALL trade bill (pay.weixin.qq.com/docs/merchant/products/bill-download/format-trade.html). */
const BILL_HEADER =
  '交易时间,公众账号ID,商户号,特约商户号,设备号,微信订单号,商户订单号,用户标识,交易类型,交易状态,付款银行,货币种类,应结订单金额,代金券金额,微信退款单号,商户退款单号,退款金额,充值券退款金额,退款类型,退款状态,商品名称,商户数据包,手续费,费率,订单金额,申请退款金额,费率备注';
const BILL_SUMMARY_HEADER = '总交易单数,应结订单总金额,退款总金额,充值券退款总金额,手续费总金额,订单总金额,申请退款总金额';

function yuan(fen: number): string {
  return `${Math.floor(fen / 100)}.${String(fen % 100).padStart(2, '0')}`;
}

function error(status: number, code: string, message: string): HttpAnswer {
  return new HttpAnswer(status, { code, message });
}

function beijing(ms: number): string {
  return new Date(Math.floor(ms / 1000) * 1000 + 8 * 3600_000).toISOString().replace(/\.\d{3}Z$/, '+08:00');
}

function digits(n: number): string {
  let s = '';
  for (const b of randomBytes(n)) s += String(b % 10);
  return s;
}

function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

const OUT_NO = /^[0-9A-Za-z_\-|*]{6,32}$/;
const OUT_REFUND_NO = /^[0-9A-Za-z_\-|*@]{1,64}$/;

export async function startWechatPaySimulator(opts: WechatPaySimulatorOptions = {}): Promise<WechatPaySimulator> {
  const now = opts.now ?? (() => Date.now());
  const log = opts.log ?? (() => {});
  const mchId = opts.mchId ?? '1900000001';
  const appId = opts.appId ?? 'wxd678efh567hg6787';
  const apiV3Key = opts.apiV3Key ?? randomBytes(24).toString('base64url').slice(0, 32);
  if (Buffer.byteLength(apiV3Key) !== 32) throw new Error('simulator: the APIv3 key must be 32 bytes');

  let merchantPrivateKeyPem: string | null = null;
  let merchantPublicKey: KeyObject;
  if (opts.merchantPublicKey === undefined) {
    const pair = generateKeyPairSync('rsa', { modulusLength: 2048 });
    merchantPrivateKeyPem = pair.privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
    merchantPublicKey = pair.publicKey;
  } else {
    merchantPublicKey = typeof opts.merchantPublicKey === 'string' ? createPublicKey(opts.merchantPublicKey) : opts.merchantPublicKey;
  }
  const merchantCertSerial = opts.merchantCertSerial ?? randomBytes(20).toString('hex').toUpperCase();
  const appSecret = opts.appSecret ?? randomBytes(16).toString('hex');
  const oauthCodeTtlMs = opts.oauthCodeTtlMs ?? 5 * 60_000;
  /** OAuth codes issued by the authorize page: single-use, valid oauthCodeTtlMs. */
  const oauthCodes = new Map<string, { openid: string; until: number; used: boolean }>();

  const pkPrivate =
    opts.platformPrivateKey === undefined
      ? generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey
      : typeof opts.platformPrivateKey === 'string'
        ? createPrivateKey(opts.platformPrivateKey)
        : opts.platformPrivateKey;
  const publicKeyId = opts.publicKeyId ?? `PUB_KEY_ID_01${mchId.padStart(10, '0')}${digits(16)}`;
  const pkPublic = createPublicKey(pkPrivate);

  /** Platform certificates, newest last, each with its own key. */
  const certs: { cert: SimCertificate; key: KeyObject }[] = [];
  function newCertificate(): SimCertificate {
    const pair = generateKeyPairSync('rsa', { modulusLength: 2048 });
    const from = now() - 60_000 + certs.length * 1000;
    const cert = selfSignedCertificate(pair.privateKey, pair.publicKey, new Date(from), new Date(from + 5 * 365 * 86400_000));
    certs.push({ cert, key: pair.privateKey });
    return cert;
  }
  newCertificate();

  const refundSettleMs = opts.refundSettleMs ?? 3000;
  const schedule = opts.notifyRetryScheduleMs ?? WECHAT_NOTIFY_SCHEDULE_MS;
  const signWith = opts.signWith ?? 'publicKey';

  const orders = new Map<string, SimOrder>();
  const ordersByPrepay = new Map<string, SimOrder>();
  const ordersByCode = new Map<string, SimOrder>();
  const refunds = new Map<string, SimRefund>();
  const faults = new Map<Endpoint, { fault: Fault; remaining: number }[]>();
  const counts = new Map<Endpoint, number>();
  const sent: SentNotification[] = [];
  const lost: { id: string; eventType: string; url: string }[] = [];
  const notifyFaults = { lose: 0, duplicate: 0, delayMs: 0 };
  const refundOutcomes: ('SUCCESS' | 'ABNORMAL')[] = [];
  const timers = new Set<NodeJS.Timeout>();
  const held = new Set<http.ServerResponse>();
  /** Bill files by download token, each valid until its time. */
  const billFiles = new Map<string, { bytes: Buffer; gzip: boolean; until: number }>();
  let closed = false;

  function later(ms: number, fn: () => void): void {
    if (closed) return;
    const t = setTimeout(() => {
      timers.delete(t);
      fn();
    }, ms);
    t.unref();
    timers.add(t);
  }
  const sleep = (ms: number) => new Promise<void>((r) => later(ms, r));

  // -- signing --------------------------------------------------------------------------------

  function signingKey(requested: string | null): { serial: string; key: KeyObject } {
    if (requested === publicKeyId) return { serial: publicKeyId, key: pkPrivate };
    const named = certs.find((c) => c.cert.serial === requested);
    if (named) return { serial: named.cert.serial, key: named.key };
    if (signWith === 'publicKey') return { serial: publicKeyId, key: pkPrivate };
    const newest = certs[certs.length - 1]!;
    return { serial: newest.cert.serial, key: newest.key };
  }

  function signatureHeaders(body: Buffer, k: { serial: string; key: KeyObject }): Record<string, string> {
    const timestamp = String(Math.floor(now() / 1000));
    const nonce = randomBytes(16).toString('hex');
    const message = Buffer.concat([Buffer.from(`${timestamp}\n${nonce}\n`), body, Buffer.from('\n')]);
    return {
      'Wechatpay-Timestamp': timestamp,
      'Wechatpay-Nonce': nonce,
      'Wechatpay-Signature': sign('sha256', message, k.key).toString('base64'),
      'Wechatpay-Serial': k.serial,
    };
  }

  function encrypt(
    plain: string,
    associatedData: string,
  ): { algorithm: string; ciphertext: string; nonce: string; associated_data: string } {
    const nonce = randomBytes(9).toString('base64url').slice(0, 12);
    const c = createCipheriv('aes-256-gcm', Buffer.from(apiV3Key), Buffer.from(nonce));
    c.setAAD(Buffer.from(associatedData));
    const ct = Buffer.concat([c.update(plain, 'utf8'), c.final(), c.getAuthTag()]);
    return { algorithm: 'AEAD_AES_256_GCM', ciphertext: ct.toString('base64'), nonce, associated_data: associatedData };
  }

  // -- request authentication -------------------------------------------------------------------

  function authenticate(method: string, url: string, body: Buffer, header: string | undefined): HttpAnswer | null {
    const refuse = (message: string) => new HttpAnswer(401, { code: 'SIGN_ERROR', message }, false);
    const scheme = 'WECHATPAY2-SHA256-RSA2048 ';
    if (!header || !header.startsWith(scheme)) return refuse('Authorization 头缺失或认证类型不正确');
    const params: Record<string, string> = {};
    for (const m of header.slice(scheme.length).matchAll(/\s*([a-z_]+)="([^"]*)"\s*(?:,|$)/g)) params[m[1]!] = m[2]!;
    const { mchid, nonce_str: nonce, timestamp, serial_no: serial, signature } = params;
    if (!mchid || !nonce || !timestamp || !serial || !signature) return refuse('Authorization 头参数不完整');
    if (mchid !== mchId) return refuse('商户号不存在或与签名不匹配');
    if (serial !== merchantCertSerial) return refuse('商户证书序列号有误');
    if (!/^\d{1,12}$/.test(timestamp) || Math.abs(Math.floor(now() / 1000) - Number(timestamp)) > 300)
      return refuse('请求时间戳与当前时间相差超过5分钟');
    const message = Buffer.concat([Buffer.from(`${method}\n${url}\n${timestamp}\n${nonce}\n`), body, Buffer.from('\n')]);
    let ok: boolean;
    try {
      ok = verify('sha256', message, merchantPublicKey, Buffer.from(signature, 'base64'));
    } catch {
      ok = false;
    }
    return ok ? null : refuse('签名错误，请检查后再试');
  }

  // -- faults -----------------------------------------------------------------------------------

  function takeFault(endpoint: Endpoint): Fault | null {
    const q = faults.get(endpoint);
    const f = q?.[0];
    if (!f) return null;
    if (--f.remaining <= 0) q.shift();
    return f.fault;
  }

  // -- notifications ----------------------------------------------------------------------------

  const defaultDeliver: Deliver = async (url, body, headers) => {
    const res = await fetch(url, { method: 'POST', headers, body, signal: AbortSignal.timeout(5000) });
    await res.arrayBuffer().catch(() => undefined);
    return res.status;
  };
  const deliver = opts.deliver ?? defaultDeliver;

  /** Sends a notification now and again on the schedule until it is answered 2xx; resolves after the first try. */
  async function notify(url: string, eventType: string, summary: string, originalType: string, resource: object): Promise<void> {
    const id = randomUUID();
    const body = Buffer.from(
      JSON.stringify({
        id,
        create_time: beijing(now()),
        resource_type: 'encrypt-resource',
        event_type: eventType,
        summary,
        resource: { original_type: originalType, ...encrypt(JSON.stringify(resource), originalType) },
      }),
    );
    if (notifyFaults.lose > 0) {
      notifyFaults.lose--;
      lost.push({ id, eventType, url });
      log(`notification ${eventType} ${id} lost`);
      return;
    }
    const copies = notifyFaults.duplicate > 0 ? (notifyFaults.duplicate--, 2) : 1;
    const delay = notifyFaults.delayMs;
    notifyFaults.delayMs = 0;
    if (delay > 0) await sleep(delay);
    let tries = 0;
    const attempt = async (): Promise<void> => {
      if (closed) return;
      let acknowledged = false;
      for (let c = 0; c < copies; c++) {
        const headers = {
          'Content-Type': 'application/json',
          'Request-ID': randomUUID(),
          'Wechatpay-Signature-Type': 'WECHATPAY2-SHA256-RSA2048',
          ...signatureHeaders(body, signingKey(null)),
        };
        const record: SentNotification = { id, eventType, url, rawBody: body, headers, status: null };
        sent.push(record);
        try {
          record.status = await deliver(url, body, headers);
          if (record.status >= 200 && record.status < 300) acknowledged = true;
        } catch (err) {
          log(`notification ${eventType} ${id} not delivered: ${(err as Error).message}`);
        }
      }
      if (!acknowledged && tries < schedule.length) later(schedule[tries++]!, () => void attempt());
    };
    await attempt();
  }

  function orderResource(o: SimOrder): Record<string, unknown> {
    const paid = o.tradeState === 'SUCCESS' || o.tradeState === 'REFUND';
    return {
      appid: o.appid,
      mchid: mchId,
      out_trade_no: o.outTradeNo,
      ...(paid ? { transaction_id: o.transactionId } : {}),
      trade_type: o.tradeType,
      trade_state: o.tradeState,
      trade_state_desc: { NOTPAY: '未支付', SUCCESS: '支付成功', REFUND: '转入退款', CLOSED: '已关闭', PAYERROR: '支付失败' }[o.tradeState],
      ...(paid ? { bank_type: 'OTHERS', success_time: o.successTime, payer: { openid: payerOf(o) } } : {}),
      amount: paid
        ? { total: o.total, payer_total: o.total, currency: o.currency, payer_currency: o.currency }
        : { total: o.total, currency: o.currency },
      attach: '',
    };
  }

  /** Who paid an order: a JSAPI order's openid, else a simulated buyer. */
  function payerOf(o: SimOrder): string {
    return o.payerOpenid ?? 'oSimulatedBuyer000000000000';
  }

  function markPaid(o: SimOrder): void {
    o.tradeState = 'SUCCESS';
    o.transactionId = `4200${digits(24)}`;
    o.successTime = beijing(now());
  }

  async function pay(o: SimOrder): Promise<'OK' | 'NOT_PAYABLE'> {
    if (o.tradeState === 'SUCCESS' || o.tradeState === 'REFUND') return 'OK';
    if (o.tradeState === 'CLOSED' || now() > o.payableUntil) return 'NOT_PAYABLE';
    markPaid(o);
    await notify(o.notifyUrl, 'TRANSACTION.SUCCESS', '支付成功', 'transaction', orderResource(o));
    return 'OK';
  }

  // -- refunds ----------------------------------------------------------------------------------

  function refundBody(r: SimRefund): Record<string, unknown> {
    return {
      refund_id: r.refundId,
      out_refund_no: r.outRefundNo,
      transaction_id: r.transactionId,
      out_trade_no: r.outTradeNo,
      channel: 'ORIGINAL',
      user_received_account: '支付用户零钱',
      ...(r.successTime ? { success_time: r.successTime } : {}),
      create_time: r.createTime,
      status: r.status,
      funds_account: 'AVAILABLE',
      amount: {
        total: r.total,
        refund: r.refund,
        payer_total: r.total,
        payer_refund: r.refund,
        settlement_refund: r.refund,
        settlement_total: r.total,
        discount_refund: 0,
        currency: 'CNY',
        refund_fee: 0,
      },
    };
  }

  async function settle(r: SimRefund, status: 'SUCCESS' | 'ABNORMAL' | 'CLOSED'): Promise<void> {
    if (r.status === status) return;
    r.status = status;
    if (status === 'SUCCESS') r.successTime = beijing(now());
    if (!r.notifyUrl) return;
    const resource = {
      mchid: mchId,
      out_trade_no: r.outTradeNo,
      transaction_id: r.transactionId,
      out_refund_no: r.outRefundNo,
      refund_id: r.refundId,
      refund_status: status,
      ...(r.successTime ? { success_time: r.successTime } : {}),
      user_received_account: '支付用户零钱',
      amount: { total: r.total, refund: r.refund, payer_total: r.total, payer_refund: r.refund },
    };
    const summary = { SUCCESS: '退款成功', ABNORMAL: '退款异常', CLOSED: '退款关闭' }[status];
    await notify(r.notifyUrl, `REFUND.${status}`, summary, 'refund', resource);
  }

  /** Settlement is a function of time: a refund past its settle time has settled, whoever asks first (or its timer). */
  function settleIfDue(r: SimRefund, due = now() >= r.settleAt): void {
    if (r.status === 'PROCESSING' && due) {
      void settle(r, r.settleTo).catch((err) => log(`refund ${r.outRefundNo} settlement notice failed: ${(err as Error).message}`));
    }
  }

  // -- API endpoints ----------------------------------------------------------------------------

  /** The answer that carries an order's material: h5_url (H5), prepay_id (JSAPI), code_url (Native). */
  function material(o: SimOrder): HttpAnswer {
    if (o.tradeType === 'JSAPI') return new HttpAnswer(200, { prepay_id: o.prepayId });
    if (o.tradeType === 'NATIVE') return new HttpAnswer(200, { code_url: o.codeUrl });
    return new HttpAnswer(200, { h5_url: o.h5Url });
  }

  /** An H5, JSAPI or Native order (`/v3/pay/transactions/h5|jsapi|native`), checked as the gateway checks them. */
  function createOrder(b: Record<string, unknown>, fault: Fault | null, tradeType: TradeType): HttpAnswer {
    const amount = b.amount as Record<string, unknown> | undefined;
    const scene = b.scene_info as Record<string, unknown> | undefined;
    const h5Info = scene?.h5_info as Record<string, unknown> | undefined;
    const payer = b.payer as Record<string, unknown> | undefined;
    const bad = (m: string) => error(400, 'PARAM_ERROR', m);
    if (b.mchid !== mchId) return bad('mchid与请求头中的商户号不一致');
    if (typeof b.appid !== 'string') return bad('缺少参数appid');
    if (b.appid !== appId) return error(400, 'APPID_MCHID_NOT_MATCH', 'AppID和mch_id不匹配');
    if (typeof b.description !== 'string' || b.description === '' || Array.from(b.description).length > 127)
      return bad('description长度不正确');
    if (typeof b.out_trade_no !== 'string' || !OUT_NO.test(b.out_trade_no)) return bad('out_trade_no格式不正确');
    if (typeof b.notify_url !== 'string' || !/^https?:\/\/[^?#]+$/.test(b.notify_url)) return bad('notify_url格式不正确');
    if (!amount || !Number.isSafeInteger(amount.total) || (amount.total as number) < 1) return bad('amount.total须为正整数(分)');
    if (amount.currency !== undefined && amount.currency !== 'CNY') return bad('amount.currency只支持CNY');
    if (tradeType === 'MWEB') {
      if (typeof scene?.payer_client_ip !== 'string' || scene.payer_client_ip === '') return bad('缺少参数scene_info.payer_client_ip');
      if (typeof h5Info?.type !== 'string') return bad('缺少参数scene_info.h5_info.type');
    }
    if (tradeType === 'JSAPI' && (typeof payer?.openid !== 'string' || !/^[\w-]{1,128}$/.test(payer.openid)))
      return bad('缺少参数payer.openid');
    let payableUntil = Infinity;
    if (b.time_expire !== undefined) {
      const t =
        typeof b.time_expire === 'string' && /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?([+-]\d\d:\d\d|Z)$/.test(b.time_expire)
          ? Date.parse(b.time_expire)
          : NaN;
      if (Number.isNaN(t)) return bad('time_expire须为rfc3339格式');
      payableUntil = t;
    }
    // The product and the payer are part of the order: the number used again with another product
    // (or for another WeChat user) is "商户订单号重复".
    const fingerprint = JSON.stringify([
      tradeType,
      tradeType === 'JSAPI' ? payer!.openid : null,
      b.appid,
      b.description,
      amount.total,
      amount.currency ?? 'CNY',
      b.notify_url,
      b.time_expire ?? null,
    ]);
    const existing = orders.get(b.out_trade_no);
    if (existing) {
      if (existing.tradeState === 'SUCCESS' || existing.tradeState === 'REFUND') return error(400, 'ORDERPAID', '该订单已支付');
      if (existing.tradeState === 'CLOSED') return error(400, 'ORDER_CLOSED', '订单已关闭');
      if (existing.fingerprint !== fingerprint) return error(403, 'OUT_TRADE_NO_USED', '商户订单号重复');
      return material(existing);
    }
    const prepayId = `wx${beijing(now()).replace(/\D/g, '').slice(0, 14)}${randomBytes(9).toString('hex')}`;
    const o: SimOrder = {
      outTradeNo: b.out_trade_no,
      tradeType,
      appid: b.appid,
      description: b.description,
      total: amount.total as number,
      currency: 'CNY',
      notifyUrl: b.notify_url,
      timeExpire: (b.time_expire as string | undefined) ?? '',
      payerClientIp: typeof scene?.payer_client_ip === 'string' ? scene.payer_client_ip : '',
      prepayId,
      h5Url: tradeType === 'MWEB' ? `${baseUrl()}/pay/h5?prepay_id=${prepayId}&package=${digits(10)}` : '',
      codeUrl: tradeType === 'NATIVE' ? `weixin://wxpay/bizpayurl?pr=${randomBytes(6).toString('base64url')}` : null,
      payerOpenid: tradeType === 'JSAPI' ? (payer!.openid as string) : null,
      tradeState: 'NOTPAY',
      transactionId: null,
      successTime: null,
      fingerprint,
      payableUntil,
    };
    orders.set(o.outTradeNo, o);
    ordersByPrepay.set(prepayId, o);
    if (o.codeUrl) ordersByCode.set(o.codeUrl, o);
    if (fault?.kind === 'paid') {
      markPaid(o);
      void notify(o.notifyUrl, 'TRANSACTION.SUCCESS', '支付成功', 'transaction', orderResource(o)).catch(() => {});
      return error(400, 'ORDERPAID', '该订单已支付');
    }
    return material(o);
  }

  // -- WeChat: web authorization, the in-browser payment call ----------------------------------------

  function openIdOf(user: string): string {
    return `o${createHash('sha256').update(`${appId}|${user}`).digest('base64url').slice(0, 27)}`;
  }

  /**
   * `GET /connect/oauth2/authorize`: only inside WeChat (its User-Agent); the user is the
   * `sim_wechat_user` cookie's (default `buyer`). Redirects to `redirect_uri` with a fresh code.
   */
  function authorizePage(req: http.IncomingMessage, url: URL): { status: number; headers: Record<string, string>; body: string } {
    const html = (text: string) => ({ status: 200, headers: { 'Content-Type': 'text/html; charset=utf-8' }, body: text });
    if (!/MicroMessenger\//i.test(req.headers['user-agent'] ?? '')) return html('<!doctype html><p>请在微信客户端打开链接</p>');
    const q = url.searchParams;
    const redirect = q.get('redirect_uri') ?? '';
    const state = q.get('state') ?? '';
    if (q.get('appid') !== appId) return html('<!doctype html><p>appid参数错误</p>');
    if (q.get('response_type') !== 'code' || !['snsapi_base', 'snsapi_userinfo'].includes(q.get('scope') ?? ''))
      return html('<!doctype html><p>scope参数错误或没有scope权限</p>');
    if (!/^https?:\/\/[^#]+$/.test(redirect)) return html('<!doctype html><p>redirect_uri参数错误</p>');
    if (!/^[A-Za-z0-9]{0,128}$/.test(state)) return html('<!doctype html><p>state参数错误</p>');
    const cookie = /(?:^|;\s*)sim_wechat_user=([\w-]{1,64})/.exec(req.headers.cookie ?? '');
    const code = randomBytes(16).toString('hex');
    oauthCodes.set(code, { openid: openIdOf(cookie?.[1] ?? 'buyer'), until: now() + oauthCodeTtlMs, used: false });
    const back = `${redirect}${redirect.includes('?') ? '&' : '?'}code=${code}&state=${state}`;
    return { status: 302, headers: { Location: back }, body: '' };
  }

  /** `GET /sns/oauth2/access_token`: the code (once, in time) for the openid; errors as WeChat's `{errcode, errmsg}`. */
  function accessToken(url: URL): HttpAnswer {
    const q = url.searchParams;
    const fail = (errcode: number, errmsg: string) => new HttpAnswer(200, { errcode, errmsg }, false);
    if (q.get('appid') !== appId) return fail(40013, 'invalid appid');
    if (q.get('secret') !== appSecret) return fail(40125, 'invalid appsecret');
    if (q.get('grant_type') !== 'authorization_code') return fail(40002, 'invalid grant_type');
    const c = oauthCodes.get(q.get('code') ?? '');
    if (!c) return fail(40029, 'invalid code');
    if (c.used) return fail(40163, 'code been used');
    if (now() > c.until) return fail(42003, 'code expired');
    c.used = true;
    return new HttpAnswer(
      200,
      {
        access_token: randomBytes(24).toString('base64url'),
        expires_in: 7200,
        refresh_token: randomBytes(24).toString('base64url'),
        openid: c.openid,
        scope: 'snsapi_base',
      },
      false,
    );
  }

  /** The stand-in for `WeixinJSBridge.invoke('getBrandWCPayRequest', params)` made by the WeChat user `openid`. */
  async function jsapiPay(call: object, openid: string): Promise<{ err_msg: string; reason?: string }> {
    const params = call as Record<string, unknown>;
    const fail = (reason: string) => ({ err_msg: 'get_brand_wcpay_request:fail', reason });
    const str = (k: string) => (typeof params[k] === 'string' ? (params[k] as string) : '');
    const [app, ts, nonce, pkg, signType, paySign] = ['appId', 'timeStamp', 'nonceStr', 'package', 'signType', 'paySign'].map(str);
    if (app !== appId) return fail('appId does not match the order');
    if (signType !== 'RSA') return fail('signType must be RSA');
    if (!/^\d{10}$/.test(ts!) || Math.abs(Math.floor(now() / 1000) - Number(ts)) > 7200) return fail('timeStamp');
    if (!nonce || nonce.length > 32) return fail('nonceStr');
    const o = ordersByPrepay.get(/^prepay_id=(.+)$/.exec(pkg!)?.[1] ?? '');
    if (!o || o.tradeType !== 'JSAPI') return fail('no JSAPI order of this prepay_id');
    let signed: boolean;
    try {
      signed = verify('sha256', Buffer.from(`${app}\n${ts}\n${nonce}\n${pkg}\n`), merchantPublicKey, Buffer.from(paySign!, 'base64'));
    } catch {
      signed = false;
    }
    if (!signed) return fail('支付验证签名失败');
    if (o.payerOpenid !== openid) return fail('the order was made for another WeChat user');
    return (await pay(o)) === 'OK' ? { err_msg: 'get_brand_wcpay_request:ok' } : fail('订单已关闭或已过期');
  }

  async function closeOrder(outTradeNo: string, b: Record<string, unknown>, fault: Fault | null): Promise<HttpAnswer> {
    if (b.mchid !== mchId) return error(400, 'PARAM_ERROR', 'mchid与请求头中的商户号不一致');
    const o = orders.get(outTradeNo);
    if (!o) return error(404, 'ORDER_NOT_EXIST', '订单不存在');
    if (fault?.kind === 'paid' && o.tradeState === 'NOTPAY') await pay(o);
    if (o.tradeState === 'SUCCESS' || o.tradeState === 'REFUND') return error(400, 'ORDERPAID', '订单已支付');
    o.tradeState = 'CLOSED';
    return new HttpAnswer(204);
  }

  function createRefund(b: Record<string, unknown>, fault: Fault | null): HttpAnswer {
    const amount = b.amount as Record<string, unknown> | undefined;
    const bad = (m: string) => error(400, 'PARAM_ERROR', m);
    if (typeof b.out_refund_no !== 'string' || !OUT_REFUND_NO.test(b.out_refund_no)) return bad('out_refund_no格式不正确');
    if (typeof b.out_trade_no !== 'string' && typeof b.transaction_id !== 'string') return bad('transaction_id和out_trade_no必须二选一');
    if (!amount || !Number.isSafeInteger(amount.refund) || !Number.isSafeInteger(amount.total) || (amount.refund as number) < 1) {
      return bad('amount.refund和amount.total须为正整数(分)');
    }
    if (amount.currency !== 'CNY') return bad('amount.currency只支持CNY');
    if (b.reason !== undefined && (typeof b.reason !== 'string' || Array.from(b.reason).length > 80)) return bad('reason长度不正确');
    if (b.notify_url !== undefined && (typeof b.notify_url !== 'string' || !/^https?:\/\/[^?#]+$/.test(b.notify_url)))
      return bad('notify_url格式不正确');
    const o =
      typeof b.out_trade_no === 'string'
        ? orders.get(b.out_trade_no)
        : [...orders.values()].find((x) => x.transactionId === b.transaction_id);
    if (!o || (o.tradeState !== 'SUCCESS' && o.tradeState !== 'REFUND')) return error(404, 'RESOURCE_NOT_EXISTS', '订单不存在');
    const existing = refunds.get(b.out_refund_no);
    if (existing) {
      if (existing.outTradeNo !== o.outTradeNo || existing.refund !== amount.refund)
        return error(400, 'INVALID_REQUEST', '退款单号已存在，且与本次请求参数不一致');
      settleIfDue(existing);
      return new HttpAnswer(200, refundBody(existing));
    }
    if (amount.total !== o.total) return error(400, 'INVALID_REQUEST', '订单金额与原订单不一致');
    const refunded = [...refunds.values()]
      .filter((r) => r.outTradeNo === o.outTradeNo && r.status !== 'CLOSED')
      .reduce((s, r) => s + r.refund, 0);
    if (refunded + (amount.refund as number) > o.total) return error(400, 'INVALID_REQUEST', '申请退款金额超过订单可退金额');
    const r: SimRefund = {
      outRefundNo: b.out_refund_no,
      refundId: `5030${digits(25)}`,
      outTradeNo: o.outTradeNo,
      transactionId: o.transactionId!,
      refund: amount.refund as number,
      total: o.total,
      reason: (b.reason as string | undefined) ?? null,
      notifyUrl: (b.notify_url as string | undefined) ?? null,
      status: 'PROCESSING',
      createTime: beijing(now()),
      successTime: null,
      settleAt: now() + refundSettleMs,
      settleTo: refundOutcomes.shift() ?? 'SUCCESS',
    };
    refunds.set(r.outRefundNo, r);
    o.tradeState = 'REFUND';
    if (fault?.kind === 'paid') {
      r.status = 'SUCCESS';
      r.successTime = r.createTime;
    } else {
      later(refundSettleMs, () => settleIfDue(r, true));
    }
    return new HttpAnswer(200, refundBody(r));
  }

  /** The Beijing day (YYYY-MM-DD) of a `+08:00` time this simulator wrote. */
  const dayOf = (beijingTime: string) => beijingTime.slice(0, 10);
  const billTime = (beijingTime: string) => beijingTime.slice(0, 19).replace('T', ' ');

  /** The ALL trade bill of a day: payments (by success time) and refunds (by acceptance time). */
  function tradeBill(day: string): { text: string; rows: number } {
    const row = (values: (string | number)[]) => values.map((v) => `\`${v}`).join(',');
    const lines: string[] = [];
    let ordersTotal = 0;
    let refundsTotal = 0;
    for (const o of orders.values()) {
      if (o.successTime === null || dayOf(o.successTime) !== day) continue;
      ordersTotal += o.total;
      lines.push(
        row([
          billTime(o.successTime),
          o.appid,
          mchId,
          0,
          '',
          o.transactionId!,
          o.outTradeNo,
          payerOf(o),
          o.tradeType,
          'SUCCESS',
          'OTHERS',
          'CNY',
          yuan(o.total),
          '0.00',
          0,
          0,
          '0.00',
          '0.00',
          '',
          '',
          o.description,
          '',
          '0.00000',
          '0.60%',
          yuan(o.total),
          '0.00',
          '',
        ]),
      );
    }
    for (const r of refunds.values()) {
      if (dayOf(r.createTime) !== day) continue;
      const o = orders.get(r.outTradeNo)!;
      refundsTotal += r.refund;
      lines.push(
        row([
          billTime(r.createTime),
          o.appid,
          mchId,
          0,
          '',
          r.transactionId,
          r.outTradeNo,
          payerOf(o),
          o.tradeType,
          'REFUND',
          'OTHERS',
          'CNY',
          '0.00',
          '0.00',
          r.refundId,
          r.outRefundNo,
          yuan(r.refund),
          '0.00',
          'ORIGINAL',
          r.status,
          o.description,
          '',
          '0.00000',
          '0.60%',
          '0.00',
          yuan(r.refund),
          '',
        ]),
      );
    }
    const summary = row([lines.length, yuan(ordersTotal), yuan(refundsTotal), '0.00', '0.00000', yuan(ordersTotal), yuan(refundsTotal)]);
    // The file starts with a byte order mark, as WeChat Pay's does.
    return {
      text: `\ufeff${BILL_HEADER}\r\n${lines.map((l) => `${l}\r\n`).join('')}${BILL_SUMMARY_HEADER}\r\n${summary}\r\n`,
      rows: lines.length,
    };
  }

  function tradeBillAddress(url: URL): HttpAnswer {
    const day = url.searchParams.get('bill_date') ?? '';
    const type = url.searchParams.get('bill_type') ?? 'ALL';
    const tar = url.searchParams.get('tar_type');
    if (!/^\d{4}-\d{2}-\d{2}$/.test(day)) return error(400, 'PARAM_ERROR', 'bill_date格式不正确');
    if (type !== 'ALL') return error(400, 'PARAM_ERROR', '模拟器只提供ALL类型账单');
    if (tar !== null && tar !== 'GZIP') return error(400, 'PARAM_ERROR', 'tar_type只支持GZIP');
    if (day >= dayOf(beijing(now()))) return error(400, 'INVALID_REQUEST', '不支持下载当日或之后的账单');
    const bill = tradeBill(day);
    if (bill.rows === 0) return error(400, 'NO_STATEMENT_EXIST', '账单文件不存在');
    const plain = Buffer.from(bill.text, 'utf8');
    const token = randomBytes(24).toString('base64url');
    billFiles.set(token, { bytes: tar === 'GZIP' ? gzipSync(plain) : plain, gzip: tar === 'GZIP', until: now() + 30_000 });
    return new HttpAnswer(200, {
      hash_type: 'SHA1',
      hash_value: createHash('sha1').update(plain).digest('hex'),
      download_url: `${baseUrl()}/v3/billdownload/file?token=${token}`,
    });
  }

  function billFile(url: URL): HttpAnswer {
    const f = billFiles.get(url.searchParams.get('token') ?? '');
    if (!f || now() > f.until) return error(400, 'INVALID_REQUEST', '下载链接已过期或无效');
    return new FileAnswer(f.bytes, f.gzip ? 'application/x-gzip' : 'text/plain; charset=utf-8');
  }

  function certificateList(): HttpAnswer {
    return new HttpAnswer(200, {
      data: certs.map(({ cert }) => ({
        serial_no: cert.serial,
        effective_time: beijing(cert.notBefore.getTime()),
        expire_time: beijing(cert.notAfter.getTime()),
        encrypt_certificate: encrypt(cert.pem, 'certificate'),
      })),
    });
  }

  async function api(method: string, url: URL, body: Buffer, fault: Fault | null): Promise<HttpAnswer> {
    const p = url.pathname;
    let json: Record<string, unknown> = {};
    if (method === 'POST') {
      try {
        const v: unknown = JSON.parse(body.toString('utf8'));
        if (typeof v !== 'object' || v === null || Array.isArray(v)) throw new Error('not an object');
        json = v as Record<string, unknown>;
      } catch {
        return error(400, 'PARAM_ERROR', '请求体不是合法的JSON对象');
      }
    }
    if (method === 'POST' && p === '/v3/pay/transactions/h5') return createOrder(json, fault, 'MWEB');
    if (method === 'POST' && p === '/v3/pay/transactions/jsapi') return createOrder(json, fault, 'JSAPI');
    if (method === 'POST' && p === '/v3/pay/transactions/native') return createOrder(json, fault, 'NATIVE');
    let m = /^\/v3\/pay\/transactions\/out-trade-no\/([^/]+)$/.exec(p);
    if (method === 'GET' && m) {
      if (url.searchParams.get('mchid') !== mchId) return error(400, 'PARAM_ERROR', 'mchid与请求头中的商户号不一致');
      const o = orders.get(decodeURIComponent(m[1]!));
      return o ? new HttpAnswer(200, orderResource(o)) : error(404, 'ORDER_NOT_EXIST', '订单不存在');
    }
    m = /^\/v3\/pay\/transactions\/out-trade-no\/([^/]+)\/close$/.exec(p);
    if (method === 'POST' && m) return closeOrder(decodeURIComponent(m[1]!), json, fault);
    if (method === 'POST' && p === '/v3/refund/domestic/refunds') return createRefund(json, fault);
    m = /^\/v3\/refund\/domestic\/refunds\/([^/]+)$/.exec(p);
    if (method === 'GET' && m) {
      const r = refunds.get(decodeURIComponent(m[1]!));
      if (!r) return error(404, 'RESOURCE_NOT_EXISTS', '退款单不存在');
      settleIfDue(r);
      return new HttpAnswer(200, refundBody(r));
    }
    if (method === 'GET' && p === '/v3/certificates') return certificateList();
    if (method === 'GET' && p === '/v3/bill/tradebill') return tradeBillAddress(url);
    if (method === 'GET' && p === '/v3/billdownload/file') return billFile(url);
    return error(404, 'NOT_FOUND', '请求的资源不存在');
  }

  function endpointOf(method: string, p: string): Endpoint | null {
    if (method === 'POST' && p === '/v3/pay/transactions/h5') return 'create';
    if (method === 'POST' && p === '/v3/pay/transactions/jsapi') return 'jsapi';
    if (method === 'POST' && p === '/v3/pay/transactions/native') return 'native';
    if (method === 'GET' && /^\/v3\/pay\/transactions\/out-trade-no\/[^/]+$/.test(p)) return 'query';
    if (method === 'POST' && /^\/v3\/pay\/transactions\/out-trade-no\/[^/]+\/close$/.test(p)) return 'close';
    if (method === 'POST' && p === '/v3/refund/domestic/refunds') return 'refund';
    if (method === 'GET' && /^\/v3\/refund\/domestic\/refunds\/[^/]+$/.test(p)) return 'refundQuery';
    if (method === 'GET' && p === '/v3/certificates') return 'certificates';
    if (method === 'GET' && p === '/v3/bill/tradebill') return 'tradeBill';
    if (method === 'GET' && p === '/v3/billdownload/file') return 'billFile';
    return null;
  }

  // -- the buyer's page -------------------------------------------------------------------------

  function buyerPage(o: SimOrder, redirectUrl: string | null, note: string | null): string {
    const yuan = `${Math.floor(o.total / 100)}.${String(o.total % 100).padStart(2, '0')}`;
    const hidden = `<input type="hidden" name="prepay_id" value="${escapeHtml(o.prepayId)}">${
      redirectUrl ? `<input type="hidden" name="redirect_url" value="${escapeHtml(redirectUrl)}">` : ''
    }`;
    const open = o.tradeState === 'NOTPAY' && now() <= o.payableUntil;
    return `<!doctype html><html lang="zh-CN"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>微信支付 (simulated)</title><style>body{font-family:sans-serif;max-width:26rem;margin:2rem auto;padding:0 1rem}button{font-size:1.1rem;padding:.6rem 1.2rem;margin:.3rem}</style></head>
<body><h1>微信支付 (simulated)</h1><p>${escapeHtml(o.description)}</p><p id="amount">¥${yuan}</p><p id="state">${o.tradeState}</p>
${note ? `<p id="note">${escapeHtml(note)}</p>` : ''}
${open ? `<form method="post" action="/pay/h5/pay">${hidden}<button id="pay">Pay</button></form><form method="post" action="/pay/h5/fail">${hidden}<button id="fail">Fail</button></form>` : ''}
${redirectUrl ? `<p><a id="back" href="${escapeHtml(redirectUrl)}">Back to the merchant</a></p>` : ''}</body></html>`;
  }

  async function buyer(
    req: http.IncomingMessage,
    url: URL,
    body: Buffer,
  ): Promise<{ status: number; headers: Record<string, string>; body: string }> {
    const html = (status: number, text: string) => ({ status, headers: { 'Content-Type': 'text/html; charset=utf-8' }, body: text });
    const form = req.method === 'POST' ? new URLSearchParams(body.toString('utf8')) : url.searchParams;
    const o = ordersByPrepay.get(form.get('prepay_id') ?? '');
    if (!o || o.tradeType !== 'MWEB') return html(404, '<!doctype html><p>订单不存在</p>');
    // WeChat Pay's H5 page is for a phone's browser: inside WeChat it refuses the payment.
    if (/MicroMessenger\//i.test(req.headers['user-agent'] ?? ''))
      return html(200, '<!doctype html><p id="refused">请在微信外打开订单，进行支付</p>');
    const redirect = form.get('redirect_url');
    const safeRedirect = redirect && /^https?:\/\//.test(redirect) ? redirect : null;
    if (req.method === 'GET') return html(200, buyerPage(o, safeRedirect, null));
    let note: string;
    if (url.pathname === '/pay/h5/pay') note = (await pay(o)) === 'OK' ? '支付成功' : '订单已关闭或已过期，无法支付';
    else if (o.tradeState === 'NOTPAY' && now() <= o.payableUntil) {
      o.tradeState = 'PAYERROR';
      note = '支付失败';
    } else note = '订单不可支付';
    if (safeRedirect) return { status: 303, headers: { Location: safeRedirect }, body: '' };
    return html(200, buyerPage(o, null, note));
  }

  // -- controls ---------------------------------------------------------------------------------

  function mustOrder(outTradeNo: string): SimOrder {
    const o = orders.get(outTradeNo);
    if (!o) throw new Error(`simulator: no order ${outTradeNo}`);
    return o;
  }

  const controls: SimulatorControls = {
    async pay(outTradeNo) {
      if ((await pay(mustOrder(outTradeNo))) !== 'OK') throw new Error(`simulator: order ${outTradeNo} cannot be paid`);
    },
    async scanPay(codeUrl) {
      const o = ordersByCode.get(codeUrl);
      if (!o) throw new Error('simulator: no Native order of this code_url');
      if ((await pay(o)) !== 'OK') throw new Error(`simulator: order ${o.outTradeNo} cannot be paid`);
    },
    jsapiPay,
    openIdOf,
    fail(outTradeNo) {
      const o = mustOrder(outTradeNo);
      if (o.tradeState !== 'NOTPAY') throw new Error(`simulator: order ${outTradeNo} is ${o.tradeState}`);
      o.tradeState = 'PAYERROR';
    },
    expire(outTradeNo) {
      mustOrder(outTradeNo).payableUntil = now() - 1;
    },
    programFault(endpoint, fault, times = 1) {
      if (!ENDPOINTS.includes(endpoint)) throw new Error(`simulator: no endpoint ${endpoint}`);
      const q = faults.get(endpoint) ?? [];
      q.push({ fault, remaining: times });
      faults.set(endpoint, q);
    },
    clearFaults() {
      faults.clear();
    },
    programNotifications(p) {
      notifyFaults.lose += p.lose ?? 0;
      notifyFaults.duplicate += p.duplicate ?? 0;
      notifyFaults.delayMs = p.delayMs ?? notifyFaults.delayMs;
    },
    nextRefundsSettleAs(status, times = 1) {
      for (let k = 0; k < times; k++) refundOutcomes.push(status);
    },
    async settleRefund(outRefundNo, status) {
      const r = refunds.get(outRefundNo);
      if (!r) throw new Error(`simulator: no refund ${outRefundNo}`);
      await settle(r, status);
    },
    rotateCertificate: () => newCertificate(),
    sentNotifications: () => sent,
    requestCount: (e) => counts.get(e) ?? 0,
    order: (n) => orders.get(n) ?? null,
    refund: (n) => refunds.get(n) ?? null,
  };

  /** The HTTP face of the controls: POST/DELETE under /__sim/, JSON in and out. */
  async function control(method: string, url: URL, body: Buffer): Promise<HttpAnswer> {
    const p = url.pathname.slice('/__sim'.length);
    const json = (): Record<string, unknown> => (body.length ? (JSON.parse(body.toString('utf8')) as Record<string, unknown>) : {});
    let m: RegExpExecArray | null;
    if (method === 'GET' && p === '/state') {
      return new HttpAnswer(200, {
        orders: [...orders.values()].map(({ fingerprint: _f, ...o }) => ({
          ...o,
          payableUntil: Number.isFinite(o.payableUntil) ? beijing(o.payableUntil) : null,
        })),
        refunds: [...refunds.values()],
        notifications: sent.map(({ rawBody: _b, headers: _h, ...n }) => n),
        lostNotifications: lost,
        requests: Object.fromEntries(counts),
      });
    }
    if (method === 'POST' && (m = /^\/orders\/([^/]+)\/(pay|fail|expire)$/.exec(p))) {
      const no = decodeURIComponent(m[1]!);
      if (m[2] === 'pay') await controls.pay(no);
      else if (m[2] === 'fail') controls.fail(no);
      else controls.expire(no);
      return new HttpAnswer(200, orderResource(mustOrder(no)));
    }
    if (method === 'POST' && p === '/native/pay') {
      await controls.scanPay(String(json().code_url));
      return new HttpAnswer(204);
    }
    if (method === 'POST' && p === '/jsapi/pay') {
      const j = json();
      return new HttpAnswer(200, await controls.jsapiPay((j.params ?? {}) as Record<string, unknown>, String(j.openid)));
    }
    if (method === 'POST' && (m = /^\/refunds\/([^/]+)\/(SUCCESS|ABNORMAL|CLOSED)$/.exec(p))) {
      await controls.settleRefund(decodeURIComponent(m[1]!), m[2] as 'SUCCESS' | 'ABNORMAL' | 'CLOSED');
      return new HttpAnswer(200, refundBody(refunds.get(decodeURIComponent(m[1]!))!));
    }
    if (method === 'POST' && p === '/faults') {
      const j = json();
      controls.programFault(j.endpoint as Endpoint, j.fault as Fault, typeof j.times === 'number' ? j.times : 1);
      return new HttpAnswer(204);
    }
    if (method === 'DELETE' && p === '/faults') {
      controls.clearFaults();
      return new HttpAnswer(204);
    }
    if (method === 'POST' && p === '/notifications') {
      controls.programNotifications(json() as { lose?: number; duplicate?: number; delayMs?: number });
      return new HttpAnswer(204);
    }
    if (method === 'POST' && p === '/refund-outcomes') {
      const j = json();
      controls.nextRefundsSettleAs(j.status === 'ABNORMAL' ? 'ABNORMAL' : 'SUCCESS', typeof j.times === 'number' ? j.times : 1);
      return new HttpAnswer(204);
    }
    if (method === 'POST' && p === '/rotate-certificate') return new HttpAnswer(200, { serial: controls.rotateCertificate().serial });
    return error(404, 'NOT_FOUND', 'no such control');
  }

  // -- the server -------------------------------------------------------------------------------

  function send(res: http.ServerResponse, a: HttpAnswer, requestedSerial: string | null, corrupt: 'bad' | 'probe' | null): void {
    if (a instanceof FileAnswer) {
      return void res.writeHead(200, { 'Request-ID': randomUUID(), 'Content-Type': a.contentType }).end(a.bytes);
    }
    const body = a.status === 204 || a.body === null ? Buffer.alloc(0) : Buffer.from(JSON.stringify(a.body));
    const headers: Record<string, string> = { 'Request-ID': randomUUID() };
    if (body.length > 0) headers['Content-Type'] = 'application/json; charset=utf-8';
    if (a.signed) {
      const sig = signatureHeaders(body, signingKey(requestedSerial));
      if (corrupt === 'bad') sig['Wechatpay-Signature'] = sign('sha256', Buffer.from('something else'), pkPrivate).toString('base64');
      if (corrupt === 'probe') sig['Wechatpay-Signature'] = `WECHATPAY/SIGNTEST/${randomBytes(32).toString('base64')}`;
      Object.assign(headers, sig);
    }
    res.writeHead(a.status, headers).end(body);
  }

  async function handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const c of req) {
      size += (c as Buffer).length;
      if (size > 1024 * 1024) return void res.writeHead(413).end();
      chunks.push(c as Buffer);
    }
    const body = Buffer.concat(chunks);
    const rawUrl = req.url ?? '/';
    const url = new URL(rawUrl, 'http://simulator.invalid');
    const method = req.method ?? 'GET';
    if (url.pathname.startsWith('/__sim/')) {
      let a: HttpAnswer;
      try {
        a = await control(method, url, body);
      } catch (err) {
        a = error(400, 'CONTROL_ERROR', (err as Error).message);
      }
      return send(res, new HttpAnswer(a.status, a.body, false), null, null);
    }
    if (url.pathname.startsWith('/pay/h5')) {
      const r = await buyer(req, url, body);
      return void res.writeHead(r.status, r.headers).end(r.body);
    }
    // WeChat's web authorization: open.weixin.qq.com and api.weixin.qq.com, not the payment API.
    if (method === 'GET' && url.pathname === '/connect/oauth2/authorize') {
      const r = authorizePage(req, url);
      return void res.writeHead(r.status, r.headers).end(r.body);
    }
    if (method === 'GET' && url.pathname === '/sns/oauth2/access_token') return send(res, accessToken(url), null, null);
    const refused = authenticate(method, rawUrl, body, req.headers.authorization);
    if (refused) return send(res, refused, null, null);
    if (!req.headers['user-agent']) return send(res, error(400, 'INVALID_REQUEST', '请求头缺少User-Agent'), null, null);
    if (method === 'POST' && !/^application\/json\b/.test(req.headers['content-type'] ?? '')) {
      return send(res, error(400, 'INVALID_REQUEST', 'Content-Type须为application/json'), null, null);
    }
    const requested = typeof req.headers['wechatpay-serial'] === 'string' ? req.headers['wechatpay-serial'] : null;
    const endpoint = endpointOf(method, url.pathname);
    if (endpoint) counts.set(endpoint, (counts.get(endpoint) ?? 0) + 1);
    let fault = endpoint ? takeFault(endpoint) : null;
    if (fault?.kind === 'delay') {
      await sleep(fault.ms);
      fault = null;
    }
    if (fault?.kind === 'error') {
      const a = error(fault.status, fault.code, fault.message ?? fault.code);
      return send(res, new HttpAnswer(a.status, a.body, fault.signed ?? true), requested, null);
    }
    // The certificate list is signed with a platform certificate, whatever the request names.
    const signer = endpoint === 'certificates' ? certs[certs.length - 1]!.cert.serial : requested;
    if (fault?.kind === 'drop') {
      // Lost on the way in: nothing done, and no answer (cut when the simulator closes, or by the client).
      held.add(res);
      res.on('close', () => held.delete(res));
      return;
    }
    const a = await api(method, url, body, fault);
    if (fault?.kind === 'noAnswer') {
      // The work is done; the answer never comes. The connection is cut at close (or by the client).
      held.add(res);
      res.on('close', () => held.delete(res));
      return;
    }
    send(res, a, signer, fault?.kind === 'badSignature' ? 'bad' : fault?.kind === 'probeSignature' ? 'probe' : null);
  }

  const server = http.createServer((req, res) => {
    handle(req, res).catch((err) => {
      log(`simulator: ${(err as Error).message}`);
      if (!res.headersSent)
        res.writeHead(500, { 'Content-Type': 'application/json' }).end(JSON.stringify({ code: 'SYSTEM_ERROR', message: '系统错误' }));
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 0, opts.host ?? '127.0.0.1', () => resolve());
  });
  const addr = server.address() as AddressInfo;
  const host = addr.family === 'IPv6' ? `[${addr.address}]` : addr.address;
  const url = `http://${host}:${addr.port}`;
  function baseUrl(): string {
    return url;
  }

  return {
    url,
    keys: {
      mchId,
      appId,
      appSecret,
      apiV3Key,
      merchantCertSerial,
      merchantPrivateKeyPem,
      publicKeyId,
      platformPublicKeyPem: pkPublic.export({ type: 'spki', format: 'pem' }).toString(),
      get certificates() {
        return certs.map((c) => c.cert);
      },
    },
    controls,
    async close() {
      closed = true;
      for (const t of timers) clearTimeout(t);
      timers.clear();
      for (const r of held) r.destroy();
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}
