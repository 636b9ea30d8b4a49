/**
 * Reconciliation of the ledger with each provider's statement of a day (docs/reconciliation.md).
 *
 * A run fetches the provider's statement (its bill) of an Asia/Shanghai day, stores its lines,
 * and matches them against the ledger in set-based statements (src/store/reconciliation.ts):
 *  - a payment the provider took that the ledger has not recorded as paid is applied through the
 *    normal notice path (applyNotification), so the order succeeds and the merchant gets its
 *    event; the finding is kept, resolved at once (PAID_NOT_NOTIFIED), as is a refund the
 *    provider settled that the ledger still had open (REFUND_NOT_NOTIFIED);
 *  - a payment or refund the ledger does not know at all, an amount or a state that differs, a
 *    payment held by another provider: kept for the operator;
 *  - what the ledger has as succeeded that day but the statement lacks is asked of the provider
 *    (it may fall on the other side of midnight there): absent there too, it is kept for the
 *    operator (MISSING_AT_PROVIDER, REFUND_MISSING_AT_PROVIDER).
 * Every finding is a provider_discrepancies row (source STATEMENT), once per subject and kind: a
 * rerun finds the same rows, applies nothing twice (the notice path is idempotent), and resolves
 * what it no longer finds.
 *
 * Runs are rows, each run by its RECONCILE_STATEMENT job (several instances run each once): the
 * daily run of yesterday for each provider that has statements, created from RECONCILIATION_HOUR
 * (SCHEDULE_RECONCILIATION), and runs asked for by an operator for any day. A run works in the
 * background of the worker loop, renewing its job's lease, so a large statement does not hold up
 * the other jobs; an instance executes one run at a time, and parses its bill in slices that take
 * their turns in the main thread's share of expensive work (WorkTurns), as statement files do.
 */
import { DomainError } from '../domain/errors.ts';
import type { Actor } from '../domain/operators.ts';
import { ProviderUncertainError, type PaymentProvider, type ProviderStatementLine } from '../providers/provider.ts';
import * as orders from '../store/orders.ts';
import * as recon from '../store/reconciliation.ts';
import type { LineRow, RunRow } from '../store/reconciliation.ts';
import { FLAGGED_OUTCOMES, type LineOutcome } from '../domain/reconciliation.ts';
import { canTransition, transition } from '../domain/states.ts';
import { shanghaiDay } from '../domain/money.ts';
import { shanghaiDayStart } from '../domain/statements.ts';
import * as refunds from '../store/refunds.ts';
import { retryDelayMs } from '../domain/jobs.ts';
import { withTx } from '../store/db.ts';
import * as jobs from '../store/jobs.ts';
import { type UseCaseDeps, nowOf } from './deps.ts';
import { audited } from './audit.ts';
import { JOB_LEASE_MS, type Job, type JobOutcome } from './jobs.ts';
import { applyNotification, ownerOfTradeNo } from './notifications.ts';

/** The daily run of yesterday is created from this hour, Asia/Shanghai (the acquirers' bills of T-1 are ready by then). */
export const RECONCILIATION_HOUR = 10;
// A failed run (the statement not ready, the provider not answering) is tried again an hour later,
// 6 times in all: the RECONCILE_STATEMENT kind's backoff (src/domain/jobs.ts).
/** Statement lines stored per statement; lines classified per statement. */
const LINE_BATCH = 2000;
/** Bill lines parsed in one slice of the main thread (a few µs each). */
const SLICE_LINES = 256;
const CLASSIFY_RANGE = 50_000;
/** Ledger lines missing from a statement that are asked of the provider, at most, per run; the rest are UNCHECKED. */
export const MAX_PROVIDER_CHECKS = 1000;

const H = 3600_000;
const DAY_MS = 24 * H;

const shanghaiDayOf = (ms: number) => shanghaiDay(new Date(ms));

/** How often a run renews its job's lease in the background (a third of the lease). */
const LEASE_KEEP_MS = JOB_LEASE_MS / 3;

/** The providers that can give a statement. */
export function reconcilableProviders(d: UseCaseDeps): PaymentProvider[] {
  return d.providers.all().filter((p) => typeof p.downloadStatement === 'function');
}

/**
 * An operator asks for the reconciliation of a day (today or earlier), for one provider or every
 * provider that has statements: one queued run each, due now, each with its audit entry.
 */
export async function requestReconciliation(d: UseCaseDeps, actor: Actor, day: string, provider: string | null): Promise<RunRow[]> {
  if (shanghaiDayStart(day) === null) throw new DomainError('VALIDATION_FAILED', 'day must be a date YYYY-MM-DD');
  if (day > shanghaiDayOf(d.clock.now())) throw new DomainError('VALIDATION_FAILED', 'day must not be later than today (Asia/Shanghai)');
  const all = reconcilableProviders(d);
  let targets = all;
  if (provider !== null) {
    targets = all.filter((p) => p.name === provider);
    if (targets.length === 0) {
      throw d.providers.all().some((p) => p.name === provider)
        ? new DomainError('STATE_INVALID', `the provider ${provider} gives no statement to reconcile with`)
        : new DomainError('VALIDATION_FAILED', `provider must be one of ${all.map((p) => p.name).join(', ')}`);
    }
  }
  const now = nowOf(d);
  const runs = await audited(d, actor, async (tx, record) => {
    const queued: RunRow[] = [];
    for (const p of targets) {
      const run = await recon.queueRun(tx, p.name, day, now);
      await jobs.schedule(tx, 'RECONCILE_STATEMENT', run.id, now);
      await record({
        action: 'reconciliation.request',
        entityType: 'reconciliation_run',
        entityId: run.id,
        before: null,
        after: { provider: p.name, day },
      });
      queued.push(run);
    }
    return queued;
  });
  d.wakeWorkers();
  return runs;
}

/** Creates the daily runs of yesterday (with their jobs), once RECONCILIATION_HOUR has come (Asia/Shanghai). Answers the day scheduled, or null. */
export async function scheduleDailyRuns(d: UseCaseDeps): Promise<string | null> {
  const nowMs = d.clock.now();
  const today = shanghaiDayOf(nowMs);
  if (nowMs < Date.parse(`${today}T00:00:00+08:00`) + RECONCILIATION_HOUR * H) return null;
  const yesterday = shanghaiDayOf(nowMs - DAY_MS);
  for (const p of reconcilableProviders(d)) {
    await withTx(d.db, async (tx) => {
      const now = nowOf(d);
      const id = await recon.ensureScheduledRun(tx, p.name, yesterday, now);
      if (id !== null) await jobs.schedule(tx, 'RECONCILE_STATEMENT', id, now);
    });
  }
  return yesterday;
}

/** SCHEDULE_RECONCILIATION: the daily runs, once their hour has come. */
export async function scheduleReconciliation(d: UseCaseDeps): Promise<JobOutcome> {
  await scheduleDailyRuns(d);
  return 'done';
}

/** RECONCILE_STATEMENT: the run the job names, executed to its end; a failed run is tried again by the job's backoff. */
export async function reconcileStatement(d: UseCaseDeps, job: Job): Promise<JobOutcome> {
  const run = await startRun(d, job.subjectId);
  if (run === null) return 'done';
  const retry = retryDelayMs('RECONCILE_STATEMENT', job.runs);
  const done = await executeRun(d, run, job.renew, retry === null ? null : new Date(d.clock.now() + retry));
  return done.status === 'FAILED' ? 'retry' : 'done';
}

/** A run's start attempts at most (each after another instance moved the run meanwhile). */
const START_TRIES = 3;

/**
 * The run RUNNING, from the state it is read in (QUEUED, FAILED, or RUNNING under a holder that
 * stopped), one try more; null when it is not to run (COMPLETED, or unknown).
 */
async function startRun(d: UseCaseDeps, runId: string): Promise<RunRow | null> {
  for (let i = 0; i < START_TRIES; i++) {
    const run = await recon.getRun(d.db, runId);
    if (!run || !canTransition('run', run.status, 'RUNNING')) return null;
    const started = await recon.startRun(d.db, runId, transition('run', 'start reconciliation run', run.status, 'RUNNING'), nowOf(d));
    if (started) return started;
  }
  return null;
}

class LeaseLost extends Error {}

/**
 * Executes a started run to its end: COMPLETED with its counts, or FAILED (tried again from
 * `retryAt`, when given). `renew` extends the job's lease as it works; false: another instance
 * took the run over, and this one stops.
 */
export async function executeRun(d: UseCaseDeps, run: RunRow, renewLease: () => Promise<boolean>, retryAt: Date | null): Promise<RunRow> {
  // The lease is also renewed in the background while the run waits for its turn and while one
  // statement of it takes long (the ledger side of a large day): a run that is alive keeps its job.
  // A real wait on the wall clock: it keeps a lease, it decides nothing.
  let lost = false;
  const keep = setInterval(() => {
    renewLease().then(
      (ok) => {
        if (!ok) lost = true;
      },
      () => {}, // a renew that fails is tried again at the next tick or step
    );
  }, LEASE_KEEP_MS);
  keep.unref();
  const renew = async () => !lost && (await renewLease());
  try {
    // One run at a time per instance: a bill is parsed on the main thread, in slices (below).
    return await d.workTurns.oneAtATime('reconciliation', () => execute(d, run, renew, retryAt));
  } finally {
    clearInterval(keep);
  }
}

async function execute(d: UseCaseDeps, run: RunRow, renewLease: () => Promise<boolean>, retryAt: Date | null): Promise<RunRow> {
  const renew = async () => {
    if (!(await renewLease())) throw new LeaseLost();
  };
  try {
    const provider = d.providers.byName(run.provider);
    if (typeof provider.downloadStatement !== 'function') throw new Error(`the provider ${run.provider} gives no statement`);
    const start = new Date(Date.parse(`${run.day}T00:00:00+08:00`));
    const end = new Date(start.getTime() + DAY_MS);

    // 1. The statement's lines, stored as they come; the table's statistics then count them, so
    // that the statements below plan for the run's real number of lines (planned as if the run had
    // none, the ledger side's anti-join compared every ledger line with every provider line).
    const providerLines = await storeStatement(d, run, provider.downloadStatement.bind(provider), renew);
    await recon.refreshLineStatistics(d.db);
    await renew();

    // 2. Matched against the ledger, set-based.
    for (let from = 1; from <= providerLines; from += CLASSIFY_RANGE) {
      await recon.classifyProviderLines(d.db, run.id, run.provider, from, Math.min(providerLines, from + CLASSIFY_RANGE - 1));
      await renew();
    }
    const ledgerLines = await recon.addLedgerOnlyLines(d.db, run.id, run.provider, start, end, providerLines + 1);

    // 3. Paid (or refunded) there, not here: through the notice path.
    await eachLine(d, run.id, 'TO_CONVERGE', async (l) => {
      await recon.setLineOutcome(d.db, run.id, l.lineNo, await converge(d, run.provider, l));
    });
    // 4. Here, not in the statement: asked of the provider.
    let checks = 0;
    await eachLine(d, run.id, 'TO_CHECK', async (l) => {
      const outcome = checks++ < MAX_PROVIDER_CHECKS ? await check(d, provider, l) : 'UNCHECKED';
      await recon.setLineOutcome(d.db, run.id, l.lineNo, outcome);
    });
    await renew();

    // 5. The findings kept for the operator.
    await recon.recordFindings(d.db, run, nowOf(d));
    const counts = await recon.outcomeCounts(d.db, run.id);
    const done = await recon.completeRun(
      d.db,
      run.id,
      run.tries,
      transition('run', 'complete reconciliation run', run.status, 'COMPLETED'),
      {
        providerLines,
        ledgerLines,
        matched: counts.MATCHED ?? 0,
        converged: counts.CONVERGED ?? 0,
        discrepancies: FLAGGED_OUTCOMES.reduce((n, k) => n + (counts[k] ?? 0), 0),
      },
      nowOf(d),
    );
    if (done === null) return (await recon.getRun(d.db, run.id))!;
    const line = { runId: run.id, provider: run.provider, day: run.day, counts };
    if ((done.discrepancies ?? 0) > 0) d.log.warn(line, 'reconciliation found discrepancies: kept for the operator');
    else d.log.info(line, 'reconciliation completed');
    return done;
  } catch (err) {
    if (err instanceof LeaseLost) {
      d.log.warn({ runId: run.id }, 'reconciliation run taken over by another instance; this one stops');
      return (await recon.getRun(d.db, run.id))!;
    }
    const why = err instanceof Error ? err.message : String(err);
    (err instanceof ProviderUncertainError ? d.log.warn : d.log.error).call(
      d.log,
      { err, runId: run.id, provider: run.provider, day: run.day, try: run.tries },
      'reconciliation run failed; tried again later',
    );
    const failed = transition('run', 'fail reconciliation run', run.status, 'FAILED');
    await recon.failRun(d.db, run.id, run.tries, failed, why, nowOf(d), retryAt ?? nowOf(d));
    return (await recon.getRun(d.db, run.id))!;
  }
}

/** A run's provider statement, its lines stored as they come, in batches (the lease renewed after each); answers how many. */
async function storeStatement(
  d: UseCaseDeps,
  run: RunRow,
  download: (day: string) => Promise<AsyncIterable<ProviderStatementLine>>,
  renew: () => Promise<void>,
): Promise<number> {
  let lineNo = 1;
  let batch: ProviderStatementLine[] = [];
  const flush = async () => {
    if (batch.length === 0) return;
    await recon.insertProviderLines(d.db, run.id, lineNo, batch);
    lineNo += batch.length;
    batch = [];
    await renew();
  };
  // The bill is parsed as its lines are taken: SLICE_LINES at a time, each slice in its turn
  // among the main thread's expensive work (WorkTurns), so a big bill never holds the event loop.
  let sliced = 0;
  for await (const line of await download(run.day)) {
    batch.push(line);
    if (batch.length >= LINE_BATCH) await flush();
    if (++sliced === SLICE_LINES) {
      sliced = 0;
      await d.workTurns.turn();
    }
  }
  await flush();
  return lineNo - 1;
}

/** Every line of the run with `outcome`, a page at a time (the callback changes its outcome). */
async function eachLine(d: UseCaseDeps, runId: string, outcome: string, fn: (l: LineRow) => Promise<void>): Promise<void> {
  let after = 0;
  for (;;) {
    const page = await recon.listLines(d.db, runId, { outcome, afterLineNo: after, limit: 500 });
    for (const l of page) await fn(l);
    if (page.length < 500) return;
    after = page[page.length - 1]!.lineNo;
  }
}

/** Applies the provider's word through the notice path; CONVERGED when the ledger now agrees. */
async function converge(d: UseCaseDeps, provider: string, l: LineRow): Promise<LineOutcome> {
  const from = { provider, source: 'STATEMENT' as const };
  if (l.kind === 'PAYMENT') {
    await applyNotification(
      d,
      { kind: 'PAYMENT', attemptId: l.subjectId, state: 'PAID', reason: null, amountFen: l.amountFen, providerRef: l.providerRef },
      from,
    );
    const owner = await ownerOfTradeNo(d.db, l.subjectId);
    const paid = owner?.trade ? owner.trade.state === 'PAID' : owner?.attempt.state === 'PAID';
    return paid ? 'CONVERGED' : 'STATE_MISMATCH';
  }
  await applyNotification(
    d,
    { kind: 'REFUND', refundId: l.subjectId, state: 'SUCCEEDED', reason: null, amountFen: l.amountFen, providerRef: l.providerRef },
    from,
  );
  return (await refunds.getRefund(d.db, l.subjectId))?.state === 'SUCCEEDED' ? 'CONVERGED' : 'STATE_MISMATCH';
}

/** A ledger line the statement lacks: MATCHED when the provider has it after all (another day of its own), else missing there. */
async function check(d: UseCaseDeps, provider: PaymentProvider, l: LineRow): Promise<LineOutcome> {
  try {
    if (l.kind === 'PAYMENT') {
      return (await provider.queryPayment(l.subjectId)).state === 'PAID' ? 'MATCHED' : 'MISSING_AT_PROVIDER';
    }
    const r = await refunds.getRefund(d.db, l.subjectId);
    const o = r ? await orders.getOrder(d.db, r.orderId) : null;
    if (!o?.paidAttemptId) return 'UNCHECKED';
    const q = await provider.queryRefund({ refundId: l.subjectId, paidAttemptId: o.paidTradeNo ?? o.paidAttemptId });
    return q.state === 'SUCCEEDED' ? 'MATCHED' : 'REFUND_MISSING_AT_PROVIDER';
  } catch (err) {
    d.log.warn({ err, subjectId: l.subjectId }, 'reconciliation: the provider could not be asked; line left unchecked');
    return 'UNCHECKED';
  }
}

/** A run with its lines counted by outcome (the back office's view). */
export async function runDetail(d: UseCaseDeps, runId: string): Promise<{ run: RunRow; outcomes: Record<string, number> }> {
  const run = await recon.getRun(d.db, runId);
  if (!run) throw new DomainError('NOT_FOUND', undefined, { entity: 'reconciliation run' });
  return { run, outcomes: await recon.outcomeCounts(d.db, runId) };
}

export async function runLines(
  d: UseCaseDeps,
  runId: string,
  f: { outcome: string | null; afterLineNo: number; limit: number },
): Promise<LineRow[]> {
  if (!(await recon.getRun(d.db, runId))) throw new DomainError('NOT_FOUND', undefined, { entity: 'reconciliation run' });
  return recon.listLines(d.db, runId, f);
}

export function listRuns(d: UseCaseDeps, f: { provider: string | null; day: string | null; limit: number }): Promise<RunRow[]> {
  return recon.listRuns(d.db, f);
}
