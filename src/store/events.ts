/**
 * Repository: the transactional outbox of event notifications (decisions.md section 7) and its
 * delivery log. An event row is written in the same transaction as the state change it reports;
 * the dispatcher (src/events/dispatcher.ts) claims due events with a lease and records each
 * attempt, fenced by the lease's token.
 */
import type { EventType } from '../domain/events.ts';
import { TurnBatcher } from './batcher.ts';
import type { DeliveryState, Transition } from '../domain/states.ts';
import { type Db, type Queryable, type Tx } from './db.ts';

/** A failed delivery attempt, or a redelivery asked of a PENDING event, is no transition: recorded over a PENDING event, which it leaves PENDING. */
const RETRIED: DeliveryState = 'PENDING';

/** Due events read to find the apps with a due event before switching to one probe per app. */
const DUE_SAMPLE = 256;

/**
 * One claim (run as the function mps_claim_events, migrations/0012 and 0015, whose body is this text): $1 now, $2 per-app limit (the default), $3 events at most, $4 ids in flight here, $5
 * lease token, $6 lease end, $7/$8 apps with a limit of their own and those limits, $9 the largest
 * limit (what is read per app: a LIMIT the planner knows keeps each app's read an index probe). Not proportional to the backlog (migrations/0006): the apps with a due event come
 * from the due events when there are fewer than DUE_SAMPLE of them, else from one index probe per
 * app with a PENDING event; per such app its oldest ready events up to the per-app limit are read
 * in order (events_app_due); the leases held are counted from the few events that hold one
 * (events_leased). Due events held back by an earlier event of their order are still read past.
 */
export const CLAIM_SQL = `WITH RECURSIVE due_sample AS (
  -- The oldest due events, at most ${DUE_SAMPLE}: when there are fewer, their apps are exactly the
  -- apps with a due event, read from events_due at the cost of the due events alone.
  SELECT app_id FROM events WHERE status = 'PENDING' AND next_attempt_at <= $1 ORDER BY next_attempt_at LIMIT ${DUE_SAMPLE}
), pending_apps AS (
  -- Otherwise (a backlog of due events): each app with a PENDING event and its earliest
  -- next_attempt_at, one index probe per such app (a loose scan of events_app_due). Not run at all
  -- when the sample sufficed.
  (SELECT app_id, next_attempt_at FROM events WHERE status = 'PENDING' ORDER BY app_id, next_attempt_at LIMIT 1)
  UNION ALL
  SELECT n.app_id, n.next_attempt_at FROM pending_apps pa
   CROSS JOIN LATERAL (SELECT e.app_id, e.next_attempt_at FROM events e
                        WHERE e.status = 'PENDING' AND e.app_id > pa.app_id
                        ORDER BY e.app_id, e.next_attempt_at LIMIT 1) n
), due_apps AS (
  SELECT DISTINCT app_id FROM due_sample WHERE (SELECT count(*) FROM due_sample) < ${DUE_SAMPLE}
  UNION
  SELECT app_id FROM pending_apps WHERE next_attempt_at <= $1 AND (SELECT count(*) FROM due_sample) >= ${DUE_SAMPLE}
), busy AS (
  SELECT app_id, count(*)::int AS n FROM events
   WHERE status = 'PENDING' AND locked_until IS NOT NULL AND locked_until > $1 GROUP BY app_id
), ready AS (
  SELECT c.id, c.app_id, c.next_attempt_at, lim.n AS lim,
         row_number() OVER (PARTITION BY c.app_id ORDER BY c.next_attempt_at, c.id) AS rn
    FROM due_apps d
    -- The app's own limit when it has one, else the default.
    CROSS JOIN LATERAL (SELECT coalesce((SELECT l.n FROM unnest($7::text[], $8::int[]) AS l(app_id, n) WHERE l.app_id = d.app_id LIMIT 1), $2) AS n) lim
    LEFT JOIN busy b ON b.app_id = d.app_id
    CROSS JOIN LATERAL (
      SELECT e.id, e.app_id, e.next_attempt_at FROM events e
       WHERE e.app_id = d.app_id AND e.status = 'PENDING' AND e.next_attempt_at <= $1
         AND (e.locked_until IS NULL OR e.locked_until <= $1)
         AND e.id <> ALL($4::text[])
         -- The order's earlier events through events_order alone: a status test the partial
         -- indexes cannot answer (|| ''), else a young table's plan ANDs in all of the app's
         -- PENDING events (events_app_due) for every event read.
         AND NOT EXISTS (SELECT 1 FROM events p
                          WHERE p.order_id = e.order_id AND p.state_version < e.state_version AND (p.status || '') = 'PENDING')
       ORDER BY e.next_attempt_at, e.id
       LIMIT $9) c
   WHERE coalesce(b.n, 0) < lim.n  -- an app at its limit reads nothing
), picked AS (
  SELECT r.id FROM ready r LEFT JOIN busy b ON b.app_id = r.app_id
   WHERE r.rn <= r.lim - coalesce(b.n, 0)
   ORDER BY r.rn, r.next_attempt_at, r.id
   LIMIT $3
), locked AS (
  SELECT e.id FROM events e JOIN picked USING (id)
   WHERE e.status = 'PENDING' AND (e.locked_until IS NULL OR e.locked_until <= $1)
   FOR UPDATE OF e SKIP LOCKED
)
UPDATE events e SET locked_by = $5, locked_until = $6
  FROM locked, apps a
 WHERE e.id = locked.id AND a.id = e.app_id
RETURNING e.id, e.app_id AS "appId", e.attempts, e.payload::text AS body, a.notify_url AS "notifyUrl",
          coalesce((SELECT d.attempt_no FROM event_deliveries d WHERE d.event_id = e.id ORDER BY d.id DESC LIMIT 1), 0) AS deliveries`;

export interface ClaimedEvent {
  id: string;
  appId: string;
  attempts: number;
  deliveries: number;
  body: string;
  notifyUrl: string | null;
}

export async function claimDueEvents(
  db: Queryable,
  o: {
    now: Date;
    perApp: number;
    /** Apps whose limit is not `perApp`. */
    appLimits?: ReadonlyMap<string, number>;
    limit: number;
    inFlight: string[];
    token: string;
    leaseUntil: Date;
  },
): Promise<ClaimedEvent[]> {
  const apps = [...(o.appLimits ?? new Map<string, number>())];
  const r = await db.query<ClaimedEvent>({
    name: 'claim_events',
    text: 'SELECT * FROM mps_claim_events($1, $2, $3, $4, $5, $6, $7, $8, $9)',
    values: [
      o.now,
      o.perApp,
      o.limit,
      o.inFlight,
      o.token,
      o.leaseUntil,
      apps.map(([a]) => a),
      apps.map(([, n]) => n),
      Math.max(o.perApp, ...apps.map(([, n]) => n)),
    ],
  });
  return r.rows;
}

export interface DeliveryRecord {
  eventId: string;
  token: string;
  /**
   * The attempt's outcome as a transition of the event from the state its claim read (PENDING to
   * DELIVERED or DEAD, checked against the tables by the caller), or null for a failed attempt,
   * which leaves the event PENDING (due again). Recorded only over that source state.
   */
  move: Transition<'delivery'> | null;
  attempts: number;
  nextAttemptAt: Date | null;
  lastError: string | null;
  now: Date;
  attemptNo: number;
  startedAt: Date;
  statusCode: number | null;
  error: string | null;
  /** The start of the receiver's answer (src/events/safe-http.ts, answerExcerpt). */
  excerpt: string | null;
  durationMs: number;
  /** The notify URL the attempt went to: a failed attempt whose app got another URL meanwhile is due at once. */
  notifyUrl: string | null;
}

/**
 * Logs delivery attempts (always: each did happen) and, for each whose lease token still holds its
 * event, its outcome, several in one statement. Answers, per record, whether the outcome was
 * recorded (false: the lease was lost meanwhile). A failed attempt whose app got another notify URL
 * while it ran, or that the merchant asked to have delivered again while it ran, is due at once.
 */
export async function recordDeliveries(db: Queryable, ds: DeliveryRecord[]): Promise<boolean[]> {
  const r = await db.query<{ idx: number; fenced: boolean }>({
    name: 'event_record_deliveries',
    text: `WITH i AS (
        SELECT * FROM json_to_recordset($1::json) AS t(idx integer, event_id text, token text, "from" text, "to" text, attempts integer,
          next_attempt_at timestamptz, last_error text, now timestamptz, attempt_no integer, started_at timestamptz,
          status_code integer, error text, duration_ms integer, notify_url text, excerpt text)
      ), upd AS (
        UPDATE events SET status = i."to", attempts = i.attempts,
               next_attempt_at = CASE WHEN i."to" = 'PENDING'
                                       AND ((SELECT a.notify_url FROM apps a WHERE a.id = events.app_id) IS DISTINCT FROM i.notify_url
                                            OR events.redelivery_requested_at >= i.started_at)
                                      THEN i.now ELSE coalesce(i.next_attempt_at, events.next_attempt_at) END,
               last_error = i.last_error,
               delivered_at = CASE WHEN i."to" = 'DELIVERED' THEN i.now ELSE events.delivered_at END,
               locked_by = NULL, locked_until = NULL
          FROM i WHERE events.id = i.event_id AND events.locked_by = i.token AND events.status = i."from"
        RETURNING events.id
      ), ins AS (
        INSERT INTO event_deliveries(event_id, attempt_no, attempted_at, status_code, error, duration_ms, response_excerpt)
        SELECT event_id, attempt_no, started_at, status_code, error, duration_ms, excerpt FROM i ORDER BY idx
      )
      SELECT i.idx, EXISTS (SELECT 1 FROM upd WHERE upd.id = i.event_id) AS fenced FROM i`,
    values: [
      JSON.stringify(
        ds.map((d, idx) => ({
          idx,
          event_id: d.eventId,
          token: d.token,
          from: d.move?.from ?? RETRIED,
          to: d.move?.to ?? RETRIED,
          attempts: d.attempts,
          next_attempt_at: d.nextAttemptAt,
          last_error: d.lastError,
          now: d.now,
          attempt_no: d.attemptNo,
          started_at: d.startedAt,
          status_code: d.statusCode,
          error: d.error,
          duration_ms: d.durationMs,
          notify_url: d.notifyUrl,
          excerpt: d.excerpt,
        })),
      ),
    ],
  });
  const out: boolean[] = new Array(ds.length).fill(false);
  for (const row of r.rows) out[row.idx] = row.fenced;
  return out;
}

/** Delivery records of concurrent deliveries, one statement (and one commit) per event-loop turn. */
export class DeliveryRecorder {
  readonly #batcher: TurnBatcher<DeliveryRecord, boolean>;
  constructor(db: Db) {
    this.#batcher = new TurnBatcher({
      one: async (d) => (await recordDeliveries(db, [d]))[0]!,
      many: (ds) => recordDeliveries(db, ds),
      key: (d) => d.eventId,
      // Concurrent batches update the events' rows in one order.
      compare: (a, b) => (a.eventId < b.eventId ? -1 : a.eventId > b.eventId ? 1 : 0),
    });
  }

  record(d: DeliveryRecord): Promise<boolean> {
    return this.#batcher.run(d);
  }
}

/** Gives a claimed event back without counting an attempt (nothing was sent). */
export async function releaseEvent(db: Queryable, eventId: string, token: string, nextAttemptAt: Date, lastError: string): Promise<void> {
  await db.query(
    `UPDATE events SET next_attempt_at = $3, last_error = $4, locked_by = NULL, locked_until = NULL
      WHERE id = $1 AND locked_by = $2 AND status = 'PENDING'`,
    [eventId, token, nextAttemptAt, lastError],
  );
}

/** When the next PENDING event after `now` comes due (events_due), or null. */
export async function nextDueEventAt(db: Queryable, now: Date): Promise<Date | null> {
  const r = await db.query<{ at: Date | null }>({
    name: 'events_next_due',
    text: `SELECT min(next_attempt_at) AS at FROM events WHERE status = 'PENDING' AND next_attempt_at > $1`,
    values: [now],
  });
  return r.rows[0]?.at ?? null;
}

/**
 * Makes the PENDING events of an app due now, e.g. once its notifyUrl has been set, so that events
 * that failed with NO_NOTIFY_URL need not wait for their next scheduled attempt.
 */
export async function rescheduleAppEvents(db: Queryable, appId: string, now: Date): Promise<number> {
  const r = await db.query(`UPDATE events SET next_attempt_at = $2 WHERE app_id = $1 AND status = 'PENDING' AND next_attempt_at > $2`, [
    appId,
    now,
  ]);
  return r.rowCount ?? 0;
}

/**
 * A pending event whose attempt is not in flight gets `attemptsBefore` attempts counted and is due
 * now, so that its next attempt is the one the schedule ends with (the sandbox's lever for testing
 * dead events). Answers whether it was applied.
 */
export async function makeNextAttemptLast(db: Queryable, eventId: string, attemptsBefore: number, now: Date): Promise<boolean> {
  const r = await db.query(
    `UPDATE events SET attempts = $3, next_attempt_at = $2
      WHERE id = $1 AND status = 'PENDING' AND (locked_until IS NULL OR locked_until <= $2)`,
    [eventId, now, attemptsBefore],
  );
  return r.rowCount === 1;
}

/** An event's delivery state, null when there is no such event. */
export async function eventStatus(db: Queryable, eventId: string): Promise<DeliveryState | null> {
  const r = await db.query<{ status: DeliveryState }>('SELECT status FROM events WHERE id = $1', [eventId]);
  return r.rows[0]?.status ?? null;
}

/**
 * A dead or delivered event goes back to the queue, due now (attempts restart; the log keeps
 * counting): `t` (to PENDING), applied only from its source state; answers whether it was.
 */
export async function requeueEvent(db: Queryable, eventId: string, t: Transition<'delivery'>, now: Date): Promise<boolean> {
  const r = await db.query(
    `UPDATE events SET status = $3, attempts = 0, next_attempt_at = $2, locked_by = NULL, locked_until = NULL
      WHERE id = $1 AND status = $4`,
    [eventId, now, t.to, t.from],
  );
  return r.rowCount === 1;
}

export async function countEventsByStatus(db: Queryable): Promise<{ status: string; n: number }[]> {
  const r = await db.query<{ status: string; n: number }>(`SELECT status, count(*)::int AS n FROM events GROUP BY status`);
  return r.rows;
}

export interface EventSummary {
  eventId: string;
  appId: string;
  openOrderId: string;
  eventType: EventType;
  stateVersion: number;
  status: DeliveryState;
  attempts: number;
  nextAttemptAt: Date;
  lastError: string | null;
  createdAt: Date;
  deliveredAt: Date | null;
}

const SUMMARY_COLS = `id AS "eventId", app_id AS "appId", order_id AS "openOrderId", event_type AS "eventType", state_version AS "stateVersion",
  status, attempts, next_attempt_at AS "nextAttemptAt", last_error AS "lastError", created_at AS "createdAt", delivered_at AS "deliveredAt"`;

export async function listEvents(
  db: Queryable,
  f: { status: string | null; appId: string | null; limit: number; merchantId?: string | null },
): Promise<EventSummary[]> {
  const r = await db.query<EventSummary>(
    `SELECT ${SUMMARY_COLS} FROM events WHERE ($1::text IS NULL OR status = $1) AND ($2::text IS NULL OR app_id = $2)
        AND ($4::text IS NULL OR app_id IN (SELECT id FROM apps WHERE merchant_id = $4))
      ORDER BY created_at DESC LIMIT $3`,
    [f.status, f.appId, f.limit, f.merchantId ?? null],
  );
  return r.rows;
}

export async function eventsOfOrder(db: Queryable, orderId: string): Promise<EventSummary[]> {
  const r = await db.query<EventSummary>(`SELECT ${SUMMARY_COLS} FROM events WHERE order_id = $1 ORDER BY state_version, created_at`, [
    orderId,
  ]);
  return r.rows;
}

export interface DeliveryRow {
  attemptNo: number;
  attemptedAt: Date;
  statusCode: number | null;
  error: string | null;
  durationMs: number;
  /** The start of the receiver's answer, or null. */
  responseExcerpt: string | null;
}

const DELIVERY_COLS = `attempt_no AS "attemptNo", attempted_at AS "attemptedAt", status_code AS "statusCode", error, duration_ms AS "durationMs",
  response_excerpt AS "responseExcerpt"`;

export async function getEventWithDeliveries(
  db: Queryable,
  eventId: string,
): Promise<{ event: EventSummary & { payload: unknown }; deliveries: DeliveryRow[] } | null> {
  const e = await db.query<EventSummary & { payload: unknown }>(`SELECT ${SUMMARY_COLS}, payload FROM events WHERE id = $1`, [eventId]);
  const event = e.rows[0];
  if (!event) return null;
  const d = await db.query<DeliveryRow>(`SELECT ${DELIVERY_COLS} FROM event_deliveries WHERE event_id = $1 ORDER BY id`, [eventId]);
  return { event, deliveries: d.rows };
}

// --- the merchant's event log (open API) --------------------------------------------------------

/** An event as the merchant's event log shows it, with its delivery attempts counted and the last one. */
export interface AppEventRow {
  eventId: string;
  eventType: EventType;
  stateVersion: number;
  status: DeliveryState;
  nextAttemptAt: Date;
  createdAt: Date;
  deliveredAt: Date | null;
  /** The exact text delivered. */
  payload: string;
  deliveryAttempts: number;
  lastAttempt: DeliveryRow | null;
}

type AppEventRaw = Omit<AppEventRow, 'lastAttempt'> & {
  l_attempt_no: number | null;
  l_attempted_at: Date | null;
  l_status_code: number | null;
  l_error: string | null;
  l_duration_ms: number | null;
  l_excerpt: string | null;
};

const APP_EVENT_SELECT = `SELECT e.id AS "eventId", e.event_type AS "eventType", e.state_version AS "stateVersion", e.status,
    e.next_attempt_at AS "nextAttemptAt", e.created_at AS "createdAt", e.delivered_at AS "deliveredAt", e.payload::text AS payload,
    coalesce(l.attempt_no, 0) AS "deliveryAttempts",
    l.attempt_no AS l_attempt_no, l.attempted_at AS l_attempted_at, l.status_code AS l_status_code, l.error AS l_error,
    l.duration_ms AS l_duration_ms, l.response_excerpt AS l_excerpt
  FROM events e
  LEFT JOIN LATERAL (SELECT * FROM event_deliveries d WHERE d.event_id = e.id ORDER BY d.id DESC LIMIT 1) l ON true`;

function appEvent(r: AppEventRaw): AppEventRow {
  const { l_attempt_no, l_attempted_at, l_status_code, l_error, l_duration_ms, l_excerpt, ...e } = r;
  return {
    ...e,
    lastAttempt:
      l_attempt_no === null
        ? null
        : {
            attemptNo: l_attempt_no,
            attemptedAt: l_attempted_at!,
            statusCode: l_status_code,
            error: l_error,
            durationMs: l_duration_ms!,
            responseExcerpt: l_excerpt,
          },
  };
}

export interface AppEventFilter {
  appId: string;
  type: EventType | null;
  status: DeliveryState | null;
  /** created_at >= from */
  from: Date | null;
  /** created_at < to */
  to: Date | null;
  /** The last event of the previous page: the page goes on after it (newest first). */
  before: { at: Date; eventId: string } | null;
  limit: number;
}

/** The app's events, newest first (events_app_created read backwards from the page's upper bound). */
export async function listAppEvents(db: Queryable, f: AppEventFilter): Promise<AppEventRow[]> {
  // The page's upper bound: the cursor's instant (inclusive, its id tells the events of that very
  // instant apart), else `to` (exclusive).
  const upper = f.before?.at ?? f.to;
  const r = await db.query<AppEventRaw>({
    name: 'app_events_page',
    text: `${APP_EVENT_SELECT}
      WHERE e.app_id = $1 AND ($2::text IS NULL OR e.event_type = $2) AND ($3::text IS NULL OR e.status = $3)
        AND ($4::timestamptz IS NULL OR e.created_at >= $4) AND ($5::timestamptz IS NULL OR e.created_at < $5)
        AND ($6::timestamptz IS NULL OR (e.created_at <= $6 AND (e.created_at < $6 OR ($7::text IS NOT NULL AND e.id < $7))))
      ORDER BY e.created_at DESC, e.id DESC
      LIMIT $8`,
    values: [f.appId, f.type, f.status, f.from, f.to, upper, f.before?.eventId ?? null, f.limit],
  });
  return r.rows.map(appEvent);
}

/** One event of the app with its delivery attempts (the latest `maxDeliveries`, oldest first), or null. */
export async function getAppEvent(
  db: Queryable,
  appId: string,
  eventId: string,
  maxDeliveries: number,
): Promise<{ event: AppEventRow; deliveries: DeliveryRow[] } | null> {
  const e = await db.query<AppEventRaw>({
    name: 'app_event_by_id',
    text: `${APP_EVENT_SELECT} WHERE e.id = $1 AND e.app_id = $2`,
    values: [eventId, appId],
  });
  const row = e.rows[0];
  if (!row) return null;
  const d = await db.query<DeliveryRow>(
    `SELECT * FROM (SELECT ${DELIVERY_COLS}, id FROM event_deliveries WHERE event_id = $1 ORDER BY id DESC LIMIT $2) x ORDER BY id`,
    [eventId, maxDeliveries],
  );
  return { event: appEvent(row), deliveries: d.rows.map(({ id: _id, ...x }: DeliveryRow & { id?: string }) => x) };
}

/** Whether the merchant may have the event delivered again now, and the event's delivery state then. */
export type RedeliveryCheck =
  { outcome: 'ALLOWED'; status: DeliveryState } | { outcome: 'NOT_FOUND' } | { outcome: 'TOO_SOON'; retryAfterMs: number };

/**
 * The merchant asks for an event of its app to be delivered again: the event's row locked in the
 * caller's transaction (its state stays as read until the transaction ends), and its state
 * answered. Refused (TOO_SOON) within `minIntervalMs` of the event's previous request, or when the
 * app has made `perAppMax` requests within `perAppWindowMs`.
 */
export async function checkRedelivery(
  tx: Tx,
  appId: string,
  eventId: string,
  now: Date,
  limits: { minIntervalMs: number; perAppWindowMs: number; perAppMax: number },
): Promise<RedeliveryCheck> {
  const e = await tx.query<{ last: Date | null; status: DeliveryState }>(
    'SELECT redelivery_requested_at AS last, status FROM events WHERE id = $1 AND app_id = $2 FOR UPDATE',
    [eventId, appId],
  );
  const row = e.rows[0];
  if (!row) return { outcome: 'NOT_FOUND' };
  if (row.last !== null && now.getTime() - row.last.getTime() < limits.minIntervalMs) {
    return { outcome: 'TOO_SOON', retryAfterMs: row.last.getTime() + limits.minIntervalMs - now.getTime() };
  }
  const recent = await tx.query<{ n: number; oldest: Date | null }>(
    `SELECT count(*)::int AS n, min(redelivery_requested_at) AS oldest FROM events
      WHERE app_id = $1 AND redelivery_requested_at > $2 AND redelivery_requested_at <= $3`,
    [appId, new Date(now.getTime() - limits.perAppWindowMs), now],
  );
  const { n, oldest } = recent.rows[0]!;
  if (n >= limits.perAppMax && oldest !== null) {
    return { outcome: 'TOO_SOON', retryAfterMs: oldest.getTime() + limits.perAppWindowMs - now.getTime() };
  }
  return { outcome: 'ALLOWED', status: row.status };
}

/**
 * The merchant's redelivery, recorded (the event locked by checkRedelivery): `move`, a delivered or
 * dead event back to the queue (to PENDING), due now with a fresh schedule; null, a pending one
 * stays PENDING, made due now (one being delivered at this moment is due again as soon as that
 * attempt ends, unless it succeeded). Applied only from the source state (PENDING for null);
 * answers when the event is next due, null when it was not in that state.
 */
export async function redeliver(tx: Tx, eventId: string, move: Transition<'delivery'> | null, now: Date): Promise<Date | null> {
  const u = await tx.query<{ nextAttemptAt: Date }>(
    `UPDATE events SET status = $3, attempts = CASE WHEN status = 'PENDING' THEN attempts ELSE 0 END,
            next_attempt_at = CASE WHEN status = 'PENDING' AND locked_until > $2 THEN next_attempt_at ELSE $2 END,
            redelivery_requested_at = $2, redelivery_requests = redelivery_requests + 1
      WHERE id = $1 AND status = $4 RETURNING next_attempt_at AS "nextAttemptAt"`,
    [eventId, now, move?.to ?? RETRIED, move?.from ?? RETRIED],
  );
  return u.rows[0]?.nextAttemptAt ?? null;
}

/**
 * Retention of the delivery log: drops at most `limit` failed attempts (no 2xx answer) made before
 * `before` of events that have since been delivered. A delivered event's last attempt is its
 * successful one, which is kept as long as the event; a pending or dead event keeps all of its log.
 * Walks the partial index of failed attempts (event_deliveries_failed), oldest first.
 */
export async function purgeDeliveryLog(db: Queryable, before: Date, limit: number): Promise<number> {
  const r = await db.query(
    `DELETE FROM event_deliveries WHERE id = ANY(ARRAY(
       SELECT d.id FROM event_deliveries d JOIN events e ON e.id = d.event_id
        WHERE (d.status_code IS NULL OR d.status_code NOT BETWEEN 200 AND 299) AND d.attempted_at < $1 AND e.status = 'DELIVERED'
        ORDER BY d.attempted_at LIMIT $2))`,
    [before, limit],
  );
  return r.rowCount ?? 0;
}
