/**
 * The job runner: claims due jobs (src/store/jobs.ts), runs each with the handler of its kind
 * (src/workers.ts lists them), and completes it, or fails it with the one backoff rule of
 * src/domain/jobs.ts. A handler answers 'done' (or nothing) when the work is over and 'retry' when
 * it must run again later; a handler that throws is retried the same way (the error logged). A job
 * a handler rescheduled itself (or that another change rescheduled meanwhile) is released from its
 * holder, so its completion leaves it in place: the work added is never dropped.
 *
 * Jobs run concurrently (at most `concurrency` in this instance). A pass runs the jobs that were
 * due when it started: it claims again while its claims find some (FIND_DUE_WORK adds the jobs
 * it finds due since the moment their work came due, so they run in the same pass; what a job
 * schedules for now runs in the next one), and waits for its jobs at most `maxWaitMs`; a run of a
 * long kind (a reconciliation) it does not wait for: it goes on in the background, holding its
 * slot and renewing its lease, and never holds up the worker loop's other tasks.
 */
import { type JobKind, RECURRING_KINDS, isLong, recurrenceMs, retryDelayMs } from '../domain/jobs.ts';
import * as jobs from '../store/jobs.ts';
import type { ClaimedJob } from '../store/jobs.ts';
import { type UseCaseDeps, nowOf } from './deps.ts';
import { INSTANCE_GONE_AFTER_MS } from './request-units.ts';

/** A claimed job as its handler sees it. */
export interface Job extends ClaimedJob {
  /** Extends the lease of a long run; false when another holder took the job over (the run should stop). */
  renew(): Promise<boolean>;
}

export type JobOutcome = 'done' | 'retry';
export type JobHandler<D> = (d: D, job: Job) => Promise<JobOutcome | void>;
/** One handler per kind: the type makes a kind without a handler a compile error. */
export type JobHandlers<D> = { readonly [K in JobKind]: JobHandler<D> };

/** A claim's lease: well above any provider call; a longer run renews it (Job.renew). */
export const JOB_LEASE_MS = 60_000;
/** Claims in one pass at most (each of at most `concurrency` jobs). */
const MAX_ROUNDS = 10;

export interface JobRunnerOptions {
  /** Jobs running at once in this instance: 8. */
  concurrency?: number;
  /** How long a pass waits for its jobs before it returns: 2 s. */
  maxWaitMs?: number;
}

export class JobRunner<D extends UseCaseDeps> {
  readonly name = 'jobs';
  readonly #d: D;
  readonly #handlers: JobHandlers<D>;
  readonly #concurrency: number;
  readonly #maxWaitMs: number;
  readonly #inFlight = new Set<Promise<void>>();
  #claims = 0;
  #recurringEnsured = false;

  constructor(d: D, handlers: JobHandlers<D>, o: JobRunnerOptions = {}) {
    this.#d = d;
    this.#handlers = handlers;
    this.#concurrency = o.concurrency ?? 8;
    this.#maxWaitMs = o.maxWaitMs ?? 2_000;
  }

  /** One pass; answers how many jobs it started. */
  async run(): Promise<number> {
    const d = this.#d;
    const started = Date.now();
    if (!this.#recurringEnsured) {
      await jobs.ensureRecurring(d.db, RECURRING_KINDS, nowOf(d));
      this.#recurringEnsured = true;
    }
    // What was due when the pass started (a clock moved by a test moves it too).
    const now = nowOf(d);
    // Never its own: an instance running this pass is alive, however late its last beat was written
    // (a beat held up by a busy database would otherwise cut its own long runs off).
    await jobs.releaseJobsOfGoneInstances(d.db, new Date(now.getTime() - INSTANCE_GONE_AFTER_MS), now, d.instanceId);
    let n = 0;
    for (let round = 0; round < MAX_ROUNDS; round++) {
      const free = this.#concurrency - this.#inFlight.size;
      if (free <= 0) break;
      const { holder, claimed } = await this.#claim(free, now);
      if (claimed.length === 0) break;
      n += claimed.length;
      // A long run (a reconciliation) goes on in the background: the pass waits for the others.
      const runs = claimed.map((j) => this.#start(j, holder)).filter((_, i) => !isLong(claimed[i]!.kind));
      const left = this.#maxWaitMs - (Date.now() - started);
      if (!(await settledWithin(Promise.all(runs), left))) break;
    }
    return n;
  }

  /** Resolves when no job of this instance is running. */
  async idle(): Promise<void> {
    while (this.#inFlight.size > 0) await Promise.all([...this.#inFlight]);
  }

  /** One claim of the jobs due by `dueBy`; its token (the holder) is unique to it. */
  async #claim(limit: number, dueBy: Date): Promise<{ holder: string; claimed: ClaimedJob[] }> {
    const d = this.#d;
    const holder = `${d.instanceId}.j${++this.#claims}`;
    const leaseUntil = new Date(d.clock.now() + JOB_LEASE_MS);
    const claimed = await jobs.claimJobs(d.db, { limit, holder, instance: d.instanceId, now: dueBy, leaseUntil });
    return { holder, claimed };
  }

  #start(c: ClaimedJob, holder: string): Promise<void> {
    const p = this.#runOne(c, holder).finally(() => this.#inFlight.delete(p));
    this.#inFlight.add(p);
    return p;
  }

  async #runOne(c: ClaimedJob, holder: string): Promise<void> {
    const d = this.#d;
    const job: Job = {
      ...c,
      renew: () => jobs.renewJob(d.db, c.id, holder, new Date(d.clock.now() + JOB_LEASE_MS)),
    };
    const line = { job: c.kind, subjectId: c.subjectId, runs: c.runs };
    let outcome: JobOutcome | 'error';
    let error = '';
    try {
      outcome = (await this.#handlers[c.kind](d, job)) ?? 'done';
    } catch (err) {
      outcome = 'error';
      error = err instanceof Error ? err.message : String(err);
      d.log.warn({ err, ...line }, 'job failed; it will be retried');
    }
    try {
      const now = d.clock.now();
      if (outcome === 'done') {
        const every = recurrenceMs(c.kind);
        await jobs.completeJob(d.db, c.id, holder, every === null ? null : new Date(now + every));
        return;
      }
      const delay = retryDelayMs(c.kind, c.runs);
      await jobs.failJob(d.db, c.id, holder, delay === null ? null : new Date(now + delay), outcome === 'error' ? error : 'retry');
      if (delay === null) d.log.error(line, 'job dropped: no run left');
    } catch (err) {
      // The lease runs out and the job is claimed again: at least once, never lost.
      d.log.warn({ err, ...line }, 'job outcome could not be recorded; it will run again');
    }
  }
}

/** Whether `p` settled within `ms` (it goes on either way). */
async function settledWithin(p: Promise<unknown>, ms: number): Promise<boolean> {
  if (ms <= 0) return false;
  let timer: NodeJS.Timeout | undefined;
  const done = await Promise.race([p.then(() => true), new Promise<boolean>((r) => (timer = setTimeout(() => r(false), ms)))]);
  clearTimeout(timer);
  return done;
}
