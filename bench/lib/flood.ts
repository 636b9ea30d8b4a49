/**
 * The flood of the `flood` scenario (issue 28 item 5): connections that send the service expensive
 * or hostile inputs, as fast as it answers, while the paced sender measures valid requests. Runs in
 * a worker thread of its own (flood-worker.ts); each kind keeps its connections busy until stopped:
 *  - deep-json: a create whose body is an array nested 20,000-32,000 deep (< 64 KB), keep-alive;
 *  - big-headers: a request with a ~200 KB header; long-path: a ~100 KB path;
 *  - garbage: 4 KB of random bytes;
 *  - slow-body: a create whose body (4 KB announced) comes one byte every 250 ms;
 *  - slow-headers: a request whose header line never ends, one byte every 250 ms.
 * Counted per kind: requests sent, answers by status, connections the server closed without
 * answering, socket errors, and for the slow kinds how long the server held them.
 */
import { randomBytes } from 'node:crypto';
import net from 'node:net';
import { Worker } from 'node:worker_threads';
import { parseAnswer } from './paced.ts';

export interface FloodKindStats {
  connections: number;
  sent: number;
  statuses: Record<string, number>;
  closedWithoutAnswer: number;
  errors: Record<string, number>;
  /** slow kinds: the longest time from connect to the server's close, ms */
  maxHeldMs: number;
  /** connections still open when the flood stopped, and the age of the oldest, ms */
  openAtStop: number;
  oldestAtStopMs: number;
}

export type FloodResult = Record<string, FloodKindStats>;

interface Kind {
  name: string;
  connections: number;
  /** the request, or (slow kinds) its beginning */
  head: Buffer;
  /** slow kinds: one byte every this many ms after `head` */
  trickleMs?: number;
  /** keep the connection for the next request after an answer */
  keepAlive?: boolean;
}

const OPEN = '/api/open/v1';

function kinds(host: string): Kind[] {
  const deep = (d: number) => Buffer.from(`${'['.repeat(d)}${']'.repeat(d)}`);
  const post = (body: Buffer) =>
    Buffer.concat([
      Buffer.from(
        `POST ${OPEN}/payments HTTP/1.1\r\nHost: ${host}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`,
      ),
      body,
    ]);
  return [
    { name: 'deep-json', connections: 2, head: post(deep(20_000 + Math.floor(Math.random() * 12_000))), keepAlive: true },
    {
      name: 'big-headers',
      connections: 1,
      head: Buffer.from(`GET ${OPEN}/payments/T_00001 HTTP/1.1\r\nHost: ${host}\r\nX-Pad: ${'a'.repeat(200_000)}\r\n\r\n`),
    },
    {
      name: 'long-path',
      connections: 1,
      head: Buffer.from(`GET ${OPEN}/payments/${'a'.repeat(100_000)} HTTP/1.1\r\nHost: ${host}\r\n\r\n`),
    },
    { name: 'garbage', connections: 1, head: randomBytes(4096) },
    {
      name: 'slow-body',
      connections: 20,
      head: Buffer.from(
        `POST ${OPEN}/payments HTTP/1.1\r\nHost: ${host}\r\nContent-Type: application/json\r\nContent-Length: 4096\r\n\r\n`,
      ),
      trickleMs: 250,
    },
    {
      name: 'slow-headers',
      connections: 20,
      head: Buffer.from(`GET ${OPEN}/payments/T_00001 HTTP/1.1\r\nHost: ${host}\r\nX-Slow: `),
      trickleMs: 250,
    },
  ];
}

/** The flood itself (in the worker thread): runs until `stop()`; `done` then resolves with the counts. */
export function floodLoop(hostname: string, port: number): { stop(): void; done: Promise<FloodResult> } {
  const result: FloodResult = {};
  /** the connect time of each open connection, by kind */
  const alive = new Map<string, Map<net.Socket, number>>();
  let open = 0;
  let isStopped = false;
  const stopped = () => isStopped;
  let resolveDone: (r: FloodResult) => void = () => {};
  const done = new Promise<FloodResult>((resolve) => (resolveDone = resolve));
  const stop = () => {
    isStopped = true;
    const now = performance.now();
    for (const [k, set] of alive) {
      result[k]!.openAtStop = set.size;
      result[k]!.oldestAtStopMs = set.size ? now - Math.min(...set.values()) : 0;
    }
    if (open === 0) resolveDone(result);
  };
  {
    const finishIfDone = () => {
      if (stopped() && open === 0) resolveDone(result);
    };
    for (const k of kinds(`${hostname}:${port}`)) {
      const st: FloodKindStats = {
        connections: k.connections,
        sent: 0,
        statuses: {},
        closedWithoutAnswer: 0,
        errors: {},
        maxHeldMs: 0,
        openAtStop: 0,
        oldestAtStopMs: 0,
      };
      result[k.name] = st;
      const mine = new Map<net.Socket, number>();
      alive.set(k.name, mine);
      const connect = () => {
        if (stopped()) return finishIfDone();
        open++;
        const t0 = performance.now();
        const s = net.connect({ host: hostname, port, noDelay: true });
        mine.set(s, t0);
        let buf = Buffer.alloc(0);
        let waiting = false;
        let trickle: NodeJS.Timeout | undefined;
        const send = () => {
          st.sent++;
          waiting = true;
          s.write(k.head);
          if (k.trickleMs) trickle = setInterval(() => (stopped() ? s.destroy() : s.write('a')), k.trickleMs);
        };
        s.on('connect', send);
        s.on('data', (chunk: Buffer) => {
          buf = Buffer.concat([buf, chunk]);
          for (;;) {
            let p;
            try {
              p = parseAnswer(buf);
            } catch {
              st.errors.BAD_ANSWER = (st.errors.BAD_ANSWER ?? 0) + 1;
              s.destroy();
              return;
            }
            if (!p) return;
            buf = buf.subarray(p.used);
            waiting = false;
            st.statuses[p.status] = (st.statuses[p.status] ?? 0) + 1;
            if (!k.keepAlive || p.close || stopped()) {
              s.destroy();
              return;
            }
            send();
          }
        });
        s.on('error', (err: Error & { code?: string }) => {
          const c = err.code ?? 'ERROR';
          st.errors[c] = (st.errors[c] ?? 0) + 1;
        });
        s.on('close', () => {
          clearInterval(trickle);
          mine.delete(s);
          open--;
          if (waiting && !stopped()) st.closedWithoutAnswer++;
          if (k.trickleMs && !stopped()) st.maxHeldMs = Math.max(st.maxHeldMs, performance.now() - t0);
          connect();
        });
      };
      for (let i = 0; i < k.connections; i++) connect();
    }
  }
  return { stop, done };
}

/** Starts the flood in its own thread; `stop()` ends it and returns the counts; then `generatorCpuMs()` is its thread's CPU. */
export function startFlood(url: string): { stop(): Promise<FloodResult>; generatorCpuMs(): number | null } {
  const u = new URL(url);
  const w = new Worker(new URL('./flood-worker.ts', import.meta.url), { workerData: { hostname: u.hostname, port: Number(u.port) } });
  let cpuMs: number | null = null;
  const done = new Promise<FloodResult>((resolve, reject) => {
    w.once('message', (r: { result: FloodResult; cpuMs: number }) => {
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
