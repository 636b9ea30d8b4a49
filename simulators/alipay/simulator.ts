/**
 * A local Alipay gateway: the OpenAPI 2.0 `gateway.do` for the calls the adapter makes, built from
 * Alipay's public documentation (docs/providers-alipay.md, "The Alipay simulator").
 *
 * - Every request's signature is verified with the merchant's public key (RSA2 over the sorted
 *   parameters, `sign` and empty values left out); a refused request gets the gateway's codes
 *   (40001 isv.missing-*, 40002 isv.invalid-*), and every answer is signed with the simulator's
 *   Alipay key (in certificate mode with `alipay_cert_sn`, and requests must carry the app and
 *   root certificate SNs).
 * - Trades and refunds live in memory. A trade is made by alipay.trade.precreate (its qr_code is a
 *   buyer page here) or by the buyer opening the alipay.trade.wap.pay page; by default a
 *   precreated trade can be queried and closed at once, as the provider contract expects; with
 *   `tradeVisibleOnPrecreate: false` it exists only once the buyer scans it, as at Alipay.
 * - The trade bill of a past day (alipay.data.dataservice.bill.downloadurl.query, bill_type trade):
 *   an address valid 30 seconds of a ZIP of two GBK CSV files made from the trades paid and the
 *   refunds settled that day (simulators/alipay/bill.ts); a day without any is isp.bill_not_exist.
 * - Notifications are form POSTs signed like Alipay's, sent again until answered `success`
 *   (Alipay's schedule by default: 4 m, 10 m, 10 m, 1 h, 2 h, 6 h, 15 h).
 * - Test levers: pay, fail, scan or expire a trade; per-method faults (no answer within the
 *   client's timeout, HTTP 5xx, a business code, an unverifiable or missing signature, a delay,
 *   the trade paid just before); delayed, duplicated or lost notifications. In process and over
 *   HTTP under /__sim/.
 */
import {
  type KeyObject,
  createPrivateKey,
  createPublicKey,
  createSign,
  createVerify,
  generateKeyPairSync,
  randomBytes,
  randomInt,
} from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { fenToYuan, yuanToFen } from '../../src/providers/alipay/amount.ts';
import { parseShanghaiDateTime, shanghaiDateTime } from '../../src/providers/alipay/wire.ts';
import { type BillRow, billArchive } from './bill.ts';
import { type CertSet, makeCertSet } from './certs.ts';
import { buyerPage, errorPage, messagePage } from './pages.ts';

export const SIMULATED_METHODS = [
  'alipay.trade.precreate',
  'alipay.trade.query',
  'alipay.trade.close',
  'alipay.trade.refund',
  'alipay.trade.fastpay.refund.query',
  'alipay.data.dataservice.bill.downloadurl.query',
] as const;
export type SimulatedMethod = (typeof SIMULATED_METHODS)[number];
const PAGE_METHOD = 'alipay.trade.wap.pay';

/** Alipay's schedule of notification retries after the first send (8 sends in about 25 hours). */
export const ALIPAY_NOTIFY_RETRY_DELAYS_MS = [4, 10, 10, 60, 120, 360, 900].map((m) => m * 60_000);

export type SimFault =
  /** The work is done, but no answer comes (the connection is held until the client gives up). */
  | { kind: 'timeout' }
  /** The request is lost before Alipay acts on it: nothing done, and no answer comes. */
  | { kind: 'drop' }
  /** An HTTP error status with an HTML body; `doWork`: the call was carried out all the same. */
  | { kind: 'http'; status: number; doWork?: boolean }
  /** A signed business answer (nothing done): e.g. 40004 ACQ.SYSTEM_ERROR, 20000 isp.unknow-error. */
  | { kind: 'business'; code: string; subCode: string | null; subMsg?: string }
  /** The work is done; the answer's signature does not verify. */
  | { kind: 'badSignature' }
  /** The work is done; the answer carries no signature. */
  | { kind: 'unsigned' }
  /** The work is done; the signature covers the answer with `\/` written as `/` (Alipay's JSON escaping quirk). */
  | { kind: 'slashVariant' }
  /** The answer comes after `ms`, then as usual. */
  | { kind: 'delay'; ms: number }
  /** precreate and close: the buyer has just paid the trade; refund: it settles at once. */
  | { kind: 'paid' };

export interface AlipaySimulatorOptions {
  host?: string;
  /** 0 (the default): any free port. */
  port?: number;
  /** The base URL buyers reach the simulator at (QR codes, pages); default the listening URL. */
  publicBaseUrl?: string;
  appId?: string;
  /** The merchant's public key (PEM); without it a key pair is made and its private key handed out in `keys`. */
  merchantPublicKeyPem?: string;
  merchantPrivateKeyPem?: string;
  /** The simulator's Alipay key (PEM); made when absent. */
  alipayPrivateKeyPem?: string;
  /** Certificate mode: certificates are made, requests must carry their SNs, answers carry alipay_cert_sn. */
  certMode?: boolean;
  /** false: a precreated trade is unknown to query and close until the buyer scans it, as at Alipay. */
  tradeVisibleOnPrecreate?: boolean;
  /** How long an accepted refund takes to succeed; 0: at once (fund_change Y). */
  refundSettleMs?: number;
  notifyRetryDelaysMs?: readonly number[];
  /** Deadline of one notification delivery. */
  notifyTimeoutMs?: number;
  /** How long a `timeout` fault holds its answer at the most. */
  holdMs?: number;
  now?: () => Date;
  log?: (line: string) => void;
}

export interface SimKeys {
  /** The merchant's private key, when the simulator made the pair. */
  merchantPrivateKeyPem: string | null;
  merchantPublicKeyPem: string;
  /** Alipay's public key: what ALIPAY_PUBLIC_KEY_FILE holds in public-key mode. */
  alipayPublicKeyPem: string;
  /** Certificate mode: the app certificate, Alipay's public certificate and the root certificate. */
  certs: { appCertPem: string; alipayPublicCertPem: string; alipayRootCertPem: string } | null;
}

export interface SimNotification {
  url: string;
  rawBody: Buffer;
  headers: Record<string, string>;
  /** 1 for the first send of a notice, 2 for its first retry, ... */
  attempt: number;
  /** The receiver's answer body (at most 1 KiB), or the delivery error. */
  answer: string;
  acknowledged: boolean;
}

export interface SimTradeView {
  outTradeNo: string;
  tradeNo: string | null;
  status: TradeStatus;
  visible: boolean;
  totalAmount: string;
  subject: string;
  timeExpire: string | null;
  notifyUrl: string | null;
  refunds: { outRequestNo: string; refundAmount: string; status: 'PENDING' | 'REFUND_SUCCESS' }[];
}

type TradeStatus = 'WAIT_BUYER_PAY' | 'TRADE_SUCCESS' | 'TRADE_CLOSED' | 'TRADE_FINISHED';

interface Refund {
  outRequestNo: string;
  amountFen: number;
  reason: string | null;
  settled: boolean;
  gmtRefund: Date | null;
}

interface Trade {
  outTradeNo: string;
  tradeNo: string | null;
  totalFen: number;
  subject: string;
  timeExpire: Date | null;
  notifyUrl: string | null;
  status: TradeStatus;
  visible: boolean;
  qrToken: string;
  createdAt: Date;
  paidAt: Date | null;
  closedAt: Date | null;
  refunds: Map<string, Refund>;
}

interface Session {
  outTradeNo: string;
  returnUrl: string | null;
  quitUrl: string | null;
}

export interface AlipaySimulator {
  /** Base URL (no trailing slash). */
  url: string;
  /** The gateway: what ALIPAY_GATEWAY_URL names. */
  gatewayUrl: string;
  appId: string;
  keys: SimKeys;
  /** Certificate mode: the SNs the simulator expects and signs with. */
  certSns: { appCertSn: string; alipayCertSn: string; alipayRootCertSn: string } | null;
  /** The buyer pays (the trade may be pre-created: paying scans it). Resolves after the notice's first send. */
  pay(outTradeNo: string): Promise<{ tradeNo: string }>;
  /** The buyer's payment fails: the trade stays open (Alipay has no failed trade), no notice. */
  fail(outTradeNo: string): void;
  /** The buyer scans the QR code (or opens the page): a pre-created trade becomes a trade. */
  scan(outTradeNo: string): void;
  /** The trade's time runs out: an open trade is closed (TRADE_CLOSED, notified). */
  expire(outTradeNo: string): Promise<void>;
  trade(outTradeNo: string): SimTradeView | null;
  programFault(method: SimulatedMethod, fault: SimFault, times?: number): void;
  clearFaults(): void;
  /** Every delivery attempt so far, oldest first. */
  notifications(): readonly SimNotification[];
  /** The next `count` notices are sent `ms` late. */
  delayNotifications(ms: number, count?: number): void;
  /** The next `count` notices are sent twice. */
  duplicateNotifications(count?: number): void;
  /** The next `count` notices are lost: never sent, never retried. */
  loseNotifications(count?: number): void;
  /** Requests received, by method (the buyer pages count under alipay.trade.wap.pay). */
  requestCount(method: string): number;
  close(): Promise<void>;
}

const MSG: Record<string, string> = {
  '10000': 'Success',
  '20000': 'Service Currently Unavailable',
  '20001': 'Insufficient Token Permissions',
  '40001': 'Missing Required Arguments',
  '40002': 'Invalid Arguments',
  '40004': 'Business Failed',
  '40006': 'Insufficient Permissions',
};

class GatewayError extends Error {
  readonly code: string;
  readonly subCode: string;
  readonly subMsg: string;
  constructor(code: string, subCode: string, subMsg: string) {
    super(`${code} ${subCode}`);
    this.code = code;
    this.subCode = subCode;
    this.subMsg = subMsg;
  }
}

const acq = (subCode: string, subMsg: string) => new GatewayError('40004', subCode, subMsg);

const MAX_REQUEST_BYTES = 1024 * 1024;

function pem(k: KeyObject, type: 'spki' | 'pkcs8'): string {
  return k.export({ type, format: 'pem' }).toString();
}

/**
 * Alipay's request signing content: every parameter but `sign`, empty values left out, sorted by
 * name, `name=value` joined by `&` (`sign_type` is signed in requests). Notifications and return
 * parameters leave `sign_type` out too.
 */
function signContent(params: Record<string, string>, withSignType: boolean): string {
  return Object.keys(params)
    .filter((k) => k !== 'sign' && (withSignType || k !== 'sign_type') && params[k] !== '')
    .sort()
    .map((k) => `${k}=${params[k]}`)
    .join('&');
}

export async function startAlipaySimulator(opts: AlipaySimulatorOptions = {}): Promise<AlipaySimulator> {
  const now = opts.now ?? (() => new Date());
  const log = opts.log ?? (() => {});
  const appId = opts.appId ?? '2021000000000001';
  const settleMs = opts.refundSettleMs ?? 1000;
  const retryDelays = opts.notifyRetryDelaysMs ?? ALIPAY_NOTIFY_RETRY_DELAYS_MS;
  const notifyTimeoutMs = opts.notifyTimeoutMs ?? 5000;
  const holdMs = opts.holdMs ?? 60_000;
  const visibleOnPrecreate = opts.tradeVisibleOnPrecreate ?? true;

  let merchantPrivateKeyPem: string | null = opts.merchantPrivateKeyPem ?? null;
  let merchantPublic: KeyObject;
  if (opts.merchantPublicKeyPem) merchantPublic = createPublicKey(opts.merchantPublicKeyPem);
  else if (merchantPrivateKeyPem) merchantPublic = createPublicKey(merchantPrivateKeyPem);
  else {
    const pair = generateKeyPairSync('rsa', { modulusLength: 2048 });
    merchantPublic = pair.publicKey;
    merchantPrivateKeyPem = pem(pair.privateKey, 'pkcs8');
  }
  const alipayKey = opts.alipayPrivateKeyPem
    ? createPrivateKey(opts.alipayPrivateKeyPem)
    : generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey;
  const certs: CertSet | null = opts.certMode ? makeCertSet(appId, merchantPublic, alipayKey) : null;
  const keys: SimKeys = {
    merchantPrivateKeyPem,
    merchantPublicKeyPem: pem(merchantPublic, 'spki'),
    alipayPublicKeyPem: pem(createPublicKey(alipayKey), 'spki'),
    certs: certs ? { appCertPem: certs.app.pem, alipayPublicCertPem: certs.alipay.pem, alipayRootCertPem: certs.root.pem } : null,
  };

  const trades = new Map<string, Trade>();
  const byQr = new Map<string, Trade>();
  const sessions = new Map<string, Session>();
  const faults = new Map<string, SimFault[]>();
  const sent: SimNotification[] = [];
  const counts = new Map<string, number>();
  const timers = new Set<NodeJS.Timeout>();
  const held = new Set<http.ServerResponse>();
  /** Bill archives by download token, each valid until its time. */
  const bills = new Map<string, { zip: Buffer; until: number }>();
  let delayNext: { ms: number; count: number } = { ms: 0, count: 0 };
  let duplicateNext = 0;
  let loseNext = 0;
  let closed = false;
  let base = '';

  function later(ms: number, fn: () => void): void {
    const t = setTimeout(() => {
      timers.delete(t);
      if (!closed) fn();
    }, ms);
    t.unref();
    timers.add(t);
  }

  function signAlipay(text: string): string {
    return createSign('RSA-SHA256').update(text, 'utf8').sign(alipayKey, 'base64');
  }

  // ---------------------------------------------------------------- notifications

  function tradeNoFor(at: Date): string {
    return `${shanghaiDateTime(at).slice(0, 10).replaceAll('-', '')}22001${String(randomInt(1e9)).padStart(9, '0')}${String(randomInt(1e6)).padStart(6, '0')}`;
  }

  function noticeParams(t: Trade, extra: Record<string, string>): Record<string, string> {
    const total = fenToYuan(t.totalFen);
    const paid = t.paidAt !== null;
    const p: Record<string, string> = {
      notify_time: shanghaiDateTime(now()),
      notify_type: 'trade_status_sync',
      notify_id: randomBytes(16).toString('hex'),
      charset: 'utf-8',
      version: '1.0',
      app_id: appId,
      auth_app_id: appId,
      out_trade_no: t.outTradeNo,
      trade_status: t.status,
      total_amount: total,
      subject: t.subject,
      gmt_create: shanghaiDateTime(t.createdAt),
      seller_id: '2088000000000001',
      seller_email: 'merchant@alipay-simulator.invalid',
      ...extra,
    };
    if (t.tradeNo) p.trade_no = t.tradeNo;
    if (paid) {
      Object.assign(p, {
        gmt_payment: shanghaiDateTime(t.paidAt!),
        buyer_id: '2088000000000002',
        buyer_logon_id: 'buy***@alipay-simulator.invalid',
        receipt_amount: total,
        invoice_amount: total,
        buyer_pay_amount: total,
        point_amount: '0.00',
        fund_bill_list: JSON.stringify([{ amount: total, fundChannel: 'ALIPAYACCOUNT' }]),
      });
    }
    if (t.closedAt) p.gmt_close = shanghaiDateTime(t.closedAt);
    p.sign_type = 'RSA2';
    p.sign = signAlipay(signContent(p, false));
    return p;
  }

  /** Sends a notice (and its retries); resolves after its first send, or at once if delayed or lost. */
  async function notify(t: Trade, extra: Record<string, string> = {}): Promise<void> {
    if (!t.notifyUrl) return;
    const url = t.notifyUrl;
    const body = Buffer.from(new URLSearchParams(noticeParams(t, extra)).toString());
    if (loseNext > 0) {
      loseNext--;
      log(`notification for ${t.outTradeNo} lost (a lever)`);
      return;
    }
    const copies = duplicateNext > 0 ? (duplicateNext--, 2) : 1;
    let delay = 0;
    if (delayNext.count > 0) {
      delay = delayNext.ms;
      delayNext = { ms: delayNext.ms, count: delayNext.count - 1 };
    }
    const sends: Promise<void>[] = [];
    for (let c = 0; c < copies; c++) {
      if (delay > 0) later(delay, () => void deliver(url, body, 1));
      else sends.push(deliver(url, body, 1));
    }
    await Promise.all(sends);
  }

  async function deliver(url: string, rawBody: Buffer, attempt: number): Promise<void> {
    const headers = { 'content-type': 'application/x-www-form-urlencoded; charset=utf-8' };
    let answer: string;
    try {
      const res = await fetch(url, {
        method: 'POST',
        headers,
        body: rawBody,
        redirect: 'manual',
        signal: AbortSignal.timeout(notifyTimeoutMs),
      });
      answer = (await res.text()).slice(0, 1024);
    } catch (err) {
      answer = `delivery failed: ${(err as Error).message}`;
    }
    // Alipay reads the answer body: exactly `success`, anything else and it sends again.
    const acknowledged = answer === 'success';
    sent.push({ url, rawBody, headers, attempt, answer, acknowledged });
    log(`notification to ${url} (send ${attempt}): ${acknowledged ? 'success' : `not acknowledged (${answer.slice(0, 80)})`}`);
    if (!acknowledged && attempt <= retryDelays.length && !closed)
      later(retryDelays[attempt - 1]!, () => void deliver(url, rawBody, attempt + 1));
  }

  // ---------------------------------------------------------------- trades

  function expireIfDue(t: Trade): Promise<void> | null {
    if (t.status !== 'WAIT_BUYER_PAY' || t.timeExpire === null || t.timeExpire.getTime() > now().getTime()) return null;
    return closeTrade(t);
  }

  /** Closes an open trade (timed out, or alipay.trade.close); a trade not yet scanned is just forgotten. */
  async function closeTrade(t: Trade): Promise<void> {
    t.status = 'TRADE_CLOSED';
    t.closedAt = now();
    if (t.visible) await notify(t);
  }

  function find(biz: Record<string, unknown>): Trade | null {
    const out = typeof biz.out_trade_no === 'string' ? biz.out_trade_no : null;
    const tno = typeof biz.trade_no === 'string' ? biz.trade_no : null;
    if (out === null && tno === null) throw acq('ACQ.INVALID_PARAMETER', '参数无效: out_trade_no or trade_no');
    let t = out !== null ? (trades.get(out) ?? null) : null;
    if (t === null && tno !== null) t = [...trades.values()].find((x) => x.tradeNo === tno) ?? null;
    if (t === null || !t.visible) return null;
    void expireIfDue(t);
    return t;
  }

  function makeVisible(t: Trade): void {
    t.visible = true;
    t.tradeNo ??= tradeNoFor(now());
  }

  async function payTrade(t: Trade): Promise<void> {
    makeVisible(t);
    t.status = 'TRADE_SUCCESS';
    t.paidAt = now();
    await notify(t);
  }

  function refundedFen(t: Trade, settledOnly: boolean): number {
    let s = 0;
    for (const r of t.refunds.values()) if (!settledOnly || r.settled) s += r.amountFen;
    return s;
  }

  async function settleRefund(t: Trade, r: Refund): Promise<void> {
    if (r.settled) return;
    r.settled = true;
    r.gmtRefund = now();
    // A trade refunded in full is TRADE_CLOSED (its payment time stays).
    if (refundedFen(t, true) === t.totalFen) {
      t.status = 'TRADE_CLOSED';
      t.closedAt = now();
    }
    await notify(t, {
      out_biz_no: r.outRequestNo,
      refund_fee: fenToYuan(refundedFen(t, true)),
      gmt_refund: `${shanghaiDateTime(r.gmtRefund)}.${String(r.gmtRefund.getMilliseconds()).padStart(3, '0')}`,
    });
  }

  function view(t: Trade): SimTradeView {
    return {
      outTradeNo: t.outTradeNo,
      tradeNo: t.tradeNo,
      status: t.status,
      visible: t.visible,
      totalAmount: fenToYuan(t.totalFen),
      subject: t.subject,
      timeExpire: t.timeExpire ? shanghaiDateTime(t.timeExpire) : null,
      notifyUrl: t.notifyUrl,
      refunds: [...t.refunds.values()].map((r) => ({
        outRequestNo: r.outRequestNo,
        refundAmount: fenToYuan(r.amountFen),
        status: r.settled ? 'REFUND_SUCCESS' : 'PENDING',
      })),
    };
  }

  // ---------------------------------------------------------------- the gateway's checks

  /** The trade fields of precreate and wap.pay, checked as the gateway checks them. */
  function tradeFields(biz: Record<string, unknown>): { outTradeNo: string; totalFen: number; subject: string; timeExpire: Date | null } {
    const out = biz.out_trade_no;
    if (typeof out !== 'string' || !/^[A-Za-z0-9_]{1,64}$/.test(out)) throw acq('ACQ.INVALID_PARAMETER', '参数无效: out_trade_no');
    const totalFen = typeof biz.total_amount === 'string' ? yuanToFen(biz.total_amount) : null;
    if (totalFen === null || totalFen < 1 || totalFen > 10_000_000_000) throw acq('ACQ.INVALID_PARAMETER', '参数无效: total_amount');
    const subject = biz.subject;
    if (typeof subject !== 'string' || subject === '' || [...subject].length > 256 || /[/=&]/.test(subject)) {
      throw acq('ACQ.INVALID_PARAMETER', '参数无效: subject (at most 256 characters, no / = &)');
    }
    let timeExpire: Date | null = null;
    if (biz.time_expire !== undefined) {
      timeExpire = typeof biz.time_expire === 'string' ? parseShanghaiDateTime(biz.time_expire) : null;
      if (timeExpire === null || timeExpire.getTime() <= now().getTime()) throw acq('ACQ.INVALID_PARAMETER', '参数无效: time_expire');
    }
    return { outTradeNo: out, totalFen, subject, timeExpire };
  }

  /**
   * The trade of out_trade_no, made if new; a repeat must carry the same trade
   * (ACQ.CONTEXT_INCONSISTENT otherwise). `by`: precreate (Alipay makes the trade, with its
   * trade_no, when the buyer scans; here it may be visible before, without trade_no), or the buyer
   * opening the page (the trade is made).
   */
  function tradeFor(f: ReturnType<typeof tradeFields>, notifyUrl: string | null, by: 'precreate' | 'buyer'): Trade {
    const existing = trades.get(f.outTradeNo);
    if (existing) {
      if (existing.totalFen !== f.totalFen || existing.subject !== f.subject) throw acq('ACQ.CONTEXT_INCONSISTENT', '交易信息被篡改');
      void expireIfDue(existing);
      existing.notifyUrl ??= notifyUrl;
      if (by === 'buyer' && existing.status === 'WAIT_BUYER_PAY') makeVisible(existing);
      return existing;
    }
    const t: Trade = {
      ...f,
      tradeNo: null,
      notifyUrl,
      status: 'WAIT_BUYER_PAY',
      visible: false,
      qrToken: randomBytes(12).toString('base64url'),
      createdAt: now(),
      paidAt: null,
      closedAt: null,
      refunds: new Map(),
    };
    trades.set(t.outTradeNo, t);
    byQr.set(t.qrToken, t);
    if (by === 'buyer') makeVisible(t);
    else t.visible = visibleOnPrecreate;
    return t;
  }

  /** The public parameters and the signature, in the gateway's order of checks. */
  function checkRequest(p: Record<string, string>): void {
    if (!p.app_id) throw new GatewayError('40001', 'isv.missing-app-id', '缺少AppID参数');
    if (p.app_id !== appId) throw new GatewayError('40002', 'isv.invalid-app-id', '无效的AppID参数');
    if (!p.sign) throw new GatewayError('40001', 'isv.missing-signature', '缺少签名参数');
    if (!p.sign_type) throw new GatewayError('40001', 'isv.missing-signature-type', '缺少签名类型参数');
    if (p.sign_type !== 'RSA2') throw new GatewayError('40002', 'isv.invalid-signature-type', '无效的签名类型参数');
    if (p.charset !== undefined && p.charset.toLowerCase() !== 'utf-8')
      throw new GatewayError('40002', 'isv.invalid-charset', '字符集错误');
    if (!p.timestamp) throw new GatewayError('40001', 'isv.missing-timestamp', '缺少时间戳参数');
    if (parseShanghaiDateTime(p.timestamp) === null) throw new GatewayError('40002', 'isv.invalid-timestamp', '非法的时间戳参数');
    if (!p.version) throw new GatewayError('40001', 'isv.missing-version', '缺少版本参数');
    if (p.version !== '1.0') throw new GatewayError('40002', 'isv.invalid-version', '非法的版本参数');
    if (certs) {
      if (!p.app_cert_sn) throw new GatewayError('40001', 'isv.missing-app-cert-sn', '缺少应用公钥证书序列号');
      if (p.app_cert_sn !== certs.app.sn) throw new GatewayError('40002', 'isv.app-cert-sn-mismatch', '应用公钥证书序列号不匹配');
      if (!p.alipay_root_cert_sn) throw new GatewayError('40001', 'isv.missing-alipay-root-cert-sn', '缺少支付宝根证书序列号');
      if (p.alipay_root_cert_sn !== certs.root.sn)
        throw new GatewayError('40002', 'isv.alipay-root-cert-sn-mismatch', '支付宝根证书序列号不匹配');
    }
    const content = signContent(p, true);
    let ok: boolean;
    try {
      ok = createVerify('RSA-SHA256').update(content, 'utf8').verify(merchantPublic, p.sign, 'base64');
    } catch {
      ok = false;
    }
    if (!ok) {
      throw new GatewayError(
        '40002',
        'isv.invalid-signature',
        `验签出错，建议检查签名字符串或签名私钥与应用公钥是否匹配，网关生成的验签字符串为：${content}`,
      );
    }
  }

  function bizOf(p: Record<string, string>): Record<string, unknown> {
    let biz: unknown;
    try {
      biz = JSON.parse(p.biz_content ?? '');
    } catch {
      throw acq('ACQ.INVALID_PARAMETER', '参数无效: biz_content');
    }
    if (typeof biz !== 'object' || biz === null || Array.isArray(biz)) throw acq('ACQ.INVALID_PARAMETER', '参数无效: biz_content');
    return biz as Record<string, unknown>;
  }

  // ---------------------------------------------------------------- the calls

  type Handler = (biz: Record<string, unknown>, p: Record<string, string>, fault: SimFault | null) => Promise<Record<string, unknown>>;

  const handlers: Record<SimulatedMethod, Handler> = {
    async 'alipay.trade.precreate'(biz, p, fault) {
      const f = tradeFields(biz);
      const t = tradeFor(f, p.notify_url || null, 'precreate');
      if (fault?.kind === 'paid' && t.status === 'WAIT_BUYER_PAY') await payTrade(t);
      if (t.status === 'TRADE_SUCCESS' || t.status === 'TRADE_FINISHED') throw acq('ACQ.TRADE_HAS_SUCCESS', '交易已被支付');
      if (t.status === 'TRADE_CLOSED') throw acq('ACQ.TRADE_HAS_CLOSE', '交易已经关闭');
      return { out_trade_no: t.outTradeNo, qr_code: `${base}/qr/${t.qrToken}` };
    },

    async 'alipay.trade.query'(biz) {
      const t = find(biz);
      if (!t) throw acq('ACQ.TRADE_NOT_EXIST', '交易不存在');
      const total = fenToYuan(t.totalFen);
      const paid = t.paidAt !== null;
      return {
        ...(t.tradeNo ? { trade_no: t.tradeNo } : {}),
        out_trade_no: t.outTradeNo,
        trade_status: t.status,
        total_amount: total,
        ...(paid
          ? {
              buyer_logon_id: 'buy***@alipay-simulator.invalid',
              buyer_user_id: '2088000000000002',
              buyer_pay_amount: total,
              receipt_amount: total,
              invoice_amount: total,
              point_amount: '0.00',
              send_pay_date: shanghaiDateTime(t.paidAt!),
            }
          : {}),
      };
    },

    async 'alipay.trade.close'(biz, _p, fault) {
      const t = find(biz);
      if (!t) throw acq('ACQ.TRADE_NOT_EXIST', '交易不存在');
      if (fault?.kind === 'paid' && t.status === 'WAIT_BUYER_PAY') await payTrade(t);
      if (t.status !== 'WAIT_BUYER_PAY') throw acq('ACQ.TRADE_STATUS_ERROR', '交易状态不合法');
      await closeTrade(t);
      return { ...(t.tradeNo ? { trade_no: t.tradeNo } : {}), out_trade_no: t.outTradeNo };
    },

    async 'alipay.trade.refund'(biz, _p, fault) {
      const t = find(biz);
      if (!t) throw acq('ACQ.TRADE_NOT_EXIST', '交易不存在');
      const amountFen = typeof biz.refund_amount === 'string' ? yuanToFen(biz.refund_amount) : null;
      if (amountFen === null || amountFen < 1) throw acq('ACQ.INVALID_PARAMETER', '参数无效: refund_amount');
      const requestNo = typeof biz.out_request_no === 'string' && biz.out_request_no !== '' ? biz.out_request_no : t.outTradeNo;
      const answer = (fundChange: 'Y' | 'N') => ({
        trade_no: t.tradeNo,
        out_trade_no: t.outTradeNo,
        buyer_logon_id: 'buy***@alipay-simulator.invalid',
        fund_change: fundChange,
        refund_fee: fenToYuan(refundedFen(t, false)),
      });
      const existing = t.refunds.get(requestNo);
      if (existing) {
        if (existing.amountFen !== amountFen) throw acq('ACQ.DISCORDANT_REPEAT_REQUEST', '不一致的请求');
        return answer('N');
      }
      if (t.status === 'WAIT_BUYER_PAY') throw acq('ACQ.TRADE_STATUS_ERROR', '交易状态非法');
      if (t.status === 'TRADE_FINISHED') throw acq('ACQ.TRADE_HAS_FINISHED', '交易已完结');
      if (t.status === 'TRADE_CLOSED' && t.paidAt === null) throw acq('ACQ.TRADE_HAS_CLOSE', '交易已经关闭');
      if (refundedFen(t, false) + amountFen > t.totalFen) throw acq('ACQ.REFUND_AMT_NOT_EQUAL_TOTAL', '退款金额超限');
      const r: Refund = {
        outRequestNo: requestNo,
        amountFen,
        reason: typeof biz.refund_reason === 'string' ? biz.refund_reason : null,
        settled: false,
        gmtRefund: null,
      };
      t.refunds.set(requestNo, r);
      if (fault?.kind === 'paid' || settleMs === 0) {
        await settleRefund(t, r);
        return answer('Y');
      }
      later(settleMs, () => void settleRefund(t, r));
      return answer('N');
    },

    async 'alipay.data.dataservice.bill.downloadurl.query'(biz) {
      const day = typeof biz.bill_date === 'string' ? biz.bill_date : '';
      if (biz.bill_type !== 'trade') throw acq('ACQ.INVALID_PARAMETER', '参数无效: bill_type (模拟器只提供trade)');
      if (!/^\d{4}-\d{2}-\d{2}$/.test(day)) throw acq('ACQ.INVALID_PARAMETER', '参数无效: bill_date');
      if (day >= shanghaiDateTime(now()).slice(0, 10)) throw acq('ACQ.INVALID_PARAMETER', '不支持下载当日或之后的账单');
      const rows: BillRow[] = [];
      const sameDay = (d: Date | null) => d !== null && shanghaiDateTime(d).slice(0, 10) === day;
      for (const t of trades.values()) {
        if (sameDay(t.paidAt)) {
          rows.push({
            tradeNo: t.tradeNo!,
            outTradeNo: t.outTradeNo,
            type: '交易',
            subject: t.subject,
            createdAt: shanghaiDateTime(t.createdAt),
            finishedAt: shanghaiDateTime(t.paidAt!),
            amount: fenToYuan(t.totalFen),
            requestNo: '',
          });
        }
        for (const r of t.refunds.values()) {
          if (!sameDay(r.gmtRefund)) continue;
          rows.push({
            tradeNo: t.tradeNo!,
            outTradeNo: t.outTradeNo,
            type: '退款',
            subject: t.subject,
            createdAt: shanghaiDateTime(t.createdAt),
            finishedAt: shanghaiDateTime(r.gmtRefund!),
            amount: `-${fenToYuan(r.amountFen)}`,
            requestNo: r.outRequestNo,
          });
        }
      }
      if (rows.length === 0) throw new GatewayError('40004', 'isp.bill_not_exist', '账单不存在');
      const token = randomBytes(24).toString('base64url');
      bills.set(token, { zip: billArchive('2088000000000001', day, rows), until: now().getTime() + 30_000 });
      return { bill_download_url: `${base}/bill/${token}` };
    },

    async 'alipay.trade.fastpay.refund.query'(biz) {
      const t = find(biz);
      if (!t) throw acq('ACQ.TRADE_NOT_EXIST', '交易不存在');
      const requestNo = typeof biz.out_request_no === 'string' && biz.out_request_no !== '' ? biz.out_request_no : t.outTradeNo;
      const r = t.refunds.get(requestNo);
      const head = { ...(t.tradeNo ? { trade_no: t.tradeNo } : {}), out_trade_no: t.outTradeNo };
      // A refund Alipay does not know: 10000 without the refund's fields.
      if (!r) return head;
      return {
        ...head,
        out_request_no: r.outRequestNo,
        total_amount: fenToYuan(t.totalFen),
        refund_amount: fenToYuan(r.amountFen),
        ...(r.reason ? { refund_reason: r.reason } : {}),
        ...(r.settled ? { refund_status: 'REFUND_SUCCESS', gmt_refund_pay: shanghaiDateTime(r.gmtRefund!) } : {}),
      };
    },
  };

  // ---------------------------------------------------------------- HTTP

  function send(res: http.ServerResponse, status: number, contentType: string, body: string, headers: Record<string, string> = {}): void {
    res.writeHead(status, { 'content-type': contentType, 'cache-control': 'no-store', ...headers });
    res.end(body);
  }

  /**
   * A signed answer, written as Alipay writes it (`/` escaped as `\/`): the signature covers the
   * exact text of the response member.
   */
  function answerText(method: string | null, payload: Record<string, unknown>, variant: SimFault['kind'] | null): string {
    const key = method === null ? 'error_response' : `${method.replaceAll('.', '_')}_response`;
    const plain = JSON.stringify(payload);
    const inner = plain.replaceAll('/', '\\/');
    let sign = signAlipay(variant === 'slashVariant' ? plain : inner);
    if (variant === 'badSignature') sign = signAlipay(`${inner} `);
    const members = [`"${key}":${inner}`];
    if (certs) members.push(`"alipay_cert_sn":"${certs.alipay.sn}"`);
    if (variant !== 'unsigned') members.push(`"sign":"${sign}"`);
    return `{${members.join(',')}}`;
  }

  function errorPayload(e: GatewayError): Record<string, unknown> {
    return { code: e.code, msg: MSG[e.code] ?? 'Business Failed', sub_code: e.subCode, sub_msg: e.subMsg };
  }

  async function readBody(req: http.IncomingMessage): Promise<Buffer | null> {
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const c of req as AsyncIterable<Buffer>) {
      size += c.length;
      if (size > MAX_REQUEST_BYTES) return null;
      chunks.push(c);
    }
    return Buffer.concat(chunks);
  }

  /** Parameters from the query string and a form body; a name given twice is refused. */
  function paramsOf(url: URL, body: Buffer, contentType: string | undefined): Record<string, string> | null {
    const p: Record<string, string> = {};
    const sources = [url.searchParams];
    if (body.length > 0 && (contentType ?? '').toLowerCase().startsWith('application/x-www-form-urlencoded')) {
      sources.push(new URLSearchParams(body.toString('utf8')));
    }
    for (const s of sources) {
      for (const [k, v] of s) {
        if (Object.hasOwn(p, k)) return null;
        p[k] = v;
      }
    }
    return p;
  }

  function takeFault(method: string): SimFault | null {
    const list = faults.get(method);
    return list && list.length > 0 ? list.shift()! : null;
  }

  async function gateway(req: http.IncomingMessage, res: http.ServerResponse, url: URL): Promise<void> {
    const body = await readBody(req);
    const p = body === null ? null : paramsOf(url, body, req.headers['content-type']);
    const method = p?.method ?? '';
    counts.set(method, (counts.get(method) ?? 0) + 1);
    if (method === PAGE_METHOD) return wapPay(req, res, p!);
    const known = (SIMULATED_METHODS as readonly string[]).includes(method) ? (method as SimulatedMethod) : null;
    const reply = (payload: Record<string, unknown>, variant: SimFault['kind'] | null = null) =>
      send(res, 200, 'application/json;charset=utf-8', answerText(known, payload, variant));
    if (p === null) return reply(errorPayload(new GatewayError('40002', 'isv.invalid-parameter', '参数重复或请求过大')));
    if (!p.method) return reply(errorPayload(new GatewayError('40001', 'isv.missing-method', '缺少方法名参数')));
    if (!known) return reply(errorPayload(new GatewayError('40002', 'isv.invalid-method', '不存在的方法名')));
    try {
      checkRequest(p);
    } catch (e) {
      if (e instanceof GatewayError) return reply(errorPayload(e));
      throw e;
    }
    const fault = takeFault(known);
    if (fault?.kind === 'drop') {
      // Lost on the way in: nothing done; the connection is held until the client gives up.
      held.add(res);
      res.on('close', () => held.delete(res));
      later(holdMs, () => res.destroy());
      return;
    }
    if (fault?.kind === 'delay') await new Promise((r) => setTimeout(r, fault.ms));
    if (fault?.kind === 'business') {
      return reply({
        code: fault.code,
        msg: MSG[fault.code] ?? 'Business Failed',
        ...(fault.subCode ? { sub_code: fault.subCode, sub_msg: fault.subMsg ?? fault.subCode } : {}),
      });
    }
    if (fault?.kind === 'http' && !fault.doWork) return send(res, fault.status, 'text/html', `<html><body>${fault.status}</body></html>`);
    let payload: Record<string, unknown>;
    try {
      payload = { code: '10000', msg: 'Success', ...(await handlers[known](bizOf(p), p, fault)) };
    } catch (e) {
      if (!(e instanceof GatewayError)) throw e;
      payload = errorPayload(e);
    }
    if (fault?.kind === 'http') return send(res, fault.status, 'text/html', `<html><body>${fault.status}</body></html>`);
    if (fault?.kind === 'timeout') {
      // Done, but the answer never comes: the connection is held until the client gives up.
      held.add(res);
      res.on('close', () => held.delete(res));
      later(holdMs, () => res.destroy());
      return;
    }
    reply(payload, fault?.kind ?? null);
  }

  /**
   * alipay.trade.wap.pay, opened by the buyer's browser: the payment page, or Alipay's error page.
   * Inside WeChat (its User-Agent) nothing: WeChat blocks Alipay's pages, so a buyer there never
   * reaches one (the merchant's page must not send them).
   */
  function wapPay(req: http.IncomingMessage, res: http.ServerResponse, p: Record<string, string>): void {
    if (/MicroMessenger\//i.test(req.headers['user-agent'] ?? '')) {
      return send(res, 403, 'text/html;charset=utf-8', messagePage('Blocked', '微信内无法打开支付宝页面 (WeChat blocks Alipay pages).'));
    }
    try {
      checkRequest(p);
      const biz = bizOf(p);
      const t = tradeFor(tradeFields(biz), p.notify_url || null, 'buyer');
      const quitUrl = typeof biz.quit_url === 'string' ? biz.quit_url : null;
      showBuyerPage(res, t, p.return_url || null, quitUrl);
    } catch (e) {
      if (!(e instanceof GatewayError)) throw e;
      send(res, 200, 'text/html;charset=utf-8', errorPage(e.code, e.subCode, e.subMsg));
    }
  }

  function showBuyerPage(res: http.ServerResponse, t: Trade, returnUrl: string | null, quitUrl: string | null): void {
    const session = randomBytes(16).toString('base64url');
    sessions.set(session, { outTradeNo: t.outTradeNo, returnUrl, quitUrl });
    send(
      res,
      200,
      'text/html;charset=utf-8',
      buyerPage({
        session,
        subject: t.subject,
        totalAmount: fenToYuan(t.totalFen),
        outTradeNo: t.outTradeNo,
        tradeNo: t.tradeNo,
        status: t.status,
        quitUrl,
      }),
    );
  }

  /** The signed parameters Alipay appends to return_url after a mobile-web payment. */
  function returnParams(t: Trade): Record<string, string> {
    const p: Record<string, string> = {
      charset: 'utf-8',
      out_trade_no: t.outTradeNo,
      method: 'alipay.trade.wap.pay.return',
      total_amount: fenToYuan(t.totalFen),
      trade_no: t.tradeNo!,
      auth_app_id: appId,
      version: '1.0',
      app_id: appId,
      seller_id: '2088000000000001',
      timestamp: shanghaiDateTime(now()),
      sign_type: 'RSA2',
    };
    p.sign = signAlipay(signContent(p, false));
    return p;
  }

  async function buyer(req: http.IncomingMessage, res: http.ServerResponse, session: string, action: string): Promise<void> {
    const s = sessions.get(session);
    const t = s ? trades.get(s.outTradeNo) : undefined;
    if (!s || !t) return send(res, 404, 'text/html;charset=utf-8', messagePage('Not found', 'This payment page has expired.'));
    counts.set(PAGE_METHOD, (counts.get(PAGE_METHOD) ?? 0) + 1);
    if (action === 'quit' && req.method === 'GET') {
      return s.quitUrl
        ? send(res, 302, 'text/plain', '', { location: s.quitUrl })
        : send(res, 200, 'text/html;charset=utf-8', messagePage('Quit', 'No quit_url.'));
    }
    if (req.method !== 'POST') return send(res, 405, 'text/plain', 'POST');
    await expireIfDue(t);
    if (t.status !== 'WAIT_BUYER_PAY') return showBuyerPage(res, t, s.returnUrl, s.quitUrl);
    if (action === 'fail') {
      sim.fail(t.outTradeNo);
      return send(
        res,
        200,
        'text/html;charset=utf-8',
        messagePage('Payment failed', 'The payment failed; the trade is still open and can be paid.'),
      );
    }
    await payTrade(t);
    if (s.returnUrl) {
      const target = new URL(s.returnUrl);
      for (const [k, v] of Object.entries(returnParams(t))) target.searchParams.set(k, v);
      return send(res, 302, 'text/plain', '', { location: target.toString() });
    }
    send(res, 200, 'text/html;charset=utf-8', messagePage('Paid', `Paid ¥${fenToYuan(t.totalFen)}.`));
  }

  async function jsonBody(req: http.IncomingMessage): Promise<Record<string, unknown>> {
    const b = await readBody(req);
    if (!b || b.length === 0) return {};
    const v = JSON.parse(b.toString('utf8')) as unknown;
    return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : {};
  }

  /** The control API under /__sim/ (JSON): the same levers as the in-process ones. */
  async function control(req: http.IncomingMessage, res: http.ServerResponse, path: string[]): Promise<void> {
    const json = (status: number, v: unknown) => send(res, status, 'application/json', JSON.stringify(v));
    const [what, id, action] = path;
    try {
      if (what === undefined && req.method === 'GET') {
        return json(200, { appId, gatewayUrl: `${base}/gateway.do`, alipayPublicKeyPem: keys.alipayPublicKeyPem, certSns: sim.certSns });
      }
      if (what === 'trades' && id !== undefined && action === undefined && req.method === 'GET') {
        const v = sim.trade(id);
        return v ? json(200, v) : json(404, { error: 'no such trade' });
      }
      if (what === 'trades' && id !== undefined && req.method === 'POST') {
        if (action === 'pay') return json(200, await sim.pay(id));
        if (action === 'fail') return json(200, (sim.fail(id), {}));
        if (action === 'scan') return json(200, (sim.scan(id), {}));
        if (action === 'expire') return json(200, (await sim.expire(id), {}));
      }
      if (what === 'faults' && req.method === 'POST') {
        const b = await jsonBody(req);
        if (!(SIMULATED_METHODS as readonly string[]).includes(String(b.method)))
          return json(400, { error: `method must be one of ${SIMULATED_METHODS.join(', ')}` });
        sim.programFault(b.method as SimulatedMethod, b.fault as SimFault, typeof b.times === 'number' ? b.times : 1);
        return json(200, {});
      }
      if (what === 'faults' && req.method === 'DELETE') return json(200, (sim.clearFaults(), {}));
      if (what === 'faults' && req.method === 'GET') return json(200, Object.fromEntries(faults));
      if (what === 'notifications' && id === undefined && req.method === 'GET') {
        return json(
          200,
          sent.map((n) => ({ ...n, rawBody: n.rawBody.toString('utf8') })),
        );
      }
      if (what === 'notifications' && req.method === 'POST') {
        const b = await jsonBody(req);
        const count = typeof b.count === 'number' ? b.count : 1;
        if (id === 'delay') return json(200, (sim.delayNotifications(Number(b.ms ?? 0), count), {}));
        if (id === 'duplicate') return json(200, (sim.duplicateNotifications(count), {}));
        if (id === 'lose') return json(200, (sim.loseNotifications(count), {}));
      }
      json(404, { error: 'no such control' });
    } catch (e) {
      json(409, { error: (e as Error).message });
    }
  }

  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://simulator.invalid');
    const parts = url.pathname.split('/').filter((s) => s !== '');
    const handle = async () => {
      if (url.pathname === '/gateway.do' && (req.method === 'POST' || req.method === 'GET')) return gateway(req, res, url);
      if (parts[0] === 'qr' && parts[1] && req.method === 'GET') {
        const t = byQr.get(parts[1]);
        if (!t) return send(res, 404, 'text/html;charset=utf-8', messagePage('Not found', 'No such QR code.'));
        counts.set('qr', (counts.get('qr') ?? 0) + 1);
        await expireIfDue(t);
        if (t.status === 'WAIT_BUYER_PAY') makeVisible(t);
        return showBuyerPage(res, t, null, null);
      }
      if (parts[0] === 'buyer' && parts[1] && parts[2]) return buyer(req, res, parts[1], parts[2]);
      if (parts[0] === 'bill' && parts[1] && req.method === 'GET') {
        const b = bills.get(parts[1]);
        // Alipay's own page for an address used too late: 下载超时，请重新下载.
        if (!b || now().getTime() > b.until)
          return send(res, 200, 'text/html;charset=utf-8', messagePage('下载超时', '下载超时，请重新下载'));
        res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-disposition': 'attachment; filename=bill.csv.zip' });
        return void res.end(b.zip);
      }
      if (parts[0] === '__sim') return control(req, res, parts.slice(1));
      send(res, 404, 'text/plain', 'not found');
    };
    handle().catch((err) => {
      log(`simulator error: ${(err as Error).stack ?? String(err)}`);
      if (!res.headersSent) send(res, 500, 'text/plain', 'simulator error');
    });
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 0, opts.host ?? '127.0.0.1', () => resolve());
  });
  const addr = server.address() as AddressInfo;
  const host = addr.family === 'IPv6' ? `[${addr.address}]` : addr.address;
  base = (opts.publicBaseUrl ?? `http://${host}:${addr.port}`).replace(/\/+$/, '');

  // Trades time out by themselves, as at Alipay (and are notified TRADE_CLOSED).
  const sweep = setInterval(() => {
    for (const t of trades.values()) void expireIfDue(t);
  }, 1000);
  sweep.unref();

  function mustTrade(outTradeNo: string): Trade {
    const t = trades.get(outTradeNo);
    if (!t) throw new Error(`alipay simulator: no trade ${outTradeNo}`);
    return t;
  }

  const sim: AlipaySimulator = {
    url: base,
    gatewayUrl: `${base}/gateway.do`,
    appId,
    keys,
    certSns: certs ? { appCertSn: certs.app.sn, alipayCertSn: certs.alipay.sn, alipayRootCertSn: certs.root.sn } : null,
    async pay(outTradeNo) {
      const t = mustTrade(outTradeNo);
      await expireIfDue(t);
      if (t.status !== 'WAIT_BUYER_PAY') throw new Error(`alipay simulator: trade ${outTradeNo} is ${t.status}, it cannot be paid`);
      await payTrade(t);
      return { tradeNo: t.tradeNo! };
    },
    fail(outTradeNo) {
      const t = mustTrade(outTradeNo);
      if (t.status !== 'WAIT_BUYER_PAY') throw new Error(`alipay simulator: trade ${outTradeNo} is ${t.status}`);
      makeVisible(t);
    },
    scan(outTradeNo) {
      const t = mustTrade(outTradeNo);
      if (t.status === 'WAIT_BUYER_PAY') makeVisible(t);
    },
    async expire(outTradeNo) {
      const t = mustTrade(outTradeNo);
      if (t.status !== 'WAIT_BUYER_PAY') throw new Error(`alipay simulator: trade ${outTradeNo} is ${t.status}`);
      await closeTrade(t);
    },
    trade(outTradeNo) {
      const t = trades.get(outTradeNo);
      return t ? view(t) : null;
    },
    programFault(method, fault, times = 1) {
      const list = faults.get(method) ?? [];
      for (let i = 0; i < times; i++) list.push(fault);
      faults.set(method, list);
    },
    clearFaults() {
      faults.clear();
    },
    notifications: () => sent,
    delayNotifications(ms, count = 1) {
      delayNext = { ms, count };
    },
    duplicateNotifications(count = 1) {
      duplicateNext = count;
    },
    loseNotifications(count = 1) {
      loseNext = count;
    },
    requestCount: (method) => counts.get(method) ?? 0,
    async close() {
      closed = true;
      clearInterval(sweep);
      for (const t of timers) clearTimeout(t);
      timers.clear();
      for (const r of held) r.destroy();
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
    },
  };
  return sim;
}
