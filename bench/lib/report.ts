/** Tables (Markdown, so they paste into docs/performance.md) and the target checks. */
import os from 'node:os';
import type { CryptoCeiling } from './crypto-ceiling.ts';
import type { FloodResult } from './flood.ts';
import type { LatencyStats } from './load.ts';
import type { NotificationStats } from './notifications.ts';
import type { ProfileSummary } from './profile.ts';
import type { MemoryBreakdown } from './service.ts';
import { type Spread, formatSpread, pairedRatios, spread } from './stats.ts';

export interface ScenarioResult {
  name: string;
  /** which repetition (--runs) it belongs to, from 1 */
  run: number;
  description: string;
  mode: 'autocannon closed-loop' | 'wrk closed-loop' | 'autocannon overallRate' | 'open-loop' | 'notification backlog';
  connections: number;
  overallRate: number | null;
  requests: number;
  completed: number;
  seconds: number;
  rps: number;
  latencyMs: LatencyStats;
  /** Paced phases: the slowest latency of the requests due in each second (ms). */
  worstBySecondMs?: number[];
  statuses: Record<string, number>;
  /** non-2xx answers by status */
  non2xx: Record<string, number>;
  socketErrors: Record<string, number>;
  timeouts: number;
  /** answers with another status than the scenario expects, by "kind status" */
  unexpected: Record<string, number>;
  unsigned2xx: number;
  /** replay scenario: answers whose bytes differ from the first answer of their request id */
  replayMismatches: number | null;
  replayGroups: number | null;
  errorFree: boolean;
  truncated: boolean;
  cpu: {
    serverSec: number;
    serverUserSec: number;
    serverSysSec: number;
    serverPer1k: number;
    pgSec: number | null;
    pgPer1k: number | null;
    pgPer1kByKind: Record<string, number> | null;
    /** requests/s the cores would carry if only the service and PostgreSQL ran: cores / (their CPU per request) */
    capacityEstimate: number | null;
    benchSec: number;
    benchPer1k: number;
    /** cores other processes of the machine used meanwhile (noise: other engineers' builds and tests) */
    otherCores: number;
    /** the service's main thread: shares of the phase on a core, waiting in a run queue, asleep (null: no schedstat) */
    mainThread: { onCpu: number; runQueue: number; asleep: number } | null;
    /** cores of the machine left idle on average over the phase */
    idleCores: number;
  };
  memory: { peakRssMB: number; hwmMB: number; after: MemoryBreakdown | null };
  db: {
    statementsPerReq: number | null;
    commitsPerReq: number | null;
    walBytesPerReq: number | null;
    topSql: { sql: string; perReq: number; msPerReq: number }[];
  };
  ceilingFraction: { ofMachine: number; ofOneCore: number };
  signing: { requests: number; seconds: number };
  profile?: ProfileSummary;
  /** phases whose answers produce events: what the receiver got of them */
  notifications?: NotificationStats;
  /** the flood scenario: how the flood's inputs were answered */
  flood?: FloodResult;
}

const f0 = (n: number) => n.toFixed(0);
const f1 = (n: number) => n.toFixed(1);
const f2 = (n: number) => n.toFixed(2);
const pct = (n: number) => `${(n * 100).toFixed(0)}%`;

export function errorsCell(r: ScenarioResult): string {
  const parts = [
    ...Object.entries(r.non2xx).map(([s, n]) => `${s}×${n}`),
    ...Object.entries(r.socketErrors).map(([c, n]) => `${c}×${n}`),
    ...(r.timeouts ? [`timeout×${r.timeouts}`] : []),
    ...Object.entries(r.unexpected)
      .filter(([k]) => !/ [45]\d\d$/.test(k))
      .map(([k, n]) => `unexpected ${k}×${n}`),
    ...(r.unsigned2xx ? [`unsigned 2xx×${r.unsigned2xx}`] : []),
    ...(r.replayMismatches ? [`replay bytes differ×${r.replayMismatches}`] : []),
  ];
  return parts.length ? parts.join(', ') : '0';
}

export function resultsTable(results: ScenarioResult[]): string {
  const head = [
    'scenario',
    'run',
    'conns',
    'requests',
    'req/s',
    '% crypto ceiling (2 cores / 1 core)',
    'p50 ms',
    'p99 ms',
    'max ms',
    'errors',
    'server CPU s/1k req',
    'PostgreSQL CPU s/1k req',
    'CPU-bound capacity req/s',
    'peak RSS MB',
    'SQL stmts/req',
    'write tx/req',
    'other load (cores)',
  ];
  const rows = results.map((r) => [
    r.name + (r.overallRate ? ` @${r.overallRate}/s` : '') + (r.truncated ? ' (TRUNCATED)' : ''),
    String(r.run),
    String(r.connections),
    String(r.completed),
    f0(r.rps),
    `${pct(r.ceilingFraction.ofMachine)} / ${pct(r.ceilingFraction.ofOneCore)}`,
    f1(r.latencyMs.p50),
    f1(r.latencyMs.p99),
    f0(r.latencyMs.max),
    errorsCell(r),
    f2(r.cpu.serverPer1k),
    r.cpu.pgPer1k === null ? 'n/a' : f2(r.cpu.pgPer1k),
    r.cpu.capacityEstimate === null ? 'n/a' : f0(r.cpu.capacityEstimate),
    f0(r.memory.peakRssMB),
    r.db.statementsPerReq === null ? 'n/a' : f1(r.db.statementsPerReq),
    r.db.commitsPerReq === null ? 'n/a' : f2(r.db.commitsPerReq),
    f2(r.cpu.otherCores),
  ]);
  return markdown(head, rows);
}

export function markdown(head: string[], rows: string[][]): string {
  const w = head.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]) => `| ${cells.map((c, i) => c.padEnd(w[i]!)).join(' | ')} |`;
  return [line(head), `|${w.map((n) => '-'.repeat(n + 2)).join('|')}|`, ...rows.map(line)].join('\n');
}

export function ceilingLine(c: CryptoCeiling): string {
  return (
    `RSA-2048 (node:crypto, cached keys): sign ${f0(c.signPerSec)}/s, verify ${f0(c.verifyPerSec)}/s on one thread; ` +
    `verify+sign pairs: ${f0(c.pairsPerSecPerCore)}/s per core (sync), ${f0(c.pairsPerSecThreadpool)}/s on the thread pool ` +
    `(${c.cores} cores, UV_THREADPOOL_SIZE ${c.threadpoolSize}) = the crypto ceiling in requests/s`
  );
}

export interface TargetCheck {
  target: string;
  measured: string;
  pass: boolean | null;
}

/** The results of each phase name over the runs, in the order first met. */
export function byName(results: ScenarioResult[]): Map<string, ScenarioResult[]> {
  const m = new Map<string, ScenarioResult[]>();
  for (const r of results) m.set(r.name, [...(m.get(r.name) ?? []), r]);
  return m;
}

const over = (rs: ScenarioResult[] | undefined, f: (r: ScenarioResult) => number | undefined): Spread | null =>
  rs ? spread(rs.map(f).filter((x): x is number => x !== undefined)) : null;

/** With / without a daily ceiling, paired run by run: throughput ratio and p99 ratio. */
export function ceilingCost(results: ScenarioResult[]): { throughput: Spread | null; p99: Spread | null } | null {
  const g = byName(results);
  const a = g.get('create');
  const b = g.get('create-no-ceiling');
  if (!a || !b) return null;
  const runs = [...new Set(a.map((r) => r.run))];
  const at = (rs: ScenarioResult[], run: number, f: (r: ScenarioResult) => number) => {
    const r = rs.find((x) => x.run === run);
    return r ? f(r) : undefined;
  };
  return {
    throughput: spread(
      pairedRatios(
        runs.map((n) => at(a, n, (r) => r.rps)),
        runs.map((n) => at(b, n, (r) => r.rps)),
      ),
    ),
    p99: spread(
      pairedRatios(
        runs.map((n) => at(a, n, (r) => r.latencyMs.p99)),
        runs.map((n) => at(b, n, (r) => r.latencyMs.p99)),
      ),
    ),
  };
}

export function ceilingCostLine(c: NonNullable<ReturnType<typeof ceilingCost>>): string {
  const pctS = (s: Spread | null) =>
    s === null ? 'n/a' : `${(s.median * 100).toFixed(0)}%${s.n > 1 ? ` [${(s.min * 100).toFixed(0)}-${(s.max * 100).toFixed(0)}%]` : ''}`;
  return `ceiling cost: throughput ${pctS(c.throughput)} of no-ceiling, p99 x ${formatSpread(c.p99, 2)} (paired run by run; target >= 90%, <= 1.5x)`;
}

/** The targets of issues 28 and 29, each judged on the median over the runs. */
export function checkTargets(results: ScenarioResult[], hwmMB: number, loadedSeconds: number): TargetCheck[] {
  const g = byName(results);
  const out: TargetCheck[] = [];
  const share = (name: string, min: number, target: string) => {
    const s = over(g.get(name), (r) => r.ceilingFraction.ofMachine);
    if (s)
      out.push({
        target,
        measured: formatSpread(
          over(g.get(name), (r) => r.ceilingFraction.ofMachine * 100),
          0,
          '%',
        ),
        pass: s.median >= min,
      });
  };
  share('create', 0.3, 'create >= 30% of the crypto ceiling');
  share('query', 0.5, 'query >= 50% of the crypto ceiling');
  share('realistic', 0.2, 'realistic mix (with notifications) >= 20% of the crypto ceiling');
  const cc = ceilingCost(results);
  if (cc?.throughput && cc.p99) {
    out.push({
      target: 'create with a daily ceiling >= 90% of the throughput without, p99 <= 1.5x',
      measured: ceilingCostLine(cc)
        .replace(/^ceiling cost: /, '')
        .replace(/ \(paired.*$/, ''),
      pass: cc.throughput.median >= 0.9 && cc.p99.median <= 1.5,
    });
  }
  const withErrors = results.filter((r) => !r.errorFree);
  out.push({
    target: 'zero errors (every answer as expected, no socket errors, no notification lost or refused)',
    measured: withErrors.length ? withErrors.map((r) => `${r.name} run ${r.run}: ${errorsCell(r)}`).join('; ') : 'none',
    pass: withErrors.length === 0,
  });
  for (const [name, rs] of g) {
    if (!name.startsWith('half-')) continue;
    const s = over(rs, (r) => r.latencyMs.p99)!;
    out.push({ target: `${name}: p99 < 50 ms at half of peak`, measured: `${formatSpread(s, 1)} ms`, pass: s.median < 50 });
  }
  const lag = over(g.get('half-realistic'), (r) => r.notifications?.lagMs.p99);
  if (lag)
    out.push({
      target: 'notification lag p99 < 1 s at half of peak (half-realistic)',
      measured: `${formatSpread(lag)} ms`,
      pass: lag.median < 1000,
    });
  const notify = over(g.get('notify'), (r) => r.notifications?.deliveredPerSec);
  if (notify)
    out.push({
      target: 'notify: >= 1,000 notifications/s for one app',
      measured: `${formatSpread(notify)}/s`,
      pass: notify.median >= 1000,
    });
  const order = results.reduce((s, r) => s + (r.notifications?.outOfOrder ?? 0), 0);
  if (results.some((r) => r.notifications))
    out.push({ target: 'notifications of an order arrive in stateVersion order', measured: `${order} out of order`, pass: order === 0 });
  const flood = g.get('flood');
  if (flood) {
    const slow = flood.reduce((s, r) => s + (r.latencyMs.over1s ?? 0), 0);
    const max = Math.max(...flood.map((r) => r.latencyMs.max));
    out.push({ target: 'flood: no valid request over 1 s', measured: `${slow} over 1 s (max ${f0(max)} ms)`, pass: slow === 0 });
  }
  out.push({
    target: 'peak RSS < 250 MB (60 s run)',
    measured: `${f0(hwmMB)} MB (VmHWM of the service over the whole run: ${f0(loadedSeconds)} s under load)`,
    pass: loadedSeconds >= 60 ? hwmMB < 250 : hwmMB < 250 ? null : false,
  });
  return out;
}

/** The headline figures of each phase: the median over the runs with its range. */
export function summaryTables(results: ScenarioResult[]): string {
  const g = byName(results);
  const rows = [...g].map(([name, rs]) => {
    const backlog = rs[0]!.mode === 'notification backlog';
    const lat = (f: (r: ScenarioResult) => number, digits: number) => (backlog ? '(below)' : formatSpread(over(rs, f), digits));
    const cpu = over(rs, (r) => (r.cpu.pgSec === null ? r.cpu.serverPer1k : r.cpu.serverPer1k + r.cpu.pgPer1k!));
    return [
      name + (rs[0]!.overallRate ? ` @${formatSpread(over(rs, (r) => r.overallRate ?? undefined))}/s` : ''),
      formatSpread(over(rs, (r) => r.rps)),
      formatSpread(
        over(rs, (r) => r.ceilingFraction.ofMachine * 100),
        0,
        '%',
      ),
      lat((r) => r.latencyMs.p50, 1),
      lat((r) => r.latencyMs.p99, 1),
      lat((r) => r.latencyMs.max, 0),
      formatSpread(cpu, 2),
      formatSpread(over(rs, (r) => r.memory.peakRssMB)),
      rs.every((r) => r.errorFree)
        ? '0'
        : rs
            .filter((r) => !r.errorFree)
            .map((r) => `run ${r.run}: ${errorsCell(r)}`)
            .join('; '),
    ];
  });
  const parts = [
    markdown(
      ['scenario', 'req/s', '% crypto ceiling', 'p50 ms', 'p99 ms', 'max ms', 'CPU ms/req (service + PostgreSQL)', 'peak RSS MB', 'errors'],
      rows,
    ),
  ];
  const cc = ceilingCost(results);
  if (cc) parts.push('', ceilingCostLine(cc));
  const withN = [...g].filter(([, rs]) => rs.some((r) => r.notifications));
  if (withN.length) {
    parts.push(
      '',
      markdown(
        ['notifications', 'expected', 'delivered/s', 'lag p50 ms', 'lag p99 ms', 'lag max ms', 'lost', 'duplicates', 'out of order'],
        withN.map(([name, rs]) => {
          const n = (f: (x: NotificationStats) => number) => over(rs, (r) => (r.notifications ? f(r.notifications) : undefined));
          const sum = (f: (x: NotificationStats) => number) =>
            String(rs.reduce((s, r) => s + (r.notifications ? f(r.notifications) : 0), 0));
          return [
            name,
            formatSpread(n((x) => x.expected)),
            formatSpread(n((x) => x.deliveredPerSec)),
            formatSpread(n((x) => x.lagMs.p50)),
            formatSpread(n((x) => x.lagMs.p99)),
            formatSpread(n((x) => x.lagMs.max)),
            sum((x) => x.lost),
            sum((x) => x.duplicates),
            sum((x) => x.outOfOrder),
          ];
        }),
      ),
      '',
      lagByTypeLine(withN),
      '',
      "notify: lag counts from the event's occurredAt, so it includes the time the backlog waited for its URL; delivered/s is from setting the URL to the last acknowledgement.",
    );
  }
  const flood = g.get('flood');
  if (flood) {
    parts.push(
      '',
      `flood: valid queries over 1 s: ${flood.map((r) => r.latencyMs.over1s ?? 0).join(', ')} (per run); max ${flood.map((r) => f0(r.latencyMs.max)).join(', ')} ms`,
      '',
      floodTable(flood),
    );
  }
  return parts.join('\n');
}

/** The lag by event type (median over the runs of each type's p50 / p99). */
function lagByTypeLine(phases: [string, ScenarioResult[]][]): string {
  const parts: string[] = [];
  for (const [name, rs] of phases) {
    const types = new Set(rs.flatMap((r) => Object.keys(r.notifications?.lagByType ?? {})));
    const each = [...types].sort().map((t) => {
      const p = (f: (x: { p50: number; p99: number }) => number) =>
        over(rs, (r) => (r.notifications?.lagByType[t] ? f(r.notifications.lagByType[t]) : undefined));
      return `${t} p50 ${formatSpread(p((x) => x.p50))} / p99 ${formatSpread(p((x) => x.p99))} ms`;
    });
    if (each.length) parts.push(`${name}: ${each.join('; ')}`);
  }
  return `lag by event type: ${parts.join('. ')}`;
}

/** How the flood's inputs were answered, summed over the runs. */
export function floodTable(flood: ScenarioResult[]): string {
  const kinds = new Map<
    string,
    { sent: number; statuses: Record<string, number>; closed: number; errors: Record<string, number>; held: number; conns: number }
  >();
  for (const r of flood) {
    for (const [k, v] of Object.entries(r.flood ?? {})) {
      const a = kinds.get(k) ?? { sent: 0, statuses: {}, closed: 0, errors: {}, held: 0, conns: v.connections };
      a.sent += v.sent;
      a.closed += v.closedWithoutAnswer;
      a.held = Math.max(a.held, v.maxHeldMs);
      for (const [s, n] of Object.entries(v.statuses)) a.statuses[s] = (a.statuses[s] ?? 0) + n;
      for (const [s, n] of Object.entries(v.errors)) a.errors[s] = (a.errors[s] ?? 0) + n;
      kinds.set(k, a);
    }
  }
  const open = new Map<string, { open: number; oldest: number }>();
  for (const r of flood)
    for (const [k, v] of Object.entries(r.flood ?? {})) {
      const o = open.get(k) ?? { open: 0, oldest: 0 };
      open.set(k, { open: o.open + v.openAtStop, oldest: Math.max(o.oldest, v.oldestAtStopMs) });
    }
  const counts = (m: Record<string, number>) =>
    Object.entries(m)
      .map(([k, n]) => `${k}×${n}`)
      .join(', ') || '-';
  return markdown(
    [
      'flood input',
      'connections',
      'sent',
      'answers by status',
      'closed without answer',
      'socket errors',
      'longest held until closed by the server',
      'open when the flood stopped (oldest)',
    ],
    [...kinds].map(([k, a]) => {
      const o = open.get(k)!;
      return [
        k,
        String(a.conns),
        String(a.sent),
        counts(a.statuses),
        String(a.closed),
        counts(a.errors),
        a.held ? `${(a.held / 1000).toFixed(1)} s` : '-',
        o.open ? `${o.open} (${(o.oldest / 1000).toFixed(1)} s)` : '0',
      ];
    }),
  );
}

/** Every phase of every run, and where its CPU and time went. */
export function detailTables(results: ScenarioResult[]): string {
  const lines: string[] = ['### Every phase', '', resultsTable(results), ''];
  lines.push('### CPU seconds per 1,000 requests, by process', '');
  lines.push(
    markdown(
      ['scenario', 'run', 'service (user + sys)', 'PostgreSQL by process', 'load generator (this process)'],
      results.map((r) => [
        r.name,
        String(r.run),
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
        'run',
        'main thread on a core',
        'main thread waiting for a core',
        'main thread asleep',
        `idle cores (of ${os.availableParallelism()})`,
      ],
      results.map((r) => {
        const t = r.cpu.mainThread;
        return [
          r.name,
          String(r.run),
          t ? pct(t.onCpu) : 'n/a',
          t ? pct(t.runQueue) : 'n/a',
          t ? pct(t.asleep) : 'n/a',
          r.cpu.idleCores.toFixed(2),
        ];
      }),
    ),
    '',
  );
  for (const r of results) {
    if (r.db.topSql.length && r.run === 1) {
      lines.push(
        `### ${r.name}: SQL statements per request (${r.db.statementsPerReq?.toFixed(1)} in all, ${r.db.commitsPerReq?.toFixed(2)} write transactions, ${r.db.walBytesPerReq === null ? '?' : (r.db.walBytesPerReq / 1024).toFixed(1)} KB WAL)`,
        '',
        sqlTable(r.db.topSql.slice(0, 14)),
        '',
      );
    }
    if (r.profile)
      lines.push(
        `### ${r.name} (run ${r.run}): CPU profile of the service's main thread (${r.profile.file})`,
        '',
        profileTable(r.profile),
        '',
      );
  }
  return lines.join('\n');
}

function sqlTable(rows: { sql: string; perReq: number; msPerReq: number }[]): string {
  const w = Math.max(...rows.map((r) => Math.min(r.sql.length, 110)), 3);
  const head = `| ${'per req'.padEnd(7)} | ${'ms/req'.padEnd(6)} | ${'SQL'.padEnd(w)} |`;
  const sep = `|${'-'.repeat(9)}|${'-'.repeat(8)}|${'-'.repeat(w + 2)}|`;
  const body = rows.map(
    (r) =>
      `| ${r.perReq.toFixed(2).padEnd(7)} | ${r.msPerReq.toFixed(2).padEnd(6)} | ${r.sql.slice(0, 110).replace(/\|/g, '\\|').padEnd(w)} |`,
  );
  return [head, sep, ...body].join('\n');
}

export function targetsTable(t: TargetCheck[]): string {
  return markdown(
    ['target', 'measured', 'result'],
    t.map((x) => [x.target, x.measured, x.pass === null ? 'n/a (run shorter than 60 s)' : x.pass ? 'PASS' : 'FAIL']),
  );
}

export function profileTable(p: ProfileSummary, top = 12): string {
  const areas = markdown(
    ['area (main thread, self time)', 'µs/req', 'share'],
    p.byArea.slice(0, top).map((a) => [a.area, f0(a.usPerReq), pct(a.share)]),
  );
  const self = markdown(
    ['function (self)', 'µs/req'],
    p.topSelf.slice(0, top).map((s) => [s.fn, f0(s.usPerReq)]),
  );
  const incl = markdown(
    ['service function (inclusive)', 'µs/req'],
    p.topInclusive.slice(0, top).map((s) => [s.fn, f0(s.usPerReq)]),
  );
  return `${areas}\n\n${self}\n\n${incl}`;
}
