/** The wiring of one service instance: stores, caches, provider, background tasks. */
import type { FastifyBaseLogger } from 'fastify';
import { Redis } from 'ioredis';
import { type Config, redisDatabase } from './config/config.ts';
import { AuthCache } from './gate/auth-cache.ts';
import { AuthFailureTracker } from './gate/auth-failures.ts';
import { AllowlistCache } from './gate/gate.ts';
import { IpPolicyHolder } from './gate/ip-policy.ts';
import { type NonceStore, PgNonceStore, RedisNonceStore, redisNonceRisks } from './gate/nonce-store.ts';
import { AppRateLimiter } from './gate/rate-limit.ts';
import { ReplayStore } from './gate/replay.ts';
import type { PlatformKeyRing } from './platform/keys.ts';
import type { PaymentProvider } from './providers/provider.ts';
import { SandboxProvider } from './providers/sandbox/sandbox.ts';
import type { Db } from './store/db.ts';
import { MerchantConfigCache } from './store/merchant-config.ts';
import { AttemptAcceptor, OrderInserter, OrderReader } from './store/orders.ts';
import { BackgroundTasks } from './usecases/background.ts';

export interface Clock {
  /** Milliseconds since the epoch. */
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };

export interface Services {
  config: Config;
  db: Db;
  redis: Redis | null;
  keys: PlatformKeyRing;
  provider: PaymentProvider;
  sandbox: SandboxProvider | null;
  log: FastifyBaseLogger;
  clock: Clock;
  authCache: AuthCache;
  authFailures: AuthFailureTracker;
  ipPolicy: IpPolicyHolder;
  nonces: NonceStore;
  rateLimiter: AppRateLimiter;
  replays: ReplayStore;
  allowlists: AllowlistCache;
  tasks: BackgroundTasks;
  merchantConfig: MerchantConfigCache;
  /** New orders of concurrent creates, one statement per event-loop turn. */
  orderInserts: OrderInserter;
  /** The query-order reads of concurrent requests, one statement per event-loop turn. */
  orderReads: OrderReader;
  /** Accepted outcomes of concurrent creates, one transaction per event-loop turn. */
  acceptor: AttemptAcceptor;
  /** Asks the background workers to look for due work now (set by the worker runner). */
  wakeWorkers?: () => void;
}

export interface ServiceDeps {
  config: Config;
  db: Db;
  keys: PlatformKeyRing;
  log: FastifyBaseLogger;
  clock?: Clock;
  provider?: PaymentProvider;
}

/** How long a Redis command may take before the request it serves is answered 503. */
export const REDIS_COMMAND_TIMEOUT_MS = 1000;

export async function createServices(d: ServiceDeps): Promise<Services> {
  const { config, db } = d;
  let redis: Redis | null = null;
  if (config.redisUrl !== null) {
    // A Redis that is down or hung answers every guarded request 503 OPEN_API_GUARD_UNAVAILABLE
    // at once or within REDIS_COMMAND_TIMEOUT_MS, instead of holding it: no offline queue (a
    // command while disconnected fails), a timeout on every command, no retries of a command.
    redis = new Redis(config.redisUrl, {
      maxRetriesPerRequest: 0,
      enableOfflineQueue: false,
      commandTimeout: REDIS_COMMAND_TIMEOUT_MS,
      connectTimeout: 5000,
      lazyConnect: true,
    });
    redis.on('error', (err) => d.log.warn({ err: err.message }, 'redis error'));
    // The client selects the URL's database while connecting, but a refused SELECT (an index
    // the server does not have) only emits an error and leaves the connection on database 0:
    // selected again here, where a refusal stops the start.
    const database = redisDatabase(config.redisUrl);
    const client = redis;
    await (async () => {
      await client.connect();
      if (database !== 0) await client.select(database);
    })().catch((err: unknown) => {
      client.disconnect();
      throw new Error(`cannot connect to the Redis at REDIS_URL: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
    });
  }
  let redisNonces: RedisNonceStore | null = null;
  if (redis !== null) {
    const r = redis;
    const nonces = new RedisNonceStore(r);
    redisNonces = nonces;
    for (const risk of await redisNonceRisks(r)) d.log.warn(`REDIS_URL: ${risk}`);
    const check = () =>
      nonces
        .checkMarker((since) =>
          d.log.error(
            { since },
            'REDIS_URL: Redis has lost its data (its marker key is new): the nonces it held are forgotten, so a request signed before this and captured could be replayed within its 300 s window (docs/authentication.md, "Nonces on Redis")',
          ),
        )
        .catch((err: unknown) => d.log.warn({ err: (err as Error).message }, 'redis marker check failed'));
    await check();
    r.on('ready', () => void check());
  }
  const sandbox = d.provider ? null : new SandboxProvider(db, (msg, err) => d.log.warn({ err }, msg));
  const provider = d.provider ?? sandbox!;
  const ipPolicy = new IpPolicyHolder(db, {
    trustedProxies: config.trustedProxies,
    allowlist: config.platformIpAllowlist,
    denylist: config.platformIpDenylist,
    allowIpv4: config.allowIpv4,
    allowIpv6: config.allowIpv6,
  });
  await ipPolicy.refresh();
  const svc: Services = {
    config,
    db,
    redis,
    keys: d.keys,
    provider,
    sandbox,
    log: d.log,
    clock: d.clock ?? systemClock,
    authCache: new AuthCache(db),
    authFailures: new AuthFailureTracker({
      maxFailures: config.authFailureLimit,
      windowMs: config.authFailureWindowSeconds * 1000,
      blockMs: config.authBlockSeconds * 1000,
      maxTrackedAddresses: 100_000,
    }),
    ipPolicy,
    nonces: redisNonces ?? new PgNonceStore(db),
    rateLimiter: new AppRateLimiter(redis),
    replays: new ReplayStore(db),
    allowlists: new AllowlistCache(),
    tasks: new BackgroundTasks(),
    merchantConfig: new MerchantConfigCache(db),
    orderInserts: new OrderInserter(db),
    orderReads: new OrderReader(db),
    acceptor: new AttemptAcceptor(db),
  };
  svc.tasks.bind(svc);
  return svc;
}
