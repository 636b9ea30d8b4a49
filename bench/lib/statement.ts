/**
 * The statement scenario (`npm run bench -- --scenarios statement`; docs/performance.md,
 * "Statements"): a closed day with N payments of one app is written straight into the service's
 * database (orders SUCCEEDED with their fee projections, and their PAYMENT_SUCCEEDED events, as the
 * service writes them), then the day's statement is asked for through the signed open API with the
 * SDK, summary then file, plain and gzip: the time of each, and the service's peak RSS while it
 * streams (sampled every 100 ms), against its RSS before. The file is checked by the SDK (size,
 * SHA-256, response signature) and its rows counted.
 */
import { Writable } from 'node:stream';
import { PaymentClient, parsePlatformKeysJson } from '@mps/sdk';
import { MemoryPoller, memoryOf } from './proc.ts';
import type { Provisioned, Service } from './service.ts';

export interface StatementPhase {
  compression: 'none' | 'gzip';
  summarySeconds: number;
  fileSeconds: number;
  rows: number | null;
  sizeBytes: number;
  sha256: string;
  signatureVerified: boolean;
  rssBeforeMB: number;
  peakRssMB: number;
}

export interface StatementResult {
  payments: number;
  day: string;
  seedSeconds: number;
  phases: StatementPhase[];
}

const SEED_BATCH = 100_000;

/** N paid orders of the app on `day`, spread over it, each with its PAYMENT_SUCCEEDED event (ids made with `key`). */
export async function seed(
  svc: Service,
  mch: Provisioned,
  day: string,
  payments: number,
  log: (m: string) => void,
  key = 'bench',
): Promise<number> {
  const t0 = performance.now();
  const start = Date.parse(`${day}T00:00:00+08:00`);
  const stepMs = Math.max(1, Math.floor(86_399_000 / payments));
  for (let from = 1; from <= payments; from += SEED_BATCH) {
    const to = Math.min(payments, from + SEED_BATCH - 1);
    await svc.sql(
      `INSERT INTO orders(id, app_id, merchant_id, out_trade_no, channel, amount_fen, currency, subject, payer_client_ip, digest, links,
                          status, expire_at, fee_projection, state_version, paid_attempt_id, paid_at, created_at, updated_at)
       SELECT 'ord_' || $7 || lpad(g::text, 12, '0'), $1, $2, upper($7) || '_' || lpad(g::text, 12, '0'),
              CASE WHEN g % 2 = 0 THEN 'ALIPAY_H5' ELSE 'WECHAT_H5' END, a, 'CNY', 'Bench', '8.8.8.8', 'bench',
              ARRAY['ALIPAY_AGGREGATION_NATIVE'], 'SUCCEEDED', t + interval '15 minutes',
              json_build_object('companyServiceFeeFen', (a * 60 + 5000) / 10000, 'companyServiceFeeRateBps', 60, 'merchantRateBps', 60,
                                'merchantSettlementFen', a - (a * 60 + 5000) / 10000, 'ruleVersion', 0, 'thresholdFen', 10000000, 'tier', 'STANDARD'),
              3, 'att_' || $7 || lpad(g::text, 12, '0'), t, t, t
         FROM generate_series($3::int, $4::int) g,
              LATERAL (SELECT 100 + (g::bigint * 7919) % 99900 AS a, to_timestamp(($5::bigint + g::bigint * $6::bigint) / 1000.0) AS t) x`,
      [mch.appId, mch.merchantId, from, to, start, stepMs, key],
    );
    await svc.sql(
      `INSERT INTO events(id, app_id, order_id, event_type, state_version, payload, status, attempts, next_attempt_at, created_at, delivered_at)
       SELECT 'evt_' || $6 || lpad(g::text, 12, '0'), $1, 'ord_' || $6 || lpad(g::text, 12, '0'), 'PAYMENT_SUCCEEDED', 3, '{}'::json,
              'DELIVERED', 1, t, t, t
         FROM generate_series($2::int, $3::int) g, LATERAL (SELECT to_timestamp(($4::bigint + g::bigint * $5::bigint) / 1000.0) AS t) x`,
      [mch.appId, from, to, start, stepMs, key],
    );
    log(`  statement: ${to} of ${payments} payments written`);
  }
  await svc.sql('ANALYZE orders');
  await svc.sql('ANALYZE events');
  return (performance.now() - t0) / 1000;
}

export async function statementScenario(
  svc: Service,
  mch: Provisioned,
  payments: number,
  log: (m: string) => void,
): Promise<StatementResult> {
  // Three days ago (Asia/Shanghai): closed, and well within the days kept.
  const day = new Date(Date.now() + 8 * 3600_000 - 3 * 86_400_000).toISOString().slice(0, 10);
  log(`statement: writing ${payments} paid orders of ${day} and their events`);
  const seedSeconds = await seed(svc, mch, day, payments, log);
  log(`statement: written in ${seedSeconds.toFixed(1)} s`);
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
  const phases: StatementPhase[] = [];
  for (const compression of ['none', 'gzip'] as const) {
    const rssBeforeMB = memoryOf(svc.pid)?.rssMB ?? 0;
    const mem = new MemoryPoller(svc.pid);
    const t0 = performance.now();
    const summary = await client.getStatement(day, { compression });
    const t1 = performance.now();
    let lines = 0;
    const sink = new Writable({
      write(chunk: Buffer, _e, cb) {
        if (compression === 'none') for (let i = chunk.indexOf(10); i !== -1; i = chunk.indexOf(10, i + 1)) lines++;
        cb();
      },
    });
    const d = await client.downloadStatement(day, sink, { compression });
    const t2 = performance.now();
    const m = mem.stop();
    const phase: StatementPhase = {
      compression,
      summarySeconds: (t1 - t0) / 1000,
      fileSeconds: (t2 - t1) / 1000,
      rows: compression === 'none' ? lines - 1 : null,
      sizeBytes: d.sizeBytes,
      sha256: d.sha256,
      signatureVerified: d.signatureVerified,
      rssBeforeMB,
      peakRssMB: m.peakRssMB,
    };
    if (summary.body.rowCount !== payments || (phase.rows !== null && phase.rows !== payments)) {
      throw new Error(`statement: ${summary.body.rowCount} rows in the summary, ${phase.rows} in the file, for ${payments} payments`);
    }
    log(
      `statement (${compression}): summary ${phase.summarySeconds.toFixed(1)} s (the file made once into its digest), file ` +
        `${phase.fileSeconds.toFixed(1)} s, ${(phase.sizeBytes / 1e6).toFixed(1)} MB, ${summary.body.rowCount} rows; ` +
        `service RSS ${rssBeforeMB.toFixed(0)} MB before, peak ${m.peakRssMB.toFixed(0)} MB`,
    );
    phases.push(phase);
  }
  return { payments, day, seedSeconds, phases };
}
