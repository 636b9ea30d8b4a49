/**
 * Outbox delivery of event notifications (decisions.md section 7; docs/events.md).
 *
 * Each run claims due events (PENDING, next_attempt_at <= now, no live lease) with FOR UPDATE SKIP
 * LOCKED and a lease (locked_by = a token unique to the claim, locked_until), so several instances
 * share the work and never send the same event at once; every later update is fenced by that token.
 * The stored payload text is sent as is: the bytes signed are the bytes sent.
 *
 * - Ordering: an event is not claimed while an event of the same order with a lower stateVersion
 *   is still PENDING (queued, retrying or in flight). A DEAD event no longer holds the order back.
 * - Fairness: at most `perAppConcurrency` events of one app are leased at a time (across instances)
 *   and a claim takes the oldest due event of each app first, then the second of each, and so on.
 * - Deliveries run concurrently (at most `concurrency` per instance). run() waits for them only up
 *   to `maxWaitMs`: a slow receiver keeps its own slots busy until its timeout but never holds up
 *   the other tasks or the other apps' events.
 * - Any 2xx acknowledges. Otherwise the event is retried after exactly RETRY_DELAYS_MS (pinned; no jitter),
 *   and after the last retry fails it is DEAD (visible and redeliverable in the back office).
 * - An app without a notifyUrl: each scheduled attempt fails with NO_NOTIFY_URL (nothing is sent),
 *   on the same schedule; setting or changing the URL makes every pending event of the app due now.
 * - Time is svc.clock's, passed into SQL, so tests walk the schedule with a fake clock.
 */
import { randomBytes } from 'node:crypto';
import type { Db } from '../store/db.ts';
import type { Services } from '../services.ts';
import type { WorkerTask } from '../workers.ts';
import { SigningKeyUnavailableError } from '../platform/keys.ts';
import { type PostOutcome, type Resolver, postNotification } from './safe-http.ts';
import { signNotification } from './signer.ts';

const S = 1000;
const M = 60 * S;
const H = 60 * M;
/** Waits after failed attempts 1..12 (decisions.md section 7); attempt 13 failing makes the event DEAD. */
export const RETRY_DELAYS_MS: readonly number[] = [15 * S, 30 * S, M, 3 * M, 10 * M, 20 * M, 30 * M, H, 3 * H, 6 * H, 12 * H, 24 * H];
export const MAX_ATTEMPTS = RETRY_DELAYS_MS.length + 1;
/** Delay before the next attempt after `attempts` failed ones (1-based), or null when none is left. */
export function retryDelayMs(attempts: number): number | null {
  return RETRY_DELAYS_MS[attempts - 1] ?? null;
}

export interface DispatcherOptions {
  /** Deadline of one delivery (resolution, connection, response): 10 s, decisions.md section 7. */
  timeoutMs?: number;
  /** Response bytes read before the connection is closed: 64 KB. */
  maxResponseBytes?: number;
  /** Events of one app leased at once, across instances: 4. */
  perAppConcurrency?: number;
  /**
   * Deliveries in flight in this instance: 64. A delivery mostly waits on the receiver (a socket,
   * no database connection), so slots are cheap; with 4 per app it takes 16 apps whose receivers
   * all hang for 10 s to fill them, rather than 4.
   */
  concurrency?: number;
  /** Lease of a claimed event; must exceed timeoutMs comfortably: max(60 s, 3 x timeoutMs). */
  leaseMs?: number;
  /** How long run() waits for deliveries in flight before it returns: 2 s. */
  maxWaitMs?: number;
  /** DNS resolution of notify hosts (tests inject one). */
  resolver?: Resolver;
}

export interface EventDispatcher extends WorkerTask {
  /** Resolves when no delivery of this instance is in flight. */
  idle(): Promise<void>;
}

interface Claimed {
  id: string;
  appId: string;
  attempts: number;
  deliveries: number;
  body: string;
  notifyUrl: string | null;
}

/** A run comes at least every few seconds and re-arms the timer: a later event needs none yet. */
const MAX_DUE_TIMER_MS = 5_000;

/** Due events read to find the apps with a due event before switching to one probe per app. */
const DUE_SAMPLE = 256;

/**
 * One claim: $1 now, $2 per-app limit, $3 events at most, $4 ids in flight here, $5 lease token,
 * $6 lease end. Not proportional to the backlog (migrations/0006): the apps with a due event come
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
  SELECT c.id, c.app_id, c.next_attempt_at, row_number() OVER (PARTITION BY c.app_id ORDER BY c.next_attempt_at, c.id) AS rn
    FROM due_apps d
    LEFT JOIN busy b ON b.app_id = d.app_id
    CROSS JOIN LATERAL (
      SELECT e.id, e.app_id, e.next_attempt_at FROM events e
       WHERE e.app_id = d.app_id AND e.status = 'PENDING' AND e.next_attempt_at <= $1
         AND (e.locked_until IS NULL OR e.locked_until <= $1)
         AND e.id <> ALL($4::text[])
         AND NOT EXISTS (SELECT 1 FROM events p
                          WHERE p.order_id = e.order_id AND p.status = 'PENDING' AND p.state_version < e.state_version)
       ORDER BY e.next_attempt_at, e.id
       LIMIT $2) c
   WHERE coalesce(b.n, 0) < $2  -- an app at its limit reads nothing
), picked AS (
  SELECT r.id FROM ready r LEFT JOIN busy b ON b.app_id = r.app_id
   WHERE r.rn <= $2 - coalesce(b.n, 0)
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
          (SELECT count(*) FROM event_deliveries d WHERE d.event_id = e.id)::int AS deliveries`;

export function createDispatcher(svc: Services, opts: DispatcherOptions = {}): EventDispatcher {
  const timeoutMs = opts.timeoutMs ?? 10_000;
  const maxResponseBytes = opts.maxResponseBytes ?? 65_536;
  const perApp = opts.perAppConcurrency ?? 4;
  const concurrency = opts.concurrency ?? 64;
  const leaseMs = opts.leaseMs ?? Math.max(60_000, 3 * timeoutMs);
  const maxWaitMs = opts.maxWaitMs ?? 2_000;
  const instance = `dsp_${randomBytes(6).toString('hex')}`;
  let claims = 0;
  const inFlight = new Map<string, Promise<void>>();

  async function claim(limit: number): Promise<{ token: string; events: Claimed[] }> {
    const token = `${instance}.${++claims}`;
    const now = new Date(svc.clock.now());
    const r = await svc.db.query<Claimed>(CLAIM_SQL, [now, perApp, limit, [...inFlight.keys()], token, new Date(now.getTime() + leaseMs)]);
    return { token, events: r.rows };
  }

  async function deliver(ev: Claimed, token: string): Promise<void> {
    const attemptNo = ev.deliveries + 1;
    const startedAt = svc.clock.now();
    const t0 = performance.now();
    let outcome: PostOutcome;
    if (ev.notifyUrl === null) {
      outcome = { statusCode: null, error: 'NO_NOTIFY_URL' };
    } else {
      // The stored JSON text, once, as bytes: what is signed is exactly what is sent.
      const body = Buffer.from(ev.body, 'utf8');
      let headers;
      try {
        headers = await signNotification(svc.keys, ev.id, body, startedAt);
      } catch (err) {
        // A platform fault, not the receiver's: nothing was sent, no attempt is counted.
        const reason = err instanceof SigningKeyUnavailableError ? 'SIGNING_KEY_UNAVAILABLE' : 'SIGNING_FAILED';
        await release(ev, token, startedAt, reason);
        svc.log.error({ eventId: ev.id, appId: ev.appId, error: reason }, 'event notification not sent: the platform could not sign it');
        return;
      }
      outcome = await postNotification(
        ev.notifyUrl,
        body,
        { ...headers },
        {
          timeoutMs,
          maxResponseBytes,
          policy: { devMode: svc.config.devMode, allowPrivateTargets: svc.config.webhookAllowPrivateTargets },
          resolver: opts.resolver,
        },
      );
    }
    await record(ev, token, attemptNo, startedAt, Math.round(performance.now() - t0), outcome);
  }

  async function record(ev: Claimed, token: string, attemptNo: number, startedAt: number, durationMs: number, o: PostOutcome) {
    const ok = o.statusCode !== null && o.statusCode >= 200 && o.statusCode < 300;
    const attempts = ev.attempts + 1;
    const delay = ok ? null : retryDelayMs(attempts);
    const status = ok ? 'DELIVERED' : delay === null ? 'DEAD' : 'PENDING';
    const now = svc.clock.now();
    const nextAttemptAt = delay === null ? null : new Date(now + delay);
    const lastError = ok ? null : o.statusCode !== null ? `HTTP ${o.statusCode}${o.error ? ` ${o.error}` : ''}` : o.error;
    // The attempt is logged even when the lease was lost meanwhile: it did happen. A failed
    // attempt whose app got another notify URL while it ran is due at once (docs/events.md: a URL
    // change makes every pending event due immediately, the one in flight included).
    const r = await svc.db.query<{ fenced: number }>(
      `WITH upd AS (
         UPDATE events SET status = $3, attempts = $4,
                next_attempt_at = CASE WHEN $3 = 'PENDING' AND (SELECT a.notify_url FROM apps a WHERE a.id = events.app_id) IS DISTINCT FROM $13::text
                                       THEN $7 ELSE coalesce($5, next_attempt_at) END,
                last_error = $6,
                delivered_at = CASE WHEN $3 = 'DELIVERED' THEN $7 ELSE delivered_at END, locked_by = NULL, locked_until = NULL
          WHERE id = $1 AND locked_by = $2 AND status = 'PENDING'
          RETURNING id
       )
       INSERT INTO event_deliveries(event_id, attempt_no, attempted_at, status_code, error, duration_ms)
       VALUES ($1, $8, $9, $10, $11, $12)
       RETURNING (SELECT count(*) FROM upd)::int AS fenced`,
      [
        ev.id,
        token,
        status,
        attempts,
        nextAttemptAt,
        lastError,
        new Date(now),
        attemptNo,
        new Date(startedAt),
        o.statusCode,
        o.error,
        durationMs,
        ev.notifyUrl,
      ],
    );
    const fenced = r.rows[0]?.fenced === 1;
    if (!fenced) svc.log.warn({ eventId: ev.id, appId: ev.appId, attempt: attemptNo }, 'event lease lost before the attempt was recorded');
    if (ok) return;
    // Never the payload or the signature: identifiers and the outcome only.
    const line = { eventId: ev.id, appId: ev.appId, attempt: attemptNo, statusCode: o.statusCode, error: o.error, status, nextAttemptAt };
    if (status === 'DEAD') svc.log.error(line, 'event notification dead: no attempt acknowledged');
    else if (o.error === 'NO_NOTIFY_URL') svc.log.info(line, 'event notification not sent: the app has no notifyUrl');
    else svc.log.warn(line, 'event notification attempt failed');
  }

  async function release(ev: Claimed, token: string, nowMs: number, lastError: string): Promise<void> {
    await svc.db.query(
      `UPDATE events SET next_attempt_at = $3, last_error = $4, locked_by = NULL, locked_until = NULL
        WHERE id = $1 AND locked_by = $2 AND status = 'PENDING'`,
      [ev.id, token, new Date(nowMs + RETRY_DELAYS_MS[0]!), lastError],
    );
  }

  function start(ev: Claimed, token: string): void {
    const p = deliver(ev, token)
      .catch((err: unknown) => {
        // The lease runs out and the event is attempted again: at least once, never lost.
        svc.log.warn({ err, eventId: ev.id, appId: ev.appId }, 'event delivery could not be recorded; it will be retried');
      })
      .finally(() => {
        inFlight.delete(ev.id);
        svc.wakeWorkers?.();
      });
    inFlight.set(ev.id, p);
  }

  async function waitInFlight(ms: number): Promise<void> {
    if (inFlight.size === 0 || ms <= 0) return;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([Promise.all(inFlight.values()), new Promise<void>((r) => (timer = setTimeout(r, ms)))]);
    clearTimeout(timer);
  }

  /** Milliseconds until the next PENDING event comes due (events_due), or null when none is waiting. */
  async function nextDueInMs(): Promise<number | null> {
    const now = svc.clock.now();
    const r = await svc.db.query<{ at: Date | null }>({
      name: 'events_next_due',
      text: `SELECT min(next_attempt_at) AS at FROM events WHERE status = 'PENDING' AND next_attempt_at > $1`,
      values: [new Date(now)],
    });
    const at = r.rows[0]?.at;
    return at ? at.getTime() - now : null;
  }

  /**
   * The workers tick once a second, so a retry would start up to a second late (more while another
   * app's receiver hangs and run() waits for it): the workers are woken when the next event comes
   * due instead, so each retry starts on its step (decisions.md section 7).
   */
  let dueTimer: NodeJS.Timeout | undefined;
  function wakeWhenDue(inMs: number | null): void {
    clearTimeout(dueTimer);
    if (inMs === null || inMs > MAX_DUE_TIMER_MS) return;
    dueTimer = setTimeout(() => svc.wakeWorkers?.(), Math.ceil(inMs) + 1);
    dueTimer.unref();
  }

  return {
    name: 'deliver events',
    async run() {
      const free = concurrency - inFlight.size;
      if (free <= 0) return 0; // a delivery that ends wakes the workers
      const { token, events } = await claim(free);
      for (const ev of events) start(ev, token);
      const dueIn = await nextDueInMs();
      wakeWhenDue(dueIn);
      // Not past the next event's due time: the tick ends, and the wake above starts the next one.
      await waitInFlight(dueIn === null ? maxWaitMs : Math.min(maxWaitMs, dueIn));
      return events.length;
    },
    async idle() {
      while (inFlight.size > 0) await Promise.all(inFlight.values());
    },
  };
}

/**
 * Makes the PENDING events of an app due now, e.g. once its notifyUrl has been set, so that events
 * that failed with NO_NOTIFY_URL need not wait for their next scheduled attempt.
 */
export async function rescheduleAppEvents(db: Db, appId: string, nowMs: number): Promise<number> {
  const r = await db.query(`UPDATE events SET next_attempt_at = $2 WHERE app_id = $1 AND status = 'PENDING' AND next_attempt_at > $2`, [
    appId,
    new Date(nowMs),
  ]);
  return r.rowCount ?? 0;
}
