/**
 * The service under test as a child process (`node src/main.ts`): a fresh temporary DATA_DIR with
 * its embedded PostgreSQL, or a fresh database on an external server (dropped afterwards); a free
 * port on 127.0.0.1; LOG_LEVEL=warn; a fixed ADMIN_TOKEN. Also: provisioning through the admin API,
 * the PostgreSQL processes serving it, and the IPC probe (server-probe.ts) loaded into it.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { type GroupSnapshot, cmdlineOf, findPostmasterByDataDir, pgProcessKind, ppidOf, snapshotGroup } from './proc.ts';

export const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const ADMIN_TOKEN = 'bench-admin-token-0123456789abcdef';
const PROBE = path.join(path.dirname(fileURLToPath(import.meta.url)), 'server-probe.ts');

export interface ServiceOptions {
  /** external PostgreSQL server URL; null = embedded */
  databaseUrl: string | null;
  workersEnabled: boolean;
  /** extra NODE_OPTIONS for the service (e.g. --cpu-prof) */
  nodeOptions: string;
  /** experiments only: extra environment variables for the service (e.g. MALLOC_ARENA_MAX=2) */
  env: Record<string, string>;
  /** experiments only: PostgreSQL settings for the run's database (e.g. synchronous_commit=off) */
  pgSettings: [string, string][];
  /** embedded only: this DATA_DIR (created if missing), kept after the run so that a filled ledger is reused; default a temporary one, removed */
  dataDir?: string | null;
  logFile: string;
  log: (msg: string) => void;
}

export interface PgStats {
  statements: number;
  durableCommits: number;
  bySql: { sql: string; count: number; ms: number }[];
}

export interface MemoryBreakdown {
  rssMB: number;
  heapTotalMB: number;
  heapUsedMB: number;
  externalMB: number;
  arrayBuffersMB: number;
  heapSpacesMB: Record<string, { size: number; used: number }>;
}

export interface Provisioned {
  merchantId: string;
  appId: string;
  keyId: string;
  privateKeyPem: string;
}

/** A free port: any, or the first free one of BENCH_PORTS (`from-to`) on a machine whose users share out ports. */
async function freePort(): Promise<number> {
  const range = /^(\d+)-(\d+)$/.exec(process.env.BENCH_PORTS ?? '');
  if (!range) return listenOn(0);
  for (let p = Number(range[1]); p <= Number(range[2]); p++) {
    const got = await listenOn(p).catch(() => null);
    if (got !== null) return got;
  }
  throw new Error(`no free port in BENCH_PORTS ${process.env.BENCH_PORTS}`);
}

function listenOn(port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.unref();
    s.on('error', reject);
    s.listen(port, '127.0.0.1', () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}

function withDatabase(url: string, name: string): string {
  const u = new URL(url);
  u.pathname = `/${name}`;
  return u.toString();
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export class Service {
  readonly opts: ServiceOptions;
  child: ChildProcess | null = null;
  port = 0;
  baseUrl = '';
  dataDir = '';
  /** the database the service uses (for statistics queries from the benchmark) */
  dbUrl = '';
  dbName = '';
  postmasterPid: number | null = null;
  embedded: boolean;
  #statsDb: pg.Client | null = null;
  #env: Record<string, string> = {};
  #stopped = false;
  #exited: Promise<void> = Promise.resolve();
  /** the one outstanding IPC question (they are asked one at a time) */
  #waiter: ((m: Record<string, unknown>) => void) | null = null;

  constructor(opts: ServiceOptions) {
    this.opts = opts;
    this.embedded = opts.databaseUrl === null;
  }

  get pid(): number {
    return this.child?.pid ?? 0;
  }

  async start(): Promise<void> {
    const { log } = this.opts;
    if (this.opts.dataDir) fs.mkdirSync(this.opts.dataDir, { recursive: true });
    this.dataDir = this.opts.dataDir ? path.resolve(this.opts.dataDir) : fs.mkdtempSync(path.join(os.tmpdir(), 'mps-bench-'));
    // --server-env PORT=N: a port of one's own on a shared machine; else any free one
    this.port = Number(this.opts.env.PORT) || (await freePort());
    this.baseUrl = `http://127.0.0.1:${this.port}`;
    const env: Record<string, string> = {};
    for (const [k, v] of Object.entries(process.env)) {
      if (v === undefined || k.startsWith('PG') || k === 'DATABASE_URL' || k === 'NODE_OPTIONS' || k === 'REDIS_URL') continue;
      env[k] = v;
    }
    Object.assign(env, {
      PORT: String(this.port),
      HOST: '127.0.0.1',
      DATA_DIR: this.dataDir,
      ADMIN_TOKEN,
      LOG_LEVEL: 'warn',
      WORKERS_ENABLED: String(this.opts.workersEnabled),
      NODE_OPTIONS: `--import=${PROBE} ${this.opts.nodeOptions}`.trim(),
      ...this.opts.env,
    });
    if (this.opts.databaseUrl !== null) {
      this.dbName = `mps_bench_${randomBytes(5).toString('hex')}`;
      const admin = new pg.Client({ connectionString: this.opts.databaseUrl });
      await admin.connect();
      await admin.query(`CREATE DATABASE ${this.dbName}`);
      for (const [k, v] of this.opts.pgSettings) await admin.query(`ALTER DATABASE ${this.dbName} SET ${k} = '${v}'`);
      await admin.end();
      this.dbUrl = withDatabase(this.opts.databaseUrl, this.dbName);
      env.DATABASE_URL = this.dbUrl;
      log(`created database ${this.dbName} on ${new URL(this.opts.databaseUrl).host}`);
    } else {
      this.dbName = 'postgres';
      this.dbUrl = `postgresql://postgres@/postgres?host=${encodeURIComponent(path.join(this.dataDir, 'run'))}&port=5432`;
    }
    this.#env = env;
    const { child, t0 } = await this.#spawnHealthy(env);
    log(`service pid ${child.pid} healthy on ${this.baseUrl} after ${((performance.now() - t0) / 1000).toFixed(1)} s`);
    this.#statsDb = new pg.Client({ connectionString: this.dbUrl });
    await this.#statsDb.connect();
    this.#statsDb.on('error', () => {});
    if (this.embedded) {
      this.postmasterPid = findPostmasterByDataDir(path.join(this.dataDir, 'pg'));
    } else {
      const r = await this.#statsDb.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
      this.postmasterPid = ppidOf(r.rows[0]!.pid);
    }
    if (this.postmasterPid === null) log('PostgreSQL server processes not found: their CPU time is not reported');
    if (this.embedded && this.opts.pgSettings.length) {
      // the private cluster: set server-wide and reload, which reaches the service's open sessions too
      for (const [k, v] of this.opts.pgSettings) await this.#statsDb.query(`ALTER SYSTEM SET ${k} = '${v}'`);
      await this.#statsDb.query('SELECT pg_reload_conf()');
    }
    if (this.opts.pgSettings.length)
      log(`PostgreSQL settings for this run: ${this.opts.pgSettings.map(([k, v]) => `${k}=${v}`).join(', ')}`);
  }

  /** Spawns the service (as npm start does) and waits until it answers /healthz. */
  async #spawnHealthy(env: Record<string, string>): Promise<{ child: ChildProcess; t0: number }> {
    const out = fs.openSync(this.opts.logFile, 'a');
    const t0 = performance.now();
    const child = spawn(process.execPath, ['--max-semi-space-size=16', 'src/main.ts'] /* as npm start */, {
      cwd: REPO_ROOT,
      env,
      stdio: ['ignore', out, out, 'ipc'],
    });
    fs.closeSync(out);
    this.child = child;
    this.#exited = new Promise((resolve) => child.once('exit', () => resolve()));
    child.on('message', (m: Record<string, unknown>) => this.#waiter?.(m));
    let exitCode: number | null | undefined;
    child.once('exit', (code, signal) => {
      exitCode = code ?? (signal ? -1 : null);
    });
    for (;;) {
      if (exitCode !== undefined) throw new Error(`the service exited during start (code ${exitCode}); see ${this.opts.logFile}`);
      if (performance.now() - t0 > 90_000) throw new Error(`the service did not become healthy within 90 s; see ${this.opts.logFile}`);
      try {
        const r = await fetch(`${this.baseUrl}/healthz`, { signal: AbortSignal.timeout(1000) });
        if (r.ok) break;
      } catch {
        // not listening yet
      }
      await sleep(100);
    }
    return { child, t0 };
  }

  /**
   * kill -9 of the service (its embedded PostgreSQL is left running, as after a crash), then at once
   * a start on the same DATA_DIR, port and database, as a supervisor would: answers the wall-clock
   * times of the kill and of the new process answering /healthz.
   */
  async crashAndRestart(): Promise<{ killedAt: number; readyAt: number }> {
    const old = this.child!;
    const exited = this.#exited;
    const killedAt = Date.now();
    old.kill('SIGKILL');
    await exited;
    const { child } = await this.#spawnHealthy(this.#env);
    const readyAt = Date.now();
    this.opts.log(`service killed (-9) and restarted: pid ${child.pid} healthy ${readyAt - killedAt} ms after the kill`);
    await this.#reconnect();
    return { killedAt, readyAt };
  }

  /** After a restart: the statistics connection again, and the embedded server's postmaster (it may be a new one). */
  async #reconnect(): Promise<void> {
    await this.#statsDb?.end().catch(() => {});
    this.#statsDb = new pg.Client({ connectionString: this.dbUrl });
    await this.#statsDb.connect();
    this.#statsDb.on('error', () => {});
    if (this.embedded) this.postmasterPid = findPostmasterByDataDir(path.join(this.dataDir, 'pg'));
  }

  /**
   * A graceful stop (SIGTERM: the service stops its embedded PostgreSQL) and a start on the same
   * DATA_DIR, port and database with `env` changed, e.g. WORKERS_ENABLED=false while the ledger is
   * bulk-loaded (the workers' scans of tables whose indexes are dropped for the load would take a
   * core from it) and true again before the scenarios.
   */
  async restartWith(env: Record<string, string>): Promise<void> {
    const old = this.child!;
    await this.#statsDb?.end().catch(() => {});
    this.#statsDb = null;
    if (old.exitCode === null && old.signalCode === null) {
      old.kill('SIGTERM');
      if (!(await Promise.race([this.#exited.then(() => true), sleep(120_000).then(() => false)]))) {
        old.kill('SIGKILL');
        await this.#exited;
      }
    }
    Object.assign(this.#env, env);
    const { child, t0 } = await this.#spawnHealthy(this.#env);
    this.opts.log(
      `service restarted with ${Object.entries(env)
        .map(([k, v]) => `${k}=${v}`)
        .join(' ')}: pid ${child.pid} healthy after ${((performance.now() - t0) / 1000).toFixed(1)} s`,
    );
    await this.#reconnect();
  }

  /** CPU snapshot of the PostgreSQL processes serving this run (external: this database's backends + auxiliaries). */
  pgSnapshot(): GroupSnapshot | null {
    if (this.postmasterPid === null) return null;
    if (this.embedded) return snapshotGroup(this.postmasterPid);
    const snap = snapshotGroup(this.postmasterPid, (pid) => {
      // "postgres: [cluster: ]user database host(port) state": keep only our database's backends.
      const c = cmdlineOf(pid);
      return pgProcessKind(c) !== 'backend' || c.replace(/^postgres:\s+(\S+:\s+)?/, '').split(/\s+/)[1] === this.dbName;
    });
    // Exits of other databases' backends are in the postmaster's reaped-children time: leave it out.
    snap.rootChildren = 0;
    snap.tracksExited = false;
    return snap;
  }

  async walLsn(): Promise<string | null> {
    try {
      const r = await this.#statsDb!.query<{ lsn: string }>('SELECT pg_current_wal_lsn()::text AS lsn');
      return r.rows[0]!.lsn;
    } catch {
      return null;
    }
  }

  async walBytesSince(lsn: string | null): Promise<number | null> {
    if (lsn === null) return null;
    const r = await this.#statsDb!.query<{ d: string }>('SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1)::text AS d', [lsn]);
    return Number(r.rows[0]!.d);
  }

  async sql<T extends pg.QueryResultRow>(text: string, values: unknown[] = []): Promise<T[]> {
    return (await this.#statsDb!.query<T>(text, values)).rows;
  }

  #ask(msg: { type: string; file?: string; gc?: boolean }, timeoutMs = 20_000): Promise<Record<string, unknown>> {
    const child = this.child;
    if (!child?.connected) return Promise.reject(new Error('no IPC channel to the service'));
    if (this.#waiter) return Promise.reject(new Error('an IPC question is already outstanding'));
    return new Promise((resolve, reject) => {
      const t = setTimeout(() => {
        this.#waiter = null;
        reject(new Error(`the service did not answer ${msg.type}`));
      }, timeoutMs);
      this.#waiter = (m) => {
        clearTimeout(t);
        this.#waiter = null;
        if (m.type === 'error') reject(new Error(String(m.message)));
        else resolve(m);
      };
      child.send(msg);
    });
  }

  async pgStats(): Promise<PgStats | null> {
    try {
      return (await this.#ask({ type: 'pg-stats' })) as unknown as PgStats;
    } catch {
      return null;
    }
  }

  async memory(gc = false): Promise<MemoryBreakdown | null> {
    try {
      const { type: _t, ...m } = await this.#ask({ type: 'memory', gc });
      return m as unknown as MemoryBreakdown;
    } catch {
      return null;
    }
  }

  async profileStart(): Promise<void> {
    await this.#ask({ type: 'profile-start' });
  }

  async profileStop(file: string): Promise<void> {
    await this.#ask({ type: 'profile-stop', file }, 60_000);
  }

  async admin<T>(method: string, url: string, body?: unknown): Promise<{ status: number; body: T }> {
    const r = await fetch(`${this.baseUrl}/api/admin/v1${url}`, {
      method,
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return { status: r.status, body: (await r.json()) as T };
  }

  /**
   * A CORPORATE merchant, an app allowed 100,000 requests/s with `app`'s settings (a daily amount
   * ceiling, a notifyUrl), and an RSA-2048 key.
   */
  async provision(app: { dailyAmountCeilingFen?: number | null; notifyUrl?: string | null } = {}): Promise<Provisioned> {
    const m = await this.admin<{ merchantId: string }>('POST', '/merchants', { name: 'Bench Shop', entityType: 'CORPORATE' });
    if (m.status !== 201) throw new Error(`provisioning the merchant: HTTP ${m.status} ${JSON.stringify(m.body)}`);
    const a = await this.admin<{ appId: string }>('POST', `/merchants/${m.body.merchantId}/apps`, {
      rateLimitPerSecond: 100_000,
      // The longest window: no order of the run expires (and gets closed by the expiry worker) meanwhile.
      paymentWindowSeconds: 7200,
      ...app,
    });
    if (a.status !== 201) throw new Error(`provisioning the app: HTTP ${a.status} ${JSON.stringify(a.body)}`);
    const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
    const keyId = 'bench-key-1';
    const k = await this.admin('POST', `/apps/${a.body.appId}/keys`, {
      keyId,
      publicKeyPem: publicKey.export({ type: 'spki', format: 'pem' }).toString(),
    });
    if (k.status !== 201) throw new Error(`provisioning the key: HTTP ${k.status} ${JSON.stringify(k.body)}`);
    return {
      merchantId: m.body.merchantId,
      appId: a.body.appId,
      keyId,
      privateKeyPem: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
    };
  }

  /** PATCH /api/admin/v1/apps/{appId}. */
  async patchApp(appId: string, body: Record<string, unknown>): Promise<void> {
    const r = await this.admin('PATCH', `/apps/${appId}`, body);
    if (r.status !== 200) throw new Error(`PATCH app ${appId}: HTTP ${r.status} ${JSON.stringify(r.body)}`);
  }

  /** The platform's public keys by key id (what a merchant verifies notifications with). */
  async platformKeys(): Promise<Record<string, string>> {
    const r = await this.admin<{ keys: { keyId: string; publicKeyPem: string }[] }>('GET', '/platform-keys');
    if (r.status !== 200) throw new Error(`GET platform-keys: HTTP ${r.status}`);
    return Object.fromEntries(r.body.keys.map((k) => [k.keyId, k.publicKeyPem]));
  }

  /** SIGTERM (graceful: the service stops its embedded PostgreSQL), SIGKILL after 30 s; then cleanup. */
  async stop(): Promise<void> {
    const { log } = this.opts;
    if (this.#stopped) return;
    this.#stopped = true;
    await this.#statsDb?.end().catch(() => {});
    this.#statsDb = null;
    const child = this.child;
    if (child && child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      const done = await Promise.race([this.#exited.then(() => true), sleep(30_000).then(() => false)]);
      if (!done) {
        log(`service pid ${child.pid} did not stop within 30 s: SIGKILL`);
        child.kill('SIGKILL');
        await this.#exited;
      }
    }
    // An embedded server left behind (service killed) is ours: stop it by its pid.
    if (this.embedded && this.postmasterPid !== null && cmdlineOf(this.postmasterPid).includes(this.dataDir)) {
      try {
        process.kill(this.postmasterPid, 'SIGINT');
        for (let i = 0; i < 100 && cmdlineOf(this.postmasterPid) !== ''; i++) await sleep(100);
      } catch {
        // already gone
      }
    }
    if (this.opts.databaseUrl !== null && this.dbName) {
      try {
        const admin = new pg.Client({ connectionString: this.opts.databaseUrl });
        await admin.connect();
        await admin.query(`DROP DATABASE IF EXISTS ${this.dbName} WITH (FORCE)`);
        await admin.end();
        log(`dropped database ${this.dbName}`);
      } catch (err) {
        log(`could not drop database ${this.dbName}: ${(err as Error).message}`);
      }
    }
    if (this.dataDir && !this.opts.dataDir) fs.rmSync(this.dataDir, { recursive: true, force: true });
  }
}
