/**
 * `npm run bench`: load benchmark of the open API (see docs/performance.md).
 *
 * Starts the service (`node src/main.ts`) on a fresh embedded PostgreSQL (or a fresh database on
 * --database-url / DATABASE_URL), a notification receiver that verifies every signature, and
 * provisions three apps (the default one with a daily ceiling and notifyUrl, one without a ceiling,
 * one for the notification backlog); measures this machine's crypto ceiling, then drives each
 * scenario, all of them once per run, --runs times. Every open-API request is validly signed with
 * its own nonce, timestamp and signature, all signed before the measured phase and sent exactly
 * once. Prints Markdown tables (each headline figure as the median of the runs with its range) and
 * writes bench/results/<ts>.json.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import {
  type Item,
  SignPool,
  createItems,
  mixedItems,
  payItem,
  queryItems,
  realisticItems,
  refundItem,
  replayItems,
} from './lib/corpus.ts';
import { startFlood } from './lib/flood.ts';
import { type NotificationStats, expectedEvent, notificationStats } from './lib/notifications.ts';
import { OrderBook } from './lib/orders.ts';
import { Receiver } from './lib/receiver.ts';
import { type CryptoCeiling, measureCryptoCeiling } from './lib/crypto-ceiling.ts';
import { type LoadResult, runLoad } from './lib/load.ts';
import { runPaced } from './lib/paced.ts';
import { runWrk, wrkAvailable } from './lib/wrk.ts';
import {
  MemoryPoller,
  clusterPssMB,
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
import { type ScenarioResult, ceilingLine, checkTargets, detailTables, markdown, summaryTables, targetsTable } from './lib/report.ts';
import { ADMIN_TOKEN, type MemoryBreakdown, type PgStats, type Provisioned, REPO_ROOT, Service } from './lib/service.ts';
import { type DayResult, dayScenario } from './lib/ledger-day.ts';
import { type LedgerResult, existingLedger, fillLedger } from './lib/ledger.ts';
import { statementScenario } from './lib/statement.ts';
import { type Neighbours, prepareNeighbours, startStalledDownloads } from './lib/stalled-downloads.ts';
import { crashScenario } from './lib/crash.ts';
import { type NoisyOptions, noisyScenario, noisyTable } from './lib/noisy.ts';

const HELP = `Usage: npm run bench -- [options]

  --runs <n>              repeat every measured phase n times, scenario after scenario, and report each
                          headline figure as the median with its range (default 3; --quick: 1)
  --duration <s>          measured seconds per scenario and run (default 10; --quick: 3)
  --connections <n>       concurrent connections of the closed-loop phases (default 128; --quick: 8)
  --half-connections <n>  connections of the autocannon half-load scenarios (default 32; --quick: 8)
  --scenarios <list>      comma list of create,create-no-ceiling,query,mixed,replay,realistic,notify,
                          flood,stalled-downloads,reading-downloads,half (half = half-query,half-create,half-realistic),
                          statement, day, noisy, crash; default: all but reading-downloads, statement and
                          day (they write a day of payments first), noisy and crash (it kills the service; run last)
  --statement-payments <n>  statement scenario: the day's payments (default 1000000; --quick: 10000)
  --ledger <n>            first fill the database with a year of history of n orders, bulk-loaded in SQL
                          (bench/lib/ledger.ts: attempts, refunds, events and deliveries, the sandbox's
                          books, request ids, audit, digests, reconciliation runs), then run the scenarios
  --data-dir <dir>        embedded PostgreSQL only: keep the service's DATA_DIR in <dir> (created if missing)
                          instead of a temporary one, and reuse it: a folder whose ledger already holds the
                          --ledger orders is not filled again (a 20-million-order fill takes half an hour).
                          Delete the folder when done: it is the whole database
  --day-orders <n>        day scenario: the orders of the closed day of one app (default 100000; --quick: 5000)
  --noisy <q,c,s>         noisy scenario (bench/lib/noisy.ts; --scenarios noisy): the merchant's query and create
                          rates and the sign-in flood's rate, per second (default 100,50,64)
  --noisy-neighbours <l>  noisy scenario: only these neighbours (comma list; default all)
  --warmup <s>            warm-up seconds before each peak scenario of the first run (default 3; --quick: 1)
  --receiver-delay-ms <n> how long the notification receiver takes to answer a verified
                          notification (default 2)
  --notify-orders <n>     notify scenario: orders created, paid and refunded for the backlog
                          (default 2500; --quick: 300): two notifications each
  --flood-rate <n>        flood scenario: the valid queries' paced rate (default 200; --quick: 100)
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
                          thread (written to bench/results/<ts>-<scenario>-run<n>.cpuprofile,
                          summarized); notify: its measured drain is profiled
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
    runs: { type: 'string' },
    duration: { type: 'string' },
    'receiver-delay-ms': { type: 'string' },
    'notify-orders': { type: 'string' },
    'flood-rate': { type: 'string' },
    connections: { type: 'string' },
    'half-connections': { type: 'string' },
    scenarios: { type: 'string' },
    'statement-payments': { type: 'string' },
    ledger: { type: 'string' },
    'day-orders': { type: 'string' },
    noisy: { type: 'string' },
    'noisy-neighbours': { type: 'string' },
    warmup: { type: 'string' },
    repeats: { type: 'string' },
    'quiet-wait': { type: 'string' },
    'load-tool': { type: 'string' },
    quick: { type: 'boolean', default: false },
    'database-url': { type: 'string' },
    'data-dir': { type: 'string' },
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
  runs: Math.floor(num(a.runs, quick ? 1 : 3, 'runs')),
  duration: num(a.duration, quick ? 3 : 10, 'duration'),
  receiverDelayMs: num(a['receiver-delay-ms'], 2, 'receiver-delay-ms', 0),
  notifyOrders: Math.floor(num(a['notify-orders'], quick ? 300 : 2500, 'notify-orders', 10)),
  floodRate: Math.floor(num(a['flood-rate'], quick ? 100 : 200, 'flood-rate')),
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
const ALL = [
  'create',
  'create-no-ceiling',
  'query',
  'mixed',
  'replay',
  'realistic',
  'notify',
  'flood',
  'stalled-downloads',
  'reading-downloads',
  'half-query',
  'half-create',
  'half-realistic',
] as const;
type Name = (typeof ALL)[number];
const HALF = ['half-query', 'half-create', 'half-realistic'];
const wanted = (a.scenarios ?? ALL.filter((n) => !HALF.includes(n) && n !== 'reading-downloads').join(',') + ',half')
  .split(',')
  .map((s) => s.trim())
  .flatMap((s) => (s === 'half' ? HALF : [s]));
for (const s of wanted) {
  if (!(ALL as readonly string[]).includes(s) && s !== 'statement' && s !== 'day' && s !== 'noisy' && s !== 'crash') {
    process.stderr.write(`unknown scenario '${s}' (known: ${ALL.join(', ')}, half, statement, day, noisy, crash)\n`);
    process.exit(2);
  }
}
const scenarios = ALL.filter((s) => wanted.includes(s));
/** The statement scenario (bench/lib/statement.ts): its own measure, after the load scenarios. */
const statementPayments = wanted.includes('statement')
  ? Math.floor(num(a['statement-payments'], quick ? 10_000 : 1_000_000, 'statement-payments', 1))
  : 0;

/** The day scenario (bench/lib/ledger-day.ts): a day's statement and reconciliation, after the load scenarios. */
const dayOrders = wanted.includes('day') ? Math.floor(num(a['day-orders'], quick ? 5_000 : 100_000, 'day-orders', 1)) : 0;
/** --ledger: the history written before the scenarios (0: a fresh database). */
const ledgerOrders = a.ledger === undefined ? 0 : Math.floor(num(a.ledger, 0, 'ledger', 1));
const [noisyQ, noisyC, noisyS] = (a.noisy ?? '100,50,64').split(',').map((x) => num(x, NaN, 'noisy', 1));
const noisyOpts: NoisyOptions = {
  queryRate: noisyQ!,
  createRate: noisyC!,
  signInRate: noisyS!,
  seconds: opts.duration,
  fullFlood: !quick,
  only: a['noisy-neighbours']?.split(',') ?? null,
};

/** The default app's daily amount ceiling: far above any run's traffic, as a production app has one. */
const CEILING_FEN = 1_000_000_000_000;

const DESCRIPTIONS: Record<Name, string> = {
  create: 'POST /payments, a new outTradeNo each (the default app: daily ceiling 10^12 fen)',
  'create-no-ceiling': 'the same creates on an app without a daily ceiling',
  query: 'GET /payments/{outTradeNo} over the orders created before',
  mixed: '70% query / 25% create / 5% close',
  replay: `POST /payments, each X-SVC-Request-Id sent ${opts.repeats} times (fresh nonce and signature): 1 execution + ${opts.repeats - 1} byte-identical replays`,
  'half-query': 'query at half of the peak query rate (autocannon overallRate)',
  'half-create': 'create at half of the peak create rate (autocannon overallRate)',
  realistic: '50% create / 30% query / 10% pay (sandbox buyer) / 5% full refund / 5% close, notifications to the receiver',
  notify: `a backlog of ${2 * opts.notifyOrders} notifications of one app (${opts.notifyOrders} orders created, paid, refunded with no notifyUrl), delivered once its notifyUrl is set`,
  flood: `query open-loop at ${opts.floodRate}/s while other connections flood deep JSON, big headers, long paths, garbage, slow bodies and headers`,
  'half-realistic': 'the realistic mix at half of its peak rate',
  'stalled-downloads': `the normal merchant's query, then create, open-loop at ${opts.floodRate}/s: quiet, then while 4 other apps open statement downloads (50,000 rows a day; --quick 10,000) and never read them`,
  'reading-downloads': `the same, while the 4 other apps download their day's file whole, over and over (2 clients each, one download at a time)`,
};

const t00 = performance.now();
const log = (msg: string) => process.stderr.write(`[bench ${((performance.now() - t00) / 1000).toFixed(1).padStart(6)} s] ${msg}\n`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const stamp = new Date().toISOString().replace(/[:.]/g, '-');
fs.mkdirSync(opts.outDir, { recursive: true });

// ---------------------------------------------------------------------------------------------------

/** CPU seconds of this benchmark and the service so far, and a snapshot of its PostgreSQL processes. */
function ownCpu(): { seconds: number; pg: ReturnType<Service['pgSnapshot']> } {
  const b = selfCpu();
  let t = b.user + b.sys;
  const c = svc.pid ? cpuOf(svc.pid) : null;
  if (c) t += c.user + c.sys;
  return { seconds: t, pg: svc.pgSnapshot() };
}

/** CPU seconds this benchmark, the service and PostgreSQL used between two readings (backends that exited included). */
function ownCpuSince(a: ReturnType<typeof ownCpu>, b: ReturnType<typeof ownCpu>): number {
  return b.seconds - a.seconds + (a.pg && b.pg ? groupDelta(a.pg, b.pg) : 0);
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
    const o0 = ownCpu();
    await sleep(1000);
    other = Math.max(0, systemBusySeconds() - s0 - ownCpuSince(o0, ownCpu()));
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
  dataDir: a['data-dir'] ?? null,
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
let receiver = null as Receiver | null;
try {
  const errorFree = await main();
  await pool?.close();
  await receiver?.stop();
  // Errors (a wrong status, a socket error, a replay that differs, a notification lost or refused)
  // fail the run; the targets do not (they depend on the machine): they are reported.
  await cleanup(errorFree ? 0 : 1);
} catch (err) {
  log(`failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
  await pool?.close().catch(() => {});
  await receiver?.stop().catch(() => {});
  await cleanup(1);
}

interface MeasureOptions {
  connections: number;
  /** a fixed overall rate (autocannon overallRate, or the paced sender with `paced`) */
  rate?: number | null;
  paced?: boolean;
  /** count the events the phase's answers must produce, and wait for the receiver to get them */
  notifications?: boolean;
  /** right before and after the load (the flood) */
  before?: () => void;
  after?: (res: ScenarioResult) => Promise<void>;
}

/** Runs the benchmark; true when every scenario was error-free. */
async function main(): Promise<boolean> {
  log(`starting the service (${opts.databaseUrl ? `external PostgreSQL ${new URL(opts.databaseUrl).host}` : 'embedded PostgreSQL'})`);
  await svc.start();
  receiver = await Receiver.start({ platformKeys: await svc.platformKeys(), delayMs: opts.receiverDelayMs });
  const mainApp: Provisioned = await svc.provision({ dailyAmountCeilingFen: CEILING_FEN, notifyUrl: receiver.url });
  const freeApp: Provisioned = await svc.provision({ notifyUrl: receiver.url });
  const notifyApp: Provisioned = await svc.provision({ dailyAmountCeilingFen: CEILING_FEN });
  log(
    `provisioned apps (rateLimitPerSecond 100000): ${mainApp.appId} (daily ceiling ${CEILING_FEN} fen, notifyUrl ${receiver.url}), ` +
      `${freeApp.appId} (no ceiling), ${notifyApp.appId} (notification backlog)`,
  );
  pool = new SignPool([mainApp, freeApp, notifyApp]);
  let ledger: LedgerResult | null = null;
  if (ledgerOrders > 0) {
    ledger = await existingLedger(svc.dbUrl, ledgerOrders);
    if (ledger) {
      log(`ledger: the data folder already holds it: ${JSON.stringify(ledger.rows)} (estimated rows)`);
    } else {
      log(`ledger: writing a year of history, ${ledgerOrders} orders`);
      // Without the service's workers meanwhile: their periodic scans (the purge of old deliveries,
      // the events' claim, the due work) read tables whose indexes the load has dropped, full scans
      // of 10 s and more that took ~0.6 core from a 20-million-order fill.
      if (opts.workers) await svc.restartWith({ WORKERS_ENABLED: 'false' });
      ledger = await fillLedger(svc.dbUrl, { orders: ledgerOrders, log });
      if (opts.workers) await svc.restartWith({ WORKERS_ENABLED: 'true' });
      log(
        `ledger: written in ${ledger.seconds.toFixed(0)} s (${(ledger.databaseBytes / 1e9).toFixed(1)} GB): ${JSON.stringify(ledger.rows)}`,
      );
    }
  }
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

  const books = new Map([mainApp, freeApp, notifyApp].map((p) => [p.appId, new OrderBook()]));
  const book = books.get(mainApp.appId)!;
  const forApp = (app: Provisioned, items: Item[]) => {
    for (const it of items) it.appId = app.appId;
    return items;
  };
  const results: ScenarioResult[] = [];
  let loadedSeconds = 0;
  /** the events the answers of the current phase must produce (eventKey), while one is counted */
  let expecting: Set<string> | null = null;

  const replayFirst = new Map<number, string>();
  let replayMismatches = 0;
  const onAnswer = (it: Item, status: number, body: string) => {
    books.get(it.appId ?? mainApp.appId)!.onAnswer(it, status, body);
    if (expecting) {
      const k = expectedEvent(it, status);
      if (k) expecting.add(k);
    }
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

  /** An unmeasured phase (warm-up, seeding): returns its requests/s. `bodies`: autocannon, whose answers carry their bodies. */
  async function unmeasured(label: string, items: Item[], bodies = false): Promise<LoadResult> {
    const s = await pool!.sign(items);
    const lo = { url: svc.baseUrl, items, connections: opts.connections, deadlineMs: deadlineOf(s.minTs), onAnswer };
    const r = await (bodies ? runLoad(lo) : sendClosedLoop(lo));
    loadedSeconds += r.seconds;
    const bad = Object.entries(r.unexpected);
    log(
      `  ${label}: ${r.completed} requests in ${r.seconds.toFixed(1)} s (${r.rps.toFixed(0)}/s)` +
        (bad.length ? `, unexpected answers ${JSON.stringify(r.unexpected)}` : ''),
    );
    return r;
  }

  /** Enough created (and still open) orders of the default app for what follows. */
  async function ensureOrders(total: number, openNeeded = 0, payable = 0, paid = 0): Promise<void> {
    const missing = Math.max(total - book.orders.length, openNeeded - book.openCount, 0);
    if (missing > 0) await unmeasured(`seeding ${missing} orders`, createItems(missing));
    const toPay = paid - book.paidCount;
    const seedPayable = Math.max(payable - book.payableCount, 0) + Math.max(toPay, 0);
    if (seedPayable > 0) await unmeasured(`seeding ${seedPayable} orders to pay`, createItems(seedPayable), true);
    if (toPay > 0)
      await unmeasured(
        `paying ${toPay} orders`,
        book.takePayable(toPay).map((p) => payItem(p.tradeNo, p.openOrderId, ADMIN_TOKEN)),
      );
  }

  /** Waits (bounded) for the receiver to have acknowledged every expected event; its figures from `fromMs`. */
  async function drainNotifications(expected: Set<string>, fromMs: number, maxWaitMs = 30_000): Promise<NotificationStats> {
    const t0 = performance.now();
    for (;;) {
      const d = await receiver!.dump();
      const n = notificationStats(expected, d.arrivals, fromMs);
      if (n.lost === 0 || performance.now() - t0 > maxWaitMs) return { ...n, rejected: d.rejected } as NotificationStats;
      await sleep(250);
    }
  }

  /** Snapshots of CPU, memory and the database at the start of a phase; `end` turns the load's result into the phase's. */
  async function startMeter() {
    const sys0 = systemCpuSeconds();
    const main0 = schedOf(svc.pid);
    const pg0: PgStats | null = await svc.pgStats();
    const lsn0 = await svc.walLsn();
    const cpu0 = cpuOf(svc.pid)!;
    const pgc0 = svc.pgSnapshot();
    const b0 = selfCpu();
    const mem = new MemoryPoller(svc.pid);
    return async (
      r: LoadResult,
    ): Promise<
      Omit<
        ScenarioResult,
        | 'name'
        | 'run'
        | 'description'
        | 'mode'
        | 'connections'
        | 'overallRate'
        | 'signing'
        | 'errorFree'
        | 'replayMismatches'
        | 'replayGroups'
      >
    > => {
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
      return {
        requests: r.sent,
        completed: n,
        seconds: r.seconds,
        rps: r.rps,
        latencyMs: r.latencyMs,
        ...(r.worstBySecondMs ? { worstBySecondMs: r.worstBySecondMs } : {}),
        statuses: r.statuses,
        non2xx: Object.fromEntries(Object.entries(r.statuses).filter(([st]) => !st.startsWith('2'))),
        socketErrors: r.socketErrors,
        timeouts: r.timeouts,
        unexpected: r.unexpected,
        unsigned2xx: r.unsigned2xx,
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
      };
    };
  }

  function logResult(res: ScenarioResult): void {
    const r = res;
    const n = res.notifications;
    log(
      `${r.name} (run ${r.run}): ${r.completed} answers in ${r.seconds.toFixed(1)} s = ${r.rps.toFixed(0)}/s, p50 ${r.latencyMs.p50.toFixed(1)} ms, ` +
        `p99 ${r.latencyMs.p99.toFixed(1)} ms, max ${r.latencyMs.max.toFixed(0)} ms, statuses ${JSON.stringify(r.statuses)}, ` +
        `server CPU ${r.cpu.serverPer1k.toFixed(2)} s/1k` +
        (r.cpu.pgPer1k === null ? '' : `, pg CPU ${r.cpu.pgPer1k.toFixed(2)} s/1k`) +
        `, peak RSS ${r.memory.peakRssMB.toFixed(0)} MB, other processes ${r.cpu.otherCores.toFixed(2)} cores` +
        (r.worstBySecondMs ? `, slowest by second ${JSON.stringify(r.worstBySecondMs.map((v) => Math.round(v)))} ms` : '') +
        (n
          ? `; notifications: ${n.delivered}/${n.expected} delivered (${n.deliveredPerSec.toFixed(0)}/s), lag p50 ${n.lagMs.p50.toFixed(0)} ms ` +
            `p99 ${n.lagMs.p99.toFixed(0)} ms, lost ${n.lost}, duplicates ${n.duplicates}, out of order ${n.outOfOrder}`
          : '') +
        (r.flood ? `; flood answers ${JSON.stringify(Object.fromEntries(Object.entries(r.flood).map(([k, v]) => [k, v.statuses])))}` : ''),
    );
  }

  async function measured(name: Name, run: number, items: Item[], o: MeasureOptions): Promise<ScenarioResult> {
    const { connections, paced = false } = o;
    const overallRate = o.rate ?? null;
    const label = paced && name.startsWith('half-') && name !== 'half-realistic' ? `${name}-paced` : name;
    // Before signing: the signed corpus must be sent within the 300 s timestamp window.
    if (opts.quietWait > 0) await waitQuiet(label);
    log(`${label}: signing ${items.length} requests`);
    const s = await pool!.sign(items);
    log(
      `${label} (run ${run}): signed in ${s.seconds.toFixed(1)} s; sending ` +
        (paced
          ? `open-loop at ${overallRate}/s (up to ${connections} sockets)`
          : `with ${connections} connections${overallRate ? ` at ${overallRate}/s` : ''}`),
    );
    replayFirst.clear();
    replayMismatches = 0;
    expecting = o.notifications ? new Set() : null;
    const fromMs = Date.now();
    const end = await startMeter();
    o.before?.();
    const lo = { url: svc.baseUrl, items, connections, deadlineMs: deadlineOf(s.minTs), onAnswer };
    const r =
      paced && overallRate
        ? await runPaced({ ...lo, rate: overallRate, maxSockets: connections })
        : await (overallRate ? runLoad : sendClosedLoop)({ ...lo, overallRate: overallRate ?? undefined });
    const measuredPart = await end(r);
    const isReplay = name === 'replay';
    const res: ScenarioResult = {
      name: label,
      run,
      description: paced
        ? `${DESCRIPTIONS[name].replace(' (autocannon overallRate)', '')}, open-loop: evenly spaced, latency from each request's due time`
        : DESCRIPTIONS[name],
      mode: paced ? 'open-loop' : overallRate ? 'autocannon overallRate' : `${closedLoop(items) ? 'wrk' : 'autocannon'} closed-loop`,
      connections: Math.min(connections, items.length),
      overallRate,
      ...measuredPart,
      replayMismatches: isReplay ? replayMismatches : null,
      replayGroups: isReplay ? new Set(items.map((i) => i.group)).size : null,
      errorFree: false,
      signing: { requests: items.length, seconds: s.seconds },
    };
    await o.after?.(res);
    if (expecting) {
      const want = expecting;
      expecting = null;
      res.notifications = await drainNotifications(want, fromMs);
    }
    res.errorFree =
      Object.keys(res.non2xx).length === 0 &&
      Object.keys(r.socketErrors).length === 0 &&
      r.timeouts === 0 &&
      Object.keys(r.unexpected).length === 0 &&
      r.unsigned2xx === 0 &&
      (!isReplay || replayMismatches === 0) &&
      r.completed === items.length &&
      notificationsOk(res.notifications);
    logResult(res);
    return res;
  }

  async function profiled(name: Name, res: ScenarioResult, build: (n: number) => Item[] | Promise<Item[]>): Promise<void> {
    const secs = Math.min(opts.duration, 10);
    const items = await build(Math.max(opts.connections * 4, Math.ceil(res.rps * secs)));
    const s = await pool!.sign(items);
    const file = path.join(opts.outDir, `${stamp}-${name}-run${res.run}.cpuprofile`);
    await svc.profileStart();
    const r = await sendClosedLoop({ url: svc.baseUrl, items, connections: opts.connections, deadlineMs: deadlineOf(s.minTs), onAnswer });
    await svc.profileStop(file);
    loadedSeconds += r.seconds;
    res.profile = summarizeProfile(file, r.completed);
    log(`${name}: profiled ${r.completed} requests at ${r.rps.toFixed(0)}/s -> ${path.relative(REPO_ROOT, file)}`);
  }

  const rateOf = (n: string, run: number) => results.find((r) => r.name === n && r.run === run)?.rps;
  const lastRateOf = (n: string) => results.findLast((r) => r.name === n)?.rps;

  /** Warm-up (first run only), then a measured phase sized to --duration at the last known rate. */
  async function peak(
    name: Name,
    run: number,
    build: (n: number) => Item[] | Promise<Item[]>,
    guessRps: number,
    o: Partial<MeasureOptions> = {},
  ): Promise<ScenarioResult> {
    let rate = lastRateOf(name) ?? guessRps;
    if (opts.warmup > 0 && lastRateOf(name) === undefined) {
      const w = await unmeasured(`${name} warm-up`, await build(Math.max(opts.connections * 4, Math.ceil(opts.warmup * guessRps))));
      rate = w.rps;
    }
    const items = await build(Math.max(opts.connections * 4, Math.ceil(opts.duration * rate)));
    const res = await measured(name, run, items, { connections: opts.connections, ...o });
    if (opts.profile) await profiled(name, res, build);
    return res;
  }

  const seedCount = quick ? 200 : 1000;

  /** The realistic mix of n requests, after seeding what it acts on. */
  async function realistic(n: number): Promise<Item[]> {
    await ensureOrders(seedCount, Math.ceil(n * 0.05) + 10, Math.ceil(n * 0.1) + 10, Math.ceil(n * 0.05) + 10);
    return realisticItems(n, book, ADMIN_TOKEN);
  }

  /**
   * The notification backlog of one app: its notifyUrl unset, n orders created, paid and fully
   * refunded (the sandbox settles refunds by itself), then the URL set; measured: from setting it
   * to the receiver's acknowledgement of every event.
   */
  async function notifyBacklog(run: number): Promise<ScenarioResult> {
    const nb = books.get(notifyApp.appId)!;
    const n = opts.notifyOrders;
    const countEvents = async () =>
      (await svc.sql<{ n: number }>('SELECT count(*)::int AS n FROM events WHERE app_id = $1', [notifyApp.appId]))[0]!.n;
    await svc.patchApp(notifyApp.appId, { notifyUrl: null });
    const before = await countEvents();
    log(`notify (run ${run}): building a backlog of ${2 * n} notifications`);
    await unmeasured('notify: creating', forApp(notifyApp, createItems(n)), true);
    expecting = new Set();
    await unmeasured(
      'notify: paying',
      forApp(
        notifyApp,
        nb.takePayable(n).map((p) => payItem(p.tradeNo, p.openOrderId, ADMIN_TOKEN)),
      ),
    );
    await unmeasured(
      'notify: refunding',
      forApp(
        notifyApp,
        nb.takePaid(n).map((p) => refundItem(p.tradeNo, p.amountFen)),
      ),
    );
    const want = expecting;
    expecting = null;
    // The sandbox settles each refund about a second after it was accepted.
    for (let t0 = performance.now(); (await countEvents()) - before < want.size && performance.now() - t0 < 30_000;) await sleep(250);
    if (opts.quietWait > 0) await waitQuiet('notify');
    const fromMs = Date.now();
    const end = await startMeter();
    const profile = opts.profile ? path.join(opts.outDir, `${stamp}-notify-run${run}.cpuprofile`) : null;
    if (profile) await svc.profileStart();
    await svc.patchApp(notifyApp.appId, { notifyUrl: receiver!.url });
    const stats = await drainNotifications(want, fromMs, 60_000);
    if (profile) await svc.profileStop(profile);
    const seconds = stats.spanMs / 1000;
    const sent: LoadResult = {
      sent: stats.expected,
      completed: stats.delivered,
      seconds,
      rps: stats.deliveredPerSec,
      latencyMs: stats.lagMs,
      statuses: {},
      socketErrors: {},
      timeouts: 0,
      unexpected: {},
      unsigned2xx: 0,
      truncated: false,
    };
    const res: ScenarioResult = {
      name: 'notify',
      run,
      description: DESCRIPTIONS.notify,
      mode: 'notification backlog',
      connections: 0,
      overallRate: null,
      ...(await end(sent)),
      replayMismatches: null,
      replayGroups: null,
      errorFree: notificationsOk(stats),
      signing: { requests: 0, seconds: 0 },
      notifications: stats,
      // the profile covers the drain (a sampled phase of its own would need another backlog)
      ...(profile ? { profile: summarizeProfile(profile, stats.delivered) } : {}),
    };
    logResult(res);
    return res;
  }

  let neighbours: Neighbours | null = null;
  async function scenario(name: Name, run: number): Promise<ScenarioResult[]> {
    switch (name) {
      case 'create':
        return [await peak(name, run, createItems, 200)];
      case 'create-no-ceiling':
        return [await peak(name, run, (n) => forApp(freeApp, createItems(n)), 200)];
      case 'query':
        await ensureOrders(seedCount);
        return [await peak(name, run, (n) => queryItems(n, book.orders), 500)];
      case 'mixed': {
        const guess = lastRateOf('mixed') ?? lastRateOf('query') ?? 400;
        const maxN = Math.ceil((opts.duration + opts.warmup) * guess * 1.5 + opts.connections * 8);
        await ensureOrders(seedCount, Math.ceil(maxN * 0.05) + 10);
        return [await peak(name, run, (n) => mixedItems(n, book.orders, book.takeClosable(Math.round(n * 0.05))), guess)];
      }
      case 'replay':
        return [await peak(name, run, (n) => replayItems(n, opts.repeats), 500)];
      case 'realistic':
        return [await peak(name, run, realistic, 300, { notifications: true })];
      case 'notify':
        return [await notifyBacklog(run)];
      case 'flood': {
        await ensureOrders(seedCount);
        let flood: ReturnType<typeof startFlood> | null = null;
        // At least 15 s, so that slow senders meet the server's 10 s header deadline within the phase.
        const items = queryItems(Math.ceil(opts.floodRate * (quick ? opts.duration : Math.max(opts.duration, 15))), book.orders);
        return [
          await measured(name, run, items, {
            connections: 64,
            rate: opts.floodRate,
            paced: true,
            before: () => (flood = startFlood(svc.baseUrl)),
            after: async (res) => {
              res.flood = await flood!.stop();
            },
          }),
        ];
      }
      case 'stalled-downloads':
      case 'reading-downloads': {
        await ensureOrders(seedCount);
        neighbours ??= await prepareNeighbours(svc, 4, quick ? 10_000 : 50_000, log);
        const nb = neighbours;
        const out: ScenarioResult[] = [];
        for (const kind of ['query', 'create'] as const) {
          for (const noisy of [false, true]) {
            const n = Math.ceil(opts.floodRate * opts.duration);
            let dl: ReturnType<typeof startStalledDownloads> | null = null;
            const r = await measured(name, run, kind === 'query' ? queryItems(n, book.orders) : createItems(n), {
              connections: 64,
              rate: opts.floodRate,
              paced: true,
              before: noisy ? () => (dl = startStalledDownloads(svc.baseUrl, nb.apps, nb.day, 2, name === 'reading-downloads')) : undefined,
              after: noisy
                ? async (res) => void log(`  ${name}: ${JSON.stringify(((res as { stalled?: unknown }).stalled = await dl!.stop()))}`)
                : undefined,
            });
            out.push({ ...r, name: `${name} ${kind} ${noisy ? 'noisy' : 'quiet'}` });
          }
        }
        return out;
      }
      case 'half-query':
      case 'half-create':
      case 'half-realistic': {
        const base = name.slice('half-'.length) as 'query' | 'create' | 'realistic';
        if (base === 'query') await ensureOrders(seedCount);
        const build = base === 'query' ? (n: number) => queryItems(n, book.orders) : base === 'create' ? createItems : realistic;
        let peakRps = rateOf(base, run) ?? lastRateOf(base);
        if (peakRps === undefined) {
          log(`${name}: no ${base} peak in this run; measuring one`);
          peakRps = (await unmeasured(`${base} peak estimate`, await build(Math.ceil(Math.max(opts.duration / 2, 3) * 300)))).rps;
        }
        const rate = Math.max(1, Math.floor(peakRps / 2));
        const out: ScenarioResult[] = [];
        const notifications = base === 'realistic';
        if (base !== 'realistic') {
          // autocannon overallRate: bursts once a second (the open-loop phase below spreads them)
          out.push(await measured(name, run, await build(Math.ceil(rate * opts.duration)), { connections: halfConnections, rate }));
          await sleep(1000);
        }
        const items = await build(Math.ceil(rate * opts.duration));
        out.push(await measured(name, run, items, { connections: Math.max(64, halfConnections), rate, paced: true, notifications }));
        return out;
      }
    }
  }

  for (let run = 1; run <= opts.runs; run++) {
    // with and without a ceiling side by side, in alternating order (the machine's speed drifts)
    const both = scenarios.includes('create') && scenarios.includes('create-no-ceiling');
    const order =
      both && run % 2 === 0
        ? scenarios.map((s) => (s === 'create' ? 'create-no-ceiling' : s === 'create-no-ceiling' ? 'create' : s))
        : scenarios;
    for (const name of order) {
      results.push(...(await scenario(name, run)));
      await sleep(1000); // let background work of the phase settle
    }
  }

  const statement = statementPayments > 0 ? await statementScenario(svc, freeApp, statementPayments, log) : null;
  const day: DayResult | null =
    dayOrders > 0
      ? await dayScenario(svc, notifyApp, dayOrders, log, () => {
          const a = ownCpu();
          return () => ownCpuSince(a, ownCpu());
        })
      : null;
  if (wanted.includes('noisy')) await ensureOrders(seedCount);
  const noisy = !wanted.includes('noisy')
    ? null
    : await noisyScenario(
        {
          baseUrl: svc.baseUrl,
          pid: svc.pid,
          orders: () => book.orders,
          sign: (items) => pool!.sign(items),
          deadlineOf,
          onAnswer,
          log,
          waitQuiet: (l) => (opts.quietWait > 0 ? waitQuiet(l) : Promise.resolve()),
        },
        noisyOpts,
        opts.runs,
      );
  const crash = wanted.includes('crash') ? await crashScenario(svc, freeApp, { inFlight: quick ? 8 : 20, loadConnections: 16, log }) : null;

  const svcHwm = memoryOf(svc.pid)?.hwmMB ?? null;
  const pgPssMB = svc.postmasterPid !== null && svc.embedded ? clusterPssMB(svc.postmasterPid) : null;
  const benchHwm = memoryOf(process.pid)?.hwmMB ?? null;
  const liveAfterGc = await svc.memory(true);
  const receiverDump = await receiver!.dump();
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
  const memory = { servicePeakRssMB: hwm, postgresPssMB: pgPssMB, benchPeakRssMB: benchHwm };
  const targets = checkTargets(results, hwm, loadedSeconds);
  const git = (args: string[]) => {
    try {
      return execFileSync('git', args, { cwd: REPO_ROOT, encoding: 'utf8' }).trim();
    } catch {
      return '?';
    }
  };
  const cpuModel = /^model name\s*:\s*(.+)$/m.exec(fs.readFileSync('/proc/cpuinfo', 'utf8'))?.[1] ?? os.cpus()[0]?.model ?? '?';
  const machine = {
    cpu: cpuModel,
    cores: os.availableParallelism(),
    memoryGB: Math.round(os.totalmem() / 2 ** 30),
    node: process.version,
    postgres: pgVersion,
    postgresSettings: pgSettings,
    /** The kernel's send buffer range (min, default, max): what a client that does not read can take (docs/performance.md, "Noisy neighbours"). */
    tcpWmem: (() => {
      try {
        return fs.readFileSync('/proc/sys/net/ipv4/tcp_wmem', 'utf8').trim().split(/\s+/).join(' ');
      } catch {
        return '?';
      }
    })(),
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
    ledger,
    day,
    noisy,
    crash,
    serverPeakRssMB: hwm,
    memory,
    serverMemoryAfterFullGc: liveAfterGc,
    receiver: { requests: receiverDump.requests, rejected: receiverDump.rejected, events: receiverDump.arrivals.length },
    loadedSeconds,
    targets,
  };
  const file = path.join(opts.outDir, `${stamp}.json`);
  fs.writeFileSync(file, `${JSON.stringify(out, null, 2)}\n`);

  const lines = [
    '',
    `## Benchmark ${out.startedAt}: ${opts.runs} run(s), ${machine.database}, PostgreSQL ${machine.postgres}, Node ${machine.node}`,
    '',
    `machine: ${machine.cores} cores of ${machine.cpu} (/proc/cpuinfo), ${machine.memoryGB} GB; net.ipv4.tcp_wmem ${machine.tcpWmem}; git ${machine.gitCommit}`,
    `start: ${ceilingLine(ceiling)}`,
    `end: ${ceilingLine(ceilingEnd)}`,
    `fractions below are of the better of the two: ${refMachine.toFixed(0)} requests/s (2 cores), ${refCore.toFixed(0)} requests/s (1 core)`,
    `memory: service peak RSS ${hwm.toFixed(0)} MB; PostgreSQL ${pgPssMB === null ? 'n/a' : `${pgPssMB.toFixed(0)} MB (PSS of its processes at the end)`}; ` +
      `benchmark process (load generator, signing pool, receiver) peak RSS ${benchHwm === null ? 'n/a' : benchHwm.toFixed(0)} MB`,
    ledger
      ? `ledger: ${ledger.orders} orders of ${ledger.merchants} merchants (${ledger.apps} apps), ${ledger.firstDay} to ${ledger.lastDay}, ` +
        `written in ${ledger.seconds.toFixed(0)} s: ${Object.entries(ledger.rows)
          .map(([t, n]) => `${t} ${n}`)
          .join(', ')}`
      : 'ledger: none (a fresh database)',
    `receiver: ${receiverDump.requests} notifications received, ${receiverDump.arrivals.length} distinct events, refused ${JSON.stringify(receiverDump.rejected)}`,
    '',
    summaryTables(results),
    '',
    targetsTable(targets),
    '',
    detailTables(results),
    `results: ${path.relative(process.cwd(), file)}`,
    '',
  ];
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
  if (day) {
    lines.push(
      `### A closed day of ${day.orders} orders of one app (${day.day}; written in ${day.seedSeconds.toFixed(0)} s; ` +
        `${day.otherOrdersOfDay} orders of other apps that day)`,
      '',
      markdown(
        [
          'statement rows',
          'statement summary (CPU)',
          'statement file',
          'reconciliation run (sandbox; CPU)',
          'provider / ledger lines',
          'matched',
          'discrepancies',
        ],
        [
          [
            String(day.statementRows),
            `${day.statementSummarySeconds.toFixed(2)} s (${day.statementSummaryCpuSeconds.toFixed(2)} s)`,
            `${day.statementFileSeconds.toFixed(2)} s`,
            `${day.reconciliationSeconds.toFixed(2)} s / ${day.reconciliationRunSeconds.toFixed(2)} s (${day.reconciliationCpuSeconds.toFixed(2)} s)`,
            `${day.reconciliation.providerLines} / ${day.reconciliation.ledgerLines}`,
            String(day.reconciliation.matched),
            String(day.reconciliation.discrepancies),
          ],
        ],
      ),
      '',
    );
  }
  if (noisy) lines.push(noisyTable(noisy, noisyOpts));
  process.stdout.write(lines.join('\n'));
  return results.every((r) => r.errorFree) && Object.keys(receiverDump.rejected).length === 0;
}

/** A phase's notifications are as they must be: none lost, none refused by the receiver's verification. */
function notificationsOk(n: NotificationStats | undefined): boolean {
  return n === undefined || (n.lost === 0 && Object.keys(n.rejected ?? {}).length === 0);
}
