/**
 * X-SVC-Request-Id replay as a unit of work (decisions.md section 5). The surface that receives a
 * POST opens a unit for its request id; the unit claims the id (on its own, or joined to the
 * operation's first write), the operation's last write may record the answer in the same
 * transaction, and the surface finishes the unit with the answer it sends. Only the unit's holder
 * completes or abandons the record (fenced by the holder's token).
 *
 * A concurrent duplicate waits for the holder and replays its answer; a holder that is gone (its
 * lease ran out, or its instance stopped beating: a crash, a kill) is taken over within seconds.
 * Which answers are kept is the surface's to say (each answer says so); answers are kept
 * REPLAY_RETENTION_HOURS.
 */
import { randomBytes } from 'node:crypto';
import type { Clock } from '../domain/clock.ts';
import { transition } from '../domain/states.ts';
import type { Db } from '../store/db.ts';
import type { RecordedAnswer } from '../store/attempt-acceptance.ts';
import type { InlineClaim } from '../store/order-inserts.ts';
import { purgeRecreateRequests } from '../store/recreate-requests.ts';
import * as replays from '../store/replays.ts';
import type { RequestKey } from '../store/replays.ts';
import type { Log } from './deps.ts';

/** A unit's answer kept for replay: its move from the state its holder's claim left it in, checked when the service loads. */
const ANSWERED = transition('requestUnit', 'answer request', 'IN_PROGRESS', 'DONE');

export type { RequestKey } from '../store/replays.ts';

export const REPLAY_RETENTION_HOURS = 24;
/** A holder's lease: the backstop when its instance is still beating but the request never ends. */
export const LEASE_SECONDS = 120;
/** An instance beats this often... */
export const HEARTBEAT_MS = 1000;
/** ...and is judged gone when it has not beaten for this long: its requests may be taken over. */
export const INSTANCE_GONE_AFTER_MS = 4000;
/** How long a duplicate waits for a holder that is still running before it is answered 503. */
export const WAIT_LIMIT_MS = 10_000;

/** An answer: the status and the exact body bytes sent (and replayed), as the surface renders them. */
export interface Answer {
  status: number;
  body: string;
}

/** An answer, and whether it is kept for replay (the surface's rule: a "try again" answer is not). */
export interface FinalAnswer extends Answer {
  kept: boolean;
}

export type Decided = { kind: 'replay'; status: number; body: string } | { kind: 'conflict' } | { kind: 'busy' };

/** Thrown by a unit's claim: the id belongs to another request; its outcome answers this one. */
export class RequestDecided extends Error {
  override name = 'RequestDecided';
  readonly outcome: Decided;
  constructor(outcome: Decided) {
    super(`request id already used: ${outcome.kind}`);
    this.outcome = outcome;
  }
}

/** Renders a use case's result as the answer the surface will send. */
export type Render = (result: unknown) => FinalAnswer;

const sleep = (ms: number) => new Promise<void>((res) => setTimeout(res, ms));

export class RequestUnits {
  readonly instanceId = `ins_${randomBytes(8).toString('hex')}`;
  readonly #db: Db;
  readonly #clock: Clock;
  readonly #log: Log;
  #claims = 0;
  #beat: NodeJS.Timeout | null = null;
  /**
   * Ids executing on this instance, each with a promise settled when its unit finishes: a
   * duplicate arriving meanwhile waits on it instead of polling. Ids held elsewhere are polled.
   */
  readonly #inflight = new Map<string, { settled: Promise<void>; settle: () => void }>();
  /**
   * Claims joined to a write whose commit was not confirmed (the connection was lost during it):
   * the claim may exist, held by a holder that will never finish. Its lease is ended as soon as
   * the database answers (at once, else at each heartbeat), so a retry takes it over and answers
   * from the ledger (the order's number) instead of waiting for the lease.
   */
  readonly #unconfirmed: { key: RequestKey; holder: string }[] = [];

  constructor(db: Db, clock: Clock, log: Log) {
    this.#db = db;
    this.#clock = clock;
    this.#log = log;
  }

  #now(): Date {
    return new Date(this.#clock.now());
  }

  /**
   * Registers this instance and beats every HEARTBEAT_MS. `alone`: this instance owns the database
   * (the embedded PostgreSQL, behind its DATA_DIR lock), so every other instance row is a crashed
   * predecessor and its requests are taken over at once.
   */
  async start(o: { alone: boolean }): Promise<void> {
    const now = this.#now();
    if (o.alone) await replays.removeInstances(this.#db, { except: this.instanceId });
    else await replays.removeInstances(this.#db, { before: new Date(now.getTime() - 24 * 3600_000) });
    await replays.registerInstance(this.#db, this.instanceId, now);
    this.#beat = setInterval(() => {
      replays.beat(this.#db, this.instanceId, this.#now()).catch((err: unknown) => this.#log.warn({ err }, 'instance heartbeat failed'));
      void this.endUnconfirmed();
    }, HEARTBEAT_MS);
    this.#beat.unref();
  }

  /** A graceful stop: no more beats; the instance row goes, so any lease left is taken over at once. */
  async stop(): Promise<void> {
    if (this.#beat) clearInterval(this.#beat);
    this.#beat = null;
    await replays.removeInstance(this.#db, this.instanceId).catch(() => {});
  }

  open(key: RequestKey, render: Render): RequestUnit {
    return new RequestUnit(this, key, render);
  }

  /** A new holder for a claim made now. */
  holder(): replays.Holder {
    return {
      holder: `${this.instanceId}.${++this.#claims}`,
      instance: this.instanceId,
      leaseUntil: new Date(this.#clock.now() + LEASE_SECONDS * 1000),
    };
  }

  get db(): Db {
    return this.#db;
  }

  get log(): Log {
    return this.#log;
  }

  now(): Date {
    return this.#now();
  }

  /** Since when an instance must have beaten to count as alive. */
  aliveSince(now: Date): Date {
    return new Date(now.getTime() - INSTANCE_GONE_AFTER_MS);
  }

  hold(k: RequestKey): void {
    const id = `${k.appId} ${k.requestId}`;
    if (this.#inflight.has(id)) return;
    let settle!: () => void;
    const settled = new Promise<void>((res) => (settle = res));
    this.#inflight.set(id, { settled, settle });
  }

  release(k: RequestKey): void {
    const id = `${k.appId} ${k.requestId}`;
    const w = this.#inflight.get(id);
    if (w) {
      this.#inflight.delete(id);
      w.settle();
    }
  }

  /** Held here: until the holder finishes, bounded by `remainingMs`. Held by another instance: `pollMs`. */
  async wait(k: RequestKey, pollMs: number, remainingMs: number): Promise<void> {
    const w = this.#inflight.get(`${k.appId} ${k.requestId}`);
    if (!w) return sleep(pollMs);
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([w.settled, new Promise<void>((res) => (timer = setTimeout(res, remainingMs)))]);
    clearTimeout(timer);
  }

  /**
   * A stop that cuts requests off: the leases this instance holds end now, so a retry (on another
   * instance, or after a restart) takes the id over at once. What such an execution left is
   * protected as after any lost holder: by the order and refund numbers, and by the provider check
   * for an attempt whose provider call had not answered. Answers how many.
   */
  endLeasesHeldHere(): Promise<number> {
    return replays.endLeasesOf(this.#db, this.instanceId, this.#now());
  }

  /** A claim whose write's commit was not confirmed: its lease is to end (see #unconfirmed). */
  unconfirmed(key: RequestKey, holder: string): Promise<void> {
    this.#unconfirmed.push({ key, holder });
    return this.endUnconfirmed();
  }

  /** Ends the leases of the unconfirmed claims; those the database did not take stay for the next beat. */
  async endUnconfirmed(): Promise<void> {
    for (const u of this.#unconfirmed.splice(0)) {
      try {
        await replays.endLease(this.#db, u.key.appId, u.key.requestId, u.holder, this.#now());
      } catch {
        this.#unconfirmed.push(u);
      }
    }
  }

  /** Drops answers past the retention (and the re-creates' request ids, kept as long). */
  async purge(): Promise<number> {
    const before = new Date(this.#clock.now() - REPLAY_RETENTION_HOURS * 3600_000);
    return (await replays.purgeRequestIds(this.#db, before, 5000)) + (await purgeRecreateRequests(this.#db, before, 5000));
  }
}

/**
 * One request id's unit of work. Claiming: `claim()` on its own; or an operation joins the claim
 * to its first write (`joinClaim()`, then `joined(claimed)` with that write's outcome). Answering:
 * an operation may record the answer in its last transaction (`answerFor(result)` gives what to
 * write, `answerRecorded()` once written); `finish()` completes the unit with the answer sent.
 */
export class RequestUnit {
  readonly key: RequestKey;
  readonly #units: RequestUnits;
  readonly #render: Render;
  #holder: replays.Holder | null = null;
  /** The holder of a claim joined to a write whose outcome is not known yet. */
  #pending: replays.Holder | null = null;
  #recorded: Answer | null = null;

  constructor(units: RequestUnits, key: RequestKey, render: Render) {
    this.#units = units;
    this.key = key;
    this.#render = render;
  }

  get held(): boolean {
    return this.#holder !== null;
  }

  /** The claim to make inside the operation's first write, or null when the unit already holds the id. */
  joinClaim(): InlineClaim | null {
    if (this.#holder) return null;
    const h = this.#units.holder();
    this.#pending = h;
    return { ...this.key, holder: h.holder, holderInstance: h.instance, leaseUntil: h.leaseUntil };
  }

  /** The first write's outcome: it claimed the id, or found it taken (then `claim()` decides). */
  joined(claimed: boolean): void {
    if (claimed && this.#pending) {
      this.#holder = this.#pending;
      this.#units.hold(this.key);
    }
    this.#pending = null;
  }

  /**
   * Claims the id in a statement of its own. Another request's id: waits for it (a holder on this
   * instance is waited for, one elsewhere polled), replays its answer, takes it over when its
   * holder is gone, or throws RequestDecided (replay, conflict, or busy past WAIT_LIMIT_MS).
   */
  async claim(): Promise<void> {
    if (this.#holder) return;
    const u = this.#units;
    const k = this.key;
    const started = Date.now();
    let delay = 10;
    for (;;) {
      const now = u.now();
      const h = u.holder();
      if (await replays.claimRequestId(u.db, k, h, now)) return this.#take(h);
      const row = await replays.readRequestId(u.db, k.appId, k.requestId, now, u.aliveSince(now));
      if (!row) continue; // deleted in between (a 429/503 was dropped): try to insert again
      if (row.method !== k.method || row.target !== k.target || row.bodySha256 !== k.bodySha256) {
        throw new RequestDecided({ kind: 'conflict' });
      }
      if (row.state === 'DONE') throw new RequestDecided({ kind: 'replay', status: row.answerStatus!, body: row.body! });
      if (row.takeable && (await replays.takeOverRequestId(u.db, k, h, now, u.aliveSince(now)))) return this.#take(h);
      const waited = Date.now() - started;
      if (waited > WAIT_LIMIT_MS) throw new RequestDecided({ kind: 'busy' });
      await u.wait(k, delay, WAIT_LIMIT_MS - waited + 1);
      delay = Math.min(delay * 2, 200);
    }
  }

  #take(h: replays.Holder): void {
    this.#holder = h;
    this.#units.hold(this.key);
  }

  /** What to record with the operation's last write for `result`, or null (not held, or not kept). */
  answerFor(result: unknown): RecordedAnswer | null {
    if (!this.#holder) return null;
    const a = this.#render(result);
    if (!a.kept) return null;
    return { appId: this.key.appId, requestId: this.key.requestId, holder: this.#holder.holder, status: a.status, body: a.body };
  }

  /** The operation's last write recorded `a`: that is the answer this unit sends. */
  answerRecorded(a: RecordedAnswer): void {
    this.#recorded = { status: a.status, body: a.body };
  }

  /**
   * Ends the unit with `answer` (the surface's rendering of the operation's outcome) and answers
   * what to send: the answer recorded by the operation if it did, else `answer`, kept for replay
   * (fenced by the holder) when the surface says it is kept, else given up. A unit that never held the id claims it now:
   * the first claim's answer is the one kept (RequestDecided otherwise). `answer` may be given as a
   * function: it is then called only when the operation recorded no answer (nothing is rendered
   * twice), before any claim made here.
   */
  async finish(answer: FinalAnswer | (() => FinalAnswer)): Promise<Answer> {
    const u = this.#units;
    if (this.#recorded) {
      u.release(this.key);
      return this.#recorded;
    }
    const a = typeof answer === 'function' ? answer() : answer;
    if (!this.#holder) await this.claim();
    const h = this.#holder!;
    const ids = { appId: this.key.appId, requestId: this.key.requestId };
    try {
      if (!a.kept) {
        await replays.abandonRequestId(u.db, ids.appId, ids.requestId, h.holder);
      } else if (!(await replays.completeRequestId(u.db, ids.appId, ids.requestId, h.holder, ANSWERED, a.status, a.body))) {
        // Taken over meanwhile (this holder was judged gone): the answer is sent, not kept.
        u.log.warn(ids, 'request id taken over before its answer was recorded');
      }
    } catch (err) {
      // The operation's outcome stands and is answered; a retry will find the id held and take it
      // over once the lease runs out, then answer from the ledger (order and refund numbers).
      u.log.error({ err, ...ids }, 'could not record the answer for request-id replay');
    } finally {
      u.release(this.key);
    }
    return a;
  }

  /** The operation failed unexpectedly: the id is given up (a retry executes afresh). */
  async abandon(): Promise<void> {
    const u = this.#units;
    if (this.#pending !== null) {
      // The write carrying the claim failed without an answer: it may have committed (docs/high-availability.md).
      void u.unconfirmed(this.key, this.#pending.holder);
      this.#pending = null;
    }
    try {
      if (this.#holder) await replays.abandonRequestId(u.db, this.key.appId, this.key.requestId, this.#holder.holder);
    } finally {
      u.release(this.key);
    }
  }
}
