/**
 * Open-loop load at a fixed rate: request i is due at start + i / rate, whatever happened to the
 * earlier ones, and its latency counts from when it was due (no coordinated omission). Used next to
 * autocannon's overallRate, which sends each connection's per-second quota back to back at the start
 * of every second (bursts of `connections` concurrent requests), so that the "half load" figure shows
 * the server's latency at an evenly spread half load too.
 */
import http from 'node:http';
import type { Item } from './corpus.ts';
import { type LoadResult, latencyStats } from './load.ts';

export function runPaced(o: {
  url: string;
  items: Item[];
  rate: number;
  maxSockets: number;
  deadlineMs: number;
  onAnswer?: (item: Item, status: number, body: string, signed: boolean) => void;
}): Promise<LoadResult> {
  const { items, rate } = o;
  const u = new URL(o.url);
  const agent = new http.Agent({ keepAlive: true, maxSockets: o.maxSockets });
  const latencies = new Float64Array(items.length);
  const statuses: Record<string, number> = {};
  const unexpected: Record<string, number> = {};
  const socketErrors: Record<string, number> = {};
  let unsigned2xx = 0;
  let nLat = 0;
  let sent = 0;
  let finished = 0;
  let last = 0;
  let truncated = false;
  return new Promise((resolve) => {
    const t0 = performance.now();
    const done = () => {
      agent.destroy();
      const seconds = ((last || performance.now()) - t0) / 1000;
      const completed = Object.values(statuses).reduce((s, n) => s + n, 0);
      resolve({
        sent,
        completed,
        seconds,
        rps: completed / seconds,
        latencyMs: latencyStats(latencies.subarray(0, nLat)),
        statuses,
        socketErrors,
        timeouts: 0,
        unexpected,
        unsigned2xx,
        truncated,
      });
    };
    const send = (i: number) => {
      const it = items[i]!;
      const due = t0 + (i * 1000) / rate;
      const req = http.request(
        {
          host: u.hostname,
          port: u.port,
          path: it.path,
          method: it.method,
          headers: { ...it.headers, 'Content-Length': String(Buffer.byteLength(it.body)) },
          agent,
          timeout: 30_000,
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => {
            const now = performance.now();
            last = now;
            latencies[nLat++] = now - due;
            const status = res.statusCode ?? 0;
            statuses[status] = (statuses[status] ?? 0) + 1;
            if (status !== it.expect) unexpected[`${it.kind} ${status}`] = (unexpected[`${it.kind} ${status}`] ?? 0) + 1;
            const signed = res.headers['x-svc-response-sign'] !== undefined;
            if (status >= 200 && status < 300 && !signed) unsigned2xx++;
            o.onAnswer?.(it, status, Buffer.concat(chunks).toString('utf8'), signed);
            if (++finished === sent && (sent === items.length || truncated)) done();
          });
        },
      );
      req.on('error', (err: Error & { code?: string }) => {
        const k = err.code ?? err.message;
        socketErrors[k] = (socketErrors[k] ?? 0) + 1;
        if (++finished === sent && (sent === items.length || truncated)) done();
      });
      req.on('timeout', () => req.destroy(Object.assign(new Error('timeout'), { code: 'TIMEOUT' })));
      req.end(it.body === '' ? undefined : it.body);
    };
    const tick = () => {
      if (Date.now() > o.deadlineMs) {
        truncated = true;
        if (finished === sent) done();
        return;
      }
      const due = Math.min(items.length, Math.floor(((performance.now() - t0) * rate) / 1000) + 1);
      while (sent < due) send(sent++);
      if (sent < items.length) setTimeout(tick, 1);
    };
    tick();
  });
}
