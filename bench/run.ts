/**
 * `npm run bench`: load benchmark of the open API (see docs/performance.md).
 *
 * Starts the service (`node src/main.ts`) on a fresh embedded PostgreSQL (or a fresh database on
 * --database-url / DATABASE_URL), provisions a merchant, app and RSA-2048 key, measures this
 * machine's crypto ceiling, then drives each scenario with autocannon from this process. Every
 * request is validly signed with its own nonce, timestamp and signature, all signed before the
 * measured phase and sent exactly once. Prints Markdown tables and writes bench/results/<ts>.json.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { type Item, SignPool, createItems, mixedItems, queryItems, replayItems } from './lib/corpus.ts';
import { type CryptoCeiling, measureCryptoCeiling } from './lib/crypto-ceiling.ts';
import { type LoadResult, runLoad } from './lib/load.ts';
import { runPaced } from './lib/paced.ts';
import { runWrk, wrkAvailable } from './lib/wrk.ts';
import {
  MemoryPoller,
  cpuOf,
  groupDelta,
  groupDeltaByKind,
  memoryOf,
  schedOf,
  schedShares,
  selfCpu,
  systemBusySeconds,
  systemCpuSeconds,
} from './lib/proc.ts';
import { summarizeProfile } from './lib/profile.ts';
import { type ScenarioResult, ceilingLine, checkTargets, markdown, profileTable, resultsTable, targetsTable } from './lib/report.ts';
import { type MemoryBreakdown, type PgStats, type Provisioned, REPO_ROOT, Service } from './lib/service.ts';
import { statementScenario } from './lib/statement.ts';

const HELP = `Usage: npm run bench -- [options]

  --duration <s>          measured seconds per scenario (default 20; --quick: 3)
  --connections <n>       concurrent connections of the closed-loop phases (default 128; --quick: 8)
  --half-connections <n>  connections of the autocannon half-load scenarios (default 32; --quick: 8)
  --scenarios <list>      comma list of create,query,mixed,replay,half (half = half-query,half-create),
                          statement; default: all but statement (it writes a day of payments first)
  --statement-payments <n>  statement scenario: the day's payments (default 1000000; --quick: 10000)
  --warmup <s>            warm-up seconds before each peak scenario (default 3; --quick: 1)
  --repeats <n>           replay scenario: sends per X-SVC-Request-Id (default 10)
  --quiet-wait <s>        before each measured phase, wait up to this long for other processes of the
                          machine to use under 0.25 core (default 30; --quick: 3; 0 = do not wait)
  --load-tool <t>         wrk or autocannon: the load tool of the closed-loop phases (create, query,
                          mixed, warm-ups); default wrk when installed (apt-get install wrk), else
                          autocannon. replay and the half-load phases always use autocannon / the
                          paced sender.
  --quick                 CI smoke mode: a few seconds per scenario
  --database-url <url>    run against this PostgreSQL server (a fresh database is created and
                          dropped); default: DATABASE_URL, else the embedded PostgreSQL
  --profile               after each peak scenario, a CPU-profiled phase of the service's main
                          thread (written to bench/results/<ts>-<scenario>.cpuprofile, summarized)
  --no-workers            WORKERS_ENABLED=false for the service (default: workers on)
  --pg-set <name=value>   experiments only (repeatable): a PostgreSQL setting for the run's database,
                          e.g. synchronous_commit=off to see what fsync costs, or
                          auto_explain.log_min_duration=0 (dotted names) to log plans
  --server-env <K=V>      experiments only (repeatable): an environment variable for the service
  --server-node-options=<s>  extra NODE_OPTIONS for the service process, given with '=' since the value
                          starts with a dash (e.g. --server-node-options=--max-semi-space-size=16)
  --out <dir>             results directory (default bench/results)
  --help

Exit status: 0 when every answer was as expected (no errors), 1 otherwise. The performance targets
are reported, not enforced (they depend on the machine).`;

const { values: a } = parseArgs({
  allowNegative: true,
  options: {
    duration: { type: 'string' },
    connections: { type: 'string' },
    'half-connections': { type: 'string' },
    scenarios: { type: 'string' },
    'statement-payments': { type: 'string' },
    warmup: { type: 'string' },
    repeats: { type: 'string' },
    'quiet-wait': { type: 'string' },
    'load-tool': { type: 'string' },
    quick: { type: 'boolean', default: false },
    'database-url': { type: 'string' },
    profile: { type: 'boolean', default: false },
    workers: { type: 'boolean', default: true },
    'server-node-options': { type: 'string', default: '' },
    'pg-set': { type: 'string', multiple: true, default: [] },
    'server-env': { type: 'string', multiple: true, default: [] },
    out: { type: 'string' },
    help: { type: 'boolean', default: false },
  },
});
if (a.help) {
  process.stdout.write(`${HELP}\n`);
  process.exit(0);
}

function num(v: string | undefined, def: number, name: string, min = 1): number {
  if (v === undefined) return def;
  const n = Number(v);
  if (!Number.isFinite(n) || n < min) {
    process.stderr.write(`--${name} must be a number >= ${min}\n`);
    process.exit(2);
  }
  return n;
}

const quick = a.quick;
const opts = {
  duration: num(a.duration, quick ? 3 : 20, 'duration'),
  connections: Math.floor(num(a.connections, quick ? 8 : 128, 'connections')),
  warmup: num(a.warmup, quick ? 1 : 3, 'warmup', 0),
  repeats: Math.floor(num(a.repeats, 10, 'repeats', 2)),
  quietWait: Math.min(600, num(a['quiet-wait'], quick ? 3 : 30, 'quiet-wait', 0)),
  loadTool: ((): 'wrk' | 'autocannon' => {
    const t = a['load-tool'];
    if (t === undefined) return wrkAvailable() ? 'wrk' : 'autocannon';
    if (t === 'autocannon') return t;
    if (t === 'wrk' && wrkAvailable()) return t;
    process.stderr.write(
      t === 'wrk' ? 'wrk is not installed (apt-get install wrk)\n' : `--load-tool takes wrk or autocannon (got '${t}')\n`,
    );
    process.exit(2);
  })(),
  databaseUrl: a['database-url'] ?? process.env.DATABASE_URL ?? null,
  profile: a.profile,
  workers: a.workers,
  nodeOptions: a['server-node-options'],
  pgSettings: (a['pg-set'] ?? []).map((kv): [string, string] => {
    const m = /^([a-z_]+(?:\.[a-z_]+)?)=([A-Za-z0-9_.-]+)$/.exec(kv);
    if (!m) {
      process.stderr.write(`--pg-set takes name=value (got '${kv}')\n`);
      process.exit(2);
    }
    return [m[1]!, m[2]!];
  }),
  serverEnv: Object.fromEntries(
    (a['server-env'] ?? []).map((kv) => {
      const i = kv.indexOf('=');
      if (i < 1) {
        process.stderr.write(`--server-env takes NAME=value (got '${kv}')\n`);
        process.exit(2);
      }
      return [kv.slice(0, i), kv.slice(i + 1)];
    }),
  ),
  outDir: path.resolve(a.out ?? path.join(REPO_ROOT, 'bench/results')),
  ceilingSeconds: quick ? 1 : 3,
};
const halfConnections = Math.floor(num(a['half-connections'], quick ? 8 : 32, 'half-connections'));
const ALL = ['create', 'query', 'mixed', 'replay', 'half-query', 'half-create'] as const;
type Name = (typeof ALL)[number];
const wanted = (a.scenarios ?? 'create,query,mixed,replay,half')
  .split(',')
  .map((s) => s.trim())
  .flatMap((s) => (s === 'half' ? ['half-query', 'half-create'] : [s]));
for (const s of wanted) {
  if (!(ALL as readonly string[]).includes(s) && s !== 'statement') {
    process.stderr.write(`unknown scenario '${s}' (known: create, query, mixed, replay, half, half-query, half-create, statement)\n`);
    process.exit(2);
  }
}
const scenarios = ALL.filter((s) => wanted.includes(s));
/** The statement scenario (bench/lib/statement.ts): its own measure, after the load scenarios. */
const statementPayments = wanted.includes('statement')
  ? Math.floor(num(a['statement-payments'], quick ? 10_000 : 1_000_000, 'statement-payments', 1))
  : 0;

const DESCRIPTIONS: Record<Name, string> = {
  create: 'POST /payments, a new outTradeNo each',
  query: 'GET /payments/{outTradeNo} over the orders created before',
  mixed: '70% query / 25% create / 5% close',
  replay: `POST /payments, each X-SVC-Request-Id sent ${opts.repeats} times (fresh nonce and signature): 1 execution + ${opts.repeats - 1} byte-identical replays`,
  'half-query': 'query at half of the peak query rate (autocannon overallRate)',
  'half-create': 'create at half of the peak create rate (autocannon overallRate)',
};

const t00 = performance.now();
const log = (msg: string) => process.stderr.write(`[bench ${((performance.now() - t00) / 1000).toFixed(1).padStart(6)} s] ${msg}\n`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const stamp = new Date().toISOString().replace(/[:.]/g, '-');
fs.mkdirSync(opts.outDir, { recursive: true });

// ---------------------------------------------------------------------------------------------------

/** CPU seconds of this benchmark, the service and its PostgreSQL processes, so far. */
function ownCpuSeconds(): number {
  const b = selfCpu();
  let t = b.user + b.sys;
  const c = svc.pid ? cpuOf(svc.pid) : null;
  if (c) t += c.user + c.sys;
  const g = svc.pgSnapshot();
  if (g) for (const v of g.perPid.values()) t += v;
  return t;
}

/**
 * Other engineers' builds and tests share this machine: wait (bounded) until the rest of the machine
 * uses under 0.25 core, so it does not take CPU from the measured phase. Returns the cores it used.
 */
async function waitQuiet(label: string): Promise<number> {
  const t0 = performance.now();
  let other: number;
  for (;;) {
    const s0 = systemBusySeconds();
    const o0 = ownCpuSeconds();
    await sleep(1000);
    other = Math.max(0, systemBusySeconds() - s0 - (ownCpuSeconds() - o0));
    if (other < 0.25) break;
    if ((performance.now() - t0) / 1000 >= opts.quietWait) {
      log(`${label}: the machine is busy (other processes use ${other.toFixed(2)} cores); measuring anyway`);
      return other;
    }
  }
  const waited = (performance.now() - t0) / 1000;
  if (waited > 1.5) log(`${label}: waited ${waited.toFixed(0)} s for the machine to be quiet`);
  return other;
}

const svc = new Service({
  databaseUrl: opts.databaseUrl,
  workersEnabled: opts.workers,
  nodeOptions: opts.nodeOptions,
  pgSettings: opts.pgSettings,
  env: opts.serverEnv,
  logFile: path.join(opts.outDir, `${stamp}-service.log`),
  log,
});

if (opts.quietWait > 0) await waitQuiet('crypto ceiling');
log(`measuring the crypto ceiling (${opts.ceilingSeconds} s per mode)`);
const ceilS0 = systemBusySeconds();
const ceilO0 = selfCpu();
const ceilT0 = performance.now();
const ceiling: CryptoCeiling = await measureCryptoCeiling(opts.ceilingSeconds);
const ceilO1 = selfCpu();
const ceilingOtherCores = Math.max(
  0,
  (systemBusySeconds() - ceilS0 - (ceilO1.user + ceilO1.sys - ceilO0.user - ceilO0.sys)) / ((performance.now() - ceilT0) / 1000),
);
log(`${ceilingLine(ceiling)}; other processes used ${ceilingOtherCores.toFixed(2)} cores meanwhile`);
let stopping = false;
const cleanup = async (code: number) => {
  if (stopping) return;
  stopping = true;
  await svc.stop().catch((err: unknown) => log(`cleanup: ${String(err)}`));
  process.exit(code);
};
process.on('SIGINT', () => void cleanup(130));
process.on('SIGTERM', () => void cleanup(143));
// Whatever fails, the service (and its PostgreSQL) must not be left running.
process.on('uncaughtException', (err) => {
  log(`failed: ${err.stack ?? err.message}`);
  void cleanup(1);
});

let pool = null as SignPool | null;
try {
  const errorFree = await main();
  await pool?.close();
  // Errors (a wrong status, a socket error, a replay that differs) fail the run; the targets do not
  // (they depend on the machine): they are reported.
  await cleanup(errorFree ? 0 : 1);
} catch (err) {
  log(`failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
  await pool?.close().catch(() => {});
  await cleanup(1);
}

/** Runs the benchmark; true when every scenario was error-free. */
async function main(): Promise<boolean> {
  log(`starting the service (${opts.databaseUrl ? `external PostgreSQL ${new URL(opts.databaseUrl).host}` : 'embedded PostgreSQL'})`);
  await svc.start();
  const mch: Provisioned = await svc.provision();
  log(`provisioned merchant ${mch.merchantId}, app ${mch.appId} (rateLimitPerSecond 100000), key ${mch.keyId}`);
  pool = new SignPool(mch);
  const pgVersion = (await svc.sql<{ v: string }>("SELECT current_setting('server_version') AS v").catch(() => [{ v: '?' }]))[0]?.v ?? '?';
  const pgSettings = Object.fromEntries(
    (
      await svc
        .sql<{ name: string; setting: string }>(
          `SELECT name, setting FROM pg_settings WHERE name IN ('fsync', 'synchronous_commit', 'wal_sync_method', 'shared_buffers',
             'max_connections', 'debug_assertions', 'wal_level', 'full_page_writes', 'commit_delay', 'jit', 'wal_init_zero')`,
        )
        .catch(() => [])
    ).map((r) => [r.name, r.setting]),
  );
  log(`PostgreSQL ${pgVersion}: ${JSON.stringify(pgSettings)}`);

  const orders: string[] = [];
  const orderSet = new Set<string>();
  const closed = new Set<string>();
  const reservedForClose = new Set<string>();
  const results: ScenarioResult[] = [];
  let loadedSeconds = 0;

  const replayFirst = new Map<number, string>();
  let replayMismatches = 0;
  const onAnswer = (it: Item, status: number, body: string) => {
    if ((it.kind === 'create' || it.kind === 'replay') && status === 201 && it.tradeNo && !orderSet.has(it.tradeNo)) {
      orderSet.add(it.tradeNo);
      orders.push(it.tradeNo);
    }
    if (it.kind === 'close' && status === 200 && it.tradeNo) closed.add(it.tradeNo);
    if (it.kind === 'replay' && it.group !== undefined) {
      const first = replayFirst.get(it.group);
      if (first === undefined) replayFirst.set(it.group, `${status} ${body}`);
      else if (first !== `${status} ${body}`) replayMismatches++;
    }
  };

  const deadlineOf = (minTs: number) => minTs * 1000 + 295_000;

  /** Closed-loop load: wrk when chosen, except for the replay corpus (its answers are compared byte for byte). */
  const closedLoop = (items: Item[]) => opts.loadTool === 'wrk' && !items.some((it) => it.kind === 'replay');
  const sendClosedLoop = (lo: Parameters<typeof runLoad>[0]) => (closedLoop(lo.items) ? runWrk(lo) : runLoad(lo));

  /** An unmeasured phase (warm-up, seeding): returns its requests/s. */
  async function unmeasured(label: string, items: Item[], connections = opts.connections): Promise<LoadResult> {
    const s = await pool!.sign(items);
    const r = await sendClosedLoop({ url: svc.baseUrl, items, connections, deadlineMs: deadlineOf(s.minTs), onAnswer });
    loadedSeconds += r.seconds;
    log(`  ${label}: ${r.completed} requests in ${r.seconds.toFixed(1)} s (${r.rps.toFixed(0)}/s)`);
    return r;
  }

  /** Enough created (and still open) orders for what follows. */
  async function ensureOrders(total: number, openNeeded = 0): Promise<void> {
    const open = () => orders.filter((o) => !closed.has(o) && !reservedForClose.has(o)).length;
    const missing = Math.max(total - orders.length, openNeeded - open());
    if (missing > 0) await unmeasured(`seeding ${missing} orders`, createItems(missing));
  }

  async function measured(
    name: Name,
    items: Item[],
    connections: number,
    overallRate: number | null = null,
    paced = false,
  ): Promise<ScenarioResult> {
    const label = paced ? `${name}-paced` : name;
    // Before signing: the signed corpus must be sent within the 300 s timestamp window.
    if (opts.quietWait > 0) await waitQuiet(label);
    log(`${label}: signing ${items.length} requests`);
    const s = await pool!.sign(items);
    log(
      `${label}: signed in ${s.seconds.toFixed(1)} s (${(items.length / s.seconds).toFixed(0)}/s); sending ` +
        (paced
          ? `open-loop at ${overallRate}/s (up to ${connections} sockets)`
          : `with ${connections} connections${overallRate ? ` at ${overallRate}/s` : ''}`),
    );
    replayFirst.clear();
    replayMismatches = 0;
    const sys0 = systemCpuSeconds();
    const main0 = schedOf(svc.pid);
    const pg0: PgStats | null = await svc.pgStats();
    const lsn0 = await svc.walLsn();
    const cpu0 = cpuOf(svc.pid)!;
    const pgc0 = svc.pgSnapshot();
    const b0 = selfCpu();
    const mem = new MemoryPoller(svc.pid);
    const r =
      paced && overallRate
        ? await runPaced({ url: svc.baseUrl, items, rate: overallRate, maxSockets: connections, deadlineMs: deadlineOf(s.minTs), onAnswer })
        : await (overallRate ? runLoad : sendClosedLoop)({
            url: svc.baseUrl,
            items,
            connections,
            overallRate: overallRate ?? undefined,
            deadlineMs: deadlineOf(s.minTs),
            onAnswer,
          });
    const m = mem.stop();
    const b1 = selfCpu();
    const pgc1 = svc.pgSnapshot();
    const cpu1 = cpuOf(svc.pid)!;
    const sys1 = systemCpuSeconds();
    const main1 = schedOf(svc.pid);
    const walBytes = await svc.walBytesSince(lsn0).catch(() => null);
    const pg1: PgStats | null = await svc.pgStats();
    const memAfter: MemoryBreakdown | null = await svc.memory();
    loadedSeconds += r.seconds;

    const n = r.completed;
    const per1k = (sec: number) => (n > 0 ? (sec / n) * 1000 : 0);
    const serverSec = cpu1.user + cpu1.sys - (cpu0.user + cpu0.sys);
    const pgSec = pgc0 && pgc1 ? groupDelta(pgc0, pgc1) : null;
    const pgByKind = pgc0 && pgc1 ? groupDeltaByKind(pgc0, pgc1) : null;
    const benchSec = b1.user + b1.sys + b1.children - (b0.user + b0.sys + b0.children);
    const otherCores = Math.max(0, (sys1.busy - sys0.busy - serverSec - (pgSec ?? 0) - benchSec) / r.seconds);
    // The service's main thread over the phase: on a core, runnable but waiting for one, or asleep
    // (waiting for PostgreSQL, the pool or the network).
    const mainThread = main0 && main1 ? schedShares(main0, main1, r.seconds) : null;
    const idleCores = (sys1.idle - sys0.idle) / r.seconds;
    let statementsPerReq: number | null = null;
    let commitsPerReq: number | null = null;
    let topSql: ScenarioResult['db']['topSql'] = [];
    if (pg0 && pg1 && n > 0) {
      statementsPerReq = (pg1.statements - pg0.statements) / n;
      commitsPerReq = (pg1.durableCommits - pg0.durableCommits) / n;
      const before = new Map(pg0.bySql.map((x) => [x.sql, x]));
      topSql = pg1.bySql
        .map((x) => ({
          sql: x.sql,
          perReq: (x.count - (before.get(x.sql)?.count ?? 0)) / n,
          msPerReq: (x.ms - (before.get(x.sql)?.ms ?? 0)) / n,
        }))
        .filter((x) => x.perReq >= 0.01)
        .sort((p, q) => q.perReq - p.perReq || q.msPerReq - p.msPerReq);
    }
    const non2xx = Object.fromEntries(Object.entries(r.statuses).filter(([st]) => !st.startsWith('2')));
    const isReplay = name === 'replay';
    const res: ScenarioResult = {
      name: label,
      description: paced
        ? `${DESCRIPTIONS[name].replace(' (autocannon overallRate)', '')}, open-loop: evenly spaced, latency from each request's due time`
        : DESCRIPTIONS[name],
      mode: paced ? 'open-loop' : overallRate ? 'autocannon overallRate' : `${closedLoop(items) ? 'wrk' : 'autocannon'} closed-loop`,
      connections: Math.min(connections, items.length),
      overallRate,
      requests: r.sent,
      completed: n,
      seconds: r.seconds,
      rps: r.rps,
      latencyMs: r.latencyMs,
      statuses: r.statuses,
      non2xx,
      socketErrors: r.socketErrors,
      timeouts: r.timeouts,
      unexpected: r.unexpected,
      unsigned2xx: r.unsigned2xx,
      replayMismatches: isReplay ? replayMismatches : null,
      replayGroups: isReplay ? new Set(items.map((i) => i.group)).size : null,
      errorFree:
        Object.keys(non2xx).length === 0 &&
        Object.keys(r.socketErrors).length === 0 &&
        r.timeouts === 0 &&
        Object.keys(r.unexpected).length === 0 &&
        r.unsigned2xx === 0 &&
        (!isReplay || replayMismatches === 0) &&
        n === items.length,
      truncated: r.truncated,
      cpu: {
        serverSec,
        serverUserSec: cpu1.user - cpu0.user,
        serverSysSec: cpu1.sys - cpu0.sys,
        serverPer1k: per1k(serverSec),
        pgSec,
        pgPer1k: pgSec === null ? null : per1k(pgSec),
        pgPer1kByKind: pgByKind === null ? null : Object.fromEntries(Object.entries(pgByKind).map(([k, v]) => [k, per1k(v)])),
        capacityEstimate: pgSec === null ? null : n / ((serverSec + pgSec) / os.availableParallelism()),
        benchSec,
        benchPer1k: per1k(benchSec),
        otherCores,
        mainThread,
        idleCores,
      },
      memory: { ...m, after: memAfter },
      db: { statementsPerReq, commitsPerReq, walBytesPerReq: walBytes === null || n === 0 ? null : walBytes / n, topSql },
      ceilingFraction: { ofMachine: r.rps / ceiling.pairsPerSecThreadpool, ofOneCore: r.rps / ceiling.pairsPerSecPerCore },
      signing: { requests: items.length, seconds: s.seconds },
    };
    log(
      `${label}: ${n} answers in ${r.seconds.toFixed(1)} s = ${r.rps.toFixed(0)}/s, p50 ${r.latencyMs.p50.toFixed(1)} ms, ` +
        `p99 ${r.latencyMs.p99.toFixed(1)} ms, statuses ${JSON.stringify(r.statuses)}, server CPU ${res.cpu.serverPer1k.toFixed(2)} s/1k` +
        (pgSec === null ? '' : `, pg CPU ${res.cpu.pgPer1k!.toFixed(2)} s/1k`) +
        `, peak RSS ${m.peakRssMB.toFixed(0)} MB` +
        (memAfter ? ` (after: heap ${memAfter.heapUsedMB}/${memAfter.heapTotalMB} MB, external ${memAfter.externalMB} MB)` : '') +
        `, other processes ${otherCores.toFixed(2)} cores`,
    );
    return res;
  }

  async function profiled(name: Name, res: ScenarioResult, build: (n: number) => Item[]): Promise<void> {
    const secs = Math.min(opts.duration, 10);
    const items = build(Math.max(opts.connections * 4, Math.ceil(res.rps * secs)));
    const s = await pool!.sign(items);
    const file = path.join(opts.outDir, `${stamp}-${name}.cpuprofile`);
    await svc.profileStart();
    const r = await sendClosedLoop({ url: svc.baseUrl, items, connections: opts.connections, deadlineMs: deadlineOf(s.minTs), onAnswer });
    await svc.profileStop(file);
    loadedSeconds += r.seconds;
    res.profile = summarizeProfile(file, r.completed);
    log(`${name}: profiled ${r.completed} requests at ${r.rps.toFixed(0)}/s -> ${path.relative(REPO_ROOT, file)}`);
  }

  /** Warm-up, then a measured phase sized to --duration at the warm-up's rate. */
  async function peak(name: Name, build: (n: number) => Item[], guessRps: number): Promise<ScenarioResult> {
    let rate = guessRps;
    if (opts.warmup > 0) {
      const w = await unmeasured(`${name} warm-up`, build(Math.max(opts.connections * 4, Math.ceil(opts.warmup * guessRps))));
      rate = w.rps;
    }
    const res = await measured(name, build(Math.max(opts.connections * 4, Math.ceil(opts.duration * rate))), opts.connections);
    if (opts.profile) await profiled(name, res, build);
    return res;
  }

  const seedCount = quick ? 200 : 1000;
  const rateOf = (n: Name) => results.find((r) => r.name === n)?.rps;

  for (const name of scenarios) {
    let res: ScenarioResult;
    switch (name) {
      case 'create':
        res = await peak(name, createItems, 200);
        break;
      case 'query':
        await ensureOrders(seedCount);
        res = await peak(name, (n) => queryItems(n, orders), 500);
        break;
      case 'mixed': {
        const guess = rateOf('query') ?? 400;
        const maxN = Math.ceil((opts.duration + opts.warmup) * guess * 1.5 + opts.connections * 8);
        await ensureOrders(seedCount, Math.ceil(maxN * 0.05) + 10);
        res = await peak(
          name,
          (n) => {
            const closable = orders.filter((o) => !closed.has(o) && !reservedForClose.has(o));
            const it = mixedItems(n, orders, closable);
            for (const x of it) if (x.kind === 'close') reservedForClose.add(x.tradeNo!);
            return it;
          },
          guess,
        );
        break;
      }
      case 'replay':
        res = await peak(name, (n) => replayItems(n, opts.repeats), 500);
        break;
      case 'half-query':
      case 'half-create': {
        const base = name === 'half-query' ? 'query' : 'create';
        if (base === 'query') await ensureOrders(seedCount);
        const build = base === 'query' ? (n: number) => queryItems(n, orders) : createItems;
        let peakRps = rateOf(base);
        if (peakRps === undefined) {
          log(`${name}: no ${base} peak in this run; measuring one`);
          peakRps = (await unmeasured(`${base} peak estimate`, build(Math.ceil(Math.max(opts.duration / 2, 3) * 300)))).rps;
        }
        const rate = Math.max(1, Math.floor(peakRps / 2));
        results.push(await measured(name, build(Math.ceil(rate * opts.duration)), halfConnections, rate));
        await sleep(1000);
        res = await measured(name, build(Math.ceil(rate * opts.duration)), Math.max(64, halfConnections), rate, true);
        break;
      }
    }
    results.push(res);
    await sleep(1000); // let background work of the phase settle
  }

  const statement = statementPayments > 0 ? await statementScenario(svc, mch, statementPayments, log) : null;

  const svcHwm = memoryOf(svc.pid)?.hwmMB ?? null;
  const liveAfterGc = await svc.memory(true);
  // The machine's speed drifts (a shared VM): the ceiling again at the end, the service stopped.
  await svc.stop();
  if (opts.quietWait > 0) await waitQuiet('crypto ceiling (end)');
  const ceilingEnd = await measureCryptoCeiling(opts.ceilingSeconds);
  log(`at the end: ${ceilingLine(ceilingEnd)}`);
  // Fractions against the better of the two measurements: what the machine does when nothing disturbs it.
  const refMachine = Math.max(ceiling.pairsPerSecThreadpool, ceilingEnd.pairsPerSecThreadpool);
  const refCore = Math.max(ceiling.pairsPerSecPerCore, ceilingEnd.pairsPerSecPerCore);
  for (const r of results) r.ceilingFraction = { ofMachine: r.rps / refMachine, ofOneCore: r.rps / refCore };

  const hwm = svcHwm ?? Math.max(0, ...results.map((r) => r.memory.hwmMB));
  if (liveAfterGc) {
    log(
      `service memory after a full GC at the end: RSS ${liveAfterGc.rssMB} MB, heap used ${liveAfterGc.heapUsedMB} of ${liveAfterGc.heapTotalMB} MB, external ${liveAfterGc.externalMB} MB`,
    );
  }
  const targets = checkTargets(results, hwm, loadedSeconds);
  const git = (args: string[]) => {
    try {
      return execFileSync('git', args, { cwd: REPO_ROOT, encoding: 'utf8' }).trim();
    } catch {
      return '?';
    }
  };
  const machine = {
    cpu: os.cpus()[0]?.model ?? '?',
    cores: os.availableParallelism(),
    memoryGB: Math.round(os.totalmem() / 2 ** 30),
    node: process.version,
    postgres: pgVersion,
    postgresSettings: pgSettings,
    gitCommit: git(['rev-parse', '--short', 'HEAD']),
    uncommittedSrcFiles: git(['status', '--porcelain', '--', 'src', 'packages', 'migrations']).split('\n').filter(Boolean).length,
    database: opts.databaseUrl
      ? `external ${new URL(opts.databaseUrl).host} (database ${svc.dbName}, dropped after)`
      : 'embedded (fresh DATA_DIR)',
  };
  const out = {
    startedAt: new Date(Date.now() - (performance.now() - t00)).toISOString(),
    options: { ...opts, halfConnections, scenarios, databaseUrl: opts.databaseUrl ? '(set)' : null },
    machine,
    cryptoCeiling: { ...ceiling, otherProcessesCores: ceilingOtherCores },
    cryptoCeilingAtEnd: ceilingEnd,
    cryptoCeilingReference: { pairsPerSecThreadpool: refMachine, pairsPerSecPerCore: refCore },
    results,
    statement,
    serverPeakRssMB: hwm,
    serverMemoryAfterFullGc: liveAfterGc,
    loadedSeconds,
    targets,
  };
  const file = path.join(opts.outDir, `${stamp}.json`);
  fs.writeFileSync(file, `${JSON.stringify(out, null, 2)}\n`);

  const lines = [
    '',
    `## Benchmark ${out.startedAt} — ${machine.database}, PostgreSQL ${machine.postgres}, Node ${machine.node}, ${machine.cores} × ${machine.cpu}`,
    '',
    `start: ${ceilingLine(ceiling)}`,
    `end: ${ceilingLine(ceilingEnd)}`,
    `fractions below are of the better of the two: ${refMachine.toFixed(0)} requests/s (2 cores), ${refCore.toFixed(0)} requests/s (1 core)`,
    '',
    resultsTable(results),
    '',
    targetsTable(targets),
    '',
  ];
  lines.push('### CPU seconds per 1,000 requests, by process', '');
  lines.push(
    markdown(
      ['scenario', 'service (user + sys)', 'PostgreSQL by process', 'load generator (this process)'],
      results.map((r) => [
        r.name,
        `${r.cpu.serverPer1k.toFixed(2)} (${((r.cpu.serverUserSec / Math.max(r.cpu.serverSec, 1e-9)) * 100).toFixed(0)}% user)`,
        r.cpu.pgPer1kByKind
          ? Object.entries(r.cpu.pgPer1kByKind)
              .filter(([, v]) => v >= 0.005)
              .sort((x, y) => y[1] - x[1])
              .map(([k, v]) => `${k} ${v.toFixed(2)}`)
              .join(', ')
          : 'n/a',
        r.cpu.benchPer1k.toFixed(2),
      ]),
    ),
    '',
  );
  lines.push('### Where the time went: the service main thread, and idle cores', '');
  lines.push(
    markdown(
      [
        'scenario',
        'main thread on a core',
        'main thread waiting for a core',
        'main thread asleep',
        'idle cores (of ' + os.availableParallelism() + ')',
      ],
      results.map((r) => {
        const t = r.cpu.mainThread;
        const pct = (x: number) => `${(x * 100).toFixed(0)}%`;
        return [r.name, t ? pct(t.onCpu) : 'n/a', t ? pct(t.runQueue) : 'n/a', t ? pct(t.asleep) : 'n/a', r.cpu.idleCores.toFixed(2)];
      }),
    ),
    '',
  );
  for (const r of results) {
    if (r.db.topSql.length) {
      lines.push(
        `### ${r.name}: SQL statements per request (${r.db.statementsPerReq?.toFixed(1)} in all, ${r.db.commitsPerReq?.toFixed(2)} write transactions, ${r.db.walBytesPerReq === null ? '?' : (r.db.walBytesPerReq / 1024).toFixed(1)} KB WAL)`,
      );
      lines.push('');
      lines.push(resultsTableSql(r.db.topSql.slice(0, 14)), '');
    }
    if (r.profile)
      lines.push(`### ${r.name}: CPU profile of the service's main thread (${r.profile.file})`, '', profileTable(r.profile), '');
  }
  if (statement) {
    lines.push(
      `### Statement of a day of ${statement.payments} payments (${statement.day}; written in ${statement.seedSeconds.toFixed(0)} s)`,
      '',
    );
    lines.push(
      markdown(
        [
          'compression',
          'summary (file made once into its digest)',
          'file streamed',
          'size',
          'rows',
          'service RSS before',
          'service peak RSS',
        ],
        statement.phases.map((p) => [
          p.compression,
          `${p.summarySeconds.toFixed(1)} s`,
          `${p.fileSeconds.toFixed(1)} s`,
          `${(p.sizeBytes / 1e6).toFixed(1)} MB`,
          p.rows === null ? 'n/a' : String(p.rows),
          `${p.rssBeforeMB.toFixed(0)} MB`,
          `${p.peakRssMB.toFixed(0)} MB`,
        ]),
      ),
      '',
    );
  }
  lines.push(`results: ${path.relative(process.cwd(), file)}`, '');
  process.stdout.write(lines.join('\n'));
  return results.every((r) => r.errorFree);
}

function resultsTableSql(rows: { sql: string; perReq: number; msPerReq: number }[]): string {
  const w = Math.max(...rows.map((r) => Math.min(r.sql.length, 110)), 3);
  const head = `| ${'per req'.padEnd(7)} | ${'ms/req'.padEnd(6)} | ${'SQL'.padEnd(w)} |`;
  const sep = `|${'-'.repeat(9)}|${'-'.repeat(8)}|${'-'.repeat(w + 2)}|`;
  const body = rows.map(
    (r) =>
      `| ${r.perReq.toFixed(2).padEnd(7)} | ${r.msPerReq.toFixed(2).padEnd(6)} | ${r.sql.slice(0, 110).replace(/\|/g, '\\|').padEnd(w)} |`,
  );
  return [head, sep, ...body].join('\n');
}
