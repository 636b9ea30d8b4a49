/**
 * The `noisy` scenario: a normal merchant's queries and creates, each open-loop at a modest fixed
 * rate (bench/lib/paced.ts: latency from each request's due time), measured quiet and then beside
 * each noisy neighbour, one at a time:
 *  - sign-in-flood: console sign-ins with wrong passwords from a new address and name each, at a
 *    fixed rate, so that no per-name or per-address throttle applies (bench/lib/sign-in-flood.ts);
 *  - flood: the `flood` scenario's hostile inputs (bench/lib/flood.ts).
 * A neighbour is a function that starts it and answers a stop that returns its counts, so that more
 * can be added to NEIGHBOURS without touching the rest. Reported per phase: the merchant's query and
 * create p99 beside the quiet ones, the neighbour's own answers, what each of its requests cost the
 * service's main thread, and the CPU of the bench's thread that generated it (the generator runs on
 * the same cores as the service).
 */
import fs from 'node:fs';
import { type Item, createItems, queryItems } from './corpus.ts';
import { startFlood } from './flood.ts';
import type { LoadResult } from './load.ts';
import { runPaced } from './paced.ts';
import { markdown } from './report.ts';
import { startSignInFlood } from './sign-in-flood.ts';

export interface Neighbour {
  name: string;
  description: string;
  /** at least this long a phase (the flood's slow senders need 15 s to meet the header deadline) */
  minSeconds?: number;
  start(baseUrl: string): { stop(): Promise<unknown>; generatorCpuMs(): number | null };
}

export interface NoisyOptions {
  queryRate: number;
  createRate: number;
  seconds: number;
  signInRate: number;
  /** the flood's phase at least 15 s (false: --quick) */
  fullFlood: boolean;
  /** only these neighbours (null: all) */
  only: string[] | null;
}

export function neighbours(o: NoisyOptions): Neighbour[] {
  return all(o).filter((n) => o.only === null || o.only.includes(n.name));
}

function all(o: NoisyOptions): Neighbour[] {
  return [
    {
      name: 'sign-in-flood',
      description: `console sign-ins with wrong passwords at ${o.signInRate}/s, each from a new loopback address and name (no throttle applies)`,
      start: (url) => startSignInFlood(url, o.signInRate),
    },
    {
      name: 'flood',
      description: 'deep JSON, big headers, long paths, garbage, slow bodies and headers, as fast as answered',
      minSeconds: o.fullFlood ? 15 : 0,
      start: (url) => startFlood(url),
    },
  ];
}

export interface NoisyPhase {
  run: number;
  neighbour: string;
  seconds: number;
  /** the service's CPU over the phase by thread (the main thread, libuv's pool, the password-hashing threads, others), ms */
  serviceCpuMs: Record<string, number>;
  query: LoadResult;
  create: LoadResult;
  neighbourAnswers: unknown;
  /** the neighbour's requests answered (or cut) by the service */
  neighbourRequests: number;
  /** the CPU of the bench's thread that generated the neighbour's load, ms */
  generatorCpuMs: number | null;
  /**
   * the service's main-thread CPU per neighbour request, ms: the phase's main thread less what the
   * quiet phase before it took for the same merchant load (per second), over the neighbour's requests
   */
  mainMsPerNeighbourRequest: number | null;
}

export interface NoisyContext {
  baseUrl: string;
  /** the service's process id (its threads' CPU is read from /proc) */
  pid: number;
  orders: () => readonly string[];
  sign(items: Item[]): Promise<{ minTs: number }>;
  deadlineOf(minTs: number): number;
  onAnswer(it: Item, status: number, body: string): void;
  waitQuiet(label: string): Promise<unknown>;
  log(m: string): void;
}

/** CPU ms of a process's threads by kind: its main thread, libuv-worker (the pool), WorkerThread (worker_threads: the password hashes), the rest. */
function threadCpuMs(pid: number): Record<string, number> {
  const out: Record<string, number> = {};
  let tids: string[];
  try {
    tids = fs.readdirSync(`/proc/${pid}/task`);
  } catch {
    return out;
  }
  for (const tid of tids) {
    try {
      const comm = fs.readFileSync(`/proc/${pid}/task/${tid}/comm`, 'utf8').trim();
      const st = fs.readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
      const f = st.slice(st.lastIndexOf(')') + 2).split(' ');
      const kind = tid === String(pid) ? 'main' : comm === 'libuv-worker' || comm === 'WorkerThread' ? comm : 'other';
      out[kind] = (out[kind] ?? 0) + (Number(f[11]) + Number(f[12])) * 10; // utime + stime, at 100 ticks a second
    } catch {
      // the thread ended
    }
  }
  return out;
}

async function phase(ctx: NoisyContext, o: NoisyOptions, run: number, n: Neighbour | null): Promise<NoisyPhase> {
  const label = `noisy ${n?.name ?? 'quiet'} (run ${run})`;
  const seconds = Math.max(o.seconds, n?.minSeconds ?? 0);
  await ctx.waitQuiet(label);
  const queries = queryItems(Math.ceil(o.queryRate * seconds), ctx.orders());
  const creates = createItems(Math.ceil(o.createRate * seconds));
  const s = await ctx.sign([...queries, ...creates]);
  const lo = { url: ctx.baseUrl, deadlineMs: ctx.deadlineOf(s.minTs), onAnswer: ctx.onAnswer, maxSockets: 64 };
  const cpu0 = threadCpuMs(ctx.pid);
  const neighbour = n?.start(ctx.baseUrl) ?? null;
  // the neighbour at full strength before the first measured request
  if (neighbour) await new Promise((r) => setTimeout(r, 1000));
  const [query, create] = await Promise.all([
    runPaced({ ...lo, items: queries, rate: o.queryRate }),
    runPaced({ ...lo, items: creates, rate: o.createRate }),
  ]);
  const neighbourAnswers = neighbour ? await neighbour.stop() : null;
  const cpu1 = threadCpuMs(ctx.pid);
  const serviceCpuMs = Object.fromEntries(Object.entries(cpu1).map(([k, v]) => [k, v - (cpu0[k] ?? 0)]));
  ctx.log(
    `${label}: query p50 ${query.latencyMs.p50.toFixed(1)} p99 ${query.latencyMs.p99.toFixed(1)} max ${query.latencyMs.max.toFixed(0)} ms ` +
      `${JSON.stringify(query.statuses)}; create p50 ${create.latencyMs.p50.toFixed(1)} p99 ${create.latencyMs.p99.toFixed(1)} ` +
      `max ${create.latencyMs.max.toFixed(0)} ms ${JSON.stringify(create.statuses)}` +
      (neighbourAnswers ? `; ${n!.name}: ${JSON.stringify(summary(neighbourAnswers))}` : '') +
      `; service CPU ms ${JSON.stringify(serviceCpuMs)}`,
  );
  return {
    run,
    neighbour: n?.name ?? 'quiet',
    seconds,
    serviceCpuMs,
    query,
    create,
    neighbourAnswers,
    neighbourRequests: neighbourAnswers === null ? 0 : answered(neighbourAnswers),
    generatorCpuMs: neighbour?.generatorCpuMs() ?? null,
    mainMsPerNeighbourRequest: null,
  };
}

/** The requests of a neighbour the service answered or cut: the sign-in flood's answers, the flood's per kind. */
function answered(a: unknown): number {
  const sum = (o: Record<string, number>) => Object.values(o).reduce((x, y) => x + y, 0);
  const x = a as Record<string, unknown>;
  if ('statuses' in x) return sum(x.statuses as Record<string, number>);
  return Object.values(x).reduce<number>((k, v) => {
    const kind = v as { statuses: Record<string, number>; closedWithoutAnswer: number };
    return k + sum(kind.statuses) + kind.closedWithoutAnswer;
  }, 0);
}

/** A neighbour's answers in short: statuses (per kind for the flood). */
function summary(a: unknown): unknown {
  const x = a as Record<string, unknown>;
  if (x && typeof x === 'object' && 'statuses' in x) return { sent: x.sent, statuses: x.statuses, errors: x.errors, skipped: x.skipped };
  return Object.fromEntries(Object.entries(x).map(([k, v]) => [k, (v as { statuses: unknown }).statuses]));
}

/** Quiet, then each neighbour, `runs` times (quiet again before each neighbour, the machine's speed drifting). */
export async function noisyScenario(ctx: NoisyContext, o: NoisyOptions, runs: number): Promise<NoisyPhase[]> {
  const out: NoisyPhase[] = [];
  for (let run = 1; run <= runs; run++) {
    for (const n of neighbours(o)) {
      const quiet = await phase(ctx, o, run, null);
      const noisy = await phase(ctx, o, run, n);
      const extra = (noisy.serviceCpuMs.main ?? 0) - ((quiet.serviceCpuMs.main ?? 0) * noisy.seconds) / quiet.seconds;
      if (noisy.neighbourRequests > 0) noisy.mainMsPerNeighbourRequest = extra / noisy.neighbourRequests;
      ctx.log(
        `noisy ${n.name} (run ${run}): ${noisy.neighbourRequests} neighbour requests, service main thread ` +
          `${noisy.mainMsPerNeighbourRequest?.toFixed(2) ?? '?'} ms each; the generator's thread ${noisy.generatorCpuMs?.toFixed(0) ?? '?'} ms CPU`,
      );
      out.push(quiet, noisy);
    }
  }
  return out;
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? NaN : s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};

/** The report: per neighbour, the medians (and ranges) of the merchant's p99 beside the quiet phases'. */
export function noisyTable(phases: NoisyPhase[], o: NoisyOptions): string {
  const fmt = (xs: number[]) =>
    xs.length === 1 ? xs[0]!.toFixed(1) : `${median(xs).toFixed(1)} (${Math.min(...xs).toFixed(1)}-${Math.max(...xs).toFixed(1)})`;
  const quiet = phases.filter((p) => p.neighbour === 'quiet');
  const qq = quiet.map((p) => p.query.latencyMs.p99);
  const qc = quiet.map((p) => p.create.latencyMs.p99);
  const rows = [['quiet', fmt(qq), fmt(qc), '1.0', '', '', '']];
  for (const n of neighbours(o)) {
    const ps = phases.filter((p) => p.neighbour === n.name);
    if (ps.length === 0) continue;
    const q = ps.map((p) => p.query.latencyMs.p99);
    const c = ps.map((p) => p.create.latencyMs.p99);
    const bad = ps.reduce(
      (k, p) =>
        k +
        Object.entries({ ...p.query.statuses })
          .filter(([s]) => !s.startsWith('2'))
          .reduce((a, [, v]) => a + v, 0),
      0,
    );
    const perReq = ps.map((p) => p.mainMsPerNeighbourRequest).filter((x): x is number => x !== null);
    const gen = ps.map((p) => p.generatorCpuMs).filter((x): x is number => x !== null);
    rows.push([
      n.name,
      fmt(q),
      fmt(c),
      (median(c) / median(qc)).toFixed(2),
      median(q) < 100 && median(c) < 2 * median(qc) ? 'yes' : 'no',
      `${perReq.length ? median(perReq).toFixed(2) : '?'} ms x ${median(ps.map((p) => p.neighbourRequests)).toFixed(0)}; generator ${gen.length ? median(gen).toFixed(0) : '?'} ms`,
      `${bad} non-2xx queries; ${JSON.stringify(summary(ps[ps.length - 1]!.neighbourAnswers))}`,
    ]);
  }
  return [
    `### Noisy neighbours: a merchant's query at ${o.queryRate}/s and create at ${o.createRate}/s (open-loop), p99 in ms`,
    '',
    markdown(
      [
        'beside',
        'query p99',
        'create p99',
        'create p99 / quiet',
        'query < 100 ms and create < 2x quiet',
        "the service's main-thread CPU per neighbour request x requests; the generator thread's CPU",
        "the neighbour's answers (last run)",
      ],
      rows,
    ),
    '',
    ...neighbours(o).map((n) => `- ${n.name}: ${n.description}`),
    '',
  ].join('\n');
}
