/** Per-app request rate limit (rate-limiter-flexible: in memory, or Redis shared by instances). */
import type { Redis } from 'ioredis';
import { RateLimiterMemory, RateLimiterRedis, RateLimiterRes } from 'rate-limiter-flexible';

export interface RateLimitDecision {
  allowed: boolean;
  retryAfterSeconds: number;
}

export class AppRateLimiter {
  readonly #redis: Redis | null;
  readonly #byPoints = new Map<number, RateLimiterMemory | RateLimiterRedis>();

  constructor(redis: Redis | null) {
    this.#redis = redis;
  }

  #limiter(points: number): RateLimiterMemory | RateLimiterRedis {
    let l = this.#byPoints.get(points);
    if (!l) {
      const opts = { points, duration: 1, keyPrefix: `mps:rl:${points}` };
      l = this.#redis
        ? new RateLimiterRedis({ ...opts, storeClient: this.#redis, insuranceLimiter: new RateLimiterMemory(opts) })
        : new RateLimiterMemory(opts);
      this.#byPoints.set(points, l);
    }
    return l;
  }

  async consume(appId: string, perSecond: number): Promise<RateLimitDecision> {
    try {
      await this.#limiter(perSecond).consume(appId, 1);
      return { allowed: true, retryAfterSeconds: 0 };
    } catch (res) {
      if (res instanceof RateLimiterRes) {
        return { allowed: false, retryAfterSeconds: Math.max(1, Math.ceil(res.msBeforeNext / 1000)) };
      }
      throw res;
    }
  }
}
