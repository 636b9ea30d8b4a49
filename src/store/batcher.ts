/**
 * Statement batching across requests (docs/performance.md). The calls made in one event-loop turn,
 * or while the previous flush was in flight, are sent as one statement: one round trip, one
 * executor start and one commit for all of them, which under load is most of what a single-row
 * statement costs PostgreSQL. Alone, a call is sent as its own single-row statement, exactly as
 * without batching.
 *
 * A batch is one statement, so it is atomic: when PostgreSQL rejects it (a deadlock between two
 * batches, a constraint one item broke), nothing of it happened, and every item is sent again on
 * its own, where each gets the answer it would have had without batching. When the connection
 * fails instead, the outcome is unknown and every item of the batch fails with that error.
 */
import pg from 'pg';

export interface BatcherOptions<I, O> {
  /** One item as its own statement. */
  one: (item: I) => Promise<O>;
  /** Several items as one statement; the answers in the items' order. */
  many: (items: I[]) => Promise<O[]>;
  /** Items are sent in this order (e.g. by unique key, so that concurrent batches lock in one order). */
  compare?: (a: I, b: I) => number;
  /**
   * Items that must not share a statement (e.g. two claims of one request id): of the items with
   * one key, the first is batched and the others are sent on their own after the batch, in turn.
   */
  key?: (item: I) => string | null;
  /** Items in one statement at most (a larger backlog is split). */
  maxBatch?: number;
  /**
   * Flushes in flight at most (default 1). While a flush is in flight, new calls wait for it and
   * go together in the next one: the batch grows with the load by itself. Alone, a call is sent at
   * once. Only for statements that wait on nothing but PostgreSQL (a slow flush delays the next).
   */
  maxInFlight?: number;
}

interface Pending<I, O> {
  item: I;
  resolve: (o: O) => void;
  reject: (err: unknown) => void;
}

export class TurnBatcher<I, O> {
  readonly #o: BatcherOptions<I, O> & { maxBatch: number; maxInFlight: number };
  #pending: Pending<I, O>[] = [];
  #scheduled = false;
  #inFlight = 0;

  constructor(o: BatcherOptions<I, O>) {
    this.#o = { maxBatch: 64, maxInFlight: 1, ...o };
  }

  run(item: I): Promise<O> {
    return new Promise<O>((resolve, reject) => {
      this.#pending.push({ item, resolve, reject });
      this.#kick();
    });
  }

  /** Schedules a flush at the end of this turn, unless one is scheduled or the flushes in flight are at the limit. */
  #kick(): void {
    if (this.#scheduled || this.#pending.length === 0 || this.#inFlight >= this.#o.maxInFlight) return;
    this.#scheduled = true;
    setImmediate(() => this.#flush());
  }

  #flush(): void {
    this.#scheduled = false;
    if (this.#inFlight >= this.#o.maxInFlight) return;
    const all = this.#pending;
    this.#pending = [];
    if (this.#o.compare) {
      const cmp = this.#o.compare;
      all.sort((a, b) => cmp(a.item, b.item));
    }
    const sends: Promise<void>[] = [];
    for (let i = 0; i < all.length; i += this.#o.maxBatch) sends.push(this.#send(all.slice(i, i + this.#o.maxBatch)));
    this.#inFlight++;
    void Promise.allSettled(sends).then(() => {
      this.#inFlight--;
      this.#kick();
    });
  }

  async #send(all: Pending<I, O>[]): Promise<void> {
    let batch = all;
    const later: Pending<I, O>[] = [];
    if (this.#o.key) {
      const keyOf = this.#o.key;
      const seen = new Set<string>();
      batch = all.filter((p) => {
        const k = keyOf(p.item);
        if (k === null || !seen.has(k)) {
          if (k !== null) seen.add(k);
          return true;
        }
        later.push(p);
        return false;
      });
    }
    await this.#sendDistinct(batch);
    for (const p of later) await this.#single(p);
  }

  async #sendDistinct(batch: Pending<I, O>[]): Promise<void> {
    if (batch.length === 1) return this.#single(batch[0]!);
    let out: O[];
    try {
      out = await this.#o.many(batch.map((p) => p.item));
    } catch (err) {
      if (err instanceof pg.DatabaseError) {
        // The statement was refused and rolled back: each item on its own.
        await Promise.all(batch.map((p) => this.#single(p)));
      } else {
        for (const p of batch) p.reject(err);
      }
      return;
    }
    batch.forEach((p, i) => p.resolve(out[i]!));
  }

  async #single(p: Pending<I, O>): Promise<void> {
    try {
      p.resolve(await this.#o.one(p.item));
    } catch (err) {
      p.reject(err);
    }
  }
}
