/** The back office's events: the outbox's list, an event with its deliveries, and redelivery. */
import { DomainError } from '../../domain/errors.ts';
import type { Actor } from '../../domain/operators.ts';
import * as events from '../../store/events.ts';
import * as merchants from '../../store/merchants.ts';
import { audited } from '../audit.ts';
import { nowOf } from '../deps.ts';
import { moveInto } from '../state-moves.ts';
import { type BackOfficeDeps, notFound } from './common.ts';

export function listEvents(d: BackOfficeDeps, f: { status: string | null; appId: string | null; limit: number }) {
  return events.listEvents(d.db, f);
}

export async function eventDetail(d: BackOfficeDeps, eventId: string) {
  const e = await events.getEventWithDeliveries(d.db, eventId);
  if (!e) throw notFound('event');
  return e;
}

/**
 * Redelivery of a dead or delivered event: it goes back to the queue, due now by the dispatcher's
 * clock, a transition to PENDING from the state read (read again if it moved meanwhile); a
 * PENDING event is refused (already queued).
 */
export async function redeliverEvent(d: BackOfficeDeps, actor: Actor, eventId: string): Promise<void> {
  await audited(d, actor, async (tx, record) => {
    const before = await events.getEventWithDeliveries(tx, eventId);
    if (!before) throw notFound('event');
    const out = await moveInto(
      'delivery',
      'redeliver event',
      'PENDING',
      before.event.status,
      () => events.eventStatus(tx, eventId),
      (t) => events.requeueEvent(tx, eventId, t, nowOf(d)),
    );
    if (out.outcome === 'GONE') throw notFound('event');
    if (out.outcome !== 'MOVED') throw new DomainError('STATE_INVALID', 'the event is already queued for delivery');
    await record({
      action: 'event.redeliver',
      entityType: 'event',
      entityId: eventId,
      before: { status: out.from, attempts: before.event.attempts },
      after: { status: 'PENDING', attempts: 0 },
      merchantId: (await merchants.getApp(tx, before.event.appId))?.merchantId ?? null,
    });
  });
  d.wakeWorkers();
}
