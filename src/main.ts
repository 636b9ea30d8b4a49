/** Loads config, starts the database if embedded, builds the app, listens, runs workers, stops gracefully. */
import net from 'node:net';
import v8 from 'node:v8';
import { ADMIN_TOKEN_ADVISED_LENGTH, type Config, ConfigError, loadConfig, withListenPort } from './config/config.ts';
import type { EmbeddedPostgres } from './store/embedded.ts';

/**
 * After each full collection V8 lets the old generation grow by at most half of what survived
 * (its own factor goes up to 4x when collections are cheap, as they are here: ~20 MB live). That
 * keeps the peak RSS under load at ~170 MB instead of 210-245 MB, at no measured CPU cost
 * (docs/performance.md, "The V8 heap"). An operator's own `--heap-growing-percent` wins.
 */
const HEAP_GROWING_PERCENT = 50;
if (!process.execArgv.some((a) => a.startsWith('--heap-growing-percent') || a.startsWith('--heap_growing_percent'))) {
  v8.setFlagsFromString(`--heap-growing-percent=${HEAP_GROWING_PERCENT}`);
}

/**
 * What must not outlive the process: the app, the embedded PostgreSQL, the DATA_DIR lock. Set as
 * each is taken, and run when an exception escapes every handler (during start or later) before
 * the process exits 1, so that even then nothing is left running.
 */
let cleanup: (() => Promise<void>) | null = null;

/** How long a graceful stop waits for requests in flight before it cuts them off (exit 1). */
const STOP_DEADLINE_MS = 25_000;

/**
 * Runs `cleanup` (once: it is taken) and exits with `code`; with a deadline, exits then even if
 * the cleanup hangs.
 */
function cleanUpAndExit(code: number, deadlineMs?: number): void {
  if (deadlineMs !== undefined) setTimeout(() => process.exit(code), deadlineMs).unref();
  const run = cleanup ?? (async () => {});
  cleanup = null;
  void run()
    .catch(() => {})
    .finally(() => process.exit(code));
}

process.on('uncaughtException', (err) => {
  process.stderr.write(`fatal: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  cleanUpAndExit(1, 15_000);
});

/**
 * SIGTERM / SIGINT: a graceful stop once the service is up (`onStop`); during the start they are
 * noted and honoured at the next step of the start (after the lock, the embedded PostgreSQL, the
 * app), which then undoes what was taken and exits 0 (a supervisor may stop a slow first start).
 */
let onStop: ((signal: string) => void) | null = null;
/** A graceful stop is under way. */
let stopping = false;
let stopRequested: string | null = null;
for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.on(signal, () => {
    if (onStop) onStop(signal);
    else stopRequested ??= signal;
  });
}

async function stopIfRequested(): Promise<void> {
  if (stopRequested === null) return;
  process.stderr.write(`${stopRequested} received while starting: stopped\n`);
  cleanUpAndExit(0);
  await new Promise(() => {}); // the start goes no further
}

/** The settings, or exit 2 with the error; a short ADMIN_TOKEN is warned about. */
function configOrExit(): Config {
  let config: Config;
  try {
    config = loadConfig();
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`configuration error: ${err.message}\n`);
      process.exit(2);
    }
    throw err;
  }
  if (config.adminToken !== null && config.adminToken.length < ADMIN_TOKEN_ADVISED_LENGTH) {
    process.stderr.write(
      `warning: ADMIN_TOKEN is shorter than ${ADMIN_TOKEN_ADVISED_LENGTH} characters; use a long random token outside development\n`,
    );
  }
  return config;
}

/**
 * The rest of the service, loaded once the settings are known good (about two seconds less before
 * a wrong setting is reported).
 */
async function loadService() {
  const [app, threadPool, logModule, dataDir, embeddedModule, lockModule] = await Promise.all([
    import('./app.ts'),
    import('./platform/thread-pool.ts'),
    import('./platform/log.ts'),
    import('./store/data-dir.ts'),
    import('./store/embedded.ts'),
    import('./store/instance-lock.ts'),
  ]);
  return {
    buildApp: app.buildApp,
    batchThreadPool: threadPool.batchThreadPool,
    cliBanner: logModule.cliBanner,
    createLogger: logModule.createLogger,
    effectiveLogFormat: logModule.effectiveLogFormat,
    ensureDataDir: dataDir.ensureDataDir,
    startEmbeddedPostgres: embeddedModule.startEmbeddedPostgres,
    acquireInstanceLock: lockModule.acquireInstanceLock,
    InstanceLockedError: lockModule.InstanceLockedError,
  };
}
type Service = Awaited<ReturnType<typeof loadService>>;
type BuiltApp = Awaited<ReturnType<Service['buildApp']>>;

/** What a start holds, released in this order on a stop: the embedded PostgreSQL, then the DATA_DIR lock. */
interface Held {
  lock: { release(): Promise<void> } | null;
  embedded: EmbeddedPostgres | null;
}

async function releaseHeld(held: Held): Promise<void> {
  await held.embedded?.stop();
  await held.lock?.release();
}

/** DATA_DIR's lock, then the embedded PostgreSQL in it; the config then names its database (exit 3 when another instance holds the lock). */
async function startEmbedded(config: Config, service: Service, say: (m: string) => void, held: Held): Promise<Config> {
  try {
    held.lock = await service.acquireInstanceLock(config.dataDir, say);
  } catch (err) {
    if (err instanceof service.InstanceLockedError) {
      process.stderr.write(`${err.message}\n`);
      process.exit(3);
    }
    throw err;
  }
  cleanup = () => held.lock!.release();
  await stopIfRequested();
  say(`starting embedded PostgreSQL in ${config.dataDir}`);
  held.embedded = await service.startEmbeddedPostgres({ dataDir: config.dataDir, log: say, schedBatch: config.embeddedPgSchedBatch });
  cleanup = () => releaseHeld(held);
  await stopIfRequested();
  return { ...config, databaseUrl: held.embedded.connectionString, databaseUrlEmbedded: true };
}

async function main(): Promise<void> {
  let config = configOrExit();
  const service = await loadService();
  const log = service.createLogger(config.logLevel, service.effectiveLogFormat(config.logFormat));
  const say = (m: string) => log.info(m);
  if (config.port === 0) {
    // PORT=0: a free port, chosen before anything is built, so payUrl (PUBLIC_BASE_URL unset) names it.
    const port = await freePort(config.host).catch((err: unknown) => {
      throw new Error(`cannot listen on ${config.host} (HOST, PORT): ${err instanceof Error ? err.message : String(err)}`);
    });
    config = withListenPort(config, port);
  }
  // DATA_DIR holds the embedded cluster and the generated platform keys: not needed when both
  // are given from outside (DATABASE_URL, PLATFORM_KEY_FILE).
  if (config.databaseUrl === null || config.platformKeyFile === null) await service.ensureDataDir(config.dataDir);
  if (config.threadPoolSchedBatch) say(await service.batchThreadPool());
  const held: Held = { lock: null, embedded: null };
  if (config.databaseUrl === null) config = await startEmbedded(config, service, say, held);
  const built = await service.buildApp(config, { aloneOnDatabase: config.databaseUrlEmbedded === true, logger: log }).catch(async (err) => {
    await releaseHeld(held);
    if (err instanceof ConfigError) {
      // A provider's configuration (PROVIDER=live) is read where the providers are built.
      process.stderr.write(`configuration error: ${err.message}\n`);
      process.exit(2);
    }
    throw err;
  });
  const stopEmbedded = cleanup;
  cleanup = async () => {
    await built.close().catch(() => {});
    await stopEmbedded?.();
  };
  await stopIfRequested();
  process.stdout.write(service.cliBanner(config, built.adminTokenGenerated ? built.adminToken : null));
  try {
    await built.server.listen({ port: config.port, host: config.host });
  } catch (err) {
    // Nothing may outlive a failed start: the app, the embedded PostgreSQL and the instance lock.
    await built.close().catch(() => {});
    await releaseHeld(held);
    throw new Error(`cannot listen on ${config.host}:${config.port} (HOST, PORT): ${err instanceof Error ? err.message : String(err)}`, {
      cause: err,
    });
  }
  if (config.workersEnabled) built.workers.start();
  if (held.embedded !== null) watchEmbedded(held.embedded);
  onStop = (signal) => void stopGracefully(built, held, signal);
  if (stopRequested !== null) onStop(stopRequested);
}

/**
 * A graceful stop: in-flight requests finish, then the app, the embedded PostgreSQL and the lock
 * are released, exit 0. Requests still running after 25 s are cut off: their request ids are freed
 * for a retry at once (the provider check settles what they left uncertain); the embedded PostgreSQL is
 * still stopped and the lock released, within 10 s more (exit 1).
 */
async function stopGracefully(built: BuiltApp, held: Held, signal: string): Promise<void> {
  if (stopping) return;
  stopping = true;
  built.server.log.info(`${signal} received: stopping (finishing in-flight requests)`);
  const force = setTimeout(() => {
    process.stderr.write('graceful stop took over 25 s; exiting\n');
    setTimeout(() => process.exit(1), 10_000).unref();
    void (async () => {
      const ended = await built.svc.units.endLeasesHeldHere().catch(() => 0);
      if (ended > 0) process.stderr.write(`${ended} request id(s) cut off: free for a retry at once\n`);
      await releaseHeld(held);
    })()
      .catch(() => {})
      .finally(() => process.exit(1));
  }, STOP_DEADLINE_MS);
  force.unref();
  try {
    await built.close();
    await releaseHeld(held);
  } finally {
    clearTimeout(force);
  }
  process.exit(0);
}

/** How often the embedded PostgreSQL is checked for being alive. */
const EMBEDDED_CHECK_MS = 2000;

/**
 * The embedded PostgreSQL is this process's own: if it dies (killed, out of memory), the service
 * cannot serve and would answer 503 for ever. It stops instead, exit 1 with a line saying why, so
 * that a supervisor restarts it (a start recovers the cluster).
 */
function watchEmbedded(embedded: EmbeddedPostgres): void {
  const timer = setInterval(() => {
    embedded
      .running()
      .then((alive) => {
        if (alive !== false || stopping) return;
        clearInterval(timer);
        process.stderr.write('fatal: the embedded PostgreSQL has stopped; stopping the service (a restart recovers it)\n');
        cleanUpAndExit(1, 10_000);
      })
      .catch(() => {});
  }, EMBEDDED_CHECK_MS);
  timer.unref();
}

function freePort(host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = net.createServer();
    probe.once('error', reject);
    probe.listen({ port: 0, host }, () => {
      const { port } = probe.address() as net.AddressInfo;
      probe.close(() => resolve(port));
    });
  });
}

main().catch((err) => {
  process.stderr.write(`fatal: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
