/** Tables (Markdown, so they paste into docs/performance.md) and the target checks. */
import type { CryptoCeiling } from './crypto-ceiling.ts';
import type { LatencyStats } from './load.ts';
import type { ProfileSummary } from './profile.ts';
import type { MemoryBreakdown } from './service.ts';

export interface ScenarioResult {
  name: string;
  description: string;
  mode: 'autocannon closed-loop' | 'wrk closed-loop' | 'autocannon overallRate' | 'open-loop';
  connections: number;
  overallRate: number | null;
  requests: number;
  completed: number;
  seconds: number;
  rps: number;
  latencyMs: LatencyStats;
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

export function checkTargets(results: ScenarioResult[], hwmMB: number, loadedSeconds: number): TargetCheck[] {
  const by = (n: string) => results.find((r) => r.name === n);
  const out: TargetCheck[] = [];
  const create = by('create');
  const query = by('query');
  if (create) {
    out.push({
      target: 'create >= 30% of the crypto ceiling',
      measured: pct(create.ceilingFraction.ofMachine),
      pass: create.ceilingFraction.ofMachine >= 0.3,
    });
  }
  if (query) {
    out.push({
      target: 'query >= 50% of the crypto ceiling',
      measured: pct(query.ceilingFraction.ofMachine),
      pass: query.ceilingFraction.ofMachine >= 0.5,
    });
  }
  const withErrors = results.filter((r) => !r.errorFree);
  out.push({
    target: 'zero errors (every answer as expected, no socket errors)',
    measured: withErrors.length ? withErrors.map((r) => `${r.name}: ${errorsCell(r)}`).join('; ') : 'none',
    pass: withErrors.length === 0,
  });
  for (const r of results.filter((x) => x.name.startsWith('half-'))) {
    out.push({ target: `${r.name}: p99 < 50 ms at half of peak`, measured: `${f1(r.latencyMs.p99)} ms`, pass: r.latencyMs.p99 < 50 });
  }
  out.push({
    target: 'peak RSS < 250 MB (60 s run)',
    measured: `${f0(hwmMB)} MB (VmHWM of the service over the whole run: ${f0(loadedSeconds)} s under load)`,
    pass: loadedSeconds >= 60 ? hwmMB < 250 : hwmMB < 250 ? null : false,
  });
  return out;
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
