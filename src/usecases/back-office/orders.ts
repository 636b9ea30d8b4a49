/** The back office's orders: an order with everything about it, the operator's close, and the duplicate payments. */
import { DomainError } from '../../domain/errors.ts';
import type { Actor } from '../../domain/operators.ts';
import * as attempts from '../../store/attempts.ts';
import * as events from '../../store/events.ts';
import * as orders from '../../store/orders.ts';
import * as refunds from '../../store/refunds.ts';
import * as trades from '../../store/trades.ts';
import { recorder } from '../audit.ts';
import { closeOrderById } from '../close-order.ts';
import { nowOf } from '../deps.ts';
import type { CloseState } from '../results.ts';
import { type BackOfficeDeps, notFound } from './common.ts';

export async function orderDetail(d: BackOfficeDeps, orderId: string) {
  const order = await orders.getOrder(d.db, orderId);
  if (!order) throw notFound('order');
  const [attemptRows, refundRows, eventRows, duplicates, tradeRows] = await Promise.all([
    attempts.attemptsOf(d.db, order.id),
    refunds.refundsOfOrder(d.db, order.id),
    events.eventsOfOrder(d.db, order.id),
    refunds.duplicatesOfOrder(d.db, order.id),
    trades.tradesOfOrder(d.db, order.id),
  ]);
  return { order, attempts: attemptRows, refunds: refundRows, events: eventRows, duplicates, trades: tradeRows };
}

/** Back-office close: closedReason MERCHANT_CLOSED, same provider confirmation as the API close. */
export async function closeOrderByOperator(
  d: BackOfficeDeps,
  actor: Actor,
  orderId: string,
): Promise<{ closeState: CloseState; order: orders.OrderRow }> {
  const now = nowOf(d);
  try {
    return await closeOrderById(d, orderId, 'MERCHANT_CLOSED', {}, (tx, c) =>
      recorder(
        tx,
        actor,
        now,
      )({
        action: 'order.close',
        entityType: 'order',
        entityId: orderId,
        before: { status: c.before.status, closedReason: c.before.closedReason, closePending: null },
        after: { status: c.after.status, closedReason: c.after.closedReason, closePending: c.after.closePending },
        merchantId: c.before.merchantId,
      }),
    );
  } catch (err) {
    if (err instanceof DomainError && err.code === 'PROVIDER_REJECTED') {
      throw new DomainError('PROVIDER_REJECTED', 'the provider rejected the close; the order is unchanged');
    }
    throw err;
  }
}

export function listDuplicates(d: BackOfficeDeps) {
  return refunds.listDuplicates(d.db, 500);
}
