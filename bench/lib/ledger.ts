/**
 * A year of history, bulk-loaded (`npm run bench -- --ledger <N>`, `npm run bench:ledger`;
 * docs/performance.md, "A year of data"). N orders over the 365 days before today (Asia/Shanghai)
 * across many merchants and apps, written straight into the service's own schema (its migrations
 * applied first) by INSERT ... SELECT over generate_series, a batch of orders at a time, each
 * batch's random choices drawn once into a temporary table so that every row of an order agrees
 * with the others and with the state machines:
 *
 * - merchants skewed like real traffic: merchant k of M takes orders with probability ~ u^3 (the
 *   first tenth of the merchants take about half), two apps each; the day's orders peak around
 *   12:00 and 20:30 Shanghai time;
 * - every order final: SUCCEEDED (72%, paid through its last attempt, with its fee projection),
 *   CLOSED by expiry (21%) or by the merchant (5%), FAILED (2%); 8% of them had a first attempt
 *   closed before a second one; 5% of WeChat payments had a JSAPI provider trade opened, then closed
 *   when the attempt's own order was paid (the sandbox pays attempts, not trades);
 * - refunds of 10% of the payments (full or half, SUCCEEDED), 0.1% duplicate payments (refunded);
 * - the events each change reports (PAYMENT_*, REFUND_*), DELIVERED, with their delivery log (8%
 *   answered 500 once before the 200; that failed attempt is left out past 30 days, as retention
 *   leaves the log); the sandbox provider's books of every payment and refund;
 * - request-id records of the last 26 hours, audit entries (one per ~2,000 orders), statements'
 *   digests of the large merchants' days, one completed reconciliation run per day with its lines.
 *
 * The random choices are PostgreSQL's random() after setseed(), so a fill is repeatable.
 */
import pg from 'pg';

export interface LedgerOptions {
  /** Orders to write. */
  orders: number;
  /** Days of history (ending yesterday, Asia/Shanghai). */
  days?: number;
  /** The fill's "now" (the service's clock); default the wall clock. */
  now?: Date;
  /** The number of the first order (ids and numbers derive from it): another fill into the same database starts past the last. */
  first?: number;
  /** The history ends at this instant (default: today's start, Asia/Shanghai). */
  endBefore?: Date;
  /** Every order of this one app (a day's payments of an app the benchmark holds the key of), else the skewed merchants. */
  app?: { appId: string; merchantId: string };
  /** Orders per batch (one temporary table, a statement per table). */
  batch?: number;
  log?: (m: string) => void;
}

export interface LedgerResult {
  orders: number;
  merchants: number;
  apps: number;
  seconds: number;
  /** Rows per table after the fill. */
  rows: Record<(typeof TABLES)[number], number>;
  /** The first and last day of the history (Asia/Shanghai). */
  firstDay: string;
  lastDay: string;
  /** An app of the largest merchant, and one of its paid orders (outTradeNo), for checks. */
  sample: { appId: string; merchantId: string; outTradeNo: string; openOrderId: string };
}

const DAY_MS = 86_400_000;
const SHANGHAI_MS = 8 * 3600_000;

/** Merchants for N orders: at least 20, one per 20,000 orders, at most 2,000. */
export function ledgerMerchants(orders: number): number {
  return Math.max(20, Math.min(2000, Math.ceil(orders / 20_000)));
}

function shanghaiDay(ms: number): string {
  return new Date(ms + SHANGHAI_MS).toISOString().slice(0, 10);
}

const TABLES = [
  'merchants',
  'apps',
  'orders',
  'attempts',
  'provider_trades',
  'refunds',
  'duplicate_payments',
  'events',
  'event_deliveries',
  'sandbox_payments',
  'sandbox_refunds',
  'request_replays',
  'audit_log',
  'statement_files',
  'reconciliation_runs',
  'reconciliation_lines',
] as const;

/** Fills the database at `url` (migrated by the caller) with a year of history. */
export async function fillLedger(url: string, o: LedgerOptions): Promise<LedgerResult> {
  const log = o.log ?? (() => {});
  if (o.app && !/^[A-Za-z0-9_]+$/.test(o.app.appId + o.app.merchantId)) throw new Error('fillLedger: an app id of letters, digits and _');
  const days = o.days ?? 365;
  const now = (o.now ?? new Date()).getTime();
  const batch = o.batch ?? 250_000;
  const merchants = ledgerMerchants(o.orders);
  // Midnight of today (Asia/Shanghai) as an instant; the history is the `days` days before it.
  const todayStart = o.endBefore?.getTime() ?? Math.floor((now + SHANGHAI_MS) / DAY_MS) * DAY_MS - SHANGHAI_MS;
  const first = o.first ?? 1;
  const last = first + o.orders - 1;
  const histStart = todayStart - days * DAY_MS;
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  const q = (text: string, values: unknown[] = []) => c.query(text, values);
  const t0 = performance.now();
  try {
    await q('SET synchronous_commit = off');
    await q('SELECT setseed(0.39)');
    // Merchants, their apps (ALIPAY_H5 and WECHAT_H5), fee rules.
    await q(
      `INSERT INTO merchants(id, name, entity_type, created_at)
       SELECT 'mch_ledger' || lpad(m::text, 6, '0'), 'Ledger Shop ' || m, CASE WHEN m % 5 = 0 THEN 'INDIVIDUAL' ELSE 'CORPORATE' END, $2
         FROM generate_series(0, $1 - 1) m ON CONFLICT DO NOTHING`,
      [merchants, new Date(histStart - DAY_MS)],
    );
    await q(
      `INSERT INTO apps(id, merchant_id, status, notify_url, channels, trade_scopes, payment_window_seconds, daily_amount_ceiling_fen,
                        rate_limit_per_second, created_at, updated_at)
       SELECT 'svcop_ledger' || lpad((m * 2 + k)::text, 10, '0'), 'mch_ledger' || lpad(m::text, 6, '0'), 'ACTIVE',
              'https://merchant-' || m || '.example/notify', ARRAY['ALIPAY_H5', 'WECHAT_H5'], ARRAY['ALIPAY_H5', 'WECHAT_H5'], 900, NULL, 1000, $2, $2
         FROM generate_series(0, $1 - 1) m, generate_series(0, 1) k ON CONFLICT DO NOTHING`,
      [merchants, new Date(histStart - DAY_MS)],
    );
    // One reconciliation run per day of the sandbox provider, completed the next morning.
    const runs = await q(
      `INSERT INTO reconciliation_runs(provider, day, trigger, status, tries, due_at, provider_lines, ledger_lines, matched, converged,
                                       discrepancies, created_at, started_at, finished_at)
       SELECT 'sandbox', d::date, 'SCHEDULED', 'COMPLETED', 1, d + interval '1 day 10 hours', 0, 0, 0, 0, 0,
              d + interval '1 day 10 hours', d + interval '1 day 10 hours', d + interval '1 day 10 hours 1 minute'
         FROM generate_series(($1::timestamptz AT TIME ZONE 'Asia/Shanghai')::date, ($2::timestamptz AT TIME ZONE 'Asia/Shanghai')::date, interval '1 day') d
       ON CONFLICT (provider, day) WHERE trigger = 'SCHEDULED' DO NOTHING
       RETURNING id, day::text`,
      [new Date(histStart), new Date(todayStart - DAY_MS)],
    );
    // The runs written here, by day (a run the service made itself meanwhile is left as it is).
    const runIds = runs.rows.map((r: { id: string }) => r.id);
    const runDays = runs.rows.map((r: { day: string }) => r.day);

    for (let from = first; from <= last; from += batch) {
      const to = Math.min(last, from + batch - 1);
      const tb = performance.now();
      await q('DROP TABLE IF EXISTS ledger_batch');
      // Each order's choices. Day: orders in time order over the history; time of day: two peaks.
      await q(
        `CREATE TEMP TABLE ledger_batch AS
         SELECT g, x.m, x.app_no, x.channel, x.amount, x.outcome, x.two, x.refund, x.half, x.dup, x.trade, x.fail1, x.t,
                least(interval '1 day', (to_timestamp($7::bigint / 1000.0) - x.t) / 2) AS rdelay,
                'ord_' || substr(md5('o' || g), 1, 24) AS oid,
                'att_' || substr(md5('a' || g), 1, 24) AS aid1,
                'att_' || substr(md5('b' || g), 1, 24) AS aid2,
                'trd_' || substr(md5('t' || g), 1, 24) AS tid,
                'rf_' || substr(md5('r' || g), 1, 24) AS rid,
                'evt_' || substr(md5('e' || g), 1, 24) AS eid,
                'evt_' || substr(md5('f' || g), 1, 24) AS fid
           FROM generate_series($1::int, $2::int) g,
           LATERAL (SELECT floor($3 * power(random(), 3))::int AS m, (random() < 0.3)::int AS app_no,
                           CASE WHEN random() < 0.55 THEN 'ALIPAY_H5' ELSE 'WECHAT_H5' END AS channel,
                           (100 + floor(power(random(), 4) * 500000))::bigint AS amount,
                           random() AS r_out, random() < 0.08 AS two, random() AS r_ref, random() < 0.5 AS half,
                           random() < 0.0125 AS dup, random() < 0.05 AS trade, random() < 0.08 AS fail1,
                           random() AS r_peak, (random() + random() + random() - 1.5) AS r_norm, random() AS r_uni
                     WHERE g IS NOT NULL) r,
           LATERAL (SELECT r.m, r.app_no, r.channel, r.amount, r.two, r.half, r.fail1,
                           CASE WHEN r.r_out < 0.72 THEN 'PAID' WHEN r.r_out < 0.93 THEN 'EXPIRED' WHEN r.r_out < 0.98 THEN 'CLOSED' ELSE 'FAILED' END AS outcome,
                           r.r_out < 0.72 AND r.r_ref < 0.1 AS refund,
                           r.r_out < 0.72 AND r.two AND r.dup AS dup,
                           r.r_out < 0.72 AND r.channel = 'WECHAT_H5' AND r.trade AS trade,
                           to_timestamp(($4::bigint + floor((g - $8)::float8 * $6 / $5)::bigint * 86400000
                             + (CASE WHEN r.r_peak < 0.4 THEN 43200 + r.r_norm * 5400 WHEN r.r_peak < 0.8 THEN 73800 + r.r_norm * 4800
                                     ELSE r.r_uni * 86400 END)::bigint % 86400 * 1000) / 1000.0) AS t) x`,
        [from, to, merchants, histStart, o.orders, days, now, first],
      );
      await q('ANALYZE ledger_batch');
      const fee = `json_build_object('companyServiceFeeFen', (b.amount * 60 + 5000) / 10000, 'companyServiceFeeRateBps', 60, 'merchantRateBps', 60,
                       'merchantSettlementFen', b.amount - (b.amount * 60 + 5000) / 10000, 'ruleVersion', 0, 'thresholdFen', 10000000, 'tier', 'STANDARD')`;
      const app = o.app ? `'${o.app.appId}'` : `'svcop_ledger' || lpad((b.m * 2 + b.app_no)::text, 10, '0')`;
      const merchant = o.app ? `'${o.app.merchantId}'` : `'mch_ledger' || lpad(b.m::text, 6, '0')`;
      // paid at +40 s..+10 min; ended (closed, expired, failed) at the window's end or a few minutes in.
      await q(
        `INSERT INTO orders(id, app_id, merchant_id, out_trade_no, channel, amount_fen, currency, subject, payer_client_ip, digest, links,
                            status, closed_reason, failure_reason, expire_at, fee_projection, state_version, paid_attempt_id, paid_at,
                            created_at, updated_at, paid_trade_no)
         SELECT b.oid, ${app}, ${merchant}, 'L' || lpad(b.g::text, 12, '0'), b.channel, b.amount, 'CNY',
                'Order ' || b.g, '203.0.113.' || (b.g % 250 + 1), md5('d' || b.g), ARRAY['ALIPAY_AGGREGATION_NATIVE'],
                CASE b.outcome WHEN 'PAID' THEN 'SUCCEEDED' WHEN 'FAILED' THEN 'FAILED' ELSE 'CLOSED' END,
                CASE b.outcome WHEN 'EXPIRED' THEN 'EXPIRED' WHEN 'CLOSED' THEN 'MERCHANT_CLOSED' END,
                CASE b.outcome WHEN 'FAILED' THEN 'PROVIDER_REJECTED' END,
                b.t + interval '15 minutes', ${fee},
                CASE WHEN b.refund THEN 4 ELSE 3 END,
                CASE WHEN b.outcome = 'PAID' THEN CASE WHEN b.two THEN b.aid2 ELSE b.aid1 END END,
                CASE WHEN b.outcome = 'PAID' THEN b.t + interval '40 seconds' + (b.g % 560) * interval '1 second' END,
                b.t,
                CASE WHEN b.refund THEN b.t + b.rdelay WHEN b.outcome = 'PAID' THEN b.t + interval '40 seconds' + (b.g % 560) * interval '1 second'
                     WHEN b.outcome = 'EXPIRED' THEN b.t + interval '15 minutes' ELSE b.t + interval '3 minutes' END,
                NULL
           FROM ledger_batch b`,
      );
      // Attempts: a first one closed before a second (8%), the last one PAID or CLOSED (or FAILED).
      await q(
        `INSERT INTO attempts(id, order_id, seq, state, cashier_token, provider_ref, expire_at, created_at, updated_at, made_at, created_by, provider)
         SELECT CASE WHEN s.seq = 1 THEN b.aid1 ELSE b.aid2 END, b.oid, s.seq,
                CASE WHEN s.seq = 1 AND b.two THEN CASE WHEN b.dup THEN 'PAID' ELSE 'CLOSED' END
                     WHEN b.outcome = 'PAID' THEN 'PAID' WHEN b.outcome = 'FAILED' THEN 'FAILED' ELSE 'CLOSED' END,
                md5('c' || b.g || '.' || s.seq) || md5('k' || b.g || '.' || s.seq),
                'sbx_' || substr(md5('p' || b.g || '.' || s.seq), 1, 24),
                b.t + interval '15 minutes', b.t + (s.seq - 1) * interval '20 seconds',
                b.t + interval '40 seconds' + (b.g % 560) * interval '1 second', b.t + (s.seq - 1) * interval '20 seconds' + interval '300 milliseconds',
                'ledger', 'sandbox'
           FROM ledger_batch b, LATERAL (SELECT 1 AS seq UNION ALL SELECT 2 WHERE b.two) s`,
      );
      await q(
        `INSERT INTO provider_trades(id, attempt_id, order_id, provider, product, payer, handle, state, provider_ref, created_at, updated_at)
         SELECT b.tid, CASE WHEN b.two THEN b.aid2 ELSE b.aid1 END, b.oid, 'sandbox', 'JSAPI', 'openid-' || substr(md5('u' || b.g), 1, 20),
                substr(md5('h' || b.g), 1, 22), 'CLOSED', 'sbx_' || substr(md5('q' || b.g), 1, 24), b.t + interval '10 seconds',
                b.t + interval '40 seconds' + (b.g % 560) * interval '1 second'
           FROM ledger_batch b WHERE b.trade`,
      );
      // The provider's books: every attempt made; paid ones with their time.
      await q(
        `INSERT INTO sandbox_payments(provider_ref, attempt_id, channel, amount_fen, state, created_at, updated_at, expire_at, paid_at)
         SELECT a.provider_ref, a.id, b.channel, b.amount, CASE WHEN a.state = 'PAID' THEN 'PAID' ELSE 'CLOSED' END, a.created_at, a.updated_at,
                a.expire_at, CASE WHEN a.state = 'PAID' THEN a.updated_at END
           FROM ledger_batch b JOIN attempts a ON a.order_id = b.oid`,
      );
      await q(
        `INSERT INTO duplicate_payments(id, order_id, attempt_id, amount_fen, refund_state, provider_ref, created_at, updated_at, provider, trade_no)
         SELECT 'dup_' || substr(b.aid1, 5), b.oid, b.aid1, b.amount, 'REFUNDED', 'sbx_rf_' || substr(md5('z' || b.g), 1, 24),
                b.t + interval '1 hour', b.t + interval '1 hour 1 minute', 'sandbox', b.aid1
           FROM ledger_batch b WHERE b.dup`,
      );
      await q(
        `INSERT INTO refunds(id, order_id, app_id, out_refund_no, amount_fen, reason, digest, state, provider_ref, created_at, updated_at, created_by, provider)
         SELECT b.rid, b.oid, ${app}, 'LR' || lpad(b.g::text, 12, '0'), CASE WHEN b.half THEN greatest(1, b.amount / 2) ELSE b.amount END,
                'customer request', md5('rd' || b.g), 'SUCCEEDED', 'sbx_rf_' || substr(b.rid, 4), b.t + b.rdelay - interval '5 seconds',
                b.t + b.rdelay, 'ledger', 'sandbox'
           FROM ledger_batch b WHERE b.refund`,
      );
      await q(
        `INSERT INTO sandbox_refunds(provider_ref, refund_key, payment_ref, amount_fen, state, settle_at, created_at, notice_sent, lost)
         SELECT r.provider_ref, r.id, a.provider_ref, r.amount_fen, 'SUCCEEDED', r.updated_at, r.created_at, true, false
           FROM ledger_batch b JOIN refunds r ON r.id = b.rid JOIN orders o ON o.id = b.oid JOIN attempts a ON a.id = o.paid_attempt_id
          WHERE b.refund`,
      );
      // The events each change reported, exactly as delivered (src/domain/events.ts), and their delivery log.
      const iso = (col: string) => `to_char(${col} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;
      await q(
        `INSERT INTO events(id, app_id, order_id, refund_id, event_type, state_version, payload, status, attempts, next_attempt_at, created_at, delivered_at)
         SELECT e.id, o.app_id, o.id, e.refund_id, e.type, e.v,
                json_build_object('appId', o.app_id, 'attach', NULL, 'eventAmountFen', coalesce(r.amount_fen, o.amount_fen), 'eventId', e.id,
                                  'eventType', e.type, 'feeProjection', CASE WHEN e.type = 'PAYMENT_SUCCEEDED' THEN o.fee_projection END,
                                  'grossAmountFen', o.amount_fen, 'occurredAt', ${iso('e.at')}, 'outRefundNo', r.out_refund_no,
                                  'outTradeNo', o.out_trade_no,
                                  'reason', CASE WHEN r.id IS NOT NULL THEN r.reason WHEN e.type = 'PAYMENT_CLOSED' THEN o.closed_reason
                                                 WHEN e.type = 'PAYMENT_FAILED' THEN o.failure_reason END,
                                  'stateVersion', e.v, 'status', coalesce(r.state, o.status)),
                'DELIVERED', CASE WHEN b.fail1 THEN 2 ELSE 1 END, e.at, e.at, e.at + CASE WHEN b.fail1 THEN interval '12 seconds' ELSE interval '150 milliseconds' END
           FROM ledger_batch b JOIN orders o ON o.id = b.oid LEFT JOIN refunds r ON r.id = b.rid,
           LATERAL (SELECT b.eid AS id, NULL::text AS refund_id, CASE o.status WHEN 'SUCCEEDED' THEN 'PAYMENT_SUCCEEDED' WHEN 'FAILED' THEN 'PAYMENT_FAILED'
                                                                  ELSE 'PAYMENT_CLOSED' END AS type, 3 AS v,
                           coalesce(o.paid_at, o.updated_at) AS at
                    UNION ALL
                    SELECT b.fid, r.id, 'REFUND_SUCCEEDED', 4, r.updated_at WHERE r.id IS NOT NULL) e
           ORDER BY e.at`,
      );
      await q(
        `INSERT INTO event_deliveries(event_id, attempt_no, attempted_at, status_code, error, duration_ms, response_excerpt)
         SELECT e.id, n.no, e.created_at + (n.no - 1) * interval '12 seconds', CASE WHEN n.no < e.attempts THEN 500 ELSE 200 END,
                CASE WHEN n.no < e.attempts THEN 'HTTP 500' END, 20 + length(e.id) % 80, CASE WHEN n.no < e.attempts THEN 'busy' ELSE 'ok' END
           FROM ledger_batch b JOIN events e ON e.id IN (b.eid, b.fid), LATERAL generate_series(1, e.attempts) n(no)
          -- as retention leaves them: a failed attempt older than 30 days is gone (PURGE_HISTORY), the 200 stays
          WHERE n.no = e.attempts OR e.created_at >= $1
          ORDER BY e.created_at, n.no`,
        [new Date(now - 30 * DAY_MS)],
      );
      // The request-id records the replay window still keeps (the last 26 hours).
      await q(
        `INSERT INTO request_replays(app_id, request_id, method, target, body_sha256, state, status_code, response_body, created_at)
         SELECT o.app_id, 'req-' || b.g, 'POST', '/api/open/v1/payments', md5('d' || b.g), 'DONE', 201,
                '{"requestId":"req-' || b.g || '","openOrderId":"' || o.id || '"}', b.t
           FROM ledger_batch b JOIN orders o ON o.id = b.oid WHERE b.t > $1`,
        [new Date(now - 26 * 3600_000)],
      );
      // An operator's change now and then (the audit log is append-only and kept).
      await q(
        `INSERT INTO audit_log(at, actor_kind, operator_id, operator_name, channel, source_ip, request_id, action, entity_type, entity_id,
                               before, after, merchant_id)
         SELECT b.t + interval '2 hours', 'SESSION', 'op_ledger' || (b.g % 7), 'ops-' || (b.g % 7), 'console', '10.0.0.' || (b.g % 7 + 1),
                'req-audit-' || b.g, 'order.close', 'order', b.oid, json_build_object('status', 'PAYING')::jsonb,
                json_build_object('status', 'CLOSED')::jsonb, ${merchant}
           FROM ledger_batch b WHERE b.g % 2000 = 0`,
      );
      // The reconciliation lines of each day's run: a provider line per payment and per refund, matched.
      if (runIds.length > 0 && !o.app) {
        await q(
          `INSERT INTO reconciliation_lines(run_id, line_no, origin, kind, subject_id, provider_ref, amount_fen, state, occurred_at, outcome)
           SELECT rr.id, l.no, 'PROVIDER', l.kind, l.subject, l.ref,
                  l.amount, 'SUCCESS', l.at, 'MATCHED'
             FROM (SELECT b.g * 2 AS no, 'PAYMENT' AS kind, coalesce(o.paid_trade_no, o.paid_attempt_id) AS subject,
                          'sbx_' || substr(md5('p' || b.g || '.' || CASE WHEN b.two THEN 2 ELSE 1 END), 1, 24) AS ref, o.amount_fen AS amount, o.paid_at AS at
                     FROM ledger_batch b JOIN orders o ON o.id = b.oid WHERE o.status = 'SUCCEEDED'
                   UNION ALL
                   SELECT b.g * 2 + 1, 'REFUND', r.id, r.provider_ref, r.amount_fen, r.updated_at
                     FROM ledger_batch b JOIN refunds r ON r.id = b.rid) l
             JOIN unnest($1::bigint[], $2::date[]) AS rr(id, day) ON rr.day = (l.at AT TIME ZONE 'Asia/Shanghai')::date`,
          [runIds, runDays],
        );
      }
      log(`  ledger: ${to - first + 1} of ${o.orders} orders written (${((performance.now() - tb) / 1000).toFixed(1)} s for the batch)`);
    }
    await q('DROP TABLE IF EXISTS ledger_batch');
    // Each run's counts, and the statements' digests of the large merchants' apps (the first tenth) of every day.
    await q(
      `UPDATE reconciliation_runs x SET provider_lines = c.n, ledger_lines = c.n, matched = c.n
         FROM (SELECT run_id, count(*)::int AS n FROM reconciliation_lines GROUP BY run_id) c WHERE x.id = c.run_id`,
    );
    await q(
      `INSERT INTO statement_files(app_id, day, format_version, compression, encoder, sha256, size_bytes, row_count, totals, computed_at)
       SELECT a.id, d::date, 1, 'NONE', 'ledger', md5(a.id || d), 100000, 1000, '{}'::json, d + interval '1 day 2 hours'
         FROM apps a, generate_series(($1::timestamptz AT TIME ZONE 'Asia/Shanghai')::date, ($2::timestamptz AT TIME ZONE 'Asia/Shanghai')::date, interval '1 day') d
        WHERE a.id LIKE 'svcop_ledger%' AND substr(a.id, 13)::int < greatest(4, $3::int / 5)
       ON CONFLICT DO NOTHING`,
      [new Date(histStart), new Date(todayStart - DAY_MS), merchants],
    );
    log('  ledger: analyzing');
    for (const t of TABLES) await q(`VACUUM ANALYZE ${t}`);
    const rows = {} as Record<(typeof TABLES)[number], number>;
    for (const t of TABLES) {
      rows[t] = Number((await q(`SELECT count(*)::bigint AS n FROM ${t}`)).rows[0].n);
    }
    const s = await q(
      `SELECT o.app_id, o.merchant_id, o.out_trade_no, o.id FROM orders o
        WHERE o.merchant_id = 'mch_ledger000000' AND o.status = 'SUCCEEDED' ORDER BY o.created_at LIMIT 1`,
    );
    const sr = s.rows[0] ?? { app_id: '', merchant_id: '', out_trade_no: '', id: '' };
    return {
      orders: o.orders,
      merchants,
      apps: merchants * 2,
      seconds: (performance.now() - t0) / 1000,
      rows,
      firstDay: shanghaiDay(histStart),
      lastDay: shanghaiDay(todayStart - DAY_MS),
      sample: { appId: sr.app_id, merchantId: sr.merchant_id, outTradeNo: sr.out_trade_no, openOrderId: sr.id },
    };
  } finally {
    await c.end();
  }
}
