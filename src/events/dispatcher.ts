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
 * - Fairness: at most an app's limit of its events are leased at a time (across instances) and a
 *   claim takes the oldest due event of each app first, then the second of each, and so on.
 * - Each app's limit adapts to its receiver (AppConcurrency, below): it starts at
 *   `perAppConcurrency`, grows while the receiver acknowledges quickly (up to `maxPerAppConcurrency`),
 *   and is halved when it fails or slows down, back to `perAppConcurrency` at least, so a fast
 *   merchant is served fast, a slow or failing one holds few slots (and never the other apps'
 *   events), and its own retries and new events keep their times while fewer of its deliveries
 *   than that hang.
 * - Deliveries run concurrently (at most `concurrency` per instance). A delivery that ends claims
 *   more at once (the pump), so the rate follows the receivers, not the workers' passes. run()
 *   waits for deliveries only up to `maxWaitMs`: a slow receiver keeps its own slots busy until its
 *   timeout but never holds up the other tasks.
 * - Outcomes are recorded in batches (one statement and one commit per event-loop turn); each
 *   delivery keeps one connection per receiver address alive between events.
 * - Any 2xx acknowledges. Otherwise the event is retried after exactly RETRY_DELAYS_MS (pinned; no jitter),
 *   and after the last retry fails it is DEAD (visible and redeliverable in the back office).
 * - An app without a notifyUrl: each scheduled attempt fails with NO_NOTIFY_URL (nothing is sent),
 *   on the same schedule; setting or changing the URL makes every pending event of the app due now.
 * - Time is svc.clock's, passed into SQL, so tests walk the schedule with a fake clock.
 */
import { randomBytes } from 'node:crypto';
import type { Clock } from '../domain/clock.ts';
import { transition } from '../domain/states.ts';
import { type PlatformKeyRing, SigningKeyUnavailableError } from '../platform/keys.ts';
import type { Db } from '../store/db.ts';
import * as events from '../store/events.ts';
import type { ClaimedEvent } from '../store/events.ts';
import type { Log } from '../lib/log.ts';
import type { NotifyUrlPolicy } from './notify-url.ts';
import { type PostOutcome, type Resolver, postNotification } from './safe-http.ts';
import { signNotification } from './signer.ts';

/** What the dispatcher works with. */
export interface DispatcherDeps {
  db: Db;
  clock: Clock;
  log: Log;
  keys: PlatformKeyRing;
  notifyUrlPolicy: NotifyUrlPolicy;
  wakeWorkers(): void;
}

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
  /** Events of one app leased at once, across instances, to begin with (and after a failure): 4. */
  perAppConcurrency?: number;
  /** The most an app's limit grows to while its receiver keeps up: 64. */
  maxPerAppConcurrency?: number;
  /**
   * Deliveries in flight in this instance: 128. A delivery mostly waits on the receiver (a socket,
   * no database connection), so slots are cheap; a receiver that hangs holds at most its app's
   * limit, which it drives down to 1 by failing.
   */
  concurrency?: number;
  /** Lease of a claimed event; must exceed timeoutMs comfortably: max(60 s, 3 x timeoutMs). */
  leaseMs?: number;
  /** How long run() waits for deliveries in flight before it returns: 2 s. */
  maxWaitMs?: number;
  /** DNS resolution of notify hosts (tests inject one). */
  resolver?: Resolver;
}

/** A task of the worker loop (src/workers.ts runs it on every pass). */
export interface EventDispatcher {
  name: string;
  /** Claims and starts due deliveries; answers how many. */
  run(): Promise<number>;
  /** Resolves when no delivery of this instance is in flight and the pump has found nothing more to send. */
  idle(): Promise<void>;
  /** Claims nothing more, and resolves when the deliveries in flight have ended (a graceful stop). */
  stop(): Promise<void>;
}

/** A run comes at least every few seconds and re-arms the timer: a later event needs none yet. */
const MAX_DUE_TIMER_MS = 5_000;

/** An acknowledgement slower than this counts as the receiver slowing down. */
const SLOW_ACK_MS = 1_000;

/**
 * Per-app concurrency that adapts to the receiver, additive increase and multiplicative decrease
 * (as TCP's congestion window): a limit of n grows by one after n quick acknowledgements in a row;
 * a failure or a slow acknowledgement halves it, to the initial limit at least (below that, one
 * hanging delivery would hold back the app's retries past their schedule, decisions.md section 7).
 * A performance control of this instance only: ordering and the lease of each event are the
 * database's.
 */
export class AppConcurrency {
  readonly #initial: number;
  readonly #max: number;
  readonly #apps = new Map<string, { limit: number; streak: number }>();
  constructor(initial: number, max: number) {
    this.#initial = initial;
    this.#max = Math.max(initial, max);
  }

  limit(appId: string): number {
    return this.#apps.get(appId)?.limit ?? this.#initial;
  }

  /** The apps whose limit is not the initial one. */
  overrides(): Map<string, number> {
    return new Map([...this.#apps].filter(([, v]) => v.limit !== this.#initial).map(([k, v]) => [k, v.limit]));
  }

  outcome(appId: string, ok: boolean, durationMs: number): void {
    const a = this.#apps.get(appId) ?? { limit: this.#initial, streak: 0 };
    if (!ok || durationMs > SLOW_ACK_MS) {
      a.limit = Math.max(this.#initial, Math.floor(a.limit / 2));
      a.streak = 0;
    } else if (++a.streak >= a.limit) {
      a.limit = Math.min(this.#max, a.limit + 1);
      a.streak = 0;
    }
    if (a.limit === this.#initial && a.streak === 0) this.#apps.delete(appId);
    else this.#apps.set(appId, a);
    if (this.#apps.size > 10_000) this.#apps.delete(this.#apps.keys().next().value as string);
  }
}

/** The settings of a dispatcher: its options with their defaults. */
interface DispatcherSettings {
  timeoutMs: number;
  maxResponseBytes: number;
  perApp: number;
  maxPerApp: number;
  concurrency: number;
  leaseMs: number;
  maxWaitMs: number;
  resolver: Resolver | undefined;
}

function settingsOf(opts: DispatcherOptions): DispatcherSettings {
  const timeoutMs = opts.timeoutMs ?? 10_000;
  return {
    timeoutMs,
    maxResponseBytes: opts.maxResponseBytes ?? 65_536,
    perApp: opts.perAppConcurrency ?? 4,
    maxPerApp: opts.maxPerAppConcurrency ?? 64,
    concurrency: opts.concurrency ?? 128,
    leaseMs: opts.leaseMs ?? Math.max(60_000, 3 * timeoutMs),
    maxWaitMs: opts.maxWaitMs ?? 2_000,
    resolver: opts.resolver,
  };
}

const acknowledged = (o: PostOutcome) => o.statusCode !== null && o.statusCode >= 200 && o.statusCode < 300;

/** What an attempt's outcome makes of its event (no I/O): delivered, retried after the schedule's next wait, or dead. */
export function attemptResult(
  attemptsBefore: number,
  o: PostOutcome,
  now: number,
): { ok: boolean; attempts: number; status: 'DELIVERED' | 'PENDING' | 'DEAD'; nextAttemptAt: Date | null; lastError: string | null } {
  const ok = acknowledged(o);
  const attempts = attemptsBefore + 1;
  const delay = ok ? null : retryDelayMs(attempts);
  return {
    ok,
    attempts,
    status: ok ? 'DELIVERED' : delay === null ? 'DEAD' : 'PENDING',
    nextAttemptAt: delay === null ? null : new Date(now + delay),
    lastError: ok ? null : o.statusCode !== null ? `HTTP ${o.statusCode}${o.error ? ` ${o.error}` : ''}` : o.error,
  };
}

/** Waits for the promises, at most `ms`. */
async function waitAtMost(promises: Iterable<Promise<unknown>>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([Promise.all(promises), new Promise<void>((r) => (timer = setTimeout(r, ms)))]);
  clearTimeout(timer);
}

export function createDispatcher(svc: DispatcherDeps, opts: DispatcherOptions = {}): EventDispatcher {
  return new OutboxDispatcher(svc, settingsOf(opts));
}

class OutboxDispatcher implements EventDispatcher {
  readonly name = 'deliver events';
  readonly #svc: DispatcherDeps;
  readonly #s: DispatcherSettings;
  readonly #limits: AppConcurrency;
  readonly #instance = `dsp_${randomBytes(6).toString('hex')}`;
  readonly #recorder: events.DeliveryRecorder;
  readonly #inFlight = new Map<string, Promise<void>>();
  #claims = 0;
  #stopped = false;
  #pumping: Promise<void> | null = null;
  #again = false;
  #dueTimer: NodeJS.Timeout | undefined;

  constructor(svc: DispatcherDeps, settings: DispatcherSettings) {
    this.#svc = svc;
    this.#s = settings;
    this.#limits = new AppConcurrency(settings.perApp, settings.maxPerApp);
    this.#recorder = new events.DeliveryRecorder(svc.db);
  }

  async run(): Promise<number> {
    const n = await this.#fill();
    const dueIn = await this.#nextDueInMs();
    this.#wakeWhenDue(dueIn);
    // Not past the next event's due time: the tick ends, and the wake above starts the next one.
    const waitMs = dueIn === null ? this.#s.maxWaitMs : Math.min(this.#s.maxWaitMs, dueIn);
    if (this.#inFlight.size > 0 && waitMs > 0) await waitAtMost(this.#inFlight.values(), waitMs);
    return n;
  }

  async idle(): Promise<void> {
    while (this.#inFlight.size > 0 || this.#pumping) await Promise.all([...this.#inFlight.values(), this.#pumping]);
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#dueTimer);
    await this.idle();
  }

  async #claim(limit: number): Promise<{ token: string; events: ClaimedEvent[] }> {
    const token = `${this.#instance}.${++this.#claims}`;
    const now = new Date(this.#svc.clock.now());
    const claimed = await events.claimDueEvents(this.#svc.db, {
      now,
      perApp: this.#s.perApp,
      appLimits: this.#limits.overrides(),
      limit,
      inFlight: [...this.#inFlight.keys()],
      token,
      leaseUntil: new Date(now.getTime() + this.#s.leaseMs),
    });
    return { token, events: claimed };
  }

  /** Claims and starts as many due events as there are free slots; answers how many. */
  async #fill(): Promise<number> {
    const free = this.#s.concurrency - this.#inFlight.size;
    if (free <= 0 || this.#stopped) return 0;
    const { token, events: claimed } = await this.#claim(free);
    for (const ev of claimed) this.#start(ev, token);
    return claimed.length;
  }

  #start(ev: ClaimedEvent, token: string): void {
    const p = this.#deliver(ev, token)
      .catch((err: unknown) => {
        // The lease runs out and the event is attempted again: at least once, never lost.
        this.#svc.log.warn({ err, eventId: ev.id, appId: ev.appId }, 'event delivery could not be recorded; it will be retried');
      })
      .finally(() => {
        this.#inFlight.delete(ev.id);
        this.#pump();
      });
    this.#inFlight.set(ev.id, p);
  }

  /**
   * The pump: deliveries that end in one event-loop turn free their slots, and one claim (after
   * that turn) fills them again, so a receiver that keeps up is sent the next events at once. A
   * claim that finds nothing stops the pump until the next delivery ends or the workers' pass.
   */
  #pump(): void {
    if (this.#stopped) return;
    if (this.#pumping) {
      this.#again = true;
      return;
    }
    this.#pumping = new Promise<void>((resolve) => setImmediate(resolve))
      .then(() => this.#fill())
      .then(
        () => undefined,
        (err: unknown) => this.#svc.log.warn({ err }, 'event claim failed; the workers try again'),
      )
      .finally(() => {
        this.#pumping = null;
        if (this.#again) {
          this.#again = false;
          this.#pump();
        }
      });
  }

  async #deliver(ev: ClaimedEvent, token: string): Promise<void> {
    const startedAt = this.#svc.clock.now();
    const t0 = performance.now();
    const outcome =
      ev.notifyUrl === null ? { statusCode: null, error: 'NO_NOTIFY_URL' } : await this.#send(ev, ev.notifyUrl, startedAt, token);
    if (outcome === null) return;
    const durationMs = Math.round(performance.now() - t0);
    if (ev.notifyUrl !== null) this.#limits.outcome(ev.appId, acknowledged(outcome), durationMs);
    await this.#record(ev, token, startedAt, durationMs, outcome);
  }

  /** Signs and posts the stored payload; null when the platform could not sign it (nothing sent, the event released). */
  async #send(ev: ClaimedEvent, notifyUrl: string, startedAt: number, token: string): Promise<PostOutcome | null> {
    // The stored JSON text, once, as bytes: what is signed is exactly what is sent.
    const body = Buffer.from(ev.body, 'utf8');
    let headers;
    try {
      headers = await signNotification(this.#svc.keys, ev.id, body, startedAt);
    } catch (err) {
      // A platform fault, not the receiver's: nothing was sent, no attempt is counted.
      const reason = err instanceof SigningKeyUnavailableError ? 'SIGNING_KEY_UNAVAILABLE' : 'SIGNING_FAILED';
      await events.releaseEvent(this.#svc.db, ev.id, token, new Date(startedAt + RETRY_DELAYS_MS[0]!), reason);
      this.#svc.log.error(
        { eventId: ev.id, appId: ev.appId, error: reason },
        'event notification not sent: the platform could not sign it',
      );
      return null;
    }
    return postNotification(
      notifyUrl,
      body,
      { ...headers },
      {
        timeoutMs: this.#s.timeoutMs,
        maxResponseBytes: this.#s.maxResponseBytes,
        policy: this.#svc.notifyUrlPolicy,
        resolver: this.#s.resolver,
        keepAlive: true,
        // Sent again on a new connection when the kept one was reset: a new timestamp and nonce.
        resign: async () => ({ ...(await signNotification(this.#svc.keys, ev.id, body, this.#svc.clock.now())) }),
      },
    );
  }

  async #record(ev: ClaimedEvent, token: string, startedAt: number, durationMs: number, o: PostOutcome): Promise<void> {
    const attemptNo = ev.deliveries + 1;
    const now = this.#svc.clock.now();
    const r = attemptResult(ev.attempts, o, now);
    // The attempt is logged even when the lease was lost meanwhile: it did happen. A failed
    // attempt whose app got another notify URL while it ran is due at once (docs/events.md: a URL
    // change makes every pending event due immediately, the one in flight included), and so is one
    // the merchant asked to have delivered again while it ran.
    const fenced = await this.#recorder.record({
      eventId: ev.id,
      token,
      // The claim took the event PENDING: delivered or dead is its transition from there; a failed
      // attempt is none (the event stays PENDING, due again).
      move: r.status === 'PENDING' ? null : transition('delivery', 'deliver event', 'PENDING', r.status),
      attempts: r.attempts,
      nextAttemptAt: r.nextAttemptAt,
      lastError: r.lastError,
      now: new Date(now),
      attemptNo,
      startedAt: new Date(startedAt),
      statusCode: o.statusCode,
      error: o.error,
      excerpt: o.excerpt ?? null,
      durationMs,
      notifyUrl: ev.notifyUrl,
    });
    const log = this.#svc.log;
    if (!fenced) log.warn({ eventId: ev.id, appId: ev.appId, attempt: attemptNo }, 'event lease lost before the attempt was recorded');
    if (r.ok) return;
    // Never the payload or the signature: identifiers and the outcome only.
    const line = {
      eventId: ev.id,
      appId: ev.appId,
      attempt: attemptNo,
      statusCode: o.statusCode,
      error: o.error,
      status: r.status,
      nextAttemptAt: r.nextAttemptAt,
    };
    if (r.status === 'DEAD') log.error(line, 'event notification dead: no attempt acknowledged');
    else if (o.error === 'NO_NOTIFY_URL') log.info(line, 'event notification not sent: the app has no notifyUrl');
    else log.warn(line, 'event notification attempt failed');
  }

  /** Milliseconds until the next PENDING event comes due (events_due), or null when none is waiting. */
  async #nextDueInMs(): Promise<number | null> {
    const now = this.#svc.clock.now();
    const at = await events.nextDueEventAt(this.#svc.db, new Date(now));
    return at ? at.getTime() - now : null;
  }

  /**
   * The workers tick once a second, so a retry would start up to a second late (more while another
   * app's receiver hangs and run() waits for it): the workers are woken when the next event comes
   * due instead, so each retry starts on its step (decisions.md section 7).
   */
  #wakeWhenDue(inMs: number | null): void {
    clearTimeout(this.#dueTimer);
    if (inMs === null || inMs > MAX_DUE_TIMER_MS) return;
    this.#dueTimer = setTimeout(() => this.#svc.wakeWorkers(), Math.ceil(inMs) + 1);
    this.#dueTimer.unref();
  }
}
