/** Loads config, starts the database if embedded, builds the app, listens, runs workers, stops gracefully. */
import { ConfigError, loadConfig } from './config/config.ts';
import { buildApp } from './app.ts';
import { startEmbeddedPostgres } from './store/embedded.ts';
import { acquireInstanceLock, InstanceLockedError } from './store/instance-lock.ts';

async function main(): Promise<void> {
  let config;
  try {
    config = loadConfig();
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`configuration error: ${err.message}\n`);
      process.exit(2);
    }
    throw err;
  }
  const quiet = ['warn', 'error', 'fatal', 'silent'].includes(config.logLevel);
  const say = (m: string) => {
    if (!quiet) process.stdout.write(`${JSON.stringify({ level: 30, time: Date.now(), msg: m })}\n`);
  };
  let lock: { release(): Promise<void> } | null = null;
  let embedded: { connectionString: string; stop(): Promise<void> } | null = null;
  if (config.databaseUrl === null) {
    try {
      lock = await acquireInstanceLock(config.dataDir, say);
    } catch (err) {
      if (err instanceof InstanceLockedError) {
        process.stderr.write(`${err.message}\n`);
        process.exit(3);
      }
      throw err;
    }
    say(`starting embedded PostgreSQL in ${config.dataDir}`);
    embedded = await startEmbeddedPostgres({ dataDir: config.dataDir, log: say });
    config = { ...config, databaseUrl: embedded.connectionString };
  }
  const built = await buildApp(config).catch(async (err) => {
    await embedded?.stop();
    await lock?.release();
    throw err;
  });
  if (built.adminTokenGenerated) {
    process.stdout.write(`\nADMIN_TOKEN=${built.adminToken}\n(generated for this run; set ADMIN_TOKEN to choose a fixed one)\n\n`);
  }
  await built.server.listen({ port: config.port, host: config.host });
  if (config.workersEnabled) built.workers.start();

  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    built.server.log.info(`${signal} received: stopping (finishing in-flight requests)`);
    const force = setTimeout(() => {
      process.stderr.write('graceful stop took over 25 s; exiting\n');
      process.exit(1);
    }, 25_000);
    force.unref();
    try {
      await built.close();
      await embedded?.stop();
      await lock?.release();
    } finally {
      clearTimeout(force);
    }
    process.exit(0);
  };
  process.on('SIGTERM', () => void stop('SIGTERM'));
  process.on('SIGINT', () => void stop('SIGINT'));
}

main().catch((err) => {
  process.stderr.write(`fatal: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
