/**
 * Event notifications (seed "Events", decisions.md section 7): which change produces which event,
 * and its payload, exactly the 13 fields of the seed. Pure: the store writes the event row in the
 * same transaction as the change it reports.
 */
import type { FeeProjection } from './money.ts';
import type { ClosedReason, OrderStatus, RefundState } from './states.ts';

export type EventType = 'PAYMENT_SUCCEEDED' | 'PAYMENT_CLOSED' | 'PAYMENT_FAILED' | 'REFUND_SUCCEEDED' | 'REFUND_FAILED';

export interface WebhookEventPayload {
  appId: string;
  attach: string | null;
  eventAmountFen: number;
  eventId: string;
  eventType: EventType;
  feeProjection: unknown;
  grossAmountFen: number;
  occurredAt: string;
  outRefundNo: string | null;
  outTradeNo: string;
  reason: string | null;
  stateVersion: number;
  status: string;
}

/** The event an order's new status reports, if any. */
export function orderEventType(status: OrderStatus): EventType | null {
  return status === 'SUCCEEDED'
    ? 'PAYMENT_SUCCEEDED'
    : status === 'CLOSED'
      ? 'PAYMENT_CLOSED'
      : status === 'FAILED'
        ? 'PAYMENT_FAILED'
        : null;
}

/** The event a refund's new state reports, if any. */
export function refundEventType(state: RefundState): EventType | null {
  return state === 'SUCCEEDED' ? 'REFUND_SUCCEEDED' : state === 'FAILED' ? 'REFUND_FAILED' : null;
}

export interface EventOrder {
  id: string;
  appId: string;
  outTradeNo: string;
  attach: string | null;
  amountFen: number;
  status: OrderStatus;
  closedReason: ClosedReason | null;
  failureReason: string | null;
  feeProjection: FeeProjection;
}

export interface EventRefund {
  id: string;
  outRefundNo: string;
  amountFen: number;
  state: RefundState;
  reason: string | null;
  failureReason: string | null;
}

export function eventPayload(
  id: string,
  type: EventType,
  order: EventOrder,
  stateVersion: number,
  occurredAt: Date,
  refund?: EventRefund,
): WebhookEventPayload {
  const isRefund = refund !== undefined;
  return {
    appId: order.appId,
    attach: order.attach,
    eventAmountFen: isRefund ? refund.amountFen : order.amountFen,
    eventId: id,
    eventType: type,
    feeProjection: type === 'PAYMENT_SUCCEEDED' ? order.feeProjection : null,
    grossAmountFen: order.amountFen,
    occurredAt: occurredAt.toISOString(),
    outRefundNo: isRefund ? refund.outRefundNo : null,
    outTradeNo: order.outTradeNo,
    reason: isRefund
      ? type === 'REFUND_FAILED'
        ? (refund.failureReason ?? refund.reason)
        : refund.reason
      : type === 'PAYMENT_CLOSED'
        ? order.closedReason
        : type === 'PAYMENT_FAILED'
          ? order.failureReason
          : null,
    stateVersion,
    status: isRefund ? refund.state : order.status,
  };
}
