/**
 * Open-loop load at a fixed rate: request i is due at start + i / rate, whatever happened to the
 * earlier ones, and its latency counts from when it was due (no coordinated omission). Used next to
 * autocannon's overallRate, which sends each connection's per-second quota back to back at the start
 * of every second (bursts of `connections` concurrent requests), so that the "half load" figure shows
 * the server's latency at an evenly spread half load too.
 *
 * It writes the pre-built raw HTTP/1.1 requests (the bytes wrk sends) on plain keep-alive sockets,
 * one request in flight per socket, and reads the answers with a minimal parser (status line,
 * Content-Length, chunked bodies, the response-signature header). node:http's client cost
 * 0.5-0.7 ms of CPU per request here, taken from the two cores the service runs on; this costs a
 * fraction of that. A request due while every socket is busy waits for the first free one (or a
 * new socket, up to `maxSockets`), and its wait counts in its latency.
 */
import net from 'node:net';
import { Worker } from 'node:worker_threads';
import { type Item, isOpenApi } from './corpus.ts';
import { type LoadResult, latencyStats } from './load.ts';
import { rawRequest } from './wrk.ts';

interface Conn {
  socket: net.Socket;
  /** index of the item in flight, -1 when idle */
  current: number;
  buf: Buffer;
  connected: boolean;
}

interface Parsed {
  status: number;
  signed: boolean;
  body: Buffer;
  /** bytes of buf this answer used */
  used: number;
  close: boolean;
}

const HEAD_END = Buffer.from('\r\n\r\n');

/** One complete answer at the start of buf, or null when more bytes are needed. Throws on garbage. */
export function parseAnswer(buf: Buffer): Parsed | null {
  const headEnd = buf.indexOf(HEAD_END);
  if (headEnd < 0) {
    if (buf.length > 65_536) throw new Error('answer head over 64 KiB');
    return null;
  }
  const lines = buf.toString('latin1', 0, headEnd).split('\r\n');
  const m = /^HTTP\/1\.[01] (\d{3})/.exec(lines[0]!);
  if (!m) throw new Error(`bad status line: ${lines[0]}`);
  let length = -1;
  let chunked = false;
  let signed = false;
  let close = false;
  for (let i = 1; i < lines.length; i++) {
    const line = lines[i]!;
    const c = line.indexOf(':');
    const name = line.slice(0, c).trim().toLowerCase();
    const value = line.slice(c + 1).trim();
    if (name === 'content-length') length = Number(value);
    else if (name === 'transfer-encoding') chunked = value.toLowerCase().includes('chunked');
    else if (name === 'x-svc-response-sign') signed = true;
    else if (name === 'connection') close = value.toLowerCase() === 'close';
  }
  const start = headEnd + 4;
  if (chunked) {
    const parts: Buffer[] = [];
    let at = start;
    for (;;) {
      const eol = buf.indexOf('\r\n', at);
      if (eol < 0) return null;
      const size = parseInt(buf.toString('latin1', at, eol), 16);
      if (!Number.isFinite(size)) throw new Error('bad chunk size');
      if (buf.length < eol + 2 + size + 2) return null;
      if (size === 0) return { status: Number(m[1]), signed, body: Buffer.concat(parts), used: eol + 4, close };
      parts.push(buf.subarray(eol + 2, eol + 2 + size));
      at = eol + 2 + size + 2;
    }
  }
  if (length < 0) length = 0;
  if (buf.length < start + length) return null;
  return { status: Number(m[1]), signed, body: buf.subarray(start, start + length), used: start + length, close };
}

/** One paced run as the worker thread receives it: the raw requests back to back, and what each expects. */
export interface PacedJob {
  hostname: string;
  port: number;
  /** the raw requests, back to back; request i is raw[offsets[i], offsets[i + 1]) */
  raw: Uint8Array;
  offsets: number[];
  expect: number[];
  kinds: string[];
  rate: number;
  maxSockets: number;
  deadlineMs: number;
}

/**
 * Runs a paced phase in a worker thread of its own, so that the latencies it measures never include
 * a pause of this process: its main thread holds the whole signed corpus, and its major garbage
 * collections (6-15 ms, every second or two under load) would delay the requests due meanwhile and
 * count as the service's latency (docs/performance.md, "The benchmark's own design"). Answers come
 * back in batches for `onAnswer`, in the order they arrived, all of them before the result.
 */
export function runPaced(o: {
  url: string;
  items: Item[];
  rate: number;
  maxSockets: number;
  deadlineMs: number;
  onAnswer?: (item: Item, status: number, body: string, signed: boolean) => void;
}): Promise<LoadResult> {
  const u = new URL(o.url);
  const raws = o.items.map((it) => rawRequest(it, u.host));
  const offsets = [0];
  for (const r of raws) offsets.push(offsets[offsets.length - 1]! + r.length);
  const raw = new Uint8Array(new ArrayBuffer(offsets[offsets.length - 1]!));
  raws.forEach((r, i) => raw.set(r, offsets[i]!));
  const job: PacedJob = {
    hostname: u.hostname,
    port: Number(u.port),
    raw,
    offsets,
    expect: o.items.map((it) => it.expect),
    kinds: o.items.map((it) => it.kind),
    rate: o.rate,
    maxSockets: o.maxSockets,
    deadlineMs: o.deadlineMs,
  };
  return new Promise((resolve, reject) => {
    const w = new Worker(new URL('./paced-worker.ts', import.meta.url), {
      workerData: { job, wantAnswers: o.onAnswer !== undefined },
      transferList: [raw.buffer],
    });
    let result: LoadResult | null = null;
    w.on('message', (m: PacedMessage) => {
      if ('answers' in m) for (const [i, status, body, signed] of m.answers) o.onAnswer?.(o.items[i]!, status, body, signed);
      else result = m.result;
    });
    w.once('error', reject);
    w.once('exit', (code) =>
      result ? resolve(result) : reject(new Error(`the paced load worker exited (code ${code}) without a result`)),
    );
  });
}

/** What the worker sends: answers (index, status, body, signed), then the result. */
export type PacedMessage = { answers: [number, number, string, boolean][] } | { result: LoadResult };

/** The paced load itself (in the worker thread). */
export function pacedLoop(
  job: PacedJob,
  onAnswer?: (i: number, status: number, body: Buffer, signed: boolean) => void,
): Promise<LoadResult> {
  const { rate } = job;
  const n = job.expect.length;
  const raws = Array.from({ length: n }, (_, i) => job.raw.subarray(job.offsets[i]!, job.offsets[i + 1]!));
  const latencies = new Float64Array(n);
  const dueAt = new Float64Array(n);
  const statuses: Record<string, number> = {};
  const unexpected: Record<string, number> = {};
  const socketErrors: Record<string, number> = {};
  const conns = new Set<Conn>();
  const idle: Conn[] = [];
  const waiting: number[] = [];
  let waitingAt = 0;
  let unsigned2xx = 0;
  let nLat = 0;
  let released = 0;
  let finished = 0;
  let last = 0;
  let truncated = false;
  let resolved = false;
  const worstBySecond: number[] = [];

  return new Promise((resolve) => {
    const t0 = performance.now();
    const done = () => {
      if (resolved) return;
      resolved = true;
      clearTimeout(deadline);
      for (const c of conns) c.socket.destroy();
      const seconds = ((last || performance.now()) - t0) / 1000;
      const completed = Object.values(statuses).reduce((s, n) => s + n, 0);
      resolve({
        sent: released,
        completed,
        seconds,
        rps: completed / seconds,
        latencyMs: latencyStats(latencies.subarray(0, nLat)),
        worstBySecondMs: worstBySecond.map((v) => Math.round(v * 10) / 10),
        statuses,
        socketErrors,
        timeouts: 0,
        unexpected,
        unsigned2xx,
        truncated,
      });
    };
    const maybeDone = () => {
      if (finished === released && (released === n || truncated)) done();
    };
    const finish = () => {
      finished++;
      maybeDone();
    };
    const failed = (code: string) => {
      socketErrors[code] = (socketErrors[code] ?? 0) + 1;
      finish();
    };
    const answered = (i: number, p: Parsed) => {
      const now = performance.now();
      last = now;
      latencies[nLat++] = now - dueAt[i]!;
      const second = Math.max(0, Math.floor((dueAt[i]! - t0) / 1000));
      while (worstBySecond.length <= second) worstBySecond.push(0);
      worstBySecond[second] = Math.max(worstBySecond[second]!, now - dueAt[i]!);
      statuses[p.status] = (statuses[p.status] ?? 0) + 1;
      if (p.status !== job.expect[i]) unexpected[`${job.kinds[i]} ${p.status}`] = (unexpected[`${job.kinds[i]} ${p.status}`] ?? 0) + 1;
      if (p.status >= 200 && p.status < 300 && !p.signed && isOpenApi(job.kinds[i]!)) unsigned2xx++;
      onAnswer?.(i, p.status, p.body, p.signed);
      finish();
    };
    const dispatch = (c: Conn) => {
      if (waitingAt < waiting.length) {
        const i = waiting[waitingAt++]!;
        if (waitingAt > 4096 && waitingAt * 2 > waiting.length) {
          waiting.splice(0, waitingAt);
          waitingAt = 0;
        }
        c.current = i;
        c.socket.write(raws[i]!);
      } else {
        c.current = -1;
        idle.push(c);
      }
    };
    const open = () => {
      const c: Conn = {
        socket: net.connect({ host: job.hostname, port: job.port, noDelay: true }),
        current: -1,
        buf: Buffer.alloc(0),
        connected: false,
      };
      conns.add(c);
      c.socket.setTimeout(30_000);
      c.socket.on('connect', () => {
        c.connected = true;
        dispatch(c);
      });
      c.socket.on('data', (chunk: Buffer) => {
        c.buf = c.buf.length === 0 ? chunk : Buffer.concat([c.buf, chunk]);
        for (;;) {
          let p: Parsed | null;
          try {
            p = parseAnswer(c.buf);
          } catch {
            c.socket.destroy(Object.assign(new Error('bad answer'), { code: 'BAD_ANSWER' }));
            return;
          }
          if (p === null) return;
          c.buf = c.buf.subarray(p.used);
          const i = c.current;
          if (i < 0) {
            c.socket.destroy(Object.assign(new Error('answer without request'), { code: 'UNSOLICITED' }));
            return;
          }
          c.current = -1;
          answered(i, p);
          if (p.close) {
            c.socket.destroy();
            return;
          }
          dispatch(c);
        }
      });
      c.socket.on('timeout', () => c.socket.destroy(Object.assign(new Error('timeout'), { code: 'TIMEOUT' })));
      c.socket.on('error', () => {});
      c.socket.on('close', () => {
        conns.delete(c);
        const k = idle.indexOf(c);
        if (k >= 0) idle.splice(k, 1);
        const code = (c.socket.errored as (Error & { code?: string }) | null)?.code ?? 'ECONNRESET';
        if (!c.connected) {
          // Could not connect: the request waiting longest fails with the error (as node:http's
          // client fails a request whose socket cannot connect), so retries are bounded by the
          // requests left and a dead server ends the run instead of a reconnect loop.
          if (waitingAt < waiting.length) {
            waitingAt++;
            failed(code);
          } else {
            socketErrors[code] = (socketErrors[code] ?? 0) + 1;
          }
        } else if (c.current >= 0) {
          c.current = -1;
          failed((c.socket.errored as (Error & { code?: string }) | null)?.code ?? 'ECONNRESET');
        }
        // requests still waiting get a new socket
        if (!resolved && waitingAt < waiting.length && conns.size < job.maxSockets) open();
      });
    };
    const release = (i: number) => {
      dueAt[i] = t0 + (i * 1000) / rate;
      waiting.push(i);
      const c = idle.pop();
      if (c) dispatch(c);
      else if (conns.size < job.maxSockets) open();
    };
    const stop = () => {
      truncated = true;
      // requests not yet on a socket are never sent
      released -= waiting.length - waitingAt;
      waiting.length = 0;
      waitingAt = 0;
      maybeDone();
    };
    // The deadline (the only place it is checked): no request is released after it, also once the
    // last one was released (answers still outstanding then end by their sockets' 30 s timeout).
    const deadline = setTimeout(
      () => {
        if (!resolved && (released < n || waitingAt < waiting.length)) stop();
      },
      Math.max(0, job.deadlineMs - Date.now()),
    );
    deadline.unref();
    const tick = () => {
      if (resolved || truncated) return; // the deadline timer stopped the run
      const due = Math.min(n, Math.floor(((performance.now() - t0) * rate) / 1000) + 1);
      while (released < due) release(released++);
      if (released < n) setTimeout(tick, 1);
    };
    if (n === 0) done();
    else tick();
  });
}
