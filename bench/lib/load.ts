/**
 * Sends a signed corpus with autocannon, each request exactly once (`amount` = corpus size, the
 * next item taken in setupRequest), closed-loop over N connections or at a fixed overall rate.
 * Latency is recorded per response (not autocannon's 1 ms histogram); requests/s is completed
 * responses over the time from the start to the last response.
 */
import autocannon from 'autocannon';
import { type Item, isOpenApi } from './corpus.ts';

export interface LoadOptions {
  url: string;
  items: Item[];
  connections: number;
  overallRate?: number;
  /** epoch ms after which the corpus's timestamps age out of the 300 s window: stop before */
  deadlineMs: number;
  /** called for every answer (status, body) of item i */
  onAnswer?: (item: Item, status: number, body: string, signed: boolean) => void;
}

export interface LatencyStats {
  /** answers slower than 1 s (not known with wrk) */
  over1s?: number;
  mean: number;
  p50: number;
  p90: number;
  p99: number;
  p999: number;
  max: number;
}

export interface LoadResult {
  sent: number;
  completed: number;
  seconds: number;
  rps: number;
  latencyMs: LatencyStats;
  /** answers by HTTP status */
  statuses: Record<string, number>;
  /** socket errors (by code) and timeouts */
  socketErrors: Record<string, number>;
  timeouts: number;
  /** answers whose status was not the expected one, by kind and status */
  unexpected: Record<string, number>;
  /** 2xx answers without X-SVC-Response-Sign */
  unsigned2xx: number;
  truncated: boolean;
  /** Paced phases: the slowest latency of the requests due in each second of the phase (ms), to see when the slow ones came. */
  worstBySecondMs?: number[];
}

export function latencyStats(values: Float64Array): LatencyStats {
  const a = Float64Array.from(values).sort();
  const q = (p: number) => (a.length === 0 ? 0 : a[Math.min(a.length - 1, Math.ceil(p * a.length) - 1)]!);
  let sum = 0;
  for (const v of a) sum += v;
  let over1s = 0;
  for (let i = a.length - 1; i >= 0 && a[i]! > 1000; i--) over1s++;
  return {
    over1s,
    mean: a.length ? sum / a.length : 0,
    p50: q(0.5),
    p90: q(0.9),
    p99: q(0.99),
    p999: q(0.999),
    max: a.length ? a[a.length - 1]! : 0,
  };
}

export function runLoad(o: LoadOptions): Promise<LoadResult> {
  const { items } = o;
  const connections = Math.max(1, Math.min(o.connections, items.length, o.overallRate ?? Infinity));
  const latencies = new Float64Array(items.length);
  let nLat = 0;
  let next = 0;
  let last = 0;
  const statuses: Record<string, number> = {};
  const unexpected: Record<string, number> = {};
  const socketErrors: Record<string, number> = {};
  let unsigned2xx = 0;
  let truncated = false;
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const instance = autocannon(
      {
        url: o.url,
        connections,
        amount: items.length,
        timeout: 30,
        ...(o.overallRate ? { overallRate: o.overallRate } : {}),
        requests: [
          {
            setupRequest(req, context) {
              const i = next++;
              const it = items[i];
              if (!it) return null; // cannot happen: amount = items.length
              context.i = i;
              req.method = it.method;
              req.path = it.path;
              req.headers = it.headers;
              req.body = it.body;
              return req;
            },
            onResponse(status, body, context, headers) {
              const it = items[context.i as number]!;
              statuses[status] = (statuses[status] ?? 0) + 1;
              if (status !== it.expect) {
                const k = `${it.kind} ${status}`;
                unexpected[k] = (unexpected[k] ?? 0) + 1;
              }
              const signed = headers['X-SVC-Response-Sign'] !== undefined || headers['x-svc-response-sign'] !== undefined;
              if (status >= 200 && status < 300 && !signed && isOpenApi(it.kind)) unsigned2xx++;
              o.onAnswer?.(it, status, body, signed);
            },
          },
        ],
      },
      (err, result) => {
        clearInterval(guard);
        if (err) return reject(err);
        const seconds = ((last || performance.now()) - t0) / 1000;
        const completed = Object.values(statuses).reduce((s, n) => s + n, 0);
        resolve({
          sent: next,
          completed,
          seconds,
          rps: completed / seconds,
          latencyMs: latencyStats(latencies.subarray(0, nLat)),
          statuses,
          socketErrors,
          timeouts: result.timeouts,
          unexpected,
          unsigned2xx,
          truncated,
        });
      },
    );
    instance.on('response', (_client: unknown, _status: number, _bytes: number, ms: number) => {
      if (nLat < latencies.length) latencies[nLat++] = ms;
      last = performance.now();
    });
    instance.on('reqError', (err: Error & { code?: string }) => {
      const k = err.code ?? err.message;
      if (k === 'request timed out') return; // counted as a timeout
      socketErrors[k] = (socketErrors[k] ?? 0) + 1;
    });
    // The corpus must be spent while its timestamps are inside the server's window.
    const guard = setInterval(() => {
      if (Date.now() > o.deadlineMs) {
        truncated = true;
        instance.stop();
      }
    }, 250);
  });
}
