/**
 * X-SVC-Request-Id replay of the POST operations (decisions.md section 5): the first response is
 * kept at least 24 h and replayed byte for byte; another method, target or body under the same id
 * is a conflict; a concurrent duplicate waits for the first and replays it, so the operation never
 * executes twice. 429 and 503 answers are not kept. A holder that died mid-flight loses its lease
 * after LEASE_SECONDS and a retry may take over (business idempotency still protects the order).
 */
import type { Db } from '../store/db.ts';

export const REPLAY_RETENTION_HOURS = 24;
export const LEASE_SECONDS = 120;
const WAIT_LIMIT_MS = 30_000;

export type ReplayBegin = { kind: 'execute' } | { kind: 'replay'; status: number; body: string } | { kind: 'conflict' } | { kind: 'busy' };

export interface ReplayKey {
  appId: string;
  requestId: string;
  method: string;
  target: string;
  bodySha256: string;
}

interface Row {
  method: string;
  target: string;
  body_sha256: string;
  state: 'IN_PROGRESS' | 'DONE';
  status_code: number | null;
  response_body: string | null;
  lease_expired: boolean;
}

export class ReplayStore {
  readonly #db: Db;
  /**
   * Request ids executing on this instance, each with a promise settled when its answer is
   * recorded (or abandoned): a duplicate arriving meanwhile waits on it instead of polling.
   * Ids held by another instance are polled.
   */
  readonly #inflight = new Map<string, { key: ReplayKey; settled: Promise<void>; settle: () => void }>();
  constructor(db: Db) {
    this.#db = db;
  }

  /** Records that this instance holds the id (an operation claimed it inside its own statement). */
  held(k: ReplayKey): void {
    this.#hold(k);
  }

  #hold(k: ReplayKey): ReplayBegin {
    const id = `${k.appId} ${k.requestId}`;
    if (!this.#inflight.has(id)) {
      let settle!: () => void;
      const settled = new Promise<void>((res) => (settle = res));
      this.#inflight.set(id, { key: k, settled, settle });
    }
    return { kind: 'execute' };
  }

  /**
   * For a stop that cuts requests off: the leases of every request id still executing here end
   * now, so that a retry (on another instance, or after a restart) takes the id over at once
   * instead of waiting up to LEASE_SECONDS for a holder that is gone. What such an execution left
   * is protected as after any expired lease: by the order and refund numbers, and by the
   * reconciler for an attempt whose provider call had not answered. Answers how many.
   */
  async endLeasesHeldHere(): Promise<number> {
    const keys = [...this.#inflight.values()].map((e) => e.key);
    if (keys.length === 0) return 0;
    const r = await this.#db.query(
      `UPDATE request_replays r SET lease_until = now() - interval '1 millisecond'
         FROM unnest($1::text[], $2::text[]) AS k(app_id, request_id)
        WHERE r.app_id = k.app_id AND r.request_id = k.request_id AND r.state = 'IN_PROGRESS'`,
      [keys.map((k) => k.appId), keys.map((k) => k.requestId)],
    );
    return r.rowCount ?? 0;
  }

  /** The request id's execution on this instance is over (its answer is recorded, or it was abandoned). */
  release(k: ReplayKey): void {
    const id = `${k.appId} ${k.requestId}`;
    const w = this.#inflight.get(id);
    if (w) {
      this.#inflight.delete(id);
      w.settle();
    }
  }

  /**
   * Held here: until the holder finishes, bounded by `remainingMs`. Held by another instance:
   * `pollMs`.
   */
  async #wait(k: ReplayKey, pollMs: number, remainingMs: number): Promise<void> {
    const w = this.#inflight.get(`${k.appId} ${k.requestId}`);
    let timer: NodeJS.Timeout | undefined;
    const sleep = new Promise<void>((res) => (timer = setTimeout(res, w ? remainingMs : pollMs)));
    await (w ? Promise.race([w.settled, sleep]) : sleep);
    clearTimeout(timer);
  }

  async begin(k: ReplayKey): Promise<ReplayBegin> {
    const started = Date.now();
    let delay = 10;
    for (;;) {
      const ins = await this.#db.query({
        name: 'replay_begin',
        text: `INSERT INTO request_replays(app_id, request_id, method, target, body_sha256, state, lease_until)
         VALUES ($1, $2, $3, $4, $5, 'IN_PROGRESS', now() + make_interval(secs => $6))
         ON CONFLICT (app_id, request_id) DO NOTHING RETURNING 1`,
        values: [k.appId, k.requestId, k.method, k.target, k.bodySha256, LEASE_SECONDS],
      });
      if (ins.rowCount === 1) return this.#hold(k);
      const r = await this.#db.query<Row>(
        `SELECT method, target, body_sha256, state, status_code, response_body, (lease_until < now()) AS lease_expired
           FROM request_replays WHERE app_id = $1 AND request_id = $2`,
        [k.appId, k.requestId],
      );
      const row = r.rows[0];
      if (!row) continue; // deleted in between (a 429/503 was dropped): try to insert again
      if (row.method !== k.method || row.target !== k.target || row.body_sha256 !== k.bodySha256) return { kind: 'conflict' };
      if (row.state === 'DONE') return { kind: 'replay', status: row.status_code!, body: row.response_body! };
      if (row.lease_expired) {
        const take = await this.#db.query(
          `UPDATE request_replays SET lease_until = now() + make_interval(secs => $3)
            WHERE app_id = $1 AND request_id = $2 AND state = 'IN_PROGRESS' AND lease_until < now() RETURNING 1`,
          [k.appId, k.requestId, LEASE_SECONDS],
        );
        if (take.rowCount === 1) return this.#hold(k);
      }
      const waited = Date.now() - started;
      if (waited > WAIT_LIMIT_MS) return { kind: 'busy' };
      await this.#wait(k, delay, WAIT_LIMIT_MS - waited + 1);
      delay = Math.min(delay * 2, 200);
    }
  }

  async complete(k: ReplayKey, status: number, body: string): Promise<void> {
    if (status === 429 || status === 503) {
      await this.abandon(k);
      return;
    }
    try {
      await this.#db.query({
        name: 'replay_complete',
        text: `UPDATE request_replays SET state = 'DONE', status_code = $3, response_body = $4, lease_until = NULL
        WHERE app_id = $1 AND request_id = $2`,
        values: [k.appId, k.requestId, status, body],
      });
    } finally {
      this.release(k);
    }
  }

  async abandon(k: ReplayKey): Promise<void> {
    try {
      await this.#db.query(`DELETE FROM request_replays WHERE app_id = $1 AND request_id = $2 AND state = 'IN_PROGRESS'`, [
        k.appId,
        k.requestId,
      ]);
    } finally {
      this.release(k);
    }
  }

  /**
   * Drops answers older than the retention, and records whose holder died long ago (an
   * IN_PROGRESS row whose lease expired more than the retention ago is never completed).
   */
  async purge(): Promise<number> {
    const r = await this.#db.query(
      `DELETE FROM request_replays WHERE ctid IN (SELECT ctid FROM request_replays
        WHERE created_at < now() - make_interval(hours => $1)
          AND (state = 'DONE' OR lease_until < now() - make_interval(hours => $1)) LIMIT 5000)`,
      [REPLAY_RETENTION_HOURS],
    );
    // The re-creates' request ids (src/usecases/orders.ts) are remembered as long as the answers.
    const rr = await this.#db.query(
      `DELETE FROM recreate_requests WHERE ctid IN (SELECT ctid FROM recreate_requests
        WHERE created_at < now() - make_interval(hours => $1) LIMIT 5000)`,
      [REPLAY_RETENTION_HOURS],
    );
    return (r.rowCount ?? 0) + (rr.rowCount ?? 0);
  }
}

/**
 * Handed to a POST operation by runWithReplay.
 *
 * Claiming: by default runWithReplay claims the request id before the operation runs (`held` is
 * then true). An operation run with `inlineClaim` gets the ticket unheld, and must hold it before
 * its first write: either inside that write's own statement (it inserts the IN_PROGRESS record
 * with `key` and `LEASE_SECONDS`, then calls `claimedInline()`), or with `claim()`, a statement
 * of its own. `claim()` throws ReplayDecided when another request has the id: runWithReplay then
 * answers with the replay or the conflict. An operation that answers without writing anything (a
 * rejection, or an answer read from existing state) may leave it unheld: runWithReplay claims it
 * afterwards, and the first claim's answer is the one kept.
 *
 * Completing: an operation that writes the answer into the replay record in its own last
 * transaction (so the answer is atomic with the change it reports and costs no write of its own)
 * sets `storedPayload` to the exact bytes it stored; runWithReplay then sends those bytes and does
 * not complete the record again.
 */
export interface ReplayTicket {
  readonly key: ReplayKey;
  readonly held: boolean;
  claim(): Promise<void>;
  claimedInline(): void;
  storedPayload: string | null;
}

/** Thrown by ReplayTicket.claim(): the id belongs to another request; its outcome answers this one. */
export class ReplayDecided extends Error {
  readonly outcome: Exclude<ReplayBegin, { kind: 'execute' }>;
  constructor(outcome: Exclude<ReplayBegin, { kind: 'execute' }>) {
    super(`request id already used: ${outcome.kind}`);
    this.outcome = outcome;
  }
}

export function replayTicket(store: ReplayStore, key: ReplayKey, held: boolean): ReplayTicket {
  const t = {
    key,
    held,
    storedPayload: null as string | null,
    async claim() {
      if (t.held) return;
      const b = await store.begin(key);
      if (b.kind !== 'execute') throw new ReplayDecided(b);
      t.held = true;
    },
    claimedInline() {
      store.held(key);
      t.held = true;
    },
  };
  return t;
}
