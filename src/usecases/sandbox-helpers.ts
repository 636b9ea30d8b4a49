/**
 * The sandbox provider's test levers that involve the service's own orders (decisions.md section
 * 8): the buyer pays or fails an order's attempt, the provider closes it of itself, an
 * order's payment window ends now, and an event's next delivery attempt is its last.
 */
import { DomainError } from '../domain/errors.ts';
import type { BuyerAction, SandboxProvider } from '../providers/sandbox/sandbox.ts';
import { MAX_ATTEMPTS } from '../events/dispatcher.ts';
import * as events from '../store/events.ts';
import * as jobs from '../store/jobs.ts';
import * as orders from '../store/orders.ts';
import { tradeNosOfOrder } from '../store/trades.ts';
import { type UseCaseDeps, nowOf } from './deps.ts';

/**
 * The buyer acts on the order's given attempt, or its latest payable one, or the provider closes it
 * (CLOSE: the order is then CLOSED with closedReason PROVIDER_CLOSED when it was the latest).
 * Answers the order's status after the provider's notice.
 */
export async function sandboxBuyerAction(
  d: UseCaseDeps,
  sandbox: SandboxProvider,
  orderId: string,
  action: BuyerAction,
  attemptId?: string,
): Promise<{ orderId: string; attemptId: string; status: string }> {
  // The order and its attempts, in one read.
  const rec = await d.records.read('order', orderId);
  if (!rec) throw new DomainError('NOT_FOUND', undefined, { entity: 'order' });
  const { order, attempts: all } = rec;
  const target =
    attemptId !== undefined
      ? all.find((a) => a.id === attemptId)
      : [...all].reverse().find((a) => a.state === 'ACCEPTED' || a.state === 'UNKNOWN');
  if (!target) throw new DomainError('STATE_INVALID', 'the order has no attempt the buyer can pay');
  const r = await sandbox.buyerAction(target.id, action);
  if (r === 'NOT_FOUND') throw new DomainError('STATE_INVALID', 'the provider has no payment for this attempt');
  if (r === 'NOT_OPEN') throw new DomainError('STATE_INVALID', 'the payment is no longer open at the provider');
  if (r === 'EXPIRED') throw new DomainError('STATE_INVALID', 'the payment window has ended: the buyer can no longer pay');
  const fresh = (await d.records.read('order', order.id))!.order;
  return { orderId: fresh.id, attemptId: target.id, status: fresh.status };
}

/** Ends the order's payment window now, at the provider too (its EXPIRE_ORDER job, due now, then closes it). */
export async function sandboxEndPaymentWindow(d: UseCaseDeps, sandbox: SandboxProvider, orderId: string): Promise<void> {
  const ended = await orders.endPaymentWindow(d.db, orderId, nowOf(d));
  if (!ended) {
    if (!(await orders.getOrder(d.db, orderId))) throw new DomainError('NOT_FOUND', undefined, { entity: 'order' });
    throw new DomainError('STATE_INVALID', 'the order is not open');
  }
  // The attempts' own payments and their trades' (JSAPI, Native).
  await sandbox.expirePayments([...ended.attemptIds, ...(await tradeNosOfOrder(d.db, orderId))], ended.expireAt);
  await jobs.schedule(d.db, 'EXPIRE_ORDER', orderId, nowOf(d));
  d.wakeWorkers();
}

/**
 * The event's next delivery attempt is the last of its schedule (the 13th), due now: if the
 * receiver fails it, the event is DEAD at once instead of some 48 hours later. Only for a PENDING
 * event whose attempt is not in flight.
 */
export async function sandboxLastDeliveryAttempt(d: UseCaseDeps, eventId: string): Promise<void> {
  if (await events.makeNextAttemptLast(d.db, eventId, MAX_ATTEMPTS - 1, nowOf(d))) {
    d.wakeWorkers();
    return;
  }
  const status = await events.eventStatus(d.db, eventId);
  if (status === null) throw new DomainError('NOT_FOUND', undefined, { entity: 'event' });
  throw new DomainError(
    'STATE_INVALID',
    status === 'PENDING' ? 'an attempt of the event is in flight: ask again when it has ended' : `the event is ${status}, not PENDING`,
  );
}
