/**
 * The kinds of background work, listed here and nowhere else (docs/architecture.md, "Background
 * work"; test/unit/jobs.test.ts checks that the handlers of src/workers.ts, the docs and the SQL
 * agree with this list). Every kind is a row of one table (`jobs`, src/store/jobs.ts), claimed by
 * one statement, completed by one, failed by one with the one backoff rule below.
 *
 * Each job is about one subject (an attempt, a refund, an order, a duplicate payment, a
 * reconciliation run), at most one job per kind and subject; a recurring kind has one job, subject
 * '', that comes due again `everyMs` after each run.
 */

export interface JobKindSpec {
  /** What the job does, for the docs and the logs. */
  what: string;
  /** The one backoff rule's parameters: the wait after the n-th failed run is min(firstMs * 2^(n-1), maxMs). */
  retry: { firstMs: number; maxMs: number };
  /** Runs at most this many times; after the last one fails the job is dropped (logged). Unbounded when absent. */
  maxRuns?: number;
  /** Recurring: one job of the kind, due again this long after each run. */
  everyMs?: number;
  /** A long run (minutes): the worker pass that starts it does not wait for it (it holds its slot and renews its lease). */
  long?: boolean;
}

const S = 1000;
const M = 60 * S;
const H = 60 * M;
/** The backoff of most kinds: 2 s, 4 s, 8 s ... up to 5 minutes between runs. */
const PROVIDER_BACKOFF = { firstMs: 2 * S, maxMs: 5 * M };

export const JOB_KINDS = {
  CHECK_ATTEMPT: {
    what: 'asks the provider about an attempt whose outcome is uncertain (UNKNOWN) or whose creation stalled (PENDING), and settles it',
    retry: PROVIDER_BACKOFF,
  },
  CHECK_REFUND: {
    what: 'asks the provider about a refund not settled yet (REQUESTED, PENDING, UNKNOWN), and settles it',
    retry: PROVIDER_BACKOFF,
  },
  EXPIRE_ORDER: {
    what: 'closes an open order whose payment window has ended (EXPIRED), the provider confirming it unpaid first',
    retry: PROVIDER_BACKOFF,
  },
  FINISH_CLOSE: {
    what: 'finishes a close left pending (the request that made it ended, or the provider answered uncertainly)',
    retry: PROVIDER_BACKOFF,
  },
  CLOSE_STRAY_ATTEMPT: {
    what: 'closes at the provider an attempt the order can no longer use; after 5 failed runs it is handed to CHECK_ATTEMPT',
    retry: PROVIDER_BACKOFF,
  },
  CLOSE_TRADE: {
    what: "closes at the provider one provider order of an attempt that can no longer be used (a trade, or the attempt's own when a trade paid)",
    retry: { firstMs: 2 * S, maxMs: H },
  },
  REFUND_DUPLICATE: {
    what: 'refunds a second payment of an order',
    retry: PROVIDER_BACKOFF,
  },
  CHECK_DUPLICATE_REFUND: {
    what: "asks the provider about a duplicate payment's refund until it is settled (requested again if the provider lost it)",
    retry: PROVIDER_BACKOFF,
  },
  RECONCILE_STATEMENT: {
    what: "matches a provider's statement of a day against the ledger (a reconciliation run)",
    retry: { firstMs: H, maxMs: H },
    maxRuns: 6,
    long: true,
  },
  SCHEDULE_RECONCILIATION: {
    what: 'creates the daily reconciliation runs of yesterday from RECONCILIATION_HOUR (Asia/Shanghai)',
    retry: PROVIDER_BACKOFF,
    everyMs: M,
  },
  FIND_DUE_WORK: {
    what: 'finds the work that rows imply: orders past their window, attempts and refunds whose request stalled or whose instance is gone',
    retry: { firstMs: S, maxMs: S },
    everyMs: S,
  },
  PURGE: {
    what: 'drops what has expired: nonces, request-id answers, console sessions, sign-in failures, daily counters',
    retry: PROVIDER_BACKOFF,
    everyMs: M,
  },
  PURGE_HISTORY: {
    what: "drops history past its retention: the failed delivery attempts of events delivered more than 30 days ago, and statement files' kept bytes STATEMENT_FILES_KEPT_DAYS after their day",
    retry: PROVIDER_BACKOFF,
    everyMs: 10 * M,
  },
} as const satisfies Record<string, JobKindSpec>;

export type JobKind = keyof typeof JOB_KINDS;

export const JOB_KIND_NAMES = Object.keys(JOB_KINDS) as JobKind[];

/** The recurring kinds (one job each). */
export const RECURRING_KINDS = JOB_KIND_NAMES.filter((k) => (JOB_KINDS[k] as JobKindSpec).everyMs !== undefined);

/**
 * The one backoff rule: the wait after a job's `runs`-th run failed, or null when the kind allows
 * no more runs (the job is dropped).
 */
export function retryDelayMs(kind: JobKind, runs: number): number | null {
  const spec: JobKindSpec = JOB_KINDS[kind];
  if (spec.maxRuns !== undefined && runs >= spec.maxRuns) return null;
  return Math.min(spec.retry.firstMs * 2 ** Math.max(0, Math.min(runs - 1, 30)), spec.retry.maxMs);
}

/** Whether runs of the kind are long (the pass that starts one does not wait for it). */
export function isLong(kind: JobKind): boolean {
  return (JOB_KINDS[kind] as JobKindSpec).long === true;
}

/** The wait after a recurring job's run, or null for a kind that does not recur. */
export function recurrenceMs(kind: JobKind): number | null {
  return (JOB_KINDS[kind] as JobKindSpec).everyMs ?? null;
}
