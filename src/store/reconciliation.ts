/**
 * Repository: reconciliation runs and their lines (migrations/0014), and the set-based matching of
 * a provider's statement against the ledger (docs/reconciliation.md). Every finding becomes a row
 * of provider_discrepancies (source STATEMENT), the one place an operator looks.
 */
import { FLAGGED_OUTCOMES, type LineOutcome, type StatementLine } from '../domain/reconciliation.ts';
import type { RunState, Transition } from '../domain/states.ts';
import type { Db, Queryable, Tx } from './db.ts';
import { withTx } from './db.ts';

export type RunTrigger = 'SCHEDULED' | 'ON_DEMAND';
export type RunStatus = RunState;

export interface RunRow {
  id: string;
  provider: string;
  day: string;
  trigger: RunTrigger;
  status: RunStatus;
  tries: number;
  /** When it runs (again): the RECONCILE_STATEMENT job's time when it was queued or failed. */
  dueAt: Date;
  providerLines: number | null;
  ledgerLines: number | null;
  matched: number | null;
  converged: number | null;
  discrepancies: number | null;
  error: string | null;
  createdAt: Date;
  startedAt: Date | null;
  finishedAt: Date | null;
}

const RUN_COLS = `id::text, provider, to_char(day, 'YYYY-MM-DD') AS day, trigger, status, tries, due_at AS "dueAt",
  provider_lines AS "providerLines", ledger_lines AS "ledgerLines", matched, converged, discrepancies,
  error, created_at AS "createdAt", started_at AS "startedAt", finished_at AS "finishedAt"`;

/** An on-demand run, due now. */
export async function queueRun(db: Queryable, provider: string, day: string, now: Date): Promise<RunRow> {
  const r = await db.query<RunRow>(
    `INSERT INTO reconciliation_runs(provider, day, trigger, status, due_at, created_at) VALUES ($1, $2, 'ON_DEMAND', 'QUEUED', $3, $3)
     RETURNING ${RUN_COLS}`,
    [provider, day, now],
  );
  return r.rows[0]!;
}

/** The daily run of a provider and day, created once (by whichever instance comes first): its id when this call created it. */
export async function ensureScheduledRun(db: Queryable, provider: string, day: string, now: Date): Promise<string | null> {
  const r = await db.query<{ id: string }>(
    `INSERT INTO reconciliation_runs(provider, day, trigger, status, due_at, created_at) VALUES ($1, $2, 'SCHEDULED', 'QUEUED', $3, $3)
     ON CONFLICT (provider, day) WHERE trigger = 'SCHEDULED' DO NOTHING RETURNING id::text`,
    [provider, day, now],
  );
  return r.rows[0]?.id ?? null;
}

/**
 * A run starts (its RECONCILE_STATEMENT job was claimed): `t` (to RUNNING, from the state the
 * caller read), one try more, its previous lines dropped. Null when the run is not in `t.from`
 * (it moved on meanwhile, or is unknown).
 */
export async function startRun(db: Queryable, runId: string, t: Transition<'run'>, now: Date): Promise<RunRow | null> {
  const r = await db.query<RunRow>(
    `UPDATE reconciliation_runs SET status = $3, tries = tries + 1, started_at = $2, error = NULL
      WHERE id = $1 AND status = $4 RETURNING ${RUN_COLS}`,
    [runId, now, t.to, t.from],
  );
  if (r.rows[0]) await db.query('DELETE FROM reconciliation_lines WHERE run_id = $1', [runId]);
  return r.rows[0] ?? null;
}

/**
 * Fresh statistics of the lines' table (PostgreSQL's ANALYZE: a sample of ~30,000 rows, whatever
 * the table's size): taken after a run's provider lines are stored, before they are matched.
 */
export async function refreshLineStatistics(db: Queryable): Promise<void> {
  await db.query('ANALYZE reconciliation_lines');
}

/** Lines of the provider's statement, numbered from `firstLineNo`. */
export async function insertProviderLines(db: Queryable, runId: string, firstLineNo: number, lines: StatementLine[]): Promise<void> {
  await db.query(
    `INSERT INTO reconciliation_lines(run_id, line_no, origin, kind, subject_id, provider_ref, amount_fen, state, occurred_at)
     SELECT $1, $2::integer + n::integer - 1, 'PROVIDER', k, s, r, a, st, t
       FROM unnest($3::text[], $4::text[], $5::text[], $6::bigint[], $7::text[], $8::timestamptz[]) WITH ORDINALITY AS x(k, s, r, a, st, t, n)`,
    [
      runId,
      firstLineNo,
      lines.map((l) => l.kind),
      lines.map((l) => l.subjectId),
      lines.map((l) => l.providerRef),
      lines.map((l) => l.amountFen),
      lines.map((l) => l.state),
      lines.map((l) => l.at),
    ],
  );
}

/**
 * Whether the ledger holds the payment of the provider order a line names (`t`: its trade row, if
 * the number is a trade's; `a`, `o`: the attempt it belongs to and its order): a trade paid; an
 * attempt's own order paid, unless the order was paid through a trade of that attempt and this
 * order's payment is not recorded as a duplicate.
 */
const PAID_IN_LEDGER = `(CASE WHEN t.id IS NOT NULL THEN t.state = 'PAID'
  ELSE a.state = 'PAID' AND (o.paid_trade_no IS NULL OR o.paid_attempt_id IS DISTINCT FROM a.id
                             OR EXISTS (SELECT 1 FROM duplicate_payments dp WHERE dp.trade_no = a.id)) END)`;

/**
 * Classifies the provider's lines numbered [from, to] against the ledger, in one statement each
 * for payments and refunds (the ledger's rows found by primary key). A payment: unknown
 * (PAYMENT_NOT_RECORDED), held by another provider, of another amount, matched, paid there but not
 * here (TO_CONVERGE: the notice path applies it), or in a state that contradicts the ledger. A
 * refund likewise (a duplicate payment's automatic refund is one of ours too).
 */
export async function classifyProviderLines(db: Queryable, runId: string, provider: string, from: number, to: number): Promise<void> {
  const classify = (kind: 'PAYMENT' | 'REFUND', outcome: string, joins: string) =>
    db.query(
      `UPDATE reconciliation_lines l SET outcome = c.outcome
         FROM (SELECT x.line_no, ${outcome} AS outcome FROM reconciliation_lines x ${joins}
                WHERE x.run_id = $1 AND x.line_no BETWEEN $3 AND $4 AND x.origin = 'PROVIDER' AND x.kind = '${kind}') c
        WHERE l.run_id = $1 AND l.line_no = c.line_no`,
      [runId, provider, from, to],
    );
  await classify(
    'PAYMENT',
    `CASE WHEN a.id IS NULL THEN 'PAYMENT_NOT_RECORDED'
          WHEN coalesce(t.provider, a.provider) <> $2 THEN 'PROVIDER_MISMATCH'
          WHEN x.amount_fen IS DISTINCT FROM o.amount_fen THEN 'AMOUNT_MISMATCH'
          WHEN x.state = 'PAID' AND ${PAID_IN_LEDGER} THEN 'MATCHED'
          WHEN x.state = 'PAID' THEN 'TO_CONVERGE'
          WHEN x.state = 'REVOKED' AND NOT ${PAID_IN_LEDGER} THEN 'MATCHED'
          ELSE 'STATE_MISMATCH' END`,
    // The line's number is an attempt's own provider order, or a trade of an attempt (migrations/0020).
    `LEFT JOIN provider_trades t ON t.id = x.subject_id LEFT JOIN attempts a ON a.id = coalesce(t.attempt_id, x.subject_id)
     LEFT JOIN orders o ON o.id = a.order_id`,
  );
  await classify(
    'REFUND',
    `CASE WHEN r.id IS NULL AND d.id IS NULL THEN 'REFUND_NOT_RECORDED'
          WHEN r.id IS NULL AND d.provider <> $2 THEN 'PROVIDER_MISMATCH'
          WHEN r.id IS NULL AND x.amount_fen IS DISTINCT FROM d.amount_fen THEN 'AMOUNT_MISMATCH'
          WHEN r.id IS NULL THEN 'MATCHED'
          WHEN r.provider <> $2 THEN 'PROVIDER_MISMATCH'
          WHEN x.amount_fen IS DISTINCT FROM r.amount_fen THEN 'AMOUNT_MISMATCH'
          WHEN x.state = 'SUCCEEDED' AND r.state = 'SUCCEEDED' THEN 'MATCHED'
          WHEN x.state = 'SUCCEEDED' THEN 'TO_CONVERGE'
          WHEN x.state = 'PENDING' AND r.state <> 'FAILED' THEN 'MATCHED'
          WHEN x.state = 'FAILED' AND r.state <> 'SUCCEEDED' THEN 'MATCHED'
          ELSE 'STATE_MISMATCH' END`,
    'LEFT JOIN refunds r ON r.id = x.subject_id LEFT JOIN duplicate_payments d ON d.id = x.subject_id',
  );
}

/**
 * The ledger's side: the payments and refunds of the provider that succeeded in [start, end) (their
 * events, events_settled_created) that the statement does not list, added as LEDGER lines to check
 * with the provider (TO_CHECK), numbered from `firstLineNo`. Answers how many.
 */
export async function addLedgerOnlyLines(
  db: Queryable,
  runId: string,
  provider: string,
  start: Date,
  end: Date,
  firstLineNo: number,
): Promise<number> {
  const r = await db.query(
    `INSERT INTO reconciliation_lines(run_id, line_no, origin, kind, subject_id, provider_ref, amount_fen, state, occurred_at, outcome)
     SELECT $1, $5::integer - 1 + (row_number() OVER (ORDER BY m.at, m.subject_id))::integer, 'LEDGER', m.kind, m.subject_id, m.ref, m.amount, 'SUCCEEDED', m.at, 'TO_CHECK'
       FROM (SELECT 'PAYMENT' AS kind, coalesce(o.paid_trade_no, a.id) AS subject_id, coalesce(t.provider_ref, a.provider_ref) AS ref,
                    o.amount_fen AS amount, e.created_at AS at
               FROM events e JOIN orders o ON o.id = e.order_id JOIN attempts a ON a.id = o.paid_attempt_id
               LEFT JOIN provider_trades t ON t.id = o.paid_trade_no
              WHERE e.event_type = 'PAYMENT_SUCCEEDED' AND e.created_at >= $3 AND e.created_at < $4 AND coalesce(t.provider, a.provider) = $2
             UNION ALL
             SELECT 'REFUND', r.id, r.provider_ref, r.amount_fen, e.created_at
               FROM events e JOIN refunds r ON r.id = e.refund_id
              WHERE e.event_type = 'REFUND_SUCCEEDED' AND e.created_at >= $3 AND e.created_at < $4 AND r.provider = $2) m
      WHERE NOT EXISTS (SELECT 1 FROM reconciliation_lines p
                         WHERE p.run_id = $1 AND p.subject_id = m.subject_id AND p.origin = 'PROVIDER' AND p.kind = m.kind)`,
    [runId, provider, start, end, firstLineNo],
  );
  return r.rowCount ?? 0;
}

export interface LineRow {
  lineNo: number;
  origin: 'PROVIDER' | 'LEDGER';
  kind: 'PAYMENT' | 'REFUND';
  subjectId: string;
  providerRef: string | null;
  amountFen: number | null;
  state: string;
  occurredAt: Date | null;
  outcome: string | null;
  discrepancyId: string | null;
}

const LINE_COLS = `line_no AS "lineNo", origin, kind, subject_id AS "subjectId", provider_ref AS "providerRef", amount_fen AS "amountFen",
  state, occurred_at AS "occurredAt", outcome, discrepancy_id::text AS "discrepancyId"`;

/** The run's lines with `outcome` (any when null), after `afterLineNo`, in line order. */
export async function listLines(
  db: Queryable,
  runId: string,
  o: { outcome: string | null; afterLineNo: number; limit: number },
): Promise<LineRow[]> {
  const r = await db.query<LineRow>(
    `SELECT ${LINE_COLS} FROM reconciliation_lines
      WHERE run_id = $1 AND ($2::text IS NULL OR outcome = $2) AND line_no > $3 ORDER BY line_no LIMIT $4`,
    [runId, o.outcome, o.afterLineNo, o.limit],
  );
  return r.rows;
}

export async function setLineOutcome(db: Queryable, runId: string, lineNo: number, outcome: LineOutcome): Promise<void> {
  await db.query('UPDATE reconciliation_lines SET outcome = $3 WHERE run_id = $1 AND line_no = $2', [runId, lineNo, outcome]);
}

/** The number of lines of each outcome. */
export async function outcomeCounts(db: Queryable, runId: string): Promise<Record<string, number>> {
  const r = await db.query<{ outcome: string; n: number }>(
    `SELECT coalesce(outcome, 'UNCLASSIFIED') AS outcome, count(*)::int AS n FROM reconciliation_lines WHERE run_id = $1 GROUP BY 1`,
    [runId],
  );
  return Object.fromEntries(r.rows.map((x) => [x.outcome, x.n]));
}

/**
 * The run's findings kept for the operator, in one transaction: each flagged line becomes a
 * provider_discrepancies row (source STATEMENT; the same finding again is the same row, so a
 * rerun adds none), and each converged line a row RESOLVED at once (PAID_NOT_NOTIFIED,
 * REFUND_NOT_NOTIFIED: found, and applied through the notice path). The lines are linked to their
 * rows. Findings of earlier runs of the provider and day that this run no longer finds are
 * resolved, and those runs' lines dropped (the latest run's lines are kept).
 */
/** The finding a line of `l` is kept as: its outcome, or for a converged line PAID_NOT_NOTIFIED / REFUND_NOT_NOTIFIED. */
const FINDING_KIND = `CASE l.outcome WHEN 'CONVERGED' THEN (CASE l.kind WHEN 'PAYMENT' THEN 'PAID_NOT_NOTIFIED' ELSE 'REFUND_NOT_NOTIFIED' END)
  ELSE l.outcome END`;

export async function recordFindings(db: Db, run: { id: string; provider: string; day: string }, now: Date): Promise<void> {
  await withTx(db, async (tx: Tx) => {
    await tx.query(
      `INSERT INTO provider_discrepancies(provider, source, kind, subject_id, expected, reported, status, created_at, resolved_at)
       SELECT $2, 'STATEMENT', f.kind, f.subject_id, f.expected, f.reported,
              CASE WHEN f.converged THEN 'RESOLVED' ELSE 'OPEN' END, $3, CASE WHEN f.converged THEN $3::timestamptz END
         FROM (SELECT ${FINDING_KIND} AS kind,
                      l.outcome = 'CONVERGED' AS converged, l.subject_id,
                      CASE WHEN l.kind = 'PAYMENT' THEN
                             (SELECT jsonb_build_object('amountFen', o.amount_fen, 'attemptState', a.state, 'provider', a.provider)
                                FROM attempts a JOIN orders o ON o.id = a.order_id
                               WHERE a.id = coalesce((SELECT attempt_id FROM provider_trades WHERE id = l.subject_id), l.subject_id))
                           ELSE coalesce(
                             (SELECT jsonb_build_object('amountFen', r.amount_fen, 'refundState', r.state, 'provider', r.provider)
                                FROM refunds r WHERE r.id = l.subject_id),
                             (SELECT jsonb_build_object('amountFen', d.amount_fen, 'refundState', d.refund_state, 'provider', d.provider)
                                FROM duplicate_payments d WHERE d.id = l.subject_id)) END AS expected,
                      CASE WHEN l.origin = 'LEDGER' THEN jsonb_build_object('inStatement', false, 'day', $4::text, 'runId', $1::bigint::text)
                           ELSE jsonb_build_object('inStatement', true, 'day', $4::text, 'runId', $1::bigint::text, 'amountFen', l.amount_fen,
                                                   'state', l.state, 'providerRef', l.provider_ref, 'at', l.occurred_at) END AS reported
                 FROM reconciliation_lines l
                WHERE l.run_id = $1 AND (l.outcome = 'CONVERGED' OR l.outcome = ANY($5::text[]))) f
       ON CONFLICT (provider, source, kind, subject_id) DO NOTHING`,
      [run.id, run.provider, now, run.day, FLAGGED_OUTCOMES],
    );
    await tx.query(
      `UPDATE reconciliation_lines l SET discrepancy_id = d.id
         FROM provider_discrepancies d
        WHERE l.run_id = $1 AND (l.outcome = 'CONVERGED' OR l.outcome = ANY($3::text[]))
          AND d.provider = $2 AND d.source = 'STATEMENT' AND d.subject_id = l.subject_id
          AND d.kind = ${FINDING_KIND}`,
      [run.id, run.provider, FLAGGED_OUTCOMES],
    );
    const earlier = `SELECT id FROM reconciliation_runs WHERE provider = $2 AND day = $3 AND id < $1 AND status = 'COMPLETED'`;
    await tx.query(
      `UPDATE provider_discrepancies SET status = 'RESOLVED', resolved_at = $4
        WHERE status = 'OPEN'
          AND id IN (SELECT discrepancy_id FROM reconciliation_lines WHERE run_id IN (${earlier}) AND discrepancy_id IS NOT NULL)
          AND id NOT IN (SELECT discrepancy_id FROM reconciliation_lines WHERE run_id = $1 AND discrepancy_id IS NOT NULL)`,
      [run.id, run.provider, run.day, now],
    );
    await tx.query(`DELETE FROM reconciliation_lines WHERE run_id IN (${earlier})`, [run.id, run.provider, run.day]);
  });
}

export interface RunCounts {
  providerLines: number;
  ledgerLines: number;
  matched: number;
  converged: number;
  discrepancies: number;
}

/**
 * A running run completed with its counts (`t`: RUNNING to COMPLETED) by the holder of its try
 * `tries`; null when it is not in `t.from` or not at that try (a holder whose run was started again
 * by another completes nothing).
 */
export async function completeRun(
  db: Queryable,
  runId: string,
  tries: number,
  t: Transition<'run'>,
  c: RunCounts,
  now: Date,
): Promise<RunRow | null> {
  const r = await db.query<RunRow>(
    `UPDATE reconciliation_runs SET status = $9, finished_at = $2, provider_lines = $3, ledger_lines = $4,
            matched = $5, converged = $6, discrepancies = $7, error = NULL
      WHERE id = $1 AND status = $10 AND tries = $8 RETURNING ${RUN_COLS}`,
    [runId, now, c.providerLines, c.ledgerLines, c.matched, c.converged, c.discrepancies, tries, t.to, t.from],
  );
  return r.rows[0] ?? null;
}

/**
 * A running run failed (`t`: RUNNING to FAILED) under the holder of its try `tries`: tried again
 * from `retryAt` (its lines so far dropped); answers whether it was in `t.from` at that try.
 */
export async function failRun(
  db: Queryable,
  runId: string,
  tries: number,
  t: Transition<'run'>,
  error: string,
  now: Date,
  retryAt: Date,
): Promise<boolean> {
  const r = await db.query(
    `UPDATE reconciliation_runs SET status = $6, finished_at = $2, due_at = $3, error = $4
      WHERE id = $1 AND status = $7 AND tries = $5`,
    [runId, now, retryAt, error.slice(0, 1000), tries, t.to, t.from],
  );
  if (r.rowCount === 1) await db.query('DELETE FROM reconciliation_lines WHERE run_id = $1', [runId]);
  return r.rowCount === 1;
}

export async function getRun(db: Queryable, runId: string): Promise<RunRow | null> {
  if (!/^\d{1,18}$/.test(runId)) return null;
  const r = await db.query<RunRow>(`SELECT ${RUN_COLS} FROM reconciliation_runs WHERE id = $1`, [runId]);
  return r.rows[0] ?? null;
}

export async function listRuns(db: Queryable, f: { provider: string | null; day: string | null; limit: number }): Promise<RunRow[]> {
  const r = await db.query<RunRow>(
    `SELECT ${RUN_COLS} FROM reconciliation_runs WHERE ($1::text IS NULL OR provider = $1) AND ($2::date IS NULL OR day = $2)
      ORDER BY id DESC LIMIT $3`,
    [f.provider, f.day, f.limit],
  );
  return r.rows;
}

/** When each provider's latest run completed, and with how many discrepancies (the metrics). */
export async function latestCompletedRuns(db: Queryable): Promise<{ provider: string; finishedAt: Date; discrepancies: number }[]> {
  const r = await db.query<{ provider: string; finishedAt: Date; discrepancies: number }>(
    `SELECT DISTINCT ON (provider) provider, finished_at AS "finishedAt", discrepancies FROM reconciliation_runs
      WHERE status = 'COMPLETED' ORDER BY provider, finished_at DESC`,
  );
  return r.rows;
}
