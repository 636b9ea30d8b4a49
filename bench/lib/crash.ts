/**
 * The crash scenario (`npm run bench -- --scenarios crash`; docs/performance.md, "Money in doubt
 * after a crash"): with creates and queries of the normal merchant running, `n` creates, `n` refunds
 * and `n` closes are left in flight at the provider (the sandbox holds their calls), the service is
 * killed with SIGKILL and started again at once on the same data; then, while the load goes on, how
 * long each of them stays in doubt after the restart (an attempt PENDING or UNKNOWN, a refund
 * REQUESTED or UNKNOWN, an order's close pending), read from the database every 100 ms.
 */
import { randomBytes } from 'node:crypto';
import { PaymentClient, parsePlatformKeysJson } from '@mps/sdk';
import { ADMIN_TOKEN, type Provisioned, type Service } from './service.ts';

export interface InDoubt {
  count: number;
  /** Settled: out of doubt by the deadline. */
  settled: number;
  /** Seconds from the restart (the new process answering /healthz) to each leaving doubt. */
  medianSeconds: number | null;
  maxSeconds: number | null;
}

export interface CrashResult {
  inFlight: number;
  loadConnections: number;
  restartSeconds: number;
  attempts: InDoubt;
  refunds: InDoubt;
  closes: InDoubt;
  loadRequests: number;
  loadFailures: number;
}

const DEADLINE_MS = 120_000;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function stats(count: number, seconds: number[]): InDoubt {
  const s = [...seconds].sort((a, b) => a - b);
  const median = s.length === 0 ? null : s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
  return { count, settled: s.length, medianSeconds: median, maxSeconds: s.length ? s[s.length - 1]! : null };
}

export async function crashScenario(
  svc: Service,
  app: Provisioned,
  o: { inFlight: number; loadConnections: number; log: (m: string) => void },
): Promise<CrashResult> {
  const { inFlight: n, log } = o;
  const keys = await svc.admin<unknown>('GET', '/platform-keys');
  const client = new PaymentClient({
    baseUrl: svc.baseUrl,
    appId: app.appId,
    keyId: app.keyId,
    privateKeyPem: app.privateKeyPem,
    platformPublicKeys: parsePlatformKeysJson(JSON.stringify(keys.body)),
    timeoutMs: 300_000,
    maxRetries: 0,
  });
  const sandbox = (p: string, body: unknown) =>
    fetch(`${svc.baseUrl}/api/sandbox/v1${p}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    }).then((r) => r.status);
  const tag = randomBytes(3).toString('hex');
  const order = (i: number, kind: string) => ({
    outTradeNo: `CRASH_${tag}_${kind}_${i}`,
    channel: 'ALIPAY_H5' as const,
    amountFen: 1000,
    currency: 'CNY' as const,
    subject: 'Crash',
    payerClientIp: '8.8.8.8',
  });
  const ignore = () => {};

  // Orders to refund (paid) and to close (payable), made first.
  const toRefund: string[] = [];
  const toClose: string[] = [];
  for (let i = 0; i < n; i++) {
    const p = await client.createOrder(order(i, 'PAID'));
    if ((await sandbox(`/payments/${p.body.openOrderId}/pay`, {})) !== 200) throw new Error('crash: the sandbox did not pay');
    toRefund.push(p.body.outTradeNo);
    toClose.push((await client.createOrder(order(i, 'OPEN'))).body.outTradeNo);
  }

  // n creates, n refunds and n closes whose provider calls are held (in flight when the process dies).
  for (const operation of ['CREATE_ATTEMPT', 'REFUND', 'CLOSE']) {
    if ((await sandbox('/faults', { operation, outcome: 'DELAY_MS', delayMs: 60_000, times: n })) !== 201) {
      throw new Error(`crash: the ${operation} fault was refused`);
    }
  }
  const creating = Array.from({ length: n }, (_, i) => order(i, 'NEW').outTradeNo);
  for (let i = 0; i < n; i++) {
    client.createOrder(order(i, 'NEW')).catch(ignore);
    client.createRefund({ outTradeNo: toRefund[i]!, outRefundNo: `RF_${toRefund[i]}`, refundAmountFen: 1000 }).catch(ignore);
    client.closeOrder(toClose[i]!).catch(ignore);
  }
  const refundNos = toRefund.map((t) => `RF_${t}`);
  const counts = async () => {
    const [r] = await svc.sql<{ a: number; r: number; c: number }>(
      `SELECT (SELECT count(*) FROM attempts a JOIN orders o ON o.id = a.order_id
                WHERE o.app_id = $1 AND o.out_trade_no = ANY($2) AND a.state IN ('PENDING', 'UNKNOWN'))::int AS a,
              (SELECT count(*) FROM refunds WHERE app_id = $1 AND out_refund_no = ANY($3) AND state IN ('REQUESTED', 'UNKNOWN'))::int AS r,
              (SELECT count(*) FROM orders WHERE app_id = $1 AND out_trade_no = ANY($4) AND close_pending IS NOT NULL)::int AS c`,
      [app.appId, creating, refundNos, toClose],
    );
    return r!;
  };
  const t0 = Date.now();
  for (;;) {
    const c = await counts();
    if (c.a === n && c.r === n && c.c === n) break;
    if (Date.now() - t0 > 30_000) throw new Error(`crash: not all in flight after 30 s: ${JSON.stringify(c)}`);
    await sleep(50);
  }

  // The normal merchant's creates and queries, through the crash and after.
  let stopping = false;
  let loadRequests = 0;
  let loadFailures = 0;
  const loops = Array.from({ length: o.loadConnections }, async (_, k) => {
    for (let i = 0; !stopping; i++) {
      try {
        const no = `CRASHLOAD_${tag}_${k}_${i}`;
        await client.createOrder({ ...order(i, 'LOAD'), outTradeNo: no });
        await client.queryOrder(no);
        loadRequests += 2;
      } catch {
        loadFailures++;
        await sleep(100);
      }
    }
  });
  await sleep(1000);

  log(`crash: ${n} creates, ${n} refunds and ${n} closes in flight; kill -9`);
  const { killedAt, readyAt } = await svc.crashAndRestart();
  const left = { a: new Set(creating), r: new Set(refundNos), c: new Set(toClose) };
  const out = { a: [] as number[], r: [] as number[], c: [] as number[] };
  while (Date.now() - readyAt < DEADLINE_MS && left.a.size + left.r.size + left.c.size > 0) {
    const at = (Date.now() - readyAt) / 1000;
    const still = await svc.sql<{ k: string; id: string }>(
      `SELECT 'a' AS k, o.out_trade_no AS id FROM attempts a JOIN orders o ON o.id = a.order_id
        WHERE o.app_id = $1 AND o.out_trade_no = ANY($2) AND a.state IN ('PENDING', 'UNKNOWN')
       UNION ALL SELECT 'r', out_refund_no FROM refunds WHERE app_id = $1 AND out_refund_no = ANY($3) AND state IN ('REQUESTED', 'UNKNOWN')
       UNION ALL SELECT 'c', out_trade_no FROM orders WHERE app_id = $1 AND out_trade_no = ANY($4) AND close_pending IS NOT NULL`,
      [app.appId, [...left.a], [...left.r], [...left.c]],
    );
    const now = { a: new Set<string>(), r: new Set<string>(), c: new Set<string>() };
    for (const s of still) now[s.k as 'a' | 'r' | 'c'].add(s.id);
    for (const k of ['a', 'r', 'c'] as const) {
      for (const id of [...left[k]]) {
        if (now[k].has(id)) continue;
        left[k].delete(id);
        out[k].push(at);
      }
    }
    await sleep(100);
  }
  stopping = true;
  await Promise.all(loops);
  const result: CrashResult = {
    inFlight: n,
    loadConnections: o.loadConnections,
    restartSeconds: (readyAt - killedAt) / 1000,
    attempts: stats(n, out.a),
    refunds: stats(n, out.r),
    closes: stats(n, out.c),
    loadRequests,
    loadFailures,
  };
  const f = (x: number | null) => (x === null ? '-' : x.toFixed(1));
  log(
    `crash: restarted ${result.restartSeconds.toFixed(1)} s after the kill; in doubt after the restart (median / max s): ` +
      `attempts ${f(result.attempts.medianSeconds)} / ${f(result.attempts.maxSeconds)} (${result.attempts.settled} of ${n}), ` +
      `refunds ${f(result.refunds.medianSeconds)} / ${f(result.refunds.maxSeconds)} (${result.refunds.settled} of ${n}), ` +
      `closes ${f(result.closes.medianSeconds)} / ${f(result.closes.maxSeconds)} (${result.closes.settled} of ${n}); ` +
      `load ${loadRequests} requests, ${loadFailures} failed (the crash's)`,
  );
  return result;
}
