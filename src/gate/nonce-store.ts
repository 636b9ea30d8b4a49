/**
 * Nonce replay protection (decisions.md section 1: remembered per app at least 600 s). Two stores
 * behind one interface, both atomic under concurrency: PostgreSQL (the default, src/store/nonces.ts)
 * and Redis.
 */
import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import { type Clock, systemClock } from '../domain/clock.ts';

/**
 * How long a nonce is remembered from its first use. A request is valid while the server's clock is
 * within 300 s of its timestamp, so one stamped 300 s ahead stays valid until 600 s after a first
 * use right on receipt, plus the part of a second the window check rounds away: 610 s leaves a
 * margin over both (decisions.md section 1: "at least the window plus a margin (600 s)").
 */
export const NONCE_TTL_SECONDS = 610;

export interface NonceStore {
  /** True the first time (app, nonce) is seen within the TTL; false on a replay. */
  claim(appId: string, nonce: string): Promise<boolean>;
  /** Drops expired entries (no-op where the store expires them itself). */
  purge(): Promise<number>;
}

/** The key that tells whether this Redis still holds what it was given (see RedisNonceStore.watch). */
export const REDIS_MARKER_KEY = 'mps:nonce-store:since';

export class RedisNonceStore implements NonceStore {
  readonly #redis: Redis;
  readonly #clock: Clock;
  #marker: string | null = null;
  constructor(redis: Redis, clock: Clock = systemClock) {
    this.#redis = redis;
    this.#clock = clock;
  }

  async claim(appId: string, nonce: string): Promise<boolean> {
    const r = await this.#redis.set(`mps:nonce:${appId}:${nonce}`, '1', 'EX', NONCE_TTL_SECONDS, 'NX');
    return r === 'OK';
  }

  async purge(): Promise<number> {
    return 0;
  }

  /**
   * Notices when the Redis has lost its data (a restart without persistence, a flush, a failover
   * to an empty replica, eviction): it then no longer remembers the nonces of the last 600 s, and a
   * request captured before the loss could be replayed within its 300 s window (docs/authentication.md,
   * "Nonces on Redis"). A marker key without expiry is written once (`SET NX`, with the time it was
   * first written, on the service's clock, and a random tag that makes each marker its own) and
   * read back at every (re)connection; if it is missing or another, the data was lost meanwhile
   * and `lost` is called with the new marker. Nothing is refused because of
   * it: the request-id record in PostgreSQL still keeps a replayed POST from running twice.
   */
  async checkMarker(lost: (since: string) => void): Promise<void> {
    const marker = `${new Date(this.#clock.now()).toISOString()} ${randomBytes(4).toString('hex')}`;
    await this.#redis.set(REDIS_MARKER_KEY, marker, 'NX');
    const now = await this.#redis.get(REDIS_MARKER_KEY);
    if (now === null) return;
    if (this.#marker !== null && now !== this.#marker) lost(now);
    this.#marker = now;
  }
}

/**
 * What an operator should know about a Redis that holds nonces: it must keep them for their 600 s
 * (persistence, so a restart keeps them; `maxmemory-policy noeviction`, since every nonce has an
 * expiry and a `volatile-*` or `allkeys-*` policy may drop them early). Answers one line per
 * problem found; nothing when the settings cannot be read (CONFIG is often disabled on managed
 * Redis).
 */
export async function redisNonceRisks(redis: Redis): Promise<string[]> {
  const out: string[] = [];
  let conf: string[];
  try {
    conf = (await redis.call('CONFIG', 'GET', '*')) as string[];
  } catch {
    return out;
  }
  const get = (name: string): string | undefined => {
    const i = conf.indexOf(name);
    return i >= 0 && i % 2 === 0 ? conf[i + 1] : undefined;
  };
  const policy = get('maxmemory-policy');
  if (policy !== undefined && policy !== 'noeviction') {
    out.push(`maxmemory-policy is ${policy}: under memory pressure Redis may drop nonces before their 600 s (use noeviction)`);
  }
  if (get('appendonly') === 'no' && (get('save') ?? '') === '') {
    out.push('neither appendonly nor save is set: a restart of Redis forgets every nonce (enable appendonly)');
  }
  return out;
}
