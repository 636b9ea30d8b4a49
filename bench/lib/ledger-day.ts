/**
 * The day scenario (`npm run bench -- --scenarios day`; docs/performance.md, "A year of data"): a
 * closed day (three days ago, Asia/Shanghai) of N orders of one app of the benchmark, written by the
 * ledger's generator (bench/lib/ledger.ts: payments, closes, refunds, events, the sandbox's books),
 * then that app's statement of the day through the SDK (summary, then the file) and the day's
 * reconciliation of the sandbox provider requested through the admin API and followed until it
 * completes. On a fresh database and on a filled one (`--ledger`), the same day's work: the
 * figures tell what the rest of the ledger costs it.
 */
import { Writable } from 'node:stream';
import { PaymentClient, parsePlatformKeysJson } from '@mps/sdk';
import { fillLedger } from './ledger.ts';
import type { Provisioned, Service } from './service.ts';

export interface DayResult {
  orders: number;
  day: string;
  seedSeconds: number;
  statementRows: number;
  statementSummarySeconds: number;
  statementFileSeconds: number;
  /** From the request to the run's completion, as an operator waits for it (a run queued behind another waits for it). */
  reconciliationSeconds: number;
  /** The run itself: from its (last) start to its end. */
  reconciliationRunSeconds: number;
  reconciliation: { providerLines: number | null; ledgerLines: number | null; matched: number | null; discrepancies: number | null };
  /** CPU seconds of the service and PostgreSQL from the request to the answer (statement) or the run's completion (reconciliation). */
  statementSummaryCpuSeconds: number;
  reconciliationCpuSeconds: number;
  /** Orders of the day in the ledger besides the app's (the reconciliation covers the provider's whole day). */
  otherOrdersOfDay: number;
}

const DAY_MS = 86_400_000;
/**
 * Order numbers of the day's fill start past any ledger the benchmark writes, at a point of the
 * clock, so that another run on a reused data folder (--data-dir) writes other orders.
 */
const dayFirst = () => 500_000_000_000 + (Math.floor(Date.now() / 1000) % 400_000) * 1_000_000;

interface RunView {
  runId: string;
  status: string;
  startedAt: string | null;
  finishedAt: string | null;
  providerLines: number | null;
  ledgerLines: number | null;
  matched: number | null;
  discrepancies: number | null;
}

export async function dayScenario(
  svc: Service,
  mch: Provisioned,
  orders: number,
  log: (m: string) => void,
  /** Starts a CPU reading (service and PostgreSQL); the function it answers tells the seconds since. */
  cpu: () => () => number,
): Promise<DayResult> {
  const todayStart = Math.floor((Date.now() + 8 * 3600_000) / DAY_MS) * DAY_MS - 8 * 3600_000;
  // Three days ago; on a reused data folder the first day back from there that no earlier run wrote
  // (a day's reconciliation covers every app of the provider's day).
  let endBefore = new Date(todayStart - 2 * DAY_MS);
  let otherOrdersOfDay = 0;
  for (let back = 0; back < 30; back++) {
    const e = new Date(todayStart - (2 + back) * DAY_MS);
    const r = await svc.sql<{ ours: number; others: number }>(
      `SELECT count(*) FILTER (WHERE app_id NOT LIKE 'svcop_ledger%')::int AS ours, count(*) FILTER (WHERE app_id LIKE 'svcop_ledger%')::int AS others
         FROM orders WHERE created_at >= $1 AND created_at < $2`,
      [new Date(e.getTime() - DAY_MS), e],
    );
    endBefore = e;
    otherOrdersOfDay = r[0]?.others ?? 0;
    if ((r[0]?.ours ?? 0) === 0) break;
  }
  const day = new Date(endBefore.getTime() - DAY_MS + 8 * 3600_000).toISOString().slice(0, 10);
  log(`day: writing ${orders} orders of ${day} for ${mch.appId} (the ledger holds ${otherOrdersOfDay} other orders of that day)`);
  const t0 = performance.now();
  await fillLedger(svc.dbUrl, {
    orders,
    days: 1,
    endBefore,
    first: dayFirst(),
    app: { appId: mch.appId, merchantId: mch.merchantId },
    log,
  });
  const seedSeconds = (performance.now() - t0) / 1000;
  log(`day: written in ${seedSeconds.toFixed(1)} s`);
  const keys = await svc.admin<unknown>('GET', '/platform-keys');
  const client = new PaymentClient({
    baseUrl: svc.baseUrl,
    appId: mch.appId,
    keyId: mch.keyId,
    privateKeyPem: mch.privateKeyPem,
    platformPublicKeys: parsePlatformKeysJson(JSON.stringify(keys.body)),
    requireSignedSuccess: true,
    timeoutMs: 600_000,
    maxRetries: 0,
  });
  const t1 = performance.now();
  const statementCpu = cpu();
  const summary = await client.getStatement(day, { compression: 'none' });
  const t2 = performance.now();
  const statementSummaryCpuSeconds = statementCpu();
  const sink = new Writable({
    write(_chunk: Buffer, _e, cb) {
      cb();
    },
  });
  await client.downloadStatement(day, sink, { compression: 'none' });
  const t3 = performance.now();
  log(`day: statement ${summary.body.rowCount} rows, summary ${((t2 - t1) / 1000).toFixed(2)} s, file ${((t3 - t2) / 1000).toFixed(2)} s`);
  const t4 = performance.now();
  const reconciliationCpu = cpu();
  const req = await svc.admin<{ runs: RunView[] }>('POST', '/reconciliation/runs', { day, provider: 'sandbox' });
  if (req.status !== 202 || !req.body.runs[0])
    throw new Error(`day: reconciliation request HTTP ${req.status} ${JSON.stringify(req.body)}`);
  const runId = req.body.runs[0].runId;
  let run: RunView | undefined;
  for (;;) {
    const l = await svc.admin<{ runs: RunView[] }>('GET', `/reconciliation/runs?provider=sandbox&day=${day}&limit=50`);
    run = l.body.runs.find((r) => r.runId === runId);
    if (run && (run.status === 'COMPLETED' || run.status === 'FAILED')) break;
    if (performance.now() - t4 > 900_000) throw new Error('day: reconciliation did not complete in 15 minutes');
    await new Promise((r) => setTimeout(r, 100));
  }
  const reconciliationSeconds = (performance.now() - t4) / 1000;
  const reconciliationCpuSeconds = reconciliationCpu();
  log(`day: reconciliation ${run.status} in ${reconciliationSeconds.toFixed(2)} s (${JSON.stringify(run)})`);
  if (run.status !== 'COMPLETED') throw new Error(`day: reconciliation ${run.status}`);
  return {
    orders,
    day,
    seedSeconds,
    statementRows: summary.body.rowCount,
    statementSummarySeconds: (t2 - t1) / 1000,
    statementFileSeconds: (t3 - t2) / 1000,
    reconciliationSeconds,
    reconciliationRunSeconds: (Date.parse(run.finishedAt ?? '') - Date.parse(run.startedAt ?? '')) / 1000,
    statementSummaryCpuSeconds,
    reconciliationCpuSeconds,
    otherOrdersOfDay,
    reconciliation: {
      providerLines: run.providerLines,
      ledgerLines: run.ledgerLines,
      matched: run.matched,
      discrepancies: run.discrepancies,
    },
  };
}
