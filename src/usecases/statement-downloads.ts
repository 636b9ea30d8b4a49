/**
 * The budget of statement files made at once by this instance (docs/configuration.md, "Statement
 * downloads"): making a file reads and encodes a whole day, so at most `perApp` of an app and
 * `total` in all run at once (a download from its first byte to its last, a first summary while it
 * computes the day's digest); one more is refused with 429 `OPEN_API_RATE_LIMITED` and
 * `Retry-After`, changing nothing. A first summary asked for by several callers at once is computed
 * once: the others wait for it and take no slot.
 *
 * The budget is this instance's: it protects this process's event loop and memory, the resource
 * it spends (a decision about money is never taken from it). Several instances each admit their own.
 */
import { setImmediate as nextTurn, setTimeout as pause } from 'node:timers/promises';
import { DomainError } from '../domain/errors.ts';

export interface StatementDownloadLimits {
  perApp: number;
  total: number;
  /** A download whose client has taken nothing for this long is cut. */
  stallTimeoutMs: number;
}

/**
 * Slices of statement work start at least this far apart (each is ~2 ms): statement files take at
 * most about a third of the main thread, whatever else is waiting, and the rest is left to requests.
 */
export const SLICE_GAP_MS = 6;

/** Seconds a refused caller is told to wait: a day's file takes seconds to send. */
export const STATEMENT_RETRY_AFTER_SECONDS = 5;

export class StatementDownloads {
  readonly limits: StatementDownloadLimits;
  readonly #byApp = new Map<string, number>();
  #total = 0;
  readonly #flights = new Map<string, Promise<unknown>>();
  #tail: Promise<void> = Promise.resolve();
  #lastSlice = 0;

  constructor(limits: StatementDownloadLimits) {
    this.limits = limits;
  }

  /** Statement files being made now (in all, or of one app). */
  inUse(appId?: string): number {
    return appId === undefined ? this.#total : (this.#byApp.get(appId) ?? 0);
  }

  /**
   * A slot for making one file of `appId`, released by the function answered (once, however often
   * it is called); throws RATE_LIMITED when the app's or the instance's slots are all taken.
   */
  acquire(appId: string): () => void {
    const mine = this.#byApp.get(appId) ?? 0;
    if (mine >= this.limits.perApp || this.#total >= this.limits.total) {
      throw new DomainError(
        'RATE_LIMITED',
        mine >= this.limits.perApp
          ? `At most ${this.limits.perApp} statement files of an app are made at once; try again shortly.`
          : 'Too many statement files are being made at once; try again shortly.',
        { retryAfterSeconds: STATEMENT_RETRY_AFTER_SECONDS },
      );
    }
    this.#byApp.set(appId, mine + 1);
    this.#total++;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.#total--;
      const n = (this.#byApp.get(appId) ?? 1) - 1;
      if (n === 0) this.#byApp.delete(appId);
      else this.#byApp.set(appId, n);
    };
  }

  /**
   * Waits for the caller's turn to do one slice of statement work (a page read, a few hundred rows
   * encoded): the turns of every file being made are taken one after another, one per turn of the
   * event loop and at least SLICE_GAP_MS apart, so however many files are being made, their work on
   * the main thread is one slice between two rounds of everything else (requests, timers, I/O), and
   * about a third of its time at most. A real wait (the wall clock): it paces work, it decides nothing.
   */
  turn(): Promise<void> {
    const mine = this.#tail.then(async () => {
      await nextTurn();
      const wait = this.#lastSlice + SLICE_GAP_MS - performance.now();
      if (wait >= 1) await pause(wait);
      this.#lastSlice = performance.now();
    });
    this.#tail = mine;
    return mine;
  }

  /** Runs `make` once for `key` however many callers ask at once; each gets its result (or its error). */
  async once<T>(key: string, make: () => Promise<T>): Promise<T> {
    const running = this.#flights.get(key);
    if (running) return running as Promise<T>;
    const p = make().finally(() => this.#flights.delete(key));
    this.#flights.set(key, p);
    return p;
  }
}
