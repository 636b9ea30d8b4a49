/**
 * The failover drill (docs/high-availability.md): a pg_auto_failover cluster, two service
 * instances on it, a load of creates, payments, refunds and closes with notifications flowing;
 * then, in turn, the primary's machine killed (SIGKILL to its keeper, postmaster and backends) and
 * the old primary brought back as the standby, and planned switchovers. Afterwards it checks that
 * nothing acknowledged was lost, nothing was doubled, no refund went above the amount paid and
 * every final state was notified once, and reports per drill the seconds without service and the
 * requests answered 503.
 *
 *   npm run ha:drill -- [--failovers 5] [--switchovers 5] [--json file]
 */
import { type ChildProcess, spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { merchantKeyPair, orderBody, requestId, signedHeaders, type Merchant } from '../../test/helpers/app.ts';
import { HaCluster } from './cluster.ts';

const root = path.resolve(import.meta.dirname, '../..');
const TOKEN = 'ha-drill-admin-token-0123456789';
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

export interface DrillOptions {
  failovers: number;
  switchovers: number;
  dir: string;
  basePort: number;
  /** Concurrent merchants' clients driving the load. */
  clients: number;
  /** Load before the first drill and between drills, ms. */
  calmMs: number;
  log: (line: string) => void;
}

export interface OneDrill {
  kind: 'failover' | 'switchover';
  n: number;
  /** The longest time without a create answered 2xx, from before the kill (or the switchover) to after the promotion. */
  secondsWithoutService: number;
  /** The monitor's promotion, seconds after the kill (switchover: the command's duration). */
  promotedAfterSeconds: number;
  answered503: number;
  /** Requests that got no answer (a connection refused or reset): none expected. */
  unanswered: number;
  /** The slowest 503, ms: a 503 is quick, not a hang. */
  slowest503Ms: number;
}

export interface DrillReport {
  drills: OneDrill[];
  acknowledged: { orders: number; payments: number; refunds: number; closes: number };
  events: { written: number; received: number };
  problems: string[];
}

interface Instance {
  base: string;
  child: ChildProcess;
}

/** What a client saw: every answer, to measure the outage. */
interface Sample {
  sentAt: number;
  at: number;
  status: number; // 0: no answer
}

export async function runDrill(o: DrillOptions): Promise<DrillReport> {
  const cluster = new HaCluster(path.join(o.dir, 'cluster'), o.basePort);
  const problems: string[] = [];
  const samples: Sample[] = [];
  const instances: Instance[] = [];
  const received = new Map<string, { eventType: string; openOrderId: string; outRefundNo: string | null; times: number }>();
  const receiver = http.createServer((req, res) => {
    let body = '';
    req.on('data', (d) => (body += d));
    req.on('end', () => {
      try {
        const e = JSON.parse(body) as { eventId: string; eventType: string; openOrderId: string; outRefundNo?: string | null };
        const seen = received.get(e.eventId);
        if (seen) seen.times++;
        else received.set(e.eventId, { eventType: e.eventType, openOrderId: e.openOrderId, outRefundNo: e.outRefundNo ?? null, times: 1 });
      } catch {
        /* not ours */
      }
      res.writeHead(200).end('ok');
    });
  });
  await new Promise<void>((r) => receiver.listen(o.basePort + 20, '127.0.0.1', r));
  const t0 = Date.now();
  const log = (s: string) => o.log(`[${((Date.now() - t0) / 1000).toFixed(1)} s] ${s}`);
  try {
    log('cluster up');
    await cluster.up();
    for (let i = 0; i < 2; i++) instances.push(await startService(o, cluster.databaseUrl, i));
    log(`service instances ${instances.map((x) => x.base).join(', ')}`);
    const m = await provision(instances[0]!, `http://127.0.0.1:${o.basePort + 20}/notify`);

    const acked = {
      orders: new Map<string, string>(),
      payments: new Set<string>(),
      refunds: new Map<string, number>(),
      closes: new Set<string>(),
    };
    let running = true;
    const drive = async (c: number) => {
      let k = c;
      while (running) {
        const inst = () => instances[k++ % instances.length]!;
        const body = orderBody({ amountFen: 1000 });
        const outTradeNo = String(body.outTradeNo);
        // A merchant's retry: the same request id and body, on either instance.
        const rid = requestId();
        const created = await untilAnswered(() => open(inst(), m, 'POST', '/api/open/v1/payments', body, rid), samples, true);
        if (created === null) continue;
        if (created.status !== 201 && created.status !== 200) {
          problems.push(`create ${outTradeNo}: ${created.status} ${JSON.stringify(created.body)}`);
          continue;
        }
        const openOrderId = String(created.body.openOrderId);
        acked.orders.set(outTradeNo, openOrderId);
        const roll = Math.random();
        if (roll < 0.3) {
          const closed = await untilAnswered(() => open(inst(), m, 'POST', `/api/open/v1/payments/${outTradeNo}/close`), samples);
          if (closed?.status === 200) acked.closes.add(outTradeNo);
          else if (closed) problems.push(`close ${outTradeNo}: ${closed.status} ${JSON.stringify(closed.body)}`);
        } else if (roll < 0.9) {
          const paid = await untilAnswered(() => admin(inst(), 'POST', `/api/sandbox/v1/payments/${openOrderId}/pay`, {}), samples);
          if (paid?.status !== 200) {
            // A payment whose answer was lost may have happened: the order says.
            const q = await untilAnswered(() => open(inst(), m, 'GET', `/api/open/v1/payments/${outTradeNo}`), samples);
            if (q?.body.status !== 'SUCCEEDED') continue;
          }
          acked.payments.add(outTradeNo);
          if (Math.random() < 0.6) {
            for (const [i, amount] of [400, 600].entries()) {
              const outRefundNo = `RF${i}_${outTradeNo}`;
              const rrid = requestId();
              const rf = await untilAnswered(
                () => open(inst(), m, 'POST', '/api/open/v1/refunds', { outTradeNo, outRefundNo, refundAmountFen: amount }, rrid),
                samples,
              );
              if (rf !== null && rf.status >= 200 && rf.status < 300) acked.refunds.set(outRefundNo, amount);
              else if (rf) problems.push(`refund ${outRefundNo}: ${rf.status} ${JSON.stringify(rf.body)}`);
            }
          }
        }
      }
    };
    const clients = Array.from({ length: o.clients }, (_, c) => drive(c));
    await sleep(o.calmMs);

    const drills: OneDrill[] = [];
    const plan: ('failover' | 'switchover')[] = [
      ...Array<'failover'>(o.failovers).fill('failover'),
      ...Array<'switchover'>(o.switchovers).fill('switchover'),
    ];
    for (const [i, kind] of plan.entries()) {
      const before = cluster.primary();
      if (before === null) throw new Error(`no primary before drill ${i + 1}`);
      const start = Date.now();
      let promotedAt: number;
      if (kind === 'failover') {
        log(`failover ${i + 1}: kill -9 ${before}`);
        cluster.kill(before);
        for (;;) {
          const p = cluster.primary();
          if (p !== null && p !== before) break;
          if (Date.now() - start > 120_000) throw new Error('no promotion within 120 s');
          await sleep(100);
        }
        promotedAt = Date.now();
      } else {
        log(`switchover ${i + 1}: from ${before}`);
        await cluster.switchover();
        promotedAt = Date.now();
      }
      const back = await firstSuccessAfter(samples, promotedAt, 60_000);
      const d = measure(kind, i + 1, samples, start, back, promotedAt);
      drills.push(d);
      log(
        `  promoted after ${d.promotedAfterSeconds} s, service back after ${d.secondsWithoutService} s, ${d.answered503} answered 503, ${d.unanswered} unanswered`,
      );
      if (kind === 'failover') {
        cluster.rejoin(before);
        await cluster.waitHealthy(180_000);
        log(`  ${before} back as the standby`);
      } else await cluster.waitHealthy(180_000);
      await sleep(o.calmMs);
    }

    running = false;
    await Promise.all(clients);
    log(
      `load stopped: ${acked.orders.size} orders, ${acked.payments.size} paid, ${acked.refunds.size} refunds, ${acked.closes.size} closes acknowledged`,
    );

    // Everything settles: refunds final, every event delivered.
    const db = new pg.Client({ connectionString: cluster.urlOf(cluster.primary()!) });
    await db.connect();
    try {
      const settled = async () => {
        const r = await db.query<{ n: string }>(
          `SELECT (SELECT count(*) FROM events WHERE app_id = $1 AND status <> 'DELIVERED')
                + (SELECT count(*) FROM refunds WHERE app_id = $1 AND state NOT IN ('SUCCEEDED', 'FAILED')) AS n`,
          [m.appId],
        );
        return Number(r.rows[0]!.n) === 0;
      };
      const until = Date.now() + 120_000;
      while (!(await settled()) && Date.now() < until) await sleep(500);
      if (!(await settled())) {
        // What is left, for whoever reads the failure: each unsettled event and refund, with its follow-up job.
        const left = await db.query(
          `SELECT 'event' AS kind, e.id, e.status AS state, e.event_type AS detail, e.attempts::text AS n, e.next_attempt_at::text AS at
             FROM events e WHERE e.app_id = $1 AND e.status <> 'DELIVERED'
           UNION ALL
           SELECT 'refund', r.id, r.state, coalesce(r.failure_reason, '') || ' jobs: ' ||
                  coalesce((SELECT string_agg(j.kind || '@' || j.run_at::text || ' ' || coalesce(j.locked_by, '-'), ', ')
                              FROM jobs j WHERE j.subject_id = r.id), 'none'), '', r.updated_at::text
             FROM refunds r WHERE r.app_id = $1 AND r.state NOT IN ('SUCCEEDED', 'FAILED') LIMIT 20`,
          [m.appId],
        );
        problems.push(`events or refunds still unsettled 120 s after the load stopped: ${JSON.stringify(left.rows)}`);
      }
      await sleep(1500); // the last deliveries' answers

      // Nothing acknowledged lost.
      const orders = new Map(
        (
          await db.query<{ out_trade_no: string; id: string; status: string; amount_fen: number }>(
            `SELECT out_trade_no, id, status, amount_fen FROM orders WHERE app_id = $1`,
            [m.appId],
          )
        ).rows.map((r) => [r.out_trade_no, r]),
      );
      for (const [no, id] of acked.orders) {
        const row = orders.get(no);
        if (!row) problems.push(`acknowledged order ${no} lost`);
        else if (row.id !== id) problems.push(`order ${no} answered ${id} but is ${row.id}`);
      }
      for (const no of acked.payments)
        if (orders.get(no)?.status !== 'SUCCEEDED') problems.push(`paid order ${no} is ${orders.get(no)?.status}`);
      for (const no of acked.closes)
        if (orders.get(no)?.status !== 'CLOSED') problems.push(`closed order ${no} is ${orders.get(no)?.status}`);
      const refunds = new Map(
        (
          await db.query<{ out_refund_no: string; amount_fen: number }>(
            `SELECT out_refund_no, amount_fen FROM refunds WHERE app_id = $1 AND NOT automatic`,
            [m.appId],
          )
        ).rows.map((r) => [r.out_refund_no, r]),
      );
      for (const [no, amount] of acked.refunds) {
        if (refunds.get(no)?.amount_fen !== amount) problems.push(`acknowledged refund ${no} lost or changed`);
      }
      // Nothing doubled, nothing above the amount paid.
      const dup = await db.query(
        `SELECT 'order ' || out_trade_no AS what FROM orders WHERE app_id = $1 GROUP BY out_trade_no HAVING count(*) > 1
         UNION ALL SELECT 'refund ' || out_refund_no FROM refunds WHERE app_id = $1 GROUP BY out_refund_no HAVING count(*) > 1
         UNION ALL SELECT 'refunds above paid on ' || o.out_trade_no FROM orders o JOIN refunds r ON r.order_id = o.id AND NOT r.automatic
           WHERE o.app_id = $1 AND r.state <> 'FAILED' GROUP BY o.id, o.out_trade_no, o.amount_fen, o.status
           HAVING sum(r.amount_fen) > CASE WHEN o.status = 'SUCCEEDED' THEN o.amount_fen ELSE 0 END`,
        [m.appId],
      );
      for (const r of dup.rows as { what: string }[]) problems.push(`duplicated or over-refunded: ${r.what}`);
      // Every final state reported by one event, each received; nothing received that the ledger lost.
      const events = (
        await db.query<{ id: string; order_id: string; refund_id: string | null; event_type: string }>(
          `SELECT id, order_id, refund_id, event_type FROM events WHERE app_id = $1`,
          [m.appId],
        )
      ).rows;
      const per = new Map<string, number>();
      for (const e of events)
        per.set(`${e.event_type} ${e.refund_id ?? e.order_id}`, (per.get(`${e.event_type} ${e.refund_id ?? e.order_id}`) ?? 0) + 1);
      for (const [k, n] of per) if (n > 1) problems.push(`${k} reported ${n} times`);
      const finals = await db.query<{ k: string }>(
        `SELECT 'PAYMENT_' || status || ' ' || id AS k FROM orders WHERE app_id = $1 AND status IN ('SUCCEEDED', 'CLOSED', 'FAILED')
         UNION ALL SELECT 'REFUND_' || state || ' ' || id FROM refunds WHERE app_id = $1 AND state IN ('SUCCEEDED', 'FAILED')`,
        [m.appId],
      );
      for (const f of finals.rows) if (!per.has(f.k)) problems.push(`final state ${f.k} has no event`);
      const ids = new Set(events.map((e) => e.id));
      for (const e of events) if (!received.has(e.id)) problems.push(`event ${e.id} (${e.event_type}) not received`);
      for (const [id, e] of received) if (!ids.has(id)) problems.push(`received event ${id} (${e.eventType}) lost from the ledger`);
      return {
        drills,
        acknowledged: { orders: acked.orders.size, payments: acked.payments.size, refunds: acked.refunds.size, closes: acked.closes.size },
        events: { written: events.length, received: received.size },
        problems,
      };
    } finally {
      await db.end();
    }
  } finally {
    for (const i of instances) i.child.kill('SIGTERM');
    await Promise.all(instances.map((i) => new Promise((r) => (i.child.exitCode !== null ? r(null) : i.child.once('exit', r)))));
    receiver.close();
    await cluster.down();
  }
}

/**
 * The seconds without service: the longest time between two creates answered 2xx around the
 * drill, from just before it started to the first success after the promotion.
 */
function measure(kind: OneDrill['kind'], n: number, samples: Sample[], start: number, back: number, promotedAt: number): OneDrill {
  const during = samples.filter((s) => s.sentAt >= start - 1000 && s.at <= back);
  const failed = during.filter((s) => s.status === 503);
  const ok = samples
    .filter((s) => s.status >= 200 && s.status < 300 && s.at >= start - 2000 && s.at <= back)
    .map((s) => s.at)
    .sort((a, b) => a - b);
  let gap = 0;
  for (let i = 1; i < ok.length; i++) gap = Math.max(gap, ok[i]! - ok[i - 1]!);
  return {
    kind,
    n,
    secondsWithoutService: round(gap / 1000),
    promotedAfterSeconds: round((promotedAt - start) / 1000),
    answered503: failed.length,
    unanswered: during.filter((s) => s.status === 0).length,
    slowest503Ms: Math.max(0, ...failed.map((s) => s.at - s.sentAt)),
  };
}

const round = (x: number) => Math.round(x * 10) / 10;

async function firstSuccessAfter(samples: Sample[], start: number, timeoutMs: number): Promise<number> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const ok = samples.find((s) => s.sentAt > start && s.status >= 200 && s.status < 300);
    if (ok) return ok.at;
    if (Date.now() > until) throw new Error(`the service did not answer within ${timeoutMs / 1000} s`);
    await sleep(50);
  }
}

interface Answer {
  status: number;
  body: Record<string, unknown>;
}

/** Retries a request answered 503 (or not at all) as a merchant would, every 200 ms, for up to 90 s. */
async function untilAnswered(call: () => Promise<Answer>, samples: Sample[], measured = false): Promise<Answer | null> {
  const until = Date.now() + 90_000;
  while (Date.now() < until) {
    const sentAt = Date.now();
    let a: Answer;
    try {
      a = await call();
    } catch {
      a = { status: 0, body: {} };
    }
    if (measured || a.status === 503 || a.status === 0) samples.push({ sentAt, at: Date.now(), status: a.status });
    if (a.status !== 503 && a.status !== 0) return a;
    await sleep(200);
  }
  return null;
}

async function open(i: Instance, m: Merchant, method: string, url: string, body?: unknown, rid?: string): Promise<Answer> {
  const raw = body === undefined ? '' : JSON.stringify(body);
  const res = await fetch(`${i.base}${url}`, {
    method,
    headers: signedHeaders(m, method, url, raw, rid === undefined ? {} : { requestId: rid }),
    body: raw === '' ? undefined : raw,
    signal: AbortSignal.timeout(30_000),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

async function admin(i: Instance, method: string, p: string, body?: unknown): Promise<Answer> {
  const res = await fetch(`${i.base}${p}`, {
    method,
    headers: { authorization: `Bearer ${TOKEN}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
    body: body !== undefined ? JSON.stringify(body) : undefined,
    signal: AbortSignal.timeout(30_000),
  });
  return { status: res.status, body: (await res.json().catch(() => ({}))) as Record<string, unknown> };
}

async function provision(i: Instance, notifyUrl: string): Promise<Merchant> {
  const mch = await admin(i, 'POST', '/api/admin/v1/merchants', { name: 'Drill Shop', entityType: 'CORPORATE' });
  const app = await admin(i, 'POST', `/api/admin/v1/merchants/${String(mch.body.merchantId)}/apps`, {
    notifyUrl,
    rateLimitPerSecond: 100_000,
  });
  const appId = String(app.body.appId);
  const key = await admin(i, 'POST', `/api/admin/v1/apps/${appId}/keys`, { keyId: 'key-1', publicKeyPem: merchantKeyPair().publicKeyPem });
  if (key.status !== 201) throw new Error(`provisioning failed: ${JSON.stringify([mch, app, key])}`);
  return { merchantId: String(mch.body.merchantId), appId, keyId: 'key-1', privateKeyPem: merchantKeyPair().privateKeyPem };
}

async function startService(o: DrillOptions, databaseUrl: string, n: number): Promise<Instance> {
  const dataDir = path.join(o.dir, `service${n}`);
  fs.mkdirSync(dataDir, { recursive: true });
  const port = o.basePort + 10 + n;
  const out = fs.openSync(path.join(o.dir, `service${n}.log`), 'a');
  const child = spawn(process.execPath, ['src/main.ts'], {
    cwd: root,
    env: {
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? '/tmp',
      DATA_DIR: dataDir,
      PORT: String(port),
      HOST: '127.0.0.1',
      LOG_LEVEL: 'warn',
      ADMIN_TOKEN: TOKEN,
      DATABASE_URL: databaseUrl,
    },
    stdio: ['ignore', out, out],
  });
  fs.closeSync(out);
  const base = `http://127.0.0.1:${port}`;
  const until = Date.now() + 60_000;
  while (Date.now() < until) {
    if (child.exitCode !== null) break;
    try {
      if ((await fetch(`${base}/`, { signal: AbortSignal.timeout(1000) })).status < 500) return { base, child };
    } catch {
      /* not yet */
    }
    await sleep(200);
  }
  child.kill('SIGKILL');
  throw new Error(`service ${n} did not start:\n${fs.readFileSync(path.join(o.dir, `service${n}.log`), 'utf8').slice(-3000)}`);
}

/** Median and maximum of the drills of a kind. */
export function summary(drills: OneDrill[], kind: OneDrill['kind']): { median: number; max: number; answered503: number } | null {
  const xs = drills
    .filter((d) => d.kind === kind)
    .map((d) => d.secondsWithoutService)
    .sort((a, b) => a - b);
  if (xs.length === 0) return null;
  const mid = xs.length >> 1;
  const median = xs.length % 2 ? xs[mid]! : round((xs[mid - 1]! + xs[mid]!) / 2);
  return { median, max: xs[xs.length - 1]!, answered503: drills.filter((d) => d.kind === kind).reduce((s, d) => s + d.answered503, 0) };
}

const isMain = process.argv[1] !== undefined && path.resolve(process.argv[1]) === path.resolve(import.meta.filename);
if (isMain) {
  const { values } = parseArgs({
    options: {
      failovers: { type: 'string', default: '5' },
      switchovers: { type: 'string', default: '5' },
      json: { type: 'string' },
      clients: { type: 'string', default: '4' },
    },
  });
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mps-ha-drill-'));
  fs.chmodSync(dir, 0o755); // the servers run as postgres when this runs as root
  const report = await runDrill({
    failovers: Number(values.failovers),
    switchovers: Number(values.switchovers),
    clients: Number(values.clients),
    dir,
    basePort: Number(process.env.HA_BASE_PORT ?? 25400),
    calmMs: 5000,
    log: (l) => console.log(l),
  });
  console.table(report.drills);
  for (const kind of ['failover', 'switchover'] as const) {
    const s = summary(report.drills, kind);
    if (s) console.log(`${kind}: seconds without service median ${s.median}, max ${s.max}; answered 503: ${s.answered503}`);
  }
  console.log(`acknowledged: ${JSON.stringify(report.acknowledged)}; events ${JSON.stringify(report.events)}`);
  if (values.json) fs.writeFileSync(values.json, JSON.stringify(report, null, 2));
  if (report.problems.length > 0) {
    console.log(`PROBLEMS (${report.problems.length}):\n${report.problems.slice(0, 50).join('\n')}`);
    process.exitCode = 1;
  } else console.log('no acknowledged write lost, none doubled, no refund above the amount paid, every final state notified once');
  fs.rmSync(dir, { recursive: true, force: true });
}
