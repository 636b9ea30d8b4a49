/**
 * A year of history, bulk-loaded (`npm run bench -- --ledger <N>`; docs/performance.md, "A year of
 * data"). N orders over the 365 days before today (Asia/Shanghai) across many merchants and apps,
 * written straight into the service's own schema (its migrations applied first) by INSERT ...
 * SELECT over generate_series, a batch of orders at a time, each batch's random choices drawn once
 * into a temporary table (with everything derived from them: states, times, amounts, references)
 * so that every row of an order agrees with the others and with the state machines, and no
 * statement of the fill reads back a table it writes:
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
 *   Nonces, sessions and finished jobs are not written: retention keeps only minutes to days of
 *   them, which the service's own traffic makes.
 *
 * Bulk mode (the default when the fill at least doubles the orders table, as into a fresh
 * database): the large tables' indexes, unique and foreign-key constraints are dropped and their
 * autovacuum paused during the fill, the tables vacuumed and analyzed, then every index and
 * constraint rebuilt from its saved definition (sorted builds, foreign keys validated) and the
 * catalog checked to be exactly as before. Rows into indexed tables one by one cost ~10x more.
 *
 * The random choices are PostgreSQL's random() after setseed(), so a fill is repeatable.
 */
import pg from 'pg';

/**
 * The 6 base32 characters of the minute of `x.t` since the epoch: the ids of the history lead with
 * their minute as the service's do (src/domain/ids.ts), so a day's rows are neighbours in the
 * primary keys as the service's own would be.
 */
const MINUTE_PREFIX_SQL = [25, 20, 15, 10, 5, 0]
  .map(
    (shift) => `substr('0123456789abcdefghjkmnpqrstvwxyz', ((floor(extract(epoch FROM x.t) / 60)::bigint >> ${shift}) & 31)::int + 1, 1)`,
  )
  .join(' || ');

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
  /** Connections writing batches (and rebuilding indexes) at once (default 2). */
  workers?: number;
  /** Drop the large tables' indexes and constraints during the fill (default: when the fill at least doubles the orders table). */
  bulk?: boolean;
  log?: (m: string) => void;
}

export interface LedgerResult {
  orders: number;
  merchants: number;
  apps: number;
  seconds: number;
  /** Seconds of the bulk mode's vacuum and index rebuild (0 when not in bulk mode). */
  rebuildSeconds: number;
  /** Rows per table after the fill. */
  rows: Record<(typeof TABLES)[number], number>;
  /** The database's size after the fill, bytes. */
  databaseBytes: number;
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

/** The tables that grow with the orders: bulk mode drops and rebuilds their indexes and constraints. */
const LARGE = [
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
  'reconciliation_lines',
] as const;

type Query = (text: string, values?: unknown[]) => Promise<pg.QueryResult>;

/** The large tables' indexes and constraints, as definitions to rebuild them from. */
interface Schema {
  /** primary keys and unique constraints: table, name, definition */
  keys: { table: string; name: string; def: string }[];
  /** indexes that back no constraint */
  indexes: { table: string; name: string; def: string }[];
  /** foreign keys from or to a large table */
  foreign: { table: string; name: string; def: string }[];
}

async function largeSchema(q: Query): Promise<Schema> {
  const keys = await q(
    `SELECT conrelid::regclass::text AS table, conname AS name, pg_get_constraintdef(oid) AS def FROM pg_constraint
      WHERE contype IN ('p', 'u', 'x') AND conrelid::regclass::text = ANY($1) ORDER BY 1, 2`,
    [LARGE],
  );
  const indexes = await q(
    `SELECT i.indrelid::regclass::text AS table, i.indexrelid::regclass::text AS name, pg_get_indexdef(i.indexrelid) AS def FROM pg_index i
      WHERE i.indrelid::regclass::text = ANY($1) AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = i.indexrelid)
      ORDER BY 1, 2`,
    [LARGE],
  );
  const foreign = await q(
    `SELECT conrelid::regclass::text AS table, conname AS name, pg_get_constraintdef(oid) AS def FROM pg_constraint
      WHERE contype = 'f' AND (conrelid::regclass::text = ANY($1) OR confrelid::regclass::text = ANY($1)) ORDER BY 1, 2`,
    [LARGE],
  );
  return { keys: keys.rows, indexes: indexes.rows, foreign: foreign.rows };
}

const ident = (s: string) => `"${s.replace(/"/g, '""')}"`;

async function dropSchema(q: Query, s: Schema): Promise<void> {
  for (const f of s.foreign) await q(`ALTER TABLE ${ident(f.table)} DROP CONSTRAINT ${ident(f.name)}`);
  for (const k of s.keys) await q(`ALTER TABLE ${ident(k.table)} DROP CONSTRAINT ${ident(k.name)}`);
  for (const i of s.indexes) await q(`DROP INDEX ${ident(i.name)}`);
}

/** Runs the tasks on the connections, each connection taking the next task when its last one ended. */
async function onConnections<T>(qs: Query[], tasks: T[], run: (q: Query, task: T) => Promise<void>): Promise<void> {
  let next = 0;
  let failed = false;
  await Promise.all(
    qs.map(async (q) => {
      while (!failed && next < tasks.length) {
        const task = tasks[next++]!;
        await run(q, task).catch((e: unknown) => {
          failed = true;
          throw e;
        });
      }
    }),
  );
}

/**
 * Rebuilds what dropSchema dropped (what is still missing, so also after a failed fill): each
 * table's keys then its other indexes, tables side by side on the connections; then the foreign
 * keys (validated); then checks the catalog is as it was.
 */
async function restoreSchema(qs: Query[], s: Schema, log: (m: string) => void): Promise<void> {
  const q = qs[0]!;
  const now = await largeSchema(q);
  const has = (list: { name: string }[], name: string) => list.some((x) => x.name === name);
  const timed = async (q: Query, sql: string, what: string) => {
    const t = performance.now();
    await q(sql);
    log(`  ledger: ${what} in ${((performance.now() - t) / 1000).toFixed(1)} s`);
  };
  const tables = [...new Set([...s.keys, ...s.indexes].map((x) => x.table))];
  await onConnections(qs, tables, async (q, table) => {
    for (const k of s.keys.filter((k) => k.table === table && !has(now.keys, k.name))) {
      await timed(q, `ALTER TABLE ${ident(k.table)} ADD CONSTRAINT ${ident(k.name)} ${k.def}`, `${k.name} built`);
    }
    for (const i of s.indexes.filter((i) => i.table === table && !has(now.indexes, i.name))) {
      await timed(q, i.def, `${i.name} built`);
    }
  });
  for (const f of s.foreign) {
    if (!has(now.foreign, f.name))
      await timed(q, `ALTER TABLE ${ident(f.table)} ADD CONSTRAINT ${ident(f.name)} ${f.def}`, `${f.name} validated`);
  }
  const after = await largeSchema(q);
  if (JSON.stringify(after) !== JSON.stringify(s)) {
    throw new Error(`ledger: the rebuilt indexes and constraints differ from the schema's: ${JSON.stringify({ before: s, after })}`);
  }
}

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
  const workers = Math.max(1, o.workers ?? 2);
  const trace = process.env.LEDGER_TRACE === '1';
  const traced =
    (client: pg.Client): Query =>
    async (text, values = []) => {
      const t = performance.now();
      const r = await client.query(text, values);
      if (trace) log(`    ${((performance.now() - t) / 1000).toFixed(2)} s ${text.replace(/\s+/g, ' ').slice(0, 60)}`);
      return r;
    };
  // Each connection: commits not waited for (the fill is redone if the machine fails), a batch's
  // temporary table and sorts in memory, index builds with room to sort.
  const session = async (q: Query): Promise<void> => {
    await q('SET synchronous_commit = off');
    await q(`SET temp_buffers = '256MB'`);
    await q(`SET work_mem = '128MB'`);
    await q(`SET maintenance_work_mem = '512MB'`);
  };
  const q = traced(c);
  const t0 = performance.now();
  let schema: Schema | null = null;
  let rebuildSeconds = 0;
  try {
    await session(q);
    const est = (await q(`SELECT greatest(reltuples, 0)::float8 AS n FROM pg_class WHERE oid = 'orders'::regclass`)).rows[0].n as number;
    const existing = est > 0 ? est : Number((await q('SELECT count(*)::bigint AS n FROM orders')).rows[0].n);
    if (o.bulk ?? existing <= o.orders) {
      schema = await largeSchema(q);
      log(
        `  ledger: bulk mode: ${schema.keys.length + schema.indexes.length + schema.foreign.length} indexes and constraints dropped until the end`,
      );
      for (const t of LARGE) await q(`ALTER TABLE ${t} SET (autovacuum_enabled = off)`);
      await dropSchema(q, schema);
    }
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
    // The simulated provider's books (not the service's: a real provider keeps its own) of the last 40 days.
    const booksFrom = new Date(now - 40 * DAY_MS);
    const app = o.app ? `'${o.app.appId}'` : `'svcop_ledger' || lpad((x.m * 2 + x.app_no)::text, 10, '0')`;
    const merchant = o.app ? `'${o.app.merchantId}'` : `'mch_ledger' || lpad(x.m::text, 6, '0')`;

    /** One batch of orders [from, to], on the connection of `q`. */
    const writeBatch = async (q: Query, from: number, to: number): Promise<void> => {
      await q('DROP TABLE IF EXISTS ledger_batch');
      // Each order's choices. Day: orders in time order over the history; time of day: two peaks.
      // Then what follows from them: paid at +40 s..+10 min; ended (closed, expired, failed) at the
      // window's end or a few minutes in; refunded up to a day later.
      await q(
        `CREATE TEMP TABLE ledger_batch AS
       SELECT y.*,
              CASE y.outcome WHEN 'PAID' THEN 'SUCCEEDED' WHEN 'FAILED' THEN 'FAILED' ELSE 'CLOSED' END AS status,
              CASE y.outcome WHEN 'EXPIRED' THEN 'EXPIRED' WHEN 'CLOSED' THEN 'MERCHANT_CLOSED' END AS closed_reason,
              CASE y.outcome WHEN 'FAILED' THEN 'PROVIDER_REJECTED' END AS failure_reason,
              CASE WHEN y.outcome = 'PAID' THEN CASE WHEN y.two THEN y.aid2 ELSE y.aid1 END END AS paid_aid,
              CASE WHEN y.two THEN y.ref2 ELSE y.ref1 END AS paid_ref,
              CASE WHEN y.outcome = 'PAID' THEN y.settled END AS paid_at,
              CASE WHEN y.refund THEN y.t + y.rdelay WHEN y.outcome = 'PAID' THEN y.settled
                   WHEN y.outcome = 'EXPIRED' THEN y.t + interval '15 minutes' ELSE y.t + interval '3 minutes' END AS o_updated,
              CASE WHEN y.refund THEN CASE WHEN y.half THEN greatest(1, y.amount / 2) ELSE y.amount END END AS ramount,
              y.t + y.rdelay AS r_at,
              -- JSON as the service writes it (JSON.stringify: no blanks), built as text
              '{"companyServiceFeeFen":' || (y.amount * 60 + 5000) / 10000 || ',"companyServiceFeeRateBps":60,"merchantRateBps":60,"merchantSettlementFen":'
                || y.amount - (y.amount * 60 + 5000) / 10000 || ',"ruleVersion":0,"thresholdFen":10000000,"tier":"STANDARD"}' AS fee
         FROM (
       SELECT g, ${app} AS app, ${merchant} AS mch, x.channel, x.amount, x.outcome, x.two, x.refund, x.half, x.dup, x.trade, x.fail1, x.t,
              least(interval '1 day', (to_timestamp($7::bigint / 1000.0) - x.t) / 2) AS rdelay,
              x.t + interval '40 seconds' + (g % 560) * interval '1 second' AS settled,
              'ord_' || pf.p || substr(h.h1, 1, 18) AS oid,
              'att_' || pf.p || substr(h.h2, 1, 18) AS aid1,
              'att_' || pf.p || substr(h.h2, 9, 18) AS aid2,
              'trd_' || pf.p || substr(h.h3, 1, 18) AS tid,
              'rf_' || pf.p || substr(h.h3, 9, 18) AS rid,
              'evt_' || pf.p || substr(h.h1, 9, 18) AS eid,
              'evt_' || pf.p || substr(h.h3, 5, 18) AS fid,
              -- the provider's references of the first and second attempt, their cashier tokens (43 characters, as base64url of 32 bytes)
              'sbx_' || substr(h.h1, 5, 24) AS ref1,
              'sbx_' || substr(h.h2, 5, 24) AS ref2,
              pf.p || substr(h.h1 || h.h3, 3, 37) AS token1,
              pf.p || substr(h.h2 || h.h1, 3, 37) AS token2,
              h.h2 AS digest, h.h3 AS rdigest
         FROM generate_series($1::bigint, $2::bigint) g,
         -- 384 random-looking bits per order, from which its ids are cut (md5 is most of a batch's CPU)
         LATERAL (SELECT md5('o' || g) AS h1, md5('a' || g) AS h2, md5('t' || g) AS h3) h,
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
                                   ELSE r.r_uni * 86400 END)::bigint % 86400 * 1000) / 1000.0) AS t) x,
         -- the minute each id leads with, as the service's ids do (src/domain/ids.ts)
         LATERAL (SELECT ${MINUTE_PREFIX_SQL} AS p) pf) y`,
        [from, to, merchants, histStart, o.orders, days, now, first],
      );
      await q(
        `INSERT INTO orders(id, app_id, merchant_id, out_trade_no, channel, amount_fen, currency, subject, payer_client_ip, digest, links,
                          status, closed_reason, failure_reason, expire_at, fee_projection, state_version, paid_attempt_id, paid_at,
                          created_at, updated_at, paid_trade_no)
       SELECT b.oid, b.app, b.mch, 'L' || lpad(b.g::text, 12, '0'), b.channel, b.amount, 'CNY',
              'Order ' || b.g, '203.0.113.' || (b.g % 250 + 1), b.digest, ARRAY['ALIPAY_AGGREGATION_NATIVE'],
              b.status, b.closed_reason, b.failure_reason, b.t + interval '15 minutes', b.fee::json, CASE WHEN b.refund THEN 4 ELSE 3 END,
              b.paid_aid, b.paid_at, b.t, b.o_updated, NULL
         FROM ledger_batch b`,
      );
      // Attempts: a first one closed before a second (8%), the last one PAID or CLOSED (or FAILED);
      // the provider's books: every attempt made, paid ones with their time.
      const attempts = `FROM ledger_batch b, LATERAL (SELECT 1 AS seq UNION ALL SELECT 2 WHERE b.two) s,
         LATERAL (SELECT CASE WHEN s.seq = 1 THEN b.aid1 ELSE b.aid2 END AS id, CASE WHEN s.seq = 1 THEN b.ref1 ELSE b.ref2 END AS ref,
                         CASE WHEN s.seq = 1 THEN b.token1 ELSE b.token2 END AS token,
                         CASE WHEN s.seq = 1 AND b.two THEN CASE WHEN b.dup THEN 'PAID' ELSE 'CLOSED' END
                              WHEN b.outcome = 'PAID' THEN 'PAID' WHEN b.outcome = 'FAILED' THEN 'FAILED' ELSE 'CLOSED' END AS state) a`;
      await q(
        `INSERT INTO attempts(id, order_id, seq, state, cashier_token, provider_ref, expire_at, created_at, updated_at, made_at, created_by, provider)
       SELECT a.id, b.oid, s.seq, a.state, a.token, a.ref,
              b.t + interval '15 minutes', b.t + (s.seq - 1) * interval '20 seconds', b.settled,
              b.t + (s.seq - 1) * interval '20 seconds' + interval '300 milliseconds', 'ledger', 'sandbox'
       ${attempts}`,
      );
      await q(
        `INSERT INTO sandbox_payments(provider_ref, attempt_id, channel, amount_fen, state, created_at, updated_at, expire_at, paid_at)
       SELECT a.ref, a.id, b.channel, b.amount, CASE WHEN a.state = 'PAID' THEN 'PAID' ELSE 'CLOSED' END, b.t + (s.seq - 1) * interval '20 seconds',
              b.settled, b.t + interval '15 minutes', CASE WHEN a.state = 'PAID' THEN b.settled END
       ${attempts}
        WHERE b.t >= $1`,
        [booksFrom],
      );
      await q(
        `INSERT INTO provider_trades(id, attempt_id, order_id, provider, product, payer, handle, state, provider_ref, created_at, updated_at)
       SELECT b.tid, b.paid_aid, b.oid, 'sandbox', 'JSAPI', 'openid-' || substr(md5('u' || b.g), 1, 20),
              substr(md5('h' || b.g), 1, 22), 'CLOSED', 'sbx_' || substr(md5('q' || b.g), 1, 24), b.t + interval '10 seconds', b.settled
         FROM ledger_batch b WHERE b.trade`,
      );
      await q(
        `INSERT INTO duplicate_payments(id, order_id, attempt_id, amount_fen, refund_state, provider_ref, created_at, updated_at, provider, trade_no)
       SELECT 'dup_' || substr(b.aid1, 5), b.oid, b.aid1, b.amount, 'REFUNDED', 'sbx_rf_' || substr(md5('z' || b.g), 1, 24),
              b.t + interval '1 hour', b.t + interval '1 hour 1 minute', 'sandbox', b.aid1
         FROM ledger_batch b WHERE b.dup`,
      );
      await q(
        `INSERT INTO refunds(id, order_id, app_id, out_refund_no, amount_fen, reason, digest, state, provider_ref, created_at, updated_at, created_by, provider)
       SELECT b.rid, b.oid, b.app, 'LR' || lpad(b.g::text, 12, '0'), b.ramount, 'customer request', b.rdigest, 'SUCCEEDED',
              'sbx_rf_' || substr(b.rid, 4), b.r_at - interval '5 seconds', b.r_at, 'ledger', 'sandbox'
         FROM ledger_batch b WHERE b.refund`,
      );
      await q(
        `INSERT INTO sandbox_refunds(provider_ref, refund_key, payment_ref, amount_fen, state, settle_at, created_at, notice_sent, lost)
       SELECT 'sbx_rf_' || substr(b.rid, 4), b.rid, b.paid_ref, b.ramount, 'SUCCEEDED', b.r_at, b.r_at - interval '5 seconds', true, false
         FROM ledger_batch b WHERE b.refund AND b.t >= $1`,
        [booksFrom],
      );
      // The events each change reported, exactly as delivered (src/domain/events.ts), and their delivery log.
      const iso = (col: string) => `to_char(${col} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;
      const events = `FROM ledger_batch b,
         LATERAL (SELECT b.eid AS id, NULL::text AS refund_id, CASE b.status WHEN 'SUCCEEDED' THEN 'PAYMENT_SUCCEEDED' WHEN 'FAILED' THEN 'PAYMENT_FAILED'
                                                             ELSE 'PAYMENT_CLOSED' END AS type, 3 AS v, coalesce(b.paid_at, b.o_updated) AS at
                  UNION ALL
                  SELECT b.fid, b.rid, 'REFUND_SUCCEEDED', 4, b.r_at WHERE b.refund) e`;
      await q(
        `INSERT INTO events(id, app_id, order_id, refund_id, event_type, state_version, payload, status, attempts, next_attempt_at, created_at, delivered_at)
       SELECT e.id, b.app, b.oid, e.refund_id, e.type, e.v,
              ('{"appId":"' || b.app || '","attach":null,"eventAmountFen":' || CASE WHEN e.refund_id IS NULL THEN b.amount ELSE b.ramount END
                || ',"eventId":"' || e.id || '","eventType":"' || e.type || '","feeProjection":'
                || CASE WHEN e.type = 'PAYMENT_SUCCEEDED' THEN b.fee ELSE 'null' END || ',"grossAmountFen":' || b.amount
                || ',"occurredAt":"' || ${iso('e.at')} || '","outRefundNo":'
                || CASE WHEN e.refund_id IS NOT NULL THEN '"LR' || lpad(b.g::text, 12, '0') || '"' ELSE 'null' END
                || ',"outTradeNo":"L' || lpad(b.g::text, 12, '0') || '","reason":'
                || coalesce('"' || CASE WHEN e.refund_id IS NOT NULL THEN 'customer request' WHEN e.type = 'PAYMENT_CLOSED' THEN b.closed_reason
                                        WHEN e.type = 'PAYMENT_FAILED' THEN b.failure_reason END || '"', 'null')
                || ',"stateVersion":' || e.v || ',"status":"' || CASE WHEN e.refund_id IS NOT NULL THEN 'SUCCEEDED' ELSE b.status END || '"}')::json,
              'DELIVERED', CASE WHEN b.fail1 THEN 2 ELSE 1 END, e.at, e.at, e.at + CASE WHEN b.fail1 THEN interval '12 seconds' ELSE interval '150 milliseconds' END
       ${events}`,
      );
      await q(
        `INSERT INTO event_deliveries(event_id, attempt_no, attempted_at, status_code, error, duration_ms, response_excerpt)
       SELECT e.id, n.no, e.at + (n.no - 1) * interval '12 seconds', CASE WHEN n.no < n.last THEN 500 ELSE 200 END,
              CASE WHEN n.no < n.last THEN 'HTTP 500' END, 20 + length(e.id) % 80, CASE WHEN n.no < n.last THEN 'busy' ELSE 'ok' END
       ${events}, LATERAL (SELECT k AS no, CASE WHEN b.fail1 THEN 2 ELSE 1 END AS last FROM generate_series(1, CASE WHEN b.fail1 THEN 2 ELSE 1 END) k) n
        -- as retention leaves them: a failed attempt older than 30 days is gone (PURGE_HISTORY), the 200 stays
        WHERE n.no = n.last OR e.at >= $1`,
        [new Date(now - 30 * DAY_MS)],
      );
      // The request-id records the replay window still keeps (the last 26 hours).
      await q(
        `INSERT INTO request_replays(app_id, request_id, method, target, body_sha256, state, status_code, response_body, created_at)
       SELECT b.app, 'req-' || b.g, 'POST', '/api/open/v1/payments', b.digest, 'DONE', 201,
              '{"requestId":"req-' || b.g || '","openOrderId":"' || b.oid || '"}', b.t
         FROM ledger_batch b WHERE b.t > $1`,
        [new Date(now - 26 * 3600_000)],
      );
      // An operator's change now and then (the audit log is append-only and kept).
      await q(
        `INSERT INTO audit_log(at, actor_kind, operator_id, operator_name, channel, source_ip, request_id, action, entity_type, entity_id,
                             before, after, merchant_id)
       SELECT b.t + interval '2 hours', 'SESSION', 'op_ledger' || (b.g % 7), 'ops-' || (b.g % 7), 'console', '10.0.0.' || (b.g % 7 + 1),
              'req-audit-' || b.g, 'order.close', 'order', b.oid, json_build_object('status', 'PAYING')::jsonb,
              json_build_object('status', 'CLOSED')::jsonb, b.mch
         FROM ledger_batch b WHERE b.g % 2000 = 0`,
      );
      // The reconciliation lines of each day's run: a provider line per payment and per refund, matched.
      if (runIds.length > 0 && !o.app) {
        await q(
          `INSERT INTO reconciliation_lines(run_id, line_no, origin, kind, subject_id, provider_ref, amount_fen, state, occurred_at, outcome)
         SELECT rr.id, l.no, 'PROVIDER', l.kind, l.subject, l.ref, l.amount, 'SUCCESS', l.at, 'MATCHED'
           FROM (SELECT b.g * 2 AS no, 'PAYMENT' AS kind, b.paid_aid AS subject, b.paid_ref AS ref, b.amount, b.paid_at AS at
                   FROM ledger_batch b WHERE b.outcome = 'PAID'
                 UNION ALL
                 SELECT b.g * 2 + 1, 'REFUND', b.rid, 'sbx_rf_' || substr(b.rid, 4), b.ramount, b.r_at
                   FROM ledger_batch b WHERE b.refund) l
           JOIN unnest($1::bigint[], $2::date[]) AS rr(id, day) ON rr.day = (l.at AT TIME ZONE 'Asia/Shanghai')::date`,
          [runIds, runDays],
        );
      }
    };
    // Batches on `workers` connections at once, each batch's random choices seeded by its number.
    const batches: [number, number][] = [];
    for (let from = first; from <= last; from += batch) batches.push([from, Math.min(last, from + batch - 1)]);
    let next = 0;
    let done = 0;
    let failed = false;
    const worker = async (): Promise<void> => {
      const wc = new pg.Client({ connectionString: url });
      await wc.connect();
      const wq = traced(wc);
      try {
        await session(wq);
        while (!failed && next < batches.length) {
          const i = next++;
          const [from, to] = batches[i]!;
          const tb = performance.now();
          await wq(`SELECT setseed(${(((i * 7919) % 19997) / 19997 - 0.5).toFixed(6)})`);
          await writeBatch(wq, from, to);
          done += to - from + 1;
          log(
            `  ledger: ${done} of ${o.orders} orders written (${((performance.now() - tb) / 1000).toFixed(1)} s for a batch of ${to - from + 1})`,
          );
        }
        await wq('DROP TABLE IF EXISTS ledger_batch');
      } catch (e) {
        failed = true;
        throw e;
      } finally {
        await wc.end();
      }
    };
    await Promise.all(Array.from({ length: Math.min(workers, batches.length) }, () => worker()));
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
    log('  ledger: vacuuming and analyzing');
    const tv = performance.now();
    // Vacuumed before the indexes are built: the pages' hint bits and visibility set once, no index to walk.
    const extra = await Promise.all(
      Array.from({ length: workers - 1 }, async () => {
        const x = new pg.Client({ connectionString: url });
        await x.connect();
        return x;
      }),
    );
    try {
      const qs = [q, ...extra.map(traced)];
      for (const x of qs.slice(1)) await session(x);
      await onConnections(qs, [...TABLES], (q, t) => q(`VACUUM ANALYZE ${t}`).then(() => {}));
      if (schema) {
        await restoreSchema(qs, schema, log);
        for (const t of LARGE) await q(`ALTER TABLE ${t} RESET (autovacuum_enabled)`);
        schema = null;
        rebuildSeconds = (performance.now() - tv) / 1000;
      }
    } finally {
      for (const x of extra) await x.end();
    }
    const rows = {} as Record<(typeof TABLES)[number], number>;
    for (const t of TABLES) {
      rows[t] = Number((await q(`SELECT count(*)::bigint AS n FROM ${t}`)).rows[0].n);
    }
    const databaseBytes = Number((await q('SELECT pg_database_size(current_database())::bigint AS n')).rows[0].n);
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
      rebuildSeconds,
      rows,
      databaseBytes,
      firstDay: shanghaiDay(histStart),
      lastDay: shanghaiDay(todayStart - DAY_MS),
      sample: { appId: sr.app_id, merchantId: sr.merchant_id, outTradeNo: sr.out_trade_no, openOrderId: sr.id },
    };
  } finally {
    // A failed fill leaves the schema whole: what was dropped is rebuilt (the rows written stay).
    if (schema) {
      const s = schema;
      await q('ROLLBACK')
        .catch(() => {})
        .then(() => restoreSchema([q], s, log))
        .then(async () => {
          for (const t of LARGE) await q(`ALTER TABLE ${t} RESET (autovacuum_enabled)`);
        })
        .catch((e: unknown) => log(`  ledger: restoring the indexes after a failed fill: ${String(e)}`));
    }
    await c.end();
  }
}

/**
 * The ledger a reused data folder already holds (`npm run bench -- --data-dir`), when it has at least
 * 95% of `orders` (the orders table's estimated rows) and the fill's merchants; else null. Rows as
 * the planner estimates them (counting 20 million rows would take minutes).
 */
export async function existingLedger(url: string, orders: number): Promise<LedgerResult | null> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    const est = await c.query<{ relname: string; n: number }>(
      `SELECT relname, greatest(reltuples, 0)::float8 AS n FROM pg_class WHERE relname = ANY($1) AND relkind = 'r' AND relnamespace = 'public'::regnamespace`,
      [TABLES],
    );
    const rows = Object.fromEntries(est.rows.map((r) => [r.relname, Math.round(r.n)])) as Record<(typeof TABLES)[number], number>;
    const merchants = ledgerMerchants(orders);
    const m = await c.query<{ n: number }>(`SELECT count(*)::int AS n FROM merchants WHERE id LIKE 'mch_ledger%'`);
    if ((rows.orders ?? 0) < orders * 0.95 || (m.rows[0]?.n ?? 0) < merchants) return null;
    const d = await c.query<{ first: string; last: string }>(
      `SELECT min(day)::text AS first, max(day)::text AS last FROM reconciliation_runs WHERE trigger = 'SCHEDULED' AND created_at <= now() - interval '1 day'`,
    );
    const s = await c.query(
      `SELECT o.app_id, o.merchant_id, o.out_trade_no, o.id FROM orders o
        WHERE o.merchant_id = 'mch_ledger000000' AND o.status = 'SUCCEEDED' ORDER BY o.created_at LIMIT 1`,
    );
    const sr = s.rows[0] ?? { app_id: '', merchant_id: '', out_trade_no: '', id: '' };
    const size = await c.query<{ n: string }>('SELECT pg_database_size(current_database())::bigint AS n');
    return {
      orders: rows.orders,
      merchants,
      apps: merchants * 2,
      seconds: 0,
      rebuildSeconds: 0,
      rows,
      databaseBytes: Number(size.rows[0]!.n),
      firstDay: d.rows[0]?.first ?? '',
      lastDay: d.rows[0]?.last ?? '',
      sample: { appId: sr.app_id, merchantId: sr.merchant_id, outTradeNo: sr.out_trade_no, openOrderId: sr.id },
    };
  } finally {
    await c.end();
  }
}
