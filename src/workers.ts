/**
 * The background worker loop, safe with several instances (work is claimed with row locks and
 * leases): follow-up work, expiry, the reconciler (src/usecases/reconcile.ts), the event
 * dispatcher and any extra task, and purging of expired nonces and request-id answers. A pass runs
 * every second, and at once (at most every WAKE_MIN_GAP_MS) when something asks for it.
 */
import type { UseCaseDeps } from './usecases/deps.ts';
import { runFollowUps } from './usecases/follow-ups.ts';
import {
  expireDueOrders,
  reconcileAttempts,
  reconcileCloses,
  reconcileDuplicates,
  reconcileRefunds,
  recoverWorkOfGoneInstances,
} from './usecases/reconcile.ts';

const TICK_MS = 1000;
/**
 * A wake (an event came due, a delivery ended, follow-up work was written) runs a pass at once,
 * but passes start at least this far apart: each pass runs every task's claim, and a steady
 * stream of deliveries would otherwise wake ~40 passes a second under load.
 */
const WAKE_MIN_GAP_MS = 100;
const BATCH = 20;

export interface WorkerTask {
  name: string;
  /** Returns how many items it handled (0 = idle). */
  run(): Promise<number>;
}

/** What the worker loop runs besides its own tasks, and what it purges. */
export interface WorkerDeps extends UseCaseDeps {
  /** Drops expired nonces and request-id answers; answers how many. */
  purge(): Promise<number>;
}

export class Workers {
  readonly #svc: WorkerDeps;
  readonly #tasks: WorkerTask[];
  #timer: NodeJS.Timeout | null = null;
  #running: Promise<void> | null = null;
  #stopped = true;
  #wake = false;
  #halt = false;
  #lastPassAt = 0;

  constructor(svc: WorkerDeps, extra: WorkerTask[] = []) {
    this.#svc = svc;
    this.#tasks = [
      { name: 'follow-ups', run: () => runFollowUps(svc, BATCH) },
      { name: 'recover work of gone instances', run: () => this.#atMostEvery(1000, 'recover', () => recoverWorkOfGoneInstances(svc)) },
      { name: 'expiry', run: () => expireDueOrders(svc, BATCH) },
      { name: 'reconcile attempts', run: () => reconcileAttempts(svc, BATCH) },
      { name: 'reconcile refunds', run: () => reconcileRefunds(svc, BATCH) },
      { name: 'reconcile closes', run: () => reconcileCloses(svc, BATCH) },
      { name: 'reconcile duplicates', run: () => reconcileDuplicates(svc, BATCH) },
      ...extra,
      // What has expired (WorkerDeps.purge), at most once a minute.
      { name: 'purge', run: () => this.#atMostEvery(60_000, 'purge', () => svc.purge()) },
    ];
  }

  readonly #lastRun = new Map<string, number>();
  /** Runs `fn` at most once per `ms` (a pass may run ten times a second when woken). */
  async #atMostEvery(ms: number, name: string, fn: () => Promise<number>): Promise<number> {
    if (Date.now() - (this.#lastRun.get(name) ?? 0) < ms) return 0;
    this.#lastRun.set(name, Date.now());
    return fn();
  }

  start(): void {
    if (!this.#stopped) return;
    this.#stopped = false;
    this.#schedule(50);
  }

  wake(): void {
    if (this.#stopped) return;
    if (this.#running) {
      this.#wake = true;
      return;
    }
    this.#schedule(this.#untilWakeAllowed());
  }

  #untilWakeAllowed(): number {
    return Math.max(0, this.#lastPassAt + WAKE_MIN_GAP_MS - Date.now());
  }

  #schedule(ms: number): void {
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = setTimeout(() => {
      this.#timer = null;
      this.#lastPassAt = Date.now();
      this.#running = this.tick().finally(() => {
        this.#running = null;
        if (!this.#stopped) this.#schedule(this.#wake ? this.#untilWakeAllowed() : TICK_MS);
        this.#wake = false;
      });
    }, ms);
    this.#timer.unref();
  }

  /** One pass over every task (exported for tests that drive time themselves). */
  async tick(): Promise<void> {
    for (const t of this.#tasks) {
      if (this.#halt) break;
      try {
        await t.run();
      } catch (err) {
        this.#svc.log.warn({ err, task: t.name }, 'background task failed; will retry');
      }
    }
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    this.#halt = true;
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = null;
    await this.#running;
  }
}
