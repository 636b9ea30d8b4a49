/**
 * The main thread's share of expensive work (statement files, reconciliation bills): such work is
 * done in slices (a page read, 64 rows encoded or parsed), each slice waiting for its turn. Turns
 * are taken one after another whatever the work, one per turn of the event loop (so I/O and timers
 * run between any two); while other work waits (the open API's requests in progress, counted by its
 * surface and passed in as `othersWaiting`), turns are also at least SLICE_GAP_MS apart, so
 * expensive work takes about a third of the main thread at most; with none waiting it runs at full
 * speed. A real wait (the wall clock): it paces work, it decides nothing.
 */
import { setImmediate as nextTurn, setTimeout as pause } from 'node:timers/promises';

/** While other work waits, slices start at least this far apart (each is ~2 ms). */
export const SLICE_GAP_MS = 6;

export class WorkTurns {
  readonly #othersWaiting: () => boolean;
  #tail: Promise<void> = Promise.resolve();
  #lastSlice = 0;
  readonly #alone = new Map<string, Promise<unknown>>();

  constructor(othersWaiting: () => boolean) {
    this.#othersWaiting = othersWaiting;
  }

  /** Waits for the caller's turn to do one slice. */
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

  /** Runs `work` when every earlier `work` of the same `kind` has ended: one at a time per kind in this process. */
  oneAtATime<T>(kind: string, work: () => Promise<T>): Promise<T> {
    const before = this.#alone.get(kind) ?? Promise.resolve();
    const mine = before.then(work, work);
    const settled = mine.then(
      () => {},
      () => {},
    );
    this.#alone.set(kind, settled);
    void settled.then(() => {
      if (this.#alone.get(kind) === settled) this.#alone.delete(kind);
    });
    return mine;
  }
}
