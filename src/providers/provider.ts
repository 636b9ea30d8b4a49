/**
 * The payment provider behind a channel. Every call is identified by our own ids (attempt id,
 * refund id), so a repeated call is idempotent at the provider. A call either returns an outcome,
 * throws ProviderRejectedError (the provider said no: nothing happened), or throws
 * ProviderUncertainError (transport failure, timeout, or an answer that does not say: it may or may
 * not have happened; the caller records UNKNOWN and the provider check asks again later).
 *
 * Amounts are integer fen on both sides of this interface; an adapter converts to its provider's
 * unit exactly (never through a float). Answers carry the amount and currency the provider holds
 * where its protocol gives them, so the service can refuse an answer that does not match its own
 * record (docs/providers.md).
 */
import type { Channel } from '../domain/open-schemas.ts';
import type { StatementLine } from '../domain/reconciliation.ts';

export class ProviderRejectedError extends Error {
  override name = 'ProviderRejectedError';
  readonly reason: string;
  constructor(reason: string) {
    super(`provider rejected: ${reason}`);
    this.reason = reason;
  }
}

export class ProviderUncertainError extends Error {
  override name = 'ProviderUncertainError';
}

export class ProviderNotificationError extends Error {
  override name = 'ProviderNotificationError';
}

/**
 * A verified notice that changes nothing in the ledger but needs an operator (e.g. a refund the
 * provider holds because it could not reach the buyer): kept for the operator and acknowledged,
 * so that the provider stops sending it.
 */
export class ProviderNoticeForOperator extends ProviderNotificationError {
  override name = 'ProviderNoticeForOperator';
  /** What it is about: `REFUND_ABNORMAL`, ... */
  readonly kind: string;
  /** Our id it names (an attempt or refund id). */
  readonly subjectId: string;
  readonly details: Record<string, unknown>;
  constructor(kind: string, subjectId: string, message: string, details: Record<string, unknown> = {}) {
    super(message);
    this.kind = kind;
    this.subjectId = subjectId;
    this.details = details;
  }
}

export interface CreateAttemptInput {
  /** Our attempt id: the provider's merchant order number (out_trade_no). */
  attemptId: string;
  openOrderId: string;
  channel: Channel;
  amountFen: number;
  currency: 'CNY';
  subject: string;
  /** The payment must be made before this (the order's expireAt). */
  expireAt: Date;
  /** The buyer's public IP, passed on by the merchant (WeChat Pay's H5 needs it). */
  payerClientIp: string;
  /** Where the provider's page sends the buyer back to (the merchant's returnUrl, or the cashier). */
  returnUrl: string | null;
}

/**
 * Channel material handed to the buyer through the cashier: the official collection code
 * (`qrCode`, ALIPAY_H5 only) and the provider's own payment page the cashier sends the buyer to
 * (`redirectUrl`: Alipay's mobile-web payment page, WeChat Pay's `h5_url`; null for the sandbox,
 * whose buyer acts on the cashier page itself).
 */
export interface PaymentMaterial {
  qrCode: string | null;
  redirectUrl: string | null;
}

export type CreateAttemptResult =
  { outcome: 'ACCEPTED'; providerRef: string; material: PaymentMaterial } | { outcome: 'PAID'; providerRef: string };

/**
 * A provider trade of an attempt beyond its own (docs/providers.md, "Provider trades"): another
 * product of the same provider for the same payment, with its own merchant order number, made when
 * the cashier needs it. WeChat Pay: JSAPI (inside WeChat, for the buyer's openid: a prepay_id the
 * page hands to WeixinJSBridge) and NATIVE (a code_url shown as a QR code on a computer).
 */
export interface CreateTradeInput {
  /** The trade's number at the provider (out_trade_no), not the attempt's. */
  tradeNo: string;
  product: 'JSAPI' | 'NATIVE';
  /** JSAPI: the buyer's openid under the official account (from WeChat's web authorization). */
  payerOpenId: string | null;
  openOrderId: string;
  amountFen: number;
  currency: 'CNY';
  subject: string;
  expireAt: Date;
  payerClientIp: string;
}

/**
 * The material of a trade: JSAPI's prepay_id, NATIVE's code_url. An identical order (the same
 * number and parameters) answers the same material again, so a trade whose answer was lost gets it
 * by asking again.
 */
export type CreateTradeResult = { outcome: 'ACCEPTED'; material: string } | { outcome: 'PAID'; providerRef: string };

/** The parameters of WeChat's in-browser payment call (`getBrandWCPayRequest`), signed on the server. */
export interface JsapiPayment {
  appId: string;
  timeStamp: string;
  nonceStr: string;
  package: string;
  signType: 'RSA';
  paySign: string;
}

/**
 * WeChat's official-account web authorization (OAuth 2.0, silent `snsapi_base`): the address the
 * buyer's browser is sent to, and the server-side exchange of the code it comes back with for the
 * buyer's openid.
 */
export interface BuyerIdentity {
  authorizeUrl(redirectUri: string, state: string): string;
  /** The openid of a code (each code once, within 5 minutes); ProviderRejectedError for a code WeChat refuses. */
  openIdOf(code: string): Promise<string>;
}

export type ProviderPaymentState = 'NOT_FOUND' | 'OPEN' | 'PAID' | 'CLOSED' | 'FAILED';

export interface PaymentQueryResult {
  state: ProviderPaymentState;
  providerRef: string | null;
  material: PaymentMaterial | null;
  /** The amount the provider holds for this payment, in fen (null when NOT_FOUND or not given). */
  amountFen: number | null;
}

export type CloseResult = { outcome: 'CLOSED' } | { outcome: 'PAID' };

export interface RefundInput {
  /** Our refund id: the provider's refund request number (a retried refund is one refund). */
  refundId: string;
  /** The provider order that was paid (out_trade_no): the paid attempt's id, or the number of its trade that was paid. */
  paidAttemptId: string;
  amountFen: number;
  /** The whole payment's amount (WeChat Pay asks for it with every refund). */
  paymentAmountFen: number;
  reason: string | null;
}

export type RefundResult = { outcome: 'PENDING' | 'SUCCEEDED'; providerRef: string };
export type ProviderRefundState = 'NOT_FOUND' | 'PENDING' | 'SUCCEEDED' | 'FAILED';

export interface RefundQuery {
  refundId: string;
  paidAttemptId: string;
}

export interface RefundQueryResult {
  state: ProviderRefundState;
  /** The refund's amount at the provider, in fen (null when NOT_FOUND or not given). */
  amountFen: number | null;
}

/**
 * A verified notice. `amountFen` / `currency` / `providerRef`, when the provider's notice carries
 * them, are checked against our record before anything is applied.
 */
export type ProviderNotification =
  | {
      kind: 'PAYMENT';
      attemptId: string;
      state: 'PAID' | 'FAILED' | 'CLOSED';
      reason: string | null;
      amountFen?: number | null;
      currency?: string | null;
      providerRef?: string | null;
    }
  | {
      kind: 'REFUND';
      refundId: string;
      state: 'SUCCEEDED' | 'FAILED';
      reason: string | null;
      amountFen?: number | null;
      providerRef?: string | null;
    };

/** The HTTP answer a provider expects to a notification it sent (its own format). */
export interface NotificationAck {
  status: number;
  contentType: string;
  body: string;
}

/**
 * Who makes a call. `background`: the service's own background work (expiry, reconciliation,
 * closing stray attempts, refunding duplicate payments), not a request of the open API or the back
 * office. A real provider ignores it; the sandbox applies programmed faults only to the calls that
 * are not background, so that a fault programmed for a test's next call is not taken by a worker.
 */
export interface CallOptions {
  background?: boolean;
}

/** A line of a provider's statement of a day (src/domain/reconciliation.ts). */
export type ProviderStatementLine = StatementLine;

/** A provider statement is not available (yet): the reconciliation of that day is tried again later. */
export class StatementUnavailableError extends ProviderUncertainError {
  override name = 'StatementUnavailableError';
}

export interface PaymentProvider {
  /** Stable name, recorded with every attempt and refund it holds, and the notification path's last segment. */
  readonly name: string;
  /** The channels it can serve. */
  readonly channels: readonly Channel[];
  createAttempt(input: CreateAttemptInput): Promise<CreateAttemptResult>;
  /**
   * How long the page an attempt's `redirectUrl` names stays valid (WeChat Pay's h5_url: 5
   * minutes); older, the identical order is asked again for a fresh one. Absent: as long as the
   * attempt (Alipay's page is built locally).
   */
  readonly pageTtlMs?: number;
  /** The trade products it makes besides an attempt's own order (none when absent). */
  readonly tradeProducts?: readonly ('JSAPI' | 'NATIVE')[];
  /** Makes (or asks again for, identically) a trade of an attempt: ACCEPTED with its material, or PAID. */
  createTrade?(input: CreateTradeInput): Promise<CreateTradeResult>;
  /** The signed parameters of the in-WeChat payment call for a JSAPI trade's prepay_id. */
  jsapiPayment?(prepayId: string): JsapiPayment;
  /** WeChat's web authorization, when configured (JSAPI needs the buyer's openid). */
  readonly buyerIdentity?: BuyerIdentity | null;
  /**
   * The calls below take the provider's merchant order number (`attemptId`): an attempt's id, or a
   * trade's number (createTrade), which every one of them serves alike.
   */
  queryPayment(attemptId: string): Promise<PaymentQueryResult>;
  /** Closes the payment if unpaid; NOT_FOUND counts as closed. Reports PAID when it was paid. */
  closePayment(attemptId: string, opts?: CallOptions): Promise<CloseResult>;
  refund(input: RefundInput, opts?: CallOptions): Promise<RefundResult>;
  queryRefund(q: RefundQuery): Promise<RefundQueryResult>;
  /** Verifies and parses a notification the provider sent; throws ProviderNotificationError. */
  parseNotification(rawBody: Buffer, headers: Record<string, string | string[] | undefined>): Promise<ProviderNotification>;
  /**
   * The answer to a notification: `ok` when it was verified and applied (or is safely ignored),
   * so the provider stops sending it; otherwise the provider's failure answer, so it sends it again.
   */
  notificationAck(ok: boolean, message?: string): NotificationAck;
  /**
   * The provider's statement (bill) of an Asia/Shanghai day (YYYY-MM-DD): its payments and refunds,
   * streamed. Throws StatementUnavailableError while the provider has not made it yet, and
   * ProviderUncertainError when it cannot be fetched or read. Optional: a provider without one
   * is not reconciled.
   */
  downloadStatement?(day: string): Promise<AsyncIterable<ProviderStatementLine>>;
}
