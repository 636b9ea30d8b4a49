/**
 * Nonce replay protection (decisions.md section 1: remembered per app at least 600 s). Two stores
 * behind one interface, both atomic under concurrency: PostgreSQL (the default) and Redis.
 */
import type { Redis } from 'ioredis';
import type { Db } from '../store/db.ts';

export const NONCE_TTL_SECONDS = 600;

export interface NonceStore {
  /** True the first time (app, nonce) is seen within the TTL; false on a replay. */
  claim(appId: string, nonce: string): Promise<boolean>;
  /** Drops expired entries (no-op where the store expires them itself). */
  purge(): Promise<number>;
}

interface PendingClaim {
  appId: string;
  nonce: string;
  resolve: (claimed: boolean) => void;
  reject: (err: unknown) => void;
}

/** Claims sent in one statement at most (a larger backlog is split into several). */
const MAX_BATCH = 256;

/**
 * PostgreSQL store. The claims that arrive in the same event-loop turn are sent as one statement
 * (one round trip and one commit for all of them): under load a nonce costs a fraction of a
 * statement, alone it costs one. The guarantees are those of one claim per statement: a claim is
 * answered only after its row is committed; two claims of one (app, nonce), in one batch or in
 * concurrent ones, never both win. Within a batch the first claim of a key wins and the others
 * lose; keys are sent sorted so concurrent batches lock index entries in one order (no deadlock).
 */
export class PgNonceStore implements NonceStore {
  readonly #db: Db;
  #pending: PendingClaim[] = [];
  #scheduled = false;
  constructor(db: Db) {
    this.#db = db;
  }

  claim(appId: string, nonce: string): Promise<boolean> {
    return new Promise<boolean>((resolve, reject) => {
      this.#pending.push({ appId, nonce, resolve, reject });
      if (!this.#scheduled) {
        this.#scheduled = true;
        setImmediate(() => this.#flush());
      }
    });
  }

  #flush(): void {
    this.#scheduled = false;
    while (this.#pending.length > 0) {
      void this.#send(this.#pending.splice(0, MAX_BATCH));
    }
  }

  async #send(batch: PendingClaim[]): Promise<void> {
    // One row per distinct key; a key's later claims in the batch are replays of its first.
    const first = new Map<string, PendingClaim[]>();
    for (const c of batch) {
      const k = `${c.appId}\u0000${c.nonce}`;
      const same = first.get(k);
      if (same) same.push(c);
      else first.set(k, [c]);
    }
    const keys = [...first.keys()].sort();
    const apps: string[] = [];
    const nonces: string[] = [];
    for (const k of keys) {
      const c = first.get(k)![0]!;
      apps.push(c.appId);
      nonces.push(c.nonce);
    }
    try {
      // Insert, or take over a row whose memory has expired; a live row wins and nothing returns.
      const r = await this.#db.query<{ a: string; n: string }>({
        name: 'nonce_claim_batch',
        text: `INSERT INTO nonces(app_id, nonce, expires_at)
         SELECT a, n, now() + make_interval(secs => $3) FROM unnest($1::text[], $2::text[]) AS t(a, n)
         ON CONFLICT (app_id, nonce) DO UPDATE SET expires_at = excluded.expires_at WHERE nonces.expires_at < now()
         RETURNING app_id AS a, nonce AS n`,
        values: [apps, nonces, NONCE_TTL_SECONDS],
      });
      const won = new Set(r.rows.map((row) => `${row.a}\u0000${row.n}`));
      for (const [k, claims] of first) {
        claims.forEach((c, i) => c.resolve(i === 0 && won.has(k)));
      }
    } catch (err) {
      for (const c of batch) c.reject(err);
    }
  }

  async purge(): Promise<number> {
    const r = await this.#db.query('DELETE FROM nonces WHERE ctid IN (SELECT ctid FROM nonces WHERE expires_at < now() LIMIT 5000)');
    return r.rowCount ?? 0;
  }
}

export class RedisNonceStore implements NonceStore {
  readonly #redis: Redis;
  constructor(redis: Redis) {
    this.#redis = redis;
  }

  async claim(appId: string, nonce: string): Promise<boolean> {
    const r = await this.#redis.set(`mps:nonce:${appId}:${nonce}`, '1', 'EX', NONCE_TTL_SECONDS, 'NX');
    return r === 'OK';
  }

  async purge(): Promise<number> {
    return 0;
  }
}
