/**
 * The transactional outbox: an event row is written in the same transaction as the state change
 * it reports (decisions.md section 7). The payload has exactly the 13 fields of the seed.
 */
import { newId } from '../domain/ids.ts';
import type { Tx } from '../store/db.ts';
import type { OrderRow, RefundRow } from '../store/orders.ts';

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

/** Bumps the order's shared state counter (orders and their refunds) and returns the new value. */
export async function bumpStateVersion(tx: Tx, orderId: string): Promise<number> {
  const r = await tx.query<{ v: number }>(
    'UPDATE orders SET state_version = state_version + 1, updated_at = now() WHERE id = $1 RETURNING state_version AS v',
    [orderId],
  );
  return r.rows[0]!.v;
}

export async function writeEvent(
  tx: Tx,
  type: EventType,
  order: OrderRow,
  stateVersion: number,
  occurredAt: Date,
  refund?: RefundRow,
): Promise<string> {
  const id = newId.event();
  const isRefund = refund !== undefined;
  const payload: WebhookEventPayload = {
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
  await tx.query(
    `INSERT INTO events(id, app_id, order_id, refund_id, event_type, state_version, payload, next_attempt_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
    [id, order.appId, order.id, refund?.id ?? null, type, stateVersion, JSON.stringify(payload), occurredAt],
  );
  return id;
}
