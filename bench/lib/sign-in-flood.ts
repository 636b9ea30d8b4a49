/**
 * The sign-in flood of the `noisy` scenario (bench/lib/noisy.ts): console sign-ins with wrong
 * passwords at a fixed rate, open-loop, each from an address of its own and a name of its own, so
 * that neither the per-address nor the per-name throttle ever sees a second failure. The addresses
 * are loopback ones (127.1.0.0 onwards: Linux routes all of 127.0.0.0/8 to the loopback device, and
 * a socket may bind any of them), so the service judges each sign-in by a real source address and
 * needs no trusted proxy. Runs in a worker thread of its own (sign-in-flood-worker.ts); counts the
 * answers by status and their latency.
 */
import http from 'node:http';
import { Worker } from 'node:worker_threads';
import { latencyStats, type LatencyStats } from './load.ts';

export interface SignInFloodResult {
  rate: number;
  sent: number;
  statuses: Record<string, number>;
  errors: Record<string, number>;
  /** requests due while `maxInFlight` were already waiting: not sent */
  skipped: number;
  latencyMs: LatencyStats;
}

/** The n-th source address: 127.1.0.1 onwards, skipping .0 and .255 in the last byte. */
export function floodAddress(n: number): string {
  const k = Math.floor(n / 254);
  return `127.${1 + ((k >> 8) % 254)}.${k & 0xff}.${1 + (n % 254)}`;
}

export function signInFloodLoop(
  hostname: string,
  port: number,
  rate: number,
  maxInFlight: number,
): { stop(): void; done: Promise<SignInFloodResult> } {
  const statuses: Record<string, number> = {};
  const errors: Record<string, number> = {};
  const latencies: number[] = [];
  let sent = 0;
  let skipped = 0;
  let inFlight = 0;
  let stopped = false;
  let resolveDone!: (r: SignInFloodResult) => void;
  const done = new Promise<SignInFloodResult>((r) => (resolveDone = r));
  const t0 = performance.now();
  const finish = () => {
    if (stopped && inFlight === 0) {
      resolveDone({ rate, sent, statuses, errors, skipped, latencyMs: latencyStats(Float64Array.from(latencies)) });
    }
  };
  const one = (n: number) => {
    const body = JSON.stringify({ name: `flood-${process.pid}-${n}`, password: 'not the password, surely' });
    const started = performance.now();
    inFlight++;
    const req = http.request(
      {
        hostname,
        port,
        method: 'POST',
        path: '/console/api/session',
        localAddress: floodAddress(n),
        agent: false,
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), connection: 'close' },
        timeout: 60_000,
      },
      (res) => {
        res.resume();
        res.on('end', () => {
          statuses[res.statusCode!] = (statuses[res.statusCode!] ?? 0) + 1;
          latencies.push(performance.now() - started);
          inFlight--;
          finish();
        });
      },
    );
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', (err: NodeJS.ErrnoException) => {
      errors[err.code ?? err.message] = (errors[err.code ?? err.message] ?? 0) + 1;
      inFlight--;
      finish();
    });
    req.end(body);
    sent++;
  };
  let due = 0;
  const tick = () => {
    if (stopped) return;
    const shouldHave = Math.floor(((performance.now() - t0) / 1000) * rate);
    while (due < shouldHave) {
      if (inFlight >= maxInFlight) skipped++;
      else one(due);
      due++;
    }
    setTimeout(tick, 5);
  };
  tick();
  return {
    stop() {
      stopped = true;
      finish();
    },
    done,
  };
}

/** Starts the sign-in flood in its own thread; `stop()` ends it and returns the counts; then `generatorCpuMs()` is its thread's CPU. */
export function startSignInFlood(
  url: string,
  rate: number,
  maxInFlight = 256,
): { stop(): Promise<SignInFloodResult>; generatorCpuMs(): number | null } {
  const u = new URL(url);
  const w = new Worker(new URL('./sign-in-flood-worker.ts', import.meta.url), {
    workerData: { hostname: u.hostname, port: Number(u.port), rate, maxInFlight },
  });
  let cpuMs: number | null = null;
  const done = new Promise<SignInFloodResult>((resolve, reject) => {
    w.once('message', (r: { result: SignInFloodResult; cpuMs: number }) => {
      cpuMs = r.cpuMs;
      resolve(r.result);
    });
    w.once('error', reject);
  });
  return {
    stop() {
      w.postMessage('stop');
      return done.finally(() => void w.terminate());
    },
    generatorCpuMs: () => cpuMs,
  };
}
