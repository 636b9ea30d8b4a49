/**
 * The merchant's event log (docs/events.md, "Your event log"): the query of a list and its cursor.
 * Pure: no I/O.
 */
import type { EventType } from './events.ts';
import { parseInstant } from './clock.ts';
import { invalidQuery } from './errors.ts';

export const EVENT_TYPES: readonly EventType[] = [
  'PAYMENT_SUCCEEDED',
  'PAYMENT_CLOSED',
  'PAYMENT_FAILED',
  'REFUND_SUCCEEDED',
  'REFUND_FAILED',
];
export const DELIVERY_STATUSES = ['PENDING', 'DELIVERED', 'DEAD'] as const;
export type DeliveryStatus = (typeof DELIVERY_STATUSES)[number];

export const EVENT_PAGE_DEFAULT = 20;
export const EVENT_PAGE_MAX = 100;

/** The form of an event id (`evt_` and lower-case base32): anything else names no event. */
export const EVENT_ID_RE = /^evt_[0-9a-z]{10,40}$/;

/** Where a page ended: the next one starts after this event (newest first). */
export interface EventCursor {
  at: Date;
  eventId: string;
}

export interface EventQuery {
  type: EventType | null;
  status: DeliveryStatus | null;
  from: Date | null;
  to: Date | null;
  after: EventCursor | null;
  limit: number;
}

/** An RFC 3339 instant, each field within its range (hour 00-23, a day its month has). */
function instant(name: string, value: string): Date {
  const t = parseInstant(value);
  if (t === null) throw invalidQuery(name, `${name} must be an RFC 3339 time, e.g. 2026-11-22T08:30:00.000Z.`);
  return new Date(t);
}

/** The cursor as the merchant sees it: opaque (base64url of the last event's time and id). */
export function encodeCursor(c: EventCursor): string {
  return Buffer.from(`${c.at.toISOString()}|${c.eventId}`, 'utf8').toString('base64url');
}

function decodeCursor(value: string): EventCursor {
  const text = /^[A-Za-z0-9_-]{1,200}$/.test(value) ? Buffer.from(value, 'base64url').toString('utf8') : '';
  const m = /^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z)\|(evt_[0-9a-z]{10,40})$/.exec(text);
  // Each field in its range (a day its month has not is no cursor this service gave).
  const at = m ? (parseInstant(m[1]!) ?? NaN) : NaN;
  if (!m || Number.isNaN(at))
    throw invalidQuery('cursor', 'cursor is not one this service gave (use nextCursor of the previous page as it is).');
  return { at: new Date(at), eventId: m[2]! };
}

/**
 * The list's query: type, status (of delivery), from (inclusive) and to (exclusive), limit 1-100
 * (default 20), cursor; each at most once, nothing else (400 OPEN_API_BODY_INVALID naming it).
 */
export function parseEventQuery(search: URLSearchParams): EventQuery {
  const q: EventQuery = { type: null, status: null, from: null, to: null, after: null, limit: EVENT_PAGE_DEFAULT };
  const seen = new Set<string>();
  for (const [name, value] of search) {
    if (seen.has(name)) throw invalidQuery(name, `The query parameter ${name} is given more than once.`);
    seen.add(name);
    switch (name) {
      case 'type':
        if (!(EVENT_TYPES as readonly string[]).includes(value)) throw invalidQuery(name, `type must be one of ${EVENT_TYPES.join(', ')}.`);
        q.type = value as EventType;
        break;
      case 'status':
        if (!(DELIVERY_STATUSES as readonly string[]).includes(value)) {
          throw invalidQuery(name, `status must be one of ${DELIVERY_STATUSES.join(', ')}.`);
        }
        q.status = value as DeliveryStatus;
        break;
      case 'from':
        q.from = instant(name, value);
        break;
      case 'to':
        q.to = instant(name, value);
        break;
      case 'limit':
        if (!/^[0-9]{1,3}$/.test(value) || Number(value) < 1 || Number(value) > EVENT_PAGE_MAX) {
          throw invalidQuery(name, `limit must be an integer from 1 to ${EVENT_PAGE_MAX}.`);
        }
        q.limit = Number(value);
        break;
      case 'cursor':
        q.after = decodeCursor(value);
        break;
      default:
        throw invalidQuery(name, `Unknown query parameter ${name}; they are type, status, from, to, limit and cursor.`);
    }
  }
  if (q.from !== null && q.to !== null && q.from.getTime() >= q.to.getTime()) throw invalidQuery('to', 'to must be later than from.');
  return q;
}
