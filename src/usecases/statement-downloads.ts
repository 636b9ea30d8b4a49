/**
 * The budget of statement files made at once (docs/configuration.md, "Statement downloads"):
 * making a file reads and encodes a whole day, so at most an app's limit of its files are made at
 * once across every instance (a lease per file in the database, counted while the instance holding
 * it beats: an instance that dies leaks no slot), and at most `total` in all by this instance (a
 * download from its first byte to its last, a first summary while it computes the day's digest);
 * one more is refused with 429 `OPEN_API_RATE_LIMITED` and `Retry-After`, changing nothing. An
 * app's limit is set by operators (apps.statement_downloads_at_once), else `perApp`. A first
 * summary asked for by several callers of one instance at once is computed once: the others wait
 * for it and take no slot.
 *
 * The instance's total protects this process's event loop and memory, the resource it spends; the
 * per-app limit is the app's share of the service, the same whichever instance it calls.
 */
import { randomUUID } from 'node:crypto';
import { setImmediate as nextTurn, setTimeout as pause } from 'node:timers/promises';
import { DomainError } from '../domain/errors.ts';
import type { Db } from '../store/db.ts';
import * as statements from '../store/statements.ts';

export interface StatementDownloadLimits {
  /** An app's limit when operators set none. */
  perApp: number;
  total: number;
  /** A download whose client has taken nothing for this long is cut. */
  stallTimeoutMs: number;
}

/** Where an app's slots are counted (across instances: databaseAppSlots). */
export interface AppSlots {
  /** One of the app's slots and the function that gives it back, or null with the limit that applied. */
  take(appId: string, defaultLimit: number): Promise<{ release: () => void; limit: number } | { release: null; limit: number }>;
}

/**
 * An app's slots as leases in the database, held by this instance (`instanceId`, counted while it
 * beats: `aliveSince`). A lease whose drop failed is dropped again before the next take (and counts
 * for nothing once the instance is gone).
 */
export function databaseAppSlots(
  db: Db,
  instance: { instanceId: string; aliveSince(now: Date): Date },
  now: () => Date,
  warn: (err: unknown) => void,
): AppSlots {
  const undropped = new Set<string>();
  const drop = (leaseId: string) =>
    statements.dropDownloadLease(db, leaseId).then(
      () => undropped.delete(leaseId),
      (err: unknown) => {
        undropped.add(leaseId);
        warn(err);
      },
    );
  return {
    async take(appId, defaultLimit) {
      for (const id of undropped) await drop(id);
      const leaseId = randomUUID();
      const at = now();
      const r = await statements.takeDownloadLease(db, {
        leaseId,
        appId,
        instanceId: instance.instanceId,
        defaultLimit,
        now: at,
        aliveSince: instance.aliveSince(at),
      });
      if (!r.taken) return { release: null, limit: r.limit };
      let released = false;
      return {
        limit: r.limit,
        release: () => {
          if (released) return;
          released = true;
          void drop(leaseId);
        },
      };
    },
  };
}

/**
 * While other requests wait, slices of statement work start at least this far apart (each is ~2
 * ms): statement files then take at most about a third of the main thread, and the rest is left to
 * those requests. With none waiting, slices run one per turn of the event loop, back to back.
 */
export const SLICE_GAP_MS = 6;

/** Seconds a refused caller is told to wait: a day's file takes seconds to send. */
export const STATEMENT_RETRY_AFTER_SECONDS = 5;

export class StatementDownloads {
  readonly limits: StatementDownloadLimits;
  readonly #appSlots: AppSlots;
  readonly #othersWaiting: () => boolean;
  #total = 0;
  readonly #flights = new Map<string, Promise<unknown>>();
  #tail: Promise<void> = Promise.resolve();
  #lastSlice = 0;

  /**
   * `othersWaiting`: whether other work waits for the main thread now (the open API's requests in
   * progress, counted by its surface); statement slices give way to it only then.
   */
  constructor(limits: StatementDownloadLimits, o: { appSlots: AppSlots; othersWaiting: () => boolean }) {
    this.limits = limits;
    this.#appSlots = o.appSlots;
    this.#othersWaiting = o.othersWaiting;
  }

  /** Statement files being made now by this instance. */
  inUse(): number {
    return this.#total;
  }

  /**
   * A slot for making one file of `appId`, released by the function answered (once, however often
   * it is called); throws RATE_LIMITED when the app's slots (across instances) or this instance's
   * are all taken.
   */
  async acquire(appId: string): Promise<() => void> {
    if (this.#total >= this.limits.total) {
      throw new DomainError('RATE_LIMITED', 'Too many statement files are being made at once; try again shortly.', {
        retryAfterSeconds: STATEMENT_RETRY_AFTER_SECONDS,
      });
    }
    this.#total++;
    let slot;
    try {
      slot = await this.#appSlots.take(appId, this.limits.perApp);
    } catch (err) {
      this.#total--;
      throw err;
    }
    if (slot.release === null) {
      this.#total--;
      throw new DomainError('RATE_LIMITED', `At most ${slot.limit} statement files of an app are made at once; try again shortly.`, {
        retryAfterSeconds: STATEMENT_RETRY_AFTER_SECONDS,
      });
    }
    const release = slot.release;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.#total--;
      release();
    };
  }

  /**
   * Waits for the caller's turn to do one slice of statement work (a page read, 64 rows encoded):
   * the turns of every file being made are taken one after another, one per turn of the event loop
   * (so I/O and timers run between any two). While other requests are in progress, turns are also
   * at least SLICE_GAP_MS apart, so however many files are being made, they take about a third of
   * the main thread at most; with none, statement work runs at full speed. A real wait (the wall
   * clock): it paces work, it decides nothing.
   */
  turn(): Promise<void> {
    const mine = this.#tail.then(async () => {
      await nextTurn();
      if (this.#othersWaiting()) {
        const wait = this.#lastSlice + SLICE_GAP_MS - performance.now();
        if (wait >= 1) await pause(wait);
      }
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
