/**
 * The wiring of one service instance (the composition root, with app.ts): the pool, Redis, the
 * gate's stores and caches, the providers, the request-id units, and the batching queues of the
 * hot statements. The object satisfies what each layer asks for (GateDeps, UseCaseDeps,
 * BackOfficeDeps, DispatcherDeps, WorkerDeps); no layer imports this module but the surfaces that
 * receive it.
 */
import type { FastifyBaseLogger } from 'fastify';
import { Redis } from 'ioredis';
import { type Config, redisDatabase } from './config/config.ts';
import { type Clock, systemClock } from './domain/clock.ts';
import { shanghaiDay } from './domain/money.ts';
import type { NotifyUrlPolicy } from './events/notify-url.ts';
import { AuthCache } from './gate/auth-cache.ts';
import { AuthFailureTracker } from './gate/auth-failures.ts';
import { RefusalPacer } from './gate/refusal-pacer.ts';
import { AllowlistCache } from './gate/gate.ts';
import { IpPolicyHolder } from './gate/ip-policy.ts';
import { NONCE_TTL_SECONDS, type NonceStore, RedisNonceStore, redisNonceRisks } from './gate/nonce-store.ts';
import { AppRateLimiter } from './gate/rate-limit.ts';
import { InFlight } from './lib/in-flight.ts';
import { setPasswordHashBusyPercent, setPasswordHashThreads } from './lib/password-hash.ts';
import { Slots } from './lib/slots.ts';
import type { PlatformKeyRing } from './platform/keys.ts';
import type { PaymentProvider } from './providers/provider.ts';
import type { ProviderRouter } from './providers/router.ts';
import type { SandboxProvider } from './providers/sandbox/sandbox.ts';
import { setUpProviders } from './providers/setup.ts';
import type { Db } from './store/db.ts';
import { MerchantConfigCache } from './store/merchant-config.ts';
import { PgNonceStore } from './store/nonces.ts';
import { AttemptAcceptor } from './store/attempt-acceptance.ts';
import { ChangeApplier, RecordsReader } from './store/changes.ts';
import { OrderInserter, purgeDailyAmounts } from './store/order-inserts.ts';
import { OrderReader } from './store/order-reads.ts';
import { purgeOAuthStates } from './store/trades.ts';
import { ACCEPT_TRANSITIONS } from './usecases/attempts.ts';
import type { BackOfficeDeps } from './usecases/back-office/common.ts';
import { inBatches, purgeHistory } from './usecases/retention.ts';
import { purgeSessionRows } from './usecases/sessions.ts';
import { RequestUnits } from './usecases/request-units.ts';
import { StatementDownloads, databaseAppSlots } from './usecases/statement-downloads.ts';
import { WorkTurns } from './usecases/work-turns.ts';

export type { Clock } from './domain/clock.ts';
export { systemClock } from './domain/clock.ts';

export interface Services extends BackOfficeDeps {
  config: Config;
  redis: Redis | null;
  keys: PlatformKeyRing;
  providers: ProviderRouter;
  /** The sandbox provider when it serves the channels (its test levers exist only then). */
  sandbox: SandboxProvider | null;
  log: FastifyBaseLogger;
  authCache: AuthCache;
  authFailures: AuthFailureTracker;
  /** The pace of refusals before authentication, per source address (gate/refusal-pacer.ts). */
  refusals: RefusalPacer;
  ipPolicy: IpPolicyHolder;
  nonces: NonceStore;
  rateLimiter: AppRateLimiter;
  allowlists: AllowlistCache;
  /** Request-id units of the POST operations, and this instance's heartbeat. */
  units: RequestUnits;
  /** The open API's requests in progress on this instance but statement downloads (kept by its surface). */
  openRequests: InFlight;
  /** The back-office use cases' dependencies (this object itself). */
  backOffice: BackOfficeDeps;
  /** Drops expired nonces and request-id answers. */
  purge(): Promise<number>;
  /** Drops history past its retention (usecases/retention.ts). */
  purgeHistory(): Promise<number>;
  /** Asks the workers for a pass now: set by app.ts to the worker runner's wake-up. */
  wakeWorkers: () => void;
}

export interface ServiceDeps {
  config: Config;
  db: Db;
  keys: PlatformKeyRing;
  log: FastifyBaseLogger;
  clock?: Clock;
  /** A provider for both channels instead of the configured ones (tests). */
  provider?: PaymentProvider;
}

/** How long a Redis command may take before the request it serves is answered 503. */
export const REDIS_COMMAND_TIMEOUT_MS = 1000;

/** The longest a refusal is held past its address's budget (gate/refusal-pacer.ts): under the headers deadline of a next request. */
export const REFUSAL_MAX_HOLD_MS = 2000;

async function connectRedis(config: Config, log: FastifyBaseLogger): Promise<Redis | null> {
  if (config.redisUrl === null) return null;
  // A Redis that is down or hung answers every guarded request 503 OPEN_API_GUARD_UNAVAILABLE
  // at once or within REDIS_COMMAND_TIMEOUT_MS, instead of holding it: no offline queue (a
  // command while disconnected fails), a timeout on every command, no retries of a command.
  const redis = new Redis(config.redisUrl, {
    maxRetriesPerRequest: 0,
    enableOfflineQueue: false,
    commandTimeout: REDIS_COMMAND_TIMEOUT_MS,
    connectTimeout: 5000,
    lazyConnect: true,
  });
  redis.on('error', (err) => log.warn({ err: err.message }, 'redis error'));
  // The client selects the URL's database while connecting, but a refused SELECT (an index
  // the server does not have) only emits an error and leaves the connection on database 0:
  // selected again here, where a refusal stops the start.
  const database = redisDatabase(config.redisUrl);
  await (async () => {
    await redis.connect();
    if (database !== 0) await redis.select(database);
  })().catch((err: unknown) => {
    redis.disconnect();
    throw new Error(`cannot connect to the Redis at REDIS_URL: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
  });
  return redis;
}

async function redisNonceStore(redis: Redis, log: FastifyBaseLogger, clock: Clock): Promise<RedisNonceStore> {
  const nonces = new RedisNonceStore(redis, clock);
  for (const risk of await redisNonceRisks(redis)) log.warn(`REDIS_URL: ${risk}`);
  const check = () =>
    nonces
      .checkMarker((since) =>
        log.error(
          { since },
          'REDIS_URL: Redis has lost its data (its marker key is new): the nonces it held are forgotten, so a request signed before this and captured could be replayed within its 300 s window (docs/authentication.md, "Nonces on Redis")',
        ),
      )
      .catch((err: unknown) => log.warn({ err: (err as Error).message }, 'redis marker check failed'));
  await check();
  redis.on('ready', () => void check());
  return nonces;
}

export async function createServices(d: ServiceDeps): Promise<Services> {
  const { config, db, log } = d;
  const clock = d.clock ?? systemClock;
  // The providers first: a configuration they refuse stops the start before anything is connected.
  const { router: providers, sandbox } = setUpProviders({
    provider: config.provider,
    channelsDisabled: config.channelsDisabled,
    providerEnv: config.providerEnv,
    publicBaseUrl: config.publicBaseUrl,
    db,
    clock,
    log: (msg, err) => log.warn({ err }, msg),
    override: d.provider,
  });
  const redis = await connectRedis(config, log);
  const redisNonces = redis ? await redisNonceStore(redis, log, clock) : null;
  const ipPolicy = new IpPolicyHolder(db, clock, {
    trustedProxies: config.trustedProxies,
    allowlist: config.platformIpAllowlist,
    denylist: config.platformIpDenylist,
    allowIpv4: config.allowIpv4,
    allowIpv6: config.allowIpv6,
  });
  await ipPolicy.refresh();
  const authCache = new AuthCache(db, clock);
  const merchantConfig = new MerchantConfigCache(db, clock);
  const nonces: NonceStore = redisNonces ?? new PgNonceStore(db, clock, NONCE_TTL_SECONDS);
  const units = new RequestUnits(db, clock, log);
  const openRequests = new InFlight();
  // Expensive work (statement files, reconciliation bills) gives way while the open API's requests are in progress, and only then.
  const workTurns = new WorkTurns(() => openRequests.count > 0);
  setPasswordHashThreads(config.passwordHashThreads);
  setPasswordHashBusyPercent(config.passwordHashBusyPercent);
  const notifyUrlPolicy: NotifyUrlPolicy = {
    allowLoopback: config.webhookAllowLoopback,
    allowPrivateTargets: config.webhookAllowPrivateTargets,
  };
  const svc: Services = {
    instanceId: units.instanceId,
    config,
    db,
    redis,
    keys: d.keys,
    providers,
    sandbox,
    log,
    clock,
    authCache,
    authFailures: new AuthFailureTracker(
      {
        maxFailures: config.authFailureLimit,
        windowMs: config.authFailureWindowSeconds * 1000,
        blockMs: config.authBlockSeconds * 1000,
        maxTrackedAddresses: 100_000,
      },
      () => clock.now(),
    ),
    refusals: new RefusalPacer(
      {
        perSecond: config.refusalsPerAddressPerSecond,
        burst: config.refusalsBurstPerAddress,
        maxHoldMs: REFUSAL_MAX_HOLD_MS,
        maxHeld: 1000,
        maxTracked: 100_000,
      },
      () => clock.now(),
    ),
    ipPolicy,
    nonces,
    rateLimiter: new AppRateLimiter(redis, clock),
    allowlists: new AllowlistCache(),
    units,
    merchantConfig,
    orderInserts: new OrderInserter(db),
    orderReads: new OrderReader(db),
    acceptor: new AttemptAcceptor(db, ACCEPT_TRANSITIONS),
    openRequests,
    workTurns,
    statementDownloads: new StatementDownloads(
      {
        perApp: config.statementDownloadsPerApp,
        total: config.statementDownloadsTotal,
        stallTimeoutMs: config.statementStallTimeoutMs,
      },
      {
        appSlots: databaseAppSlots(
          db,
          units,
          () => new Date(clock.now()),
          (err) => log.warn({ err }, 'statement download lease not dropped; dropped again at the next download'),
        ),
        turns: workTurns,
      },
    ),
    statementFilesKeptDays: config.statementFilesKeptDays,
    changes: new ChangeApplier(db),
    records: new RecordsReader(db),
    signIns: new Slots(config.signInMaxConcurrent),
    notifyUrlPolicy,
    appChanged: (appId) => authCache.invalidateApp(appId),
    merchantConfigChanged: (merchantId) => merchantConfig.invalidate(merchantId),
    get backOffice() {
      return svc;
    },
    // Expired nonces and request-id answers; ended console sessions and failed sign-ins out of the throttle's window.
    // Each in batches of 5,000 rows, batch after batch while one is full (usecases/retention.ts).
    purge: async () =>
      (await inBatches(() => nonces.purge())) +
      (await inBatches(() => units.purge())) +
      (await purgeSessionRows(svc)) +
      // Daily amount counters of the days before yesterday (Asia/Shanghai).
      (await purgeDailyAmounts(db, shanghaiDay(new Date(clock.now() - 2 * 86_400_000)))) +
      // The cashier's WeChat authorization states an hour after they ended.
      (await inBatches(() => purgeOAuthStates(db, new Date(clock.now() - 3_600_000), 1000), 1000)),
    purgeHistory: () => purgeHistory(svc),
    // Replaced by the worker runner's wake-up once the workers exist (app.ts).
    wakeWorkers: () => {},
  };
  return svc;
}
