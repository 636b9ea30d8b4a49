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
import { DomainError } from '../domain/errors.ts';
import type { Db } from '../store/db.ts';
import * as statements from '../store/statements.ts';
import type { WorkTurns } from './work-turns.ts';

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

/** Seconds a refused caller is told to wait: a day's file takes seconds to send. */
export const STATEMENT_RETRY_AFTER_SECONDS = 5;

export class StatementDownloads {
  readonly limits: StatementDownloadLimits;
  readonly #appSlots: AppSlots;
  readonly #turns: WorkTurns;
  #total = 0;
  readonly #flights = new Map<string, Promise<unknown>>();

  /** `turns`: the main thread's share of expensive work, whose turns statement slices take. */
  constructor(limits: StatementDownloadLimits, o: { appSlots: AppSlots; turns: WorkTurns }) {
    this.limits = limits;
    this.#appSlots = o.appSlots;
    this.#turns = o.turns;
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

  /** Waits for the caller's turn to do one slice of statement work (a page read, 64 rows encoded): WorkTurns. */
  turn(): Promise<void> {
    return this.#turns.turn();
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
