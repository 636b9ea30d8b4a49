/**
 * Loaded into the service process by the benchmark (NODE_OPTIONS=--import=<this file>); never
 * imported by src/. Over the IPC channel the benchmark opened it answers:
 *  - 'pg-stats': statements the service sent through node-postgres, by SQL text (count, total
 *    client-side milliseconds), and how many were durable commits (COMMIT, or a write outside
 *    BEGIN ... COMMIT, each of which is its own transaction);
 *  - 'memory': process.memoryUsage() in MB (where the resident memory is: V8 heap or elsewhere),
 *    optionally after a full garbage collection (what is live);
 *  - 'profile-start' / 'profile-stop' (with a file path): a V8 CPU profile of the service's main
 *    thread for one phase, through node:inspector (no restart, no --cpu-prof for the whole life).
 * Cost when not profiling: two Map lookups and two clock reads per statement.
 */
import fs from 'node:fs';
import { Session } from 'node:inspector';
import v8 from 'node:v8';
import { runInNewContext } from 'node:vm';
import pg from 'pg';

interface SqlStat {
  count: number;
  ms: number;
}

/** What a statement is, for the commit count: 0 other, 1 BEGIN, 2 COMMIT, 3 ROLLBACK, 4 a write. */
type Verb = 0 | 1 | 2 | 3 | 4;

interface Known {
  stat: SqlStat;
  verb: Verb;
}

/** By exact SQL text (the service builds the same texts again and again): normalized once. */
const known = new Map<string, Known>();
const stats = new Map<string, SqlStat>();
let durableCommits = 0;
let statements = 0;
const inTx = new WeakSet<object>();

/**
 * A statement that writes although it does not start with INSERT/UPDATE/DELETE: a WITH whose
 * parts write, or a call of one of the service's writing SQL functions (migrations/, `mps_*`).
 */
function isWritingStatement(text: string): boolean {
  return (
    (/^\s*WITH\b/i.test(text) && /\b(INSERT\s+INTO|UPDATE\s+\w+\s+SET|DELETE\s+FROM)\b/i.test(text)) || /^\s*SELECT\s+mps_/i.test(text)
  );
}

function classify(text: string): Known {
  const key = text.replace(/\s+/g, ' ').trim().slice(0, 160);
  let stat = stats.get(key);
  if (!stat) stats.set(key, (stat = { count: 0, ms: 0 }));
  const v = key.slice(0, 8).toUpperCase();
  const verb: Verb = v.startsWith('BEGIN')
    ? 1
    : v.startsWith('COMMIT')
      ? 2
      : v.startsWith('ROLLBACK')
        ? 3
        : /^(INSERT|UPDATE|DELETE)/.test(v) || isWritingStatement(text)
          ? 4
          : 0;
  const k = { stat, verb };
  if (known.size < 10_000) known.set(text, k);
  return k;
}

function record(client: object, text: string, ms: number): void {
  statements++;
  const k = known.get(text) ?? classify(text);
  k.stat.count++;
  k.stat.ms += ms;
  if (k.verb === 1) inTx.add(client);
  else if (k.verb === 2) {
    inTx.delete(client);
    durableCommits++;
  } else if (k.verb === 3) inTx.delete(client);
  else if (k.verb === 4 && !inTx.has(client)) durableCommits++;
}

type QueryFn = (this: object, ...args: unknown[]) => unknown;
const proto = pg.Client.prototype as unknown as { query: QueryFn };
const original = proto.query;
proto.query = function (this: object, ...args: unknown[]): unknown {
  const first = args[0];
  const text =
    typeof first === 'string' ? first : typeof (first as { text?: unknown })?.text === 'string' ? (first as { text: string }).text : '';
  const t0 = performance.now();
  const last = args.length - 1;
  if (typeof args[last] === 'function') {
    const cb = args[last] as (...a: unknown[]) => unknown;
    args[last] = (...a: unknown[]) => {
      record(this, text, performance.now() - t0);
      return cb(...a);
    };
    return original.apply(this, args);
  }
  const r = original.apply(this, args);
  if (r && typeof (r as Promise<unknown>).then === 'function') {
    (r as Promise<unknown>).then(
      () => record(this, text, performance.now() - t0),
      () => record(this, text, performance.now() - t0),
    );
  }
  return r;
};

let session: Session | null = null;

function post<T>(method: string, params?: object): Promise<T> {
  return new Promise((resolve, reject) => session!.post(method, params ?? {}, (err, res) => (err ? reject(err) : resolve(res as T))));
}

type Msg = { type: 'pg-stats' } | { type: 'memory'; gc?: boolean } | { type: 'profile-start' } | { type: 'profile-stop'; file: string };

process.on('message', (m: Msg) => {
  void (async () => {
    try {
      if (m.type === 'pg-stats') {
        process.send?.({
          type: 'pg-stats',
          statements,
          durableCommits,
          bySql: [...stats].map(([sql, s]) => ({ sql, count: s.count, ms: s.ms })),
        });
      } else if (m.type === 'memory') {
        if (m.gc) {
          // a full collection first: what is live, not what is waiting to be collected
          v8.setFlagsFromString('--expose-gc');
          (runInNewContext('gc') as () => void)();
        }
        const u = process.memoryUsage();
        const mb = (n: number) => Math.round((n / 2 ** 20) * 10) / 10;
        process.send?.({
          type: 'memory',
          rssMB: mb(u.rss),
          heapTotalMB: mb(u.heapTotal),
          heapUsedMB: mb(u.heapUsed),
          externalMB: mb(u.external),
          arrayBuffersMB: mb(u.arrayBuffers),
          heapSpacesMB: Object.fromEntries(
            v8.getHeapSpaceStatistics().map((x) => [x.space_name, { size: mb(x.space_size), used: mb(x.space_used_size) }]),
          ),
        });
      } else if (m.type === 'profile-start') {
        session = new Session();
        session.connect();
        await post('Profiler.enable');
        await post('Profiler.setSamplingInterval', { interval: 200 });
        await post('Profiler.start');
        process.send?.({ type: 'profile-started' });
      } else if (m.type === 'profile-stop') {
        const r = await post<{ profile: unknown }>('Profiler.stop');
        fs.writeFileSync(m.file, JSON.stringify(r.profile));
        session?.disconnect();
        session = null;
        process.send?.({ type: 'profile-stopped', file: m.file });
      }
    } catch (err) {
      process.send?.({ type: 'error', message: String(err) });
    }
  })();
});
// The channel must not keep the service alive, nor change how it stops.
process.channel?.unref();
