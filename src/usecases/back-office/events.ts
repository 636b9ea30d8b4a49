/** The back office's events: the outbox's list, an event with its deliveries, and redelivery. */
import { DomainError } from '../../domain/errors.ts';
import type { Actor } from '../../domain/operators.ts';
import * as events from '../../store/events.ts';
import * as merchants from '../../store/merchants.ts';
import { audited } from '../audit.ts';
import { nowOf } from '../deps.ts';
import { type BackOfficeDeps, notFound } from './common.ts';

export function listEvents(d: BackOfficeDeps, f: { status: string | null; appId: string | null; limit: number }) {
  return events.listEvents(d.db, f);
}

export async function eventDetail(d: BackOfficeDeps, eventId: string) {
  const e = await events.getEventWithDeliveries(d.db, eventId);
  if (!e) throw notFound('event');
  return e;
}

/** Redelivery of a dead or delivered event: it goes back to the queue, due now by the dispatcher's clock. */
export async function redeliverEvent(d: BackOfficeDeps, actor: Actor, eventId: string): Promise<void> {
  await audited(d, actor, async (tx, record) => {
    const before = await events.getEventWithDeliveries(tx, eventId);
    const r = await events.requeueEvent(tx, eventId, nowOf(d));
    if (r === 'NOT_FOUND') throw notFound('event');
    if (r === 'ALREADY_QUEUED') throw new DomainError('STATE_INVALID', 'the event is already queued for delivery');
    await record({
      action: 'event.redeliver',
      entityType: 'event',
      entityId: eventId,
      before: { status: before!.event.status, attempts: before!.event.attempts },
      after: { status: 'PENDING', attempts: 0 },
      merchantId: (await merchants.getApp(tx, before!.event.appId))?.merchantId ?? null,
    });
  });
  d.wakeWorkers();
}
