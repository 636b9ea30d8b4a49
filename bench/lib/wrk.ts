/**
 * Sends a signed corpus with wrk (Debian's `wrk`, a C load generator with LuaJIT scripting), the
 * load tool of the closed-loop peak scenarios when it is installed: it costs the shared cores a
 * fraction of what autocannon does (docs/performance.md). Each request exactly once, in corpus
 * order, over `connections` keep-alive connections on one wrk thread (bench/lib/wrk.lua).
 *
 * wrk reports answers by status, not by request, so this runner cannot call `onAnswer` per item:
 * when every answer had its expected status, every item is reported answered with it; otherwise the
 * mismatches are counted as errors (and no item is reported). BENCH_WRK_DEBUG=1 shows wrk's own
 * output (and any error of its script).
 */
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { type Item, isOpenApi } from './corpus.ts';
import type { LoadOptions, LoadResult } from './load.ts';

export function wrkAvailable(): boolean {
  const r = spawnSync('wrk', ['--version'], { encoding: 'utf8' });
  return r.error === undefined && /^wrk /m.test(`${r.stdout}${r.stderr}`);
}

export function rawRequest(it: Item, host: string): Buffer {
  const body = Buffer.from(it.body, 'utf8');
  let head = `${it.method} ${it.path} HTTP/1.1\r\nHost: ${host}\r\n`;
  for (const [k, v] of Object.entries(it.headers)) head += `${k}: ${v}\r\n`;
  const hasLength = Object.keys(it.headers).some((k) => k.toLowerCase() === 'content-length');
  if (!hasLength && (it.method === 'POST' || body.length > 0)) head += `Content-Length: ${body.length}\r\n`;
  return Buffer.concat([Buffer.from(`${head}\r\n`, 'latin1'), body]);
}

export async function runWrk(o: LoadOptions): Promise<LoadResult> {
  const url = new URL(o.url);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mps-wrk-'));
  const corpus = path.join(dir, 'corpus');
  const out = path.join(dir, 'out');
  try {
    const parts: Buffer[] = [];
    for (const it of o.items) {
      const raw = rawRequest(it, url.host);
      parts.push(Buffer.from(`${raw.length}\n`, 'latin1'), raw);
    }
    fs.writeFileSync(corpus, Buffer.concat(parts));
    const seconds = Math.max(1, Math.floor((o.deadlineMs - Date.now()) / 1000));
    const script = path.join(import.meta.dirname, 'wrk.lua');
    const connections = Math.max(1, Math.min(o.connections, o.items.length));
    const t0 = performance.now();
    const code = await new Promise<number>((resolve, reject) => {
      const child = spawn('wrk', ['-t', '1', '-c', String(connections), '-d', `${seconds}s`, '--timeout', '30s', '-s', script, o.url], {
        env: { ...process.env, BENCH_CORPUS: corpus, BENCH_OUT: out },
        stdio: ['ignore', process.env.BENCH_WRK_DEBUG ? 'inherit' : 'ignore', 'inherit'],
      });
      // All answered (the script's marker), or past the window: wrk reports when interrupted.
      const poll = setInterval(() => {
        if (fs.existsSync(`${out}.done`) || Date.now() > o.deadlineMs) child.kill('SIGINT');
      }, 5);
      child.on('error', (err) => {
        clearInterval(poll);
        reject(err);
      });
      child.on('exit', (c) => {
        clearInterval(poll);
        resolve(c ?? 0);
      });
    });
    const wall = (performance.now() - t0) / 1000;
    if (code !== 0 || !fs.existsSync(out)) throw new Error(`wrk exited with ${code}`);
    const kv = new Map<string, number>();
    const statuses: Record<string, number> = {};
    for (const line of fs.readFileSync(out, 'utf8').split('\n')) {
      const f = line.split(' ');
      if (f[0] === 'status') statuses[f[1]!] = Number(f[2]);
      else if (f.length === 2) kv.set(f[0]!, Number(f[1]));
    }
    const completed = Object.values(statuses).reduce((s, c) => s + c, 0);
    // Expected statuses as a multiset; answers cannot be matched to items one by one.
    const expected: Record<string, number> = {};
    for (const it of o.items) expected[it.expect] = (expected[it.expect] ?? 0) + 1;
    const unexpected: Record<string, number> = {};
    for (const [status, count] of Object.entries(statuses)) {
      const extra = count - (expected[status] ?? 0);
      if (extra > 0) unexpected[`(any) ${status}`] = extra;
    }
    if (Object.keys(unexpected).length === 0 && completed === o.items.length) {
      for (const it of o.items) o.onAnswer?.(it, it.expect, '', true);
    }
    const ms = (k: string) => (kv.get(k) ?? 0) / 1000;
    const socketErrors: Record<string, number> = {};
    for (const k of ['connect', 'read', 'write']) if ((kv.get(`errors_${k}`) ?? 0) > 0) socketErrors[k] = kv.get(`errors_${k}`)!;
    const secs = (kv.get('duration_us') ?? wall * 1e6) / 1e6;
    return {
      sent: Math.min(o.items.length, kv.get('requests') ?? completed),
      completed,
      seconds: secs,
      rps: completed / secs,
      latencyMs: {
        mean: ms('latency_mean'),
        p50: ms('latency_p50'),
        p90: ms('latency_p90'),
        p99: ms('latency_p99'),
        p999: ms('latency_p99.9'),
        max: ms('latency_max'),
      },
      statuses,
      socketErrors,
      timeouts: kv.get('errors_timeout') ?? 0,
      unexpected,
      // wrk counts per status, not per request: the answers of non-open-API requests (unsigned by design) are taken off.
      unsigned2xx: Math.max(0, (kv.get('unsigned2xx') ?? 0) - o.items.filter((it) => !isOpenApi(it.kind)).length),
      truncated: completed < o.items.length,
    };
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}
