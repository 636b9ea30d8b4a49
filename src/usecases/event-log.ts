/**
 * The merchant's event log (docs/events.md, "Your event log"): the app's events with their
 * delivery attempts, and a request to deliver one again (the same event, signed as any delivery,
 * through the outbox's own schedule). Scoped to the calling app: another app's event, like a
 * malformed id, is the neutral NOT_FOUND.
 */
import { DomainError } from '../domain/errors.ts';
import { EVENT_ID_RE, type EventQuery } from '../domain/event-log.ts';
import { transition } from '../domain/states.ts';
import { type Tx, withTx } from '../store/db.ts';
import * as events from '../store/events.ts';
import { type Caller, type UseCaseDeps, nowOf } from './deps.ts';
import type { EventDetail, EventPage, EventRedelivery } from './results.ts';

/** A merchant may ask for one event again once a minute, and for at most 20 events of an app a minute. */
export const REDELIVERY_LIMITS = { minIntervalMs: 60_000, perAppWindowMs: 60_000, perAppMax: 20 } as const;
/** The delivery attempts shown with one event: the latest 50 (a dead event has 13; redeliveries add more). */
export const EVENT_DELIVERIES_SHOWN = 50;

export async function listEvents(d: UseCaseDeps, caller: Caller, q: EventQuery): Promise<EventPage> {
  // One more than asked tells whether a next page exists.
  const rows = await events.listAppEvents(d.db, { appId: caller.app.id, ...q, before: q.after, limit: q.limit + 1 });
  const page = rows.slice(0, q.limit);
  const last = page[page.length - 1];
  return { kind: 'event-page', events: page, next: rows.length > q.limit && last ? { at: last.createdAt, eventId: last.eventId } : null };
}

export async function getEvent(d: UseCaseDeps, caller: Caller, eventId: string): Promise<EventDetail> {
  if (!EVENT_ID_RE.test(eventId)) throw new DomainError('NOT_FOUND');
  const found = await events.getAppEvent(d.db, caller.app.id, eventId, EVENT_DELIVERIES_SHOWN);
  if (!found) throw new DomainError('NOT_FOUND');
  return { kind: 'event', ...found };
}

/** Rate-limited (REDELIVERY_LIMITS): 429 OPEN_API_RATE_LIMITED with Retry-After, as the gate's rate limit answers. */
export async function redeliverEvent(d: UseCaseDeps, caller: Caller, eventId: string): Promise<EventRedelivery> {
  if (!EVENT_ID_RE.test(eventId)) throw new DomainError('NOT_FOUND');
  const r = await withTx(d.db, (tx) => requestRedelivery(tx, caller.app.id, eventId, nowOf(d)));
  if (r.outcome === 'NOT_FOUND') throw new DomainError('NOT_FOUND');
  if (r.outcome === 'TOO_SOON') {
    throw new DomainError('RATE_LIMITED', 'Redelivery is limited to one request per event a minute and 20 events of an app a minute.', {
      retryAfterSeconds: Math.max(1, Math.ceil(r.retryAfterMs / 1000)),
    });
  }
  d.wakeWorkers();
  return { kind: 'event-redelivery', eventId, nextAttemptAt: r.nextAttemptAt };
}

export type RedeliveryOutcome =
  { outcome: 'QUEUED'; nextAttemptAt: Date } | { outcome: 'NOT_FOUND' } | { outcome: 'TOO_SOON'; retryAfterMs: number };

/**
 * The merchant asks for an event of its app to be delivered again (the open API's event log, the
 * portal), within REDELIVERY_LIMITS, in the caller's transaction: the event locked and its state
 * read; a delivered or dead one goes back to the queue, a transition to PENDING from that state,
 * with a fresh schedule; a pending one stays PENDING, made due now.
 */
export async function requestRedelivery(tx: Tx, appId: string, eventId: string, now: Date): Promise<RedeliveryOutcome> {
  const c = await events.checkRedelivery(tx, appId, eventId, now, REDELIVERY_LIMITS);
  if (c.outcome !== 'ALLOWED') return c;
  const move = c.status === 'PENDING' ? null : transition('delivery', 'redeliver event', c.status, 'PENDING');
  const nextAttemptAt = await events.redeliver(tx, eventId, move, now);
  if (nextAttemptAt === null) throw new Error(`event ${eventId} changed under its lock`);
  return { outcome: 'QUEUED', nextAttemptAt };
}
