import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { type EmbeddedPostgres, memorySettings, startEmbeddedPostgres } from '../../src/store/embedded.ts';
import { InstanceLockedError, acquireInstanceLock } from '../../src/store/instance-lock.ts';

const HOLD = path.join(path.dirname(fileURLToPath(import.meta.url)), 'fixtures', 'hold.ts');

interface Ctx {
  dir: string;
  logs: string[];
  log: (msg: string) => void;
  cleanups: Array<() => Promise<unknown>>;
}

/** Runs fn in a fresh temp DATA_DIR; afterwards kills any server left there and removes the dir. */
async function inTempDir(fn: (ctx: Ctx) => Promise<void>, sub?: string): Promise<void> {
  const base = await fs.mkdtemp(path.join(os.tmpdir(), 'mps-embedded-'));
  const dir = sub ? path.join(base, sub) : base;
  if (sub) await fs.chmod(base, 0o755); // mkdtemp makes 0700: the server's OS user must be able to enter it
  const logs: string[] = [];
  const ctx: Ctx = { dir, logs, log: (m) => logs.push(m), cleanups: [] };
  try {
    await fn(ctx);
  } catch (err) {
    console.error(`logs:\n  ${logs.join('\n  ')}`);
    throw err;
  } finally {
    for (const c of ctx.cleanups.reverse()) await c().catch(() => {});
    await killServer(dir);
    await fs.rm(base, { recursive: true, force: true });
  }
}

async function postmasterPid(dir: string): Promise<number | undefined> {
  try {
    const n = Number.parseInt((await fs.readFile(path.join(dir, 'pg', 'postmaster.pid'), 'utf8')).split('\n')[0] ?? '', 10);
    return Number.isInteger(n) && n > 0 ? n : undefined;
  } catch {
    return undefined;
  }
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

async function waitDead(pid: number, ms = 10_000): Promise<boolean> {
  const until = Date.now() + ms;
  while (isAlive(pid) && Date.now() < until) await new Promise((r) => setTimeout(r, 50));
  return !isAlive(pid);
}

/** Safety net for failed tests: immediate shutdown of a server still running in dir. */
async function killServer(dir: string): Promise<void> {
  const pid = await postmasterPid(dir);
  if (pid === undefined || !isAlive(pid)) return;
  try {
    const cwd = await fs.readlink(`/proc/${pid}/cwd`);
    if (cwd !== path.join(dir, 'pg')) return; // not a server of this dir
    process.kill(pid, 'SIGQUIT');
    await waitDead(pid);
  } catch {
    // gone
  }
}

async function query<T extends pg.QueryResultRow>(db: EmbeddedPostgres, sql: string): Promise<T[]> {
  const pool = new pg.Pool({ connectionString: db.connectionString, max: 1 });
  // pool.end() does not wait for the server to close its side: a stop right after may still reach
  // the ended connection as "terminating connection due to administrator command"
  pool.on('error', () => {});
  try {
    return (await pool.query<T>(sql)).rows;
  } finally {
    await pool.end();
  }
}

describe('embedded PostgreSQL', () => {
  test("memory settings: a quarter of the machine's memory for buffers (128 MB to 8 GB), half for the planner's cache", () => {
    const GB = 1024 ** 3;
    assert.equal(memorySettings(24 * GB), '-c shared_buffers=6144MB -c effective_cache_size=12288MB');
    assert.equal(memorySettings(256 * GB), '-c shared_buffers=8192MB -c effective_cache_size=131072MB');
    assert.equal(memorySettings(0.25 * GB), '-c shared_buffers=128MB -c effective_cache_size=512MB');
  });

  test('restart keeps data; unix socket only; stop is idempotent', (t) =>
    inTempDir(async ({ dir, log, logs }) => {
      let t0 = performance.now();
      const a = await startEmbeddedPostgres({ dataDir: dir, log });
      const firstMs = performance.now() - t0;
      assert.equal(a.host, path.join(dir, 'run'));
      assert.ok(a.connectionString.startsWith('postgresql://postgres@/postgres?host='));
      await query(a, 'CREATE TABLE kept (id int PRIMARY KEY, note text)');
      await query(a, `INSERT INTO kept VALUES (1, 'survives a restart')`);
      const [s] = await query<{ la: string }>(a, `SELECT current_setting('listen_addresses') AS la`);
      assert.equal(s?.la, '', 'no TCP listener');
      const [z] = await query<{ z: string }>(a, `SELECT current_setting('wal_init_zero') AS z`);
      assert.equal(z?.z, 'off', 'new WAL segments are not zero-filled (docs/performance.md, "New WAL segments not zero-filled")');
      // Buffers for a service database: a quarter of the machine's memory (docs/configuration.md)
      const [m] = await query<{ sb: string; ec: string }>(
        a,
        `SELECT (SELECT setting::bigint * 8 / 1024 FROM pg_settings WHERE name = 'shared_buffers')::text AS sb,
                (SELECT setting::bigint * 8 / 1024 FROM pg_settings WHERE name = 'effective_cache_size')::text AS ec`,
      );
      assert.equal(`-c shared_buffers=${m?.sb}MB -c effective_cache_size=${m?.ec}MB`, memorySettings(os.totalmem()));
      await a.stop();
      await a.stop(); // idempotent
      assert.equal(await postmasterPid(dir), undefined);

      t0 = performance.now();
      const b = await startEmbeddedPostgres({ dataDir: dir, log });
      const secondMs = performance.now() - t0;
      assert.deepEqual(await query(b, 'SELECT id, note FROM kept'), [{ id: 1, note: 'survives a restart' }]);
      assert.equal(logs.filter((l) => l.startsWith('initializing')).length, 1, 'initdb only once');
      await b.stop();
      t.diagnostic(`first start (with initdb) ${firstMs.toFixed(0)} ms, restart ${secondMs.toFixed(0)} ms`);
    }));

  test('kill -9 of the service: stale instance lock taken over, orphan server stopped, data kept', () =>
    inTempDir(async ({ dir, log, logs, cleanups }) => {
      const child = spawn(process.execPath, [HOLD, dir], { stdio: ['ignore', 'pipe', 'pipe'] });
      let stderr = '';
      child.stderr.setEncoding('utf8').on('data', (d: string) => {
        stderr += d;
      });
      const exited = new Promise<void>((resolve) => child.on('exit', () => resolve()));
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`child not READY in time:\n${stderr}`)), 30_000);
        child.stdout.setEncoding('utf8').on('data', (d: string) => {
          if (d.includes('READY')) {
            clearTimeout(timer);
            resolve();
          }
        });
        child.on('exit', (code) => reject(new Error(`child exited (${code}) before READY:\n${stderr}`)));
      });
      const orphan = await postmasterPid(dir);
      assert.ok(orphan !== undefined);
      child.kill('SIGKILL');
      await exited;
      await new Promise((r) => setTimeout(r, 200));
      assert.ok(isAlive(orphan), 'the server outlives the killed service');

      const lock = await acquireInstanceLock(dir, log);
      cleanups.push(() => lock.release());
      assert.ok(
        logs.some((l) => l.includes('taking over stale lock') && l.includes(`pid ${child.pid}`)),
        logs.join('\n'),
      );
      const db = await startEmbeddedPostgres({ dataDir: dir, log });
      cleanups.push(() => db.stop());
      assert.ok(
        logs.some((l) => l.includes(`server (pid ${orphan}) is already running`)),
        logs.join('\n'),
      );
      assert.ok(await waitDead(orphan), 'orphan stopped');
      const fresh = await postmasterPid(dir);
      assert.ok(fresh !== undefined && fresh !== orphan);
      assert.deepEqual(await query(db, 'SELECT id, note FROM held'), [{ id: 1, note: 'written by the child' }]);
    }));

  test('instance lock: a second acquire throws InstanceLockedError naming the pid', () =>
    inTempDir(async ({ dir, log }) => {
      const first = await acquireInstanceLock(dir, log);
      await assert.rejects(acquireInstanceLock(dir, log), (err: unknown) => {
        assert.ok(err instanceof InstanceLockedError);
        assert.match(err.message, new RegExp(`another instance \\(pid ${process.pid}\\) is already using DATA_DIR ${dir};`));
        assert.equal(err.pid, process.pid);
        return true;
      });
      await first.release();
      await first.release(); // idempotent
      const second = await acquireInstanceLock(dir, log);

      // release() leaves a lock alone that is no longer ours
      const lockFile = path.join(dir, 'service.lock');
      const foreign = JSON.stringify({ pid: 1, startedAt: new Date().toISOString(), hostname: 'elsewhere' });
      await fs.writeFile(lockFile, foreign);
      await second.release();
      assert.equal(await fs.readFile(lockFile, 'utf8'), foreign);

      // a lock naming our own pid that this process does not hold is a previous incarnation's (container restarts)
      await fs.writeFile(lockFile, JSON.stringify({ pid: process.pid, startedAt: '2000-01-01T00:00:00Z', hostname: 'x' }));
      const third = await acquireInstanceLock(dir, log);
      await third.release();
      await assert.rejects(fs.stat(lockFile), { code: 'ENOENT' });
    }));

  test('second start on a running cluster: stops it and starts fresh; the old handle no longer stops it', () =>
    inTempDir(async ({ dir, log, logs }) => {
      const a = await startEmbeddedPostgres({ dataDir: dir, log });
      await query(a, 'CREATE TABLE t (v int)');
      await query(a, 'INSERT INTO t VALUES (42)');
      const pidA = await postmasterPid(dir);
      const client = new pg.Client({ connectionString: a.connectionString });
      client.on('error', () => {});
      await client.connect(); // an open connection to the first server

      const b = await startEmbeddedPostgres({ dataDir: dir, log });
      const pidB = await postmasterPid(dir);
      assert.ok(pidA !== undefined && pidB !== undefined && pidA !== pidB);
      assert.ok(
        logs.some((l) => l.includes(`server (pid ${pidA}) is already running`)),
        logs.join('\n'),
      );
      await assert.rejects(client.query('SELECT 1')); // its connections were terminated
      await client.end().catch(() => {});

      await a.stop(); // must not take down b's server
      assert.ok(
        logs.some((l) => l.includes(`not stopping PostgreSQL pid ${pidB}`)),
        logs.join('\n'),
      );
      assert.deepEqual(await query(b, 'SELECT v FROM t'), [{ v: 42 }]);
      await b.stop();
      assert.equal(await postmasterPid(dir), undefined);
    }));

  test('stale postmaster.pid naming a live unrelated process: start removes it, never signals that process', () =>
    inTempDir(async ({ dir, log, logs, cleanups }) => {
      const a = await startEmbeddedPostgres({ dataDir: dir, log });
      await a.stop();
      // A process of the server's OS user, as after a reboot when the old pid got recycled.
      const asRoot = process.getuid?.() === 0;
      const ids = asRoot
        ? {
            uid: Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' })),
            gid: Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' })),
          }
        : {};
      const sleeper = spawn('sleep', ['60'], { stdio: 'ignore', ...ids });
      cleanups.push(async () => sleeper.kill('SIGKILL'));
      const pid = sleeper.pid;
      assert.ok(pid !== undefined);
      const pidFile = path.join(dir, 'pg', 'postmaster.pid');
      await fs.writeFile(pidFile, `${pid}\n${path.join(dir, 'pg')}\n1700000000\n5432\n${path.join(dir, 'run')}\n\n  0 0\nstopped\n`);
      if (asRoot) await fs.chown(pidFile, ids.uid ?? 0, ids.gid ?? 0);

      const b = await startEmbeddedPostgres({ dataDir: dir, log });
      cleanups.push(() => b.stop());
      assert.ok(isAlive(pid), 'the unrelated process was not signalled');
      assert.ok(
        logs.some((l) => l.includes('removing stale lock file') && l.includes(`pid ${pid}`)),
        logs.join('\n'),
      );
      assert.deepEqual(await query(b, 'SELECT 1 AS ok'), [{ ok: 1 }]);
    }));

  test('long DATA_DIR: socket directory falls back to /tmp', () =>
    inTempDir(async ({ dir, log, cleanups }) => {
      const db = await startEmbeddedPostgres({ dataDir: dir, log });
      cleanups.push(() => fs.rm(db.host, { recursive: true, force: true }));
      cleanups.push(() => db.stop());
      assert.match(db.host, /^\/tmp\/mps-pg-[0-9a-f]{12}$/);
      assert.deepEqual(await query(db, 'SELECT 1 AS ok'), [{ ok: 1 }]);
    }, 'x'.repeat(90)));
});
