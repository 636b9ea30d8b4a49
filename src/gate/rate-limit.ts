/**
 * Per-app request rate limit (step 8): at most `perSecond` requests in a window of one second that
 * starts with the app's first request after the previous window ended, on the service's clock (so
 * tests move time instead of waiting). In memory, or on Redis (REDIS_URL) shared by every instance:
 * one hash per app and limit, updated by one script that is given the time; should Redis fail, the
 * instance's own memory decides.
 */
import type { Redis } from 'ioredis';
import type { Clock } from '../domain/clock.ts';

export interface RateLimitDecision {
  allowed: boolean;
  retryAfterSeconds: number;
}

const WINDOW_MS = 1000;
/** Windows kept in memory at most (one per app and limit in use); ended ones go first. */
const MAX_WINDOWS = 100_000;

/**
 * KEYS[1]: the app's window; ARGV: now (ms, the service's clock), the window's length (ms). Starts a
 * window when there is none or it ended; answers the requests counted in it (this one included)
 * and when it ends. The key's expiry (Redis's own clock) only collects ended windows.
 */
const CONSUME_LUA = `
local now = tonumber(ARGV[1])
local len = tonumber(ARGV[2])
local w = redis.call('HMGET', KEYS[1], 'end', 'n')
local e = tonumber(w[1])
if e == nil or e <= now then
  redis.call('HSET', KEYS[1], 'end', now + len, 'n', 1)
  redis.call('PEXPIRE', KEYS[1], len * 2 + 1000)
  return {1, now + len}
end
return {redis.call('HINCRBY', KEYS[1], 'n', 1), e}
`;

type Counted = { n: number; end: number };

export class AppRateLimiter {
  readonly #redis: Redis | null;
  readonly #clock: Clock;
  readonly #windows = new Map<string, Counted>();

  constructor(redis: Redis | null, clock: Clock) {
    this.#redis = redis;
    this.#clock = clock;
  }

  async consume(appId: string, perSecond: number): Promise<RateLimitDecision> {
    const now = this.#clock.now();
    // A changed limit starts a window of its own (raising the limit takes effect at once).
    const key = `mps:rl:${perSecond}:${appId}`;
    let c: Counted;
    try {
      c = this.#redis ? await this.#redisConsume(key, now) : this.#memoryConsume(key, now);
    } catch {
      c = this.#memoryConsume(key, now);
    }
    if (c.n <= perSecond) return { allowed: true, retryAfterSeconds: 0 };
    return { allowed: false, retryAfterSeconds: Math.max(1, Math.ceil((c.end - now) / 1000)) };
  }

  async #redisConsume(key: string, now: number): Promise<Counted> {
    const [n, end] = (await this.#redis!.eval(CONSUME_LUA, 1, key, now, WINDOW_MS)) as [number, number];
    return { n, end };
  }

  #memoryConsume(key: string, now: number): Counted {
    const w = this.#windows.get(key);
    if (w && w.end > now) {
      w.n++;
      return w;
    }
    if (!w && this.#windows.size >= MAX_WINDOWS) {
      for (const [k, v] of this.#windows) if (v.end <= now) this.#windows.delete(k);
      if (this.#windows.size >= MAX_WINDOWS) this.#windows.delete(this.#windows.keys().next().value as string);
    }
    const fresh = { n: 1, end: now + WINDOW_MS };
    this.#windows.set(key, fresh);
    return fresh;
  }
}
