/**
 * The payment provider behind the service. Every call is identified by our own ids (attempt id,
 * refund id), so a repeated call is idempotent at the provider. A call either returns an outcome,
 * throws ProviderRejectedError (the provider said no: nothing happened), or throws
 * ProviderUncertainError (transport failure or timeout: it may or may not have happened; the
 * caller records UNKNOWN and the reconciler asks again later).
 */
import type { Channel } from '../domain/open-schemas.ts';

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

export interface CreateAttemptInput {
  attemptId: string;
  openOrderId: string;
  channel: Channel;
  amountFen: number;
  subject: string;
  expireAt: Date;
  payerClientIp: string;
}

/** Channel material: the official collection code for ALIPAY_H5, the JSAPI prepay id for WECHAT_H5. */
export interface PaymentMaterial {
  qrCode: string | null;
  prepayId: string | null;
}

export type CreateAttemptResult =
  { outcome: 'ACCEPTED'; providerRef: string; material: PaymentMaterial } | { outcome: 'PAID'; providerRef: string };

export type ProviderPaymentState = 'NOT_FOUND' | 'OPEN' | 'PAID' | 'CLOSED' | 'FAILED';

export interface PaymentQueryResult {
  state: ProviderPaymentState;
  providerRef: string | null;
  material: PaymentMaterial | null;
}

export type CloseResult = { outcome: 'CLOSED' } | { outcome: 'PAID' };

export interface RefundInput {
  refundId: string;
  paidAttemptId: string;
  amountFen: number;
}

export type RefundResult = { outcome: 'PENDING' | 'SUCCEEDED'; providerRef: string };
export type ProviderRefundState = 'NOT_FOUND' | 'PENDING' | 'SUCCEEDED' | 'FAILED';

export type ProviderNotification =
  | { kind: 'PAYMENT'; attemptId: string; state: 'PAID' | 'FAILED' | 'CLOSED'; reason: string | null }
  | { kind: 'REFUND'; refundId: string; state: 'SUCCEEDED' | 'FAILED'; reason: string | null };

/**
 * Who makes a call. `background`: the service's own background work (expiry, reconciliation,
 * closing stray attempts, refunding duplicate payments), not a request of the open API or the back
 * office. A real provider ignores it; the sandbox applies programmed faults only to the calls that
 * are not background, so that a fault programmed for a test's next call is not taken by a worker.
 */
export interface CallOptions {
  background?: boolean;
}

export interface PaymentProvider {
  readonly name: string;
  createAttempt(input: CreateAttemptInput): Promise<CreateAttemptResult>;
  queryPayment(attemptId: string): Promise<PaymentQueryResult>;
  /** Closes the payment if unpaid; NOT_FOUND counts as closed. Reports PAID when it was paid. */
  closePayment(attemptId: string, opts?: CallOptions): Promise<CloseResult>;
  refund(input: RefundInput, opts?: CallOptions): Promise<RefundResult>;
  queryRefund(refundId: string): Promise<ProviderRefundState>;
  /** Verifies and parses a notification the provider sent; throws ProviderNotificationError. */
  parseNotification(rawBody: Buffer, headers: Record<string, string | string[] | undefined>): Promise<ProviderNotification>;
}
