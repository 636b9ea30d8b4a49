/**
 * A highly available PostgreSQL on one machine, for the drill and its suite
 * (docs/high-availability.md): pg_auto_failover's monitor and two nodes, a primary and a
 * synchronous standby, each under its own `pg_autoctl run` (one process group: the keeper, the
 * postmaster and its backends, killed together as a machine dies).
 *
 *   node scripts/ha/cluster.ts up [dir]      start (or restart) the cluster, print DATABASE_URL
 *   node scripts/ha/cluster.ts state [dir]   the monitor's view of the nodes
 *   node scripts/ha/cluster.ts down [dir]    stop it and remove its directory
 *
 * Needs Debian's `pg-auto-failover-cli` and `postgresql-15-auto-failover` (pg_autoctl, PostgreSQL
 * 15). As root, the servers run as the `postgres` user. Ports: HA_BASE_PORT (25400) for the
 * monitor, the next ones for the nodes.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

export const PG_BIN = '/usr/lib/postgresql/15/bin';
export const PG_AUTOCTL = '/usr/bin/pg_autoctl';

/** Whether this machine can run the cluster (the packages the CI installs). */
export function haPackagesPresent(): boolean {
  return (
    fs.existsSync(PG_AUTOCTL) &&
    fs.existsSync(path.join(PG_BIN, 'pg_ctl')) &&
    fs.existsSync('/usr/share/postgresql/15/extension/pgautofailover.control')
  );
}

/**
 * The monitor's failure detection, shortened from its defaults (a 5 s health check, 20 s before a
 * node is judged unhealthy) so that a primary's death is acted on within a few seconds: the
 * monitor checks each node every second, and a node that stopped reporting and answering for
 * 3 s is failed over.
 */
const MONITOR_SETTINGS: Record<string, string> = {
  'pgautofailover.health_check_period': '1000',
  'pgautofailover.health_check_timeout': '1000',
  'pgautofailover.health_check_max_retries': '1',
  'pgautofailover.health_check_retry_delay': '500',
  'pgautofailover.node_considered_unhealthy_timeout': '3000',
  'pgautofailover.startup_grace_period': '3000',
  // The old primary is given this long to demote itself before the standby is promoted anyway
  // (its keeper is gone with its machine). Safe with a synchronous standby: an old primary cut off
  // but alive cannot acknowledge a commit once its standby stopped replicating from it.
  'pgautofailover.primary_demote_timeout': '3000',
};

export interface NodeState {
  name: string;
  port: number;
  reported: string;
  assigned: string;
  health: number;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

export class HaCluster {
  readonly dir: string;
  readonly monitorPort: number;
  readonly nodes: { name: string; port: number }[];
  readonly #runs = new Map<string, ChildProcess>();
  readonly #asRoot = process.getuid?.() === 0;

  constructor(dir: string, basePort = Number(process.env.HA_BASE_PORT ?? 25400)) {
    this.dir = path.resolve(dir);
    this.monitorPort = basePort;
    this.nodes = [
      { name: 'node1', port: basePort + 1 },
      { name: 'node2', port: basePort + 2 },
    ];
  }

  /** The service's address: every node, libpq's way; the service follows the primary. */
  get databaseUrl(): string {
    return `postgres://postgres@${this.nodes.map((n) => `127.0.0.1:${n.port}`).join(',')}/postgres?target_session_attrs=read-write`;
  }

  urlOf(name: string): string {
    return `postgres://postgres@127.0.0.1:${this.#node(name).port}/postgres`;
  }

  get monitorUrl(): string {
    return `postgres://autoctl_node@127.0.0.1:${this.monitorPort}/pg_auto_failover?sslmode=disable`;
  }

  #node(name: string) {
    const n = this.nodes.find((x) => x.name === name);
    if (!n) throw new Error(`no node ${name}`);
    return n;
  }

  #cmd(args: string[]): { cmd: string; args: string[]; env: NodeJS.ProcessEnv } {
    const env = {
      PATH: `${PG_BIN}:/usr/bin:/bin`,
      XDG_CONFIG_HOME: path.join(this.dir, 'config'),
      XDG_DATA_HOME: path.join(this.dir, 'share'),
      HOME: this.dir,
    };
    if (!this.#asRoot) return { cmd: PG_AUTOCTL, args, env: { ...process.env, ...env } };
    return {
      cmd: 'runuser',
      args: ['-u', 'postgres', '--', 'env', ...Object.entries(env).map(([k, v]) => `${k}=${v}`), PG_AUTOCTL, ...args],
      env: process.env,
    };
  }

  #ctl(args: string[], allowFail = false): string {
    const c = this.#cmd(args);
    const r = spawnSync(c.cmd, c.args, { env: c.env, encoding: 'utf8', timeout: 120_000, cwd: this.dir });
    if (r.status !== 0 && !allowFail) throw new Error(`pg_autoctl ${args.join(' ')} failed (${r.status}):\n${r.stderr}${r.stdout}`);
    return r.stdout;
  }

  /** Starts `pg_autoctl run` (or create ... --run) in a process group of its own. */
  #spawn(name: string, args: string[]): void {
    const c = this.#cmd(args);
    const log = fs.openSync(path.join(this.dir, `${name}.log`), 'a');
    const child = spawn(c.cmd, c.args, { env: c.env, stdio: ['ignore', log, log], detached: true, cwd: this.dir });
    fs.closeSync(log);
    child.unref();
    this.#runs.set(name, child);
    fs.writeFileSync(path.join(this.dir, `${name}.pid`), String(child.pid));
  }

  /** Creates (first time) or restarts the monitor and both nodes; resolves once a primary and a secondary run. */
  async up(): Promise<void> {
    fs.mkdirSync(this.dir, { recursive: true });
    if (this.#asRoot) spawnSync('chown', ['-R', 'postgres', this.dir]);
    const monitorData = path.join(this.dir, 'monitor');
    if (!fs.existsSync(path.join(monitorData, 'PG_VERSION'))) {
      this.#ctl([
        'create',
        'monitor',
        '--pgdata',
        monitorData,
        '--pgport',
        String(this.monitorPort),
        '--hostname',
        '127.0.0.1',
        '--auth',
        'trust',
        '--no-ssl',
      ]);
    }
    if (!this.#alive('monitor')) this.#spawn('monitor', ['run', '--pgdata', monitorData]);
    await this.#waitFor('the monitor', 90_000, async () => this.#psql(this.monitorPort, 'pg_auto_failover', 'SELECT 1') === '1');
    // ALTER SYSTEM runs outside a transaction: one statement per -c.
    const set = Object.entries(MONITOR_SETTINGS).map(([k, v]) => `ALTER SYSTEM SET ${k} = '${v}'`);
    if (this.#psql(this.monitorPort, 'pg_auto_failover', [...set, 'SELECT pg_reload_conf()']) === null) {
      throw new Error('HA cluster: the monitor refused its settings');
    }
    for (const [i, n] of this.nodes.entries()) {
      if (this.#alive(n.name)) continue;
      const data = path.join(this.dir, n.name);
      if (fs.existsSync(path.join(data, 'PG_VERSION'))) this.#spawn(n.name, ['run', '--pgdata', data]);
      else {
        this.#spawn(n.name, [
          'create',
          'postgres',
          '--pgdata',
          data,
          '--pgport',
          String(n.port),
          '--hostname',
          '127.0.0.1',
          '--name',
          n.name,
          '--auth',
          'trust',
          '--no-ssl',
          '--monitor',
          this.monitorUrl,
          '--run',
        ]);
        // The first node becomes the primary before the second joins as its standby.
        if (i === 0)
          await this.#waitFor(`${n.name} primary`, 90_000, async () =>
            this.state().some((s) => s.name === n.name && s.reported === 'single'),
          );
      }
    }
    await this.waitHealthy(180_000);
  }

  /** The monitor's view of the nodes. */
  state(): NodeState[] {
    const out = this.#psql(
      this.monitorPort,
      'pg_auto_failover',
      `SELECT nodename || '|' || nodeport || '|' || reportedstate || '|' || goalstate || '|' || health FROM pgautofailover.node ORDER BY nodeid`,
    );
    if (out === null || out === '') return [];
    return out.split('\n').map((l) => {
      const [name, port, reported, assigned, health] = l.split('|');
      return { name: name!, port: Number(port), reported: reported!, assigned: assigned!, health: Number(health) };
    });
  }

  /** The node the monitor says is the primary (with its standby, or alone: wait_primary), if any. */
  primary(): string | null {
    return this.state().find((s) => (s.reported === 'primary' || s.reported === 'wait_primary') && s.reported === s.assigned)?.name ?? null;
  }

  /** Both nodes running, one primary with its synchronous standby. */
  async waitHealthy(timeoutMs = 120_000): Promise<void> {
    await this.#waitFor('a primary and a secondary', timeoutMs, async () => {
      const s = this.state();
      return (
        s.length === this.nodes.length &&
        s.some((n) => n.reported === 'primary' && n.assigned === 'primary') &&
        s.some((n) => n.reported === 'secondary' && n.assigned === 'secondary')
      );
    });
  }

  /** The machine of a node dies: SIGKILL to its whole process group (pg_autoctl, the postmaster, the backends). */
  kill(name: string): void {
    const pid = Number(fs.readFileSync(path.join(this.dir, `${name}.pid`), 'utf8'));
    try {
      process.kill(-pid, 'SIGKILL');
    } catch {
      /* already gone */
    }
    this.#runs.delete(name);
  }

  /** Brings a dead node back: pg_autoctl rejoins it as the standby of the new primary (pg_rewind as needed). */
  rejoin(name: string): void {
    this.#spawn(name, ['run', '--pgdata', path.join(this.dir, name)]);
  }

  /** A planned switchover, as an operator runs it; resolves when pg_autoctl reports it done. */
  switchover(): Promise<void> {
    const c = this.#cmd(['perform', 'switchover', '--pgdata', path.join(this.dir, 'monitor'), '--formation', 'default']);
    return new Promise((resolve, reject) => {
      const child = spawn(c.cmd, c.args, { env: c.env, cwd: this.dir, stdio: ['ignore', 'pipe', 'pipe'] });
      let out = '';
      child.stdout.on('data', (d) => (out += d));
      child.stderr.on('data', (d) => (out += d));
      child.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`pg_autoctl perform switchover failed (${code}):\n${out}`))));
    });
  }

  /** Stops everything (SIGTERM, then SIGKILL) and removes the directory unless kept. */
  async down(keep = false): Promise<void> {
    const names = [...this.nodes.map((n) => n.name), 'monitor'];
    for (const name of names) this.#signal(name, 'SIGTERM');
    const until = Date.now() + 15_000;
    while (Date.now() < until && names.some((n) => this.#alive(n))) await sleep(200);
    for (const name of names) this.#signal(name, 'SIGKILL');
    await sleep(300);
    if (!keep) fs.rmSync(this.dir, { recursive: true, force: true });
  }

  #signal(name: string, sig: NodeJS.Signals): void {
    const f = path.join(this.dir, `${name}.pid`);
    if (!fs.existsSync(f)) return;
    try {
      process.kill(-Number(fs.readFileSync(f, 'utf8')), sig);
    } catch {
      /* gone */
    }
  }

  #alive(name: string): boolean {
    const f = path.join(this.dir, `${name}.pid`);
    if (!fs.existsSync(f)) return false;
    try {
      process.kill(-Number(fs.readFileSync(f, 'utf8')), 0);
      return true;
    } catch {
      return false;
    }
  }

  #psql(port: number, db: string, sql: string | string[]): string | null {
    const statements = (Array.isArray(sql) ? sql : [sql]).flatMap((s) => ['-c', s]);
    const r = spawnSync('psql', ['-X', '-q', '-At', '-h', '127.0.0.1', '-p', String(port), '-U', 'postgres', '-d', db, ...statements], {
      encoding: 'utf8',
      timeout: 10_000,
    });
    return r.status === 0 ? r.stdout.trim() : null;
  }

  async #waitFor(what: string, timeoutMs: number, ok: () => Promise<boolean>): Promise<void> {
    const until = Date.now() + timeoutMs;
    while (Date.now() < until) {
      if (await ok().catch(() => false)) return;
      await sleep(250);
    }
    const logs = fs
      .readdirSync(this.dir)
      .filter((f) => f.endsWith('.log'))
      .map((f) => `--- ${f}\n${fs.readFileSync(path.join(this.dir, f), 'utf8').split('\n').slice(-15).join('\n')}`);
    throw new Error(`HA cluster: no ${what} within ${timeoutMs / 1000} s; nodes: ${JSON.stringify(this.state())}\n${logs.join('\n')}`);
  }
}

const isMain = process.argv[1] !== undefined && path.resolve(process.argv[1]) === path.resolve(import.meta.filename);
if (isMain) {
  const [verb = 'up', dir = path.join(os.tmpdir(), 'mps-ha')] = process.argv.slice(2);
  const c = new HaCluster(dir);
  if (verb === 'up') {
    if (!haPackagesPresent()) {
      console.error('pg_auto_failover is not installed: apt-get install pg-auto-failover-cli postgresql-15-auto-failover');
      process.exit(1);
    }
    await c.up();
    console.log(`DATABASE_URL=${c.databaseUrl}`);
  } else if (verb === 'state') console.log(c.state());
  else if (verb === 'down') await c.down();
  else {
    console.error('usage: node scripts/ha/cluster.ts up|state|down [dir]');
    process.exit(2);
  }
}
