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

export class PgNonceStore implements NonceStore {
  readonly #db: Db;
  constructor(db: Db) {
    this.#db = db;
  }

  async claim(appId: string, nonce: string): Promise<boolean> {
    // Insert, or take over a row whose memory has expired; a live row wins and nothing returns.
    const r = await this.#db.query({
      name: 'nonce_claim',
      text: `INSERT INTO nonces(app_id, nonce, expires_at) VALUES ($1, $2, now() + make_interval(secs => $3))
       ON CONFLICT (app_id, nonce) DO UPDATE SET expires_at = excluded.expires_at WHERE nonces.expires_at < now()
       RETURNING 1`,
      values: [appId, nonce, NONCE_TTL_SECONDS],
    });
    return r.rowCount === 1;
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
