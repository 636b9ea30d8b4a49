/**
 * Summary of a V8 .cpuprofile of the service's main thread: self time by function and by area
 * (crypto, node-postgres, Fastify, logging, the service's own code...), and inclusive time of the
 * service's functions, all in microseconds per request of the profiled phase.
 */
import fs from 'node:fs';
import { REPO_ROOT } from './service.ts';

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
}

interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}

interface CpuProfile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

export interface ProfileSummary {
  file: string;
  requests: number;
  wallMs: number;
  /** main thread busy (not idle), ms */
  busyMs: number;
  byArea: { area: string; usPerReq: number; share: number }[];
  topSelf: { fn: string; usPerReq: number }[];
  /** inclusive time of the service's own functions (src/, packages/sdk) */
  topInclusive: { fn: string; usPerReq: number }[];
}

function shortUrl(url: string): string {
  return url
    .replace(/^file:\/\//, '')
    .replace(`${REPO_ROOT}/`, '')
    .replace(/^.*node_modules\//, '');
}

function area(cf: CallFrame): string {
  const u = cf.url;
  const name = cf.functionName;
  if (u === '') {
    if (name === '(idle)') return 'idle';
    if (name === '(garbage collector)') return 'GC';
    if (name === '(program)') return 'V8/native (program)';
    if (/^(stringify|parse)$/.test(name)) return 'JSON';
    // Wall-clock samples: on 2 busy cores the main thread is often preempted right where it wakes
    // another thread (a PostgreSQL backend through a socket write, a pool thread for a crypto job).
    if (/^(writev|writeBuffer|writeUtf8String|writeLatin1String)$/.test(name)) return 'native: socket writes (incl. preemption)';
    if (name === 'run' || name === 'SignJob' || name === 'VerifyJob')
      return 'native: crypto jobs, verify + sign hand-offs to the pool (incl. preemption)';
    return `native: ${name || '(anonymous)'}`;
  }
  if (u.includes('/src/') && !u.includes('node_modules')) return `service: ${shortUrl(u).replace(/^src\//, '')}`;
  if (u.includes('packages/sdk')) return 'sdk signing strings';
  if (u.includes('node_modules/pg') || u.includes('node_modules/pg-')) return 'node-postgres';
  if (/node_modules\/(fastify|@fastify|find-my-way|avvio|light-my-request|fast-json-stringify|fast-querystring|toad-cache)/.test(u))
    return 'Fastify';
  if (/node_modules\/(pino|sonic-boom|thread-stream)/.test(u)) return 'logging (pino)';
  if (u.includes('node_modules/rate-limiter-flexible')) return 'rate limiter';
  if (u.startsWith('node:internal/crypto') || u === 'node:crypto') return 'node:crypto (JS side + sync native)';
  if (/^node:(internal\/)?(http|_http|net|stream|internal\/streams|internal\/stream_base|timers|events|buffer)/.test(u))
    return 'node core: http/net/streams';
  if (u.startsWith('node:')) return 'node core: other';
  const dep = /node_modules\/(@[^/]+\/[^/]+|[^/]+)\//.exec(u);
  return dep ? `dependency: ${dep[1]}` : 'other';
}

function key(cf: CallFrame): string {
  return `${cf.functionName || '(anonymous)'} ${cf.url ? `${shortUrl(cf.url)}:${cf.lineNumber + 1}` : ''}`.trim();
}

export function summarizeProfile(file: string, requests: number, top = 20): ProfileSummary {
  const p = JSON.parse(fs.readFileSync(file, 'utf8')) as CpuProfile;
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const selfUs = new Map<number, number>();
  for (let i = 0; i < p.samples.length; i++) {
    // a sample's time is the delta to the next one
    const dt = p.timeDeltas[i + 1] ?? 0;
    selfUs.set(p.samples[i]!, (selfUs.get(p.samples[i]!) ?? 0) + dt);
  }
  const wallUs = p.endTime - p.startTime;
  const perReq = (us: number) => (requests > 0 ? us / requests : 0);

  const areas = new Map<string, number>();
  const fns = new Map<string, number>();
  for (const [id, us] of selfUs) {
    const cf = byId.get(id)!.callFrame;
    areas.set(area(cf), (areas.get(area(cf)) ?? 0) + us);
    fns.set(key(cf), (fns.get(key(cf)) ?? 0) + us);
  }
  const busy = [...areas].filter(([a]) => a !== 'idle').reduce((s, [, us]) => s + us, 0);

  // Inclusive time of own functions: each sample counted once per distinct own function on its stack.
  const parent = new Map<number, number>();
  for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const incl = new Map<string, number>();
  for (const [id, us] of selfUs) {
    const seen = new Set<string>();
    for (let cur: number | undefined = id; cur !== undefined; cur = parent.get(cur)) {
      const cf = byId.get(cur)!.callFrame;
      if (!/\/(src|packages\/sdk\/src)\//.test(cf.url) || cf.url.includes('node_modules')) continue;
      const k = key(cf);
      if (seen.has(k)) continue;
      seen.add(k);
      incl.set(k, (incl.get(k) ?? 0) + us);
    }
  }
  const sorted = (m: Map<string, number>) => [...m].sort((a, b) => b[1] - a[1]);
  return {
    file,
    requests,
    wallMs: wallUs / 1000,
    busyMs: busy / 1000,
    byArea: sorted(areas)
      .filter(([a]) => a !== 'idle')
      .map(([a, us]) => ({ area: a, usPerReq: perReq(us), share: busy > 0 ? us / busy : 0 })),
    topSelf: sorted(fns)
      .filter(([f]) => !f.startsWith('(idle)'))
      .slice(0, top)
      .map(([fn, us]) => ({ fn, usPerReq: perReq(us) })),
    topInclusive: sorted(incl)
      .slice(0, top)
      .map(([fn, us]) => ({ fn, usPerReq: perReq(us) })),
  };
}
