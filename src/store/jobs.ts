/**
 * Repository: the one job queue (migrations/0030). A change that needs work after it writes the
 * job in its own transaction (schedule); FIND_DUE_WORK adds the jobs that rows imply. Workers claim
 * due jobs with FOR UPDATE SKIP LOCKED; a claim leases each job to a token unique to the claim (its
 * run_at becomes the lease's end, so a holder that stops is replaced when it lapses, or at once
 * when its instance stops beating), and completing, failing or renewing is fenced by that token.
 * Time is the service's clock, passed in.
 */
import type { JobKind } from '../domain/jobs.ts';
import type { Queryable } from './db.ts';

export interface ClaimedJob {
  id: string;
  kind: JobKind;
  subjectId: string;
  /** How many times a holder started it, this run included. */
  runs: number;
}

/**
 * How a job is written when one of its kind and subject exists already: `earliest` keeps the
 * sooner of the two times (more work for the subject); `exactly` sets the time given (the subject's
 * schedule changed). Either way a job being run is released from its holder, so that the holder's
 * completion does not drop the work added meanwhile.
 */
export type ScheduleMode = 'earliest' | 'exactly';

/** Adds the job (kind, subject) due at `at`, or moves the existing one (see ScheduleMode). */
export async function schedule(db: Queryable, kind: JobKind, subjectId: string, at: Date, mode: ScheduleMode = 'earliest'): Promise<void> {
  await db.query({
    name: mode === 'earliest' ? 'job_schedule_earliest' : 'job_schedule_exactly',
    text: `INSERT INTO jobs(kind, subject_id, run_at, created_at) VALUES ($1, $2, $3, $3)
           ON CONFLICT (kind, subject_id) DO UPDATE
             SET run_at = ${mode === 'earliest' ? 'CASE WHEN jobs.locked_by IS NULL THEN LEAST(jobs.run_at, $3) ELSE $3 END' : '$3'},
                 locked_by = NULL, holder_instance = NULL`,
    values: [kind, subjectId, at],
  });
}

/** Drops the job (kind, subject) if there is one (its holder, if any, finds it gone). */
export async function cancel(db: Queryable, kind: JobKind, subjectId: string): Promise<void> {
  await db.query({ name: 'job_cancel', text: 'DELETE FROM jobs WHERE kind = $1 AND subject_id = $2', values: [kind, subjectId] });
}

/** The recurring kinds' one job each, due now when missing. */
export async function ensureRecurring(db: Queryable, kinds: readonly JobKind[], now: Date): Promise<void> {
  await db.query(
    `INSERT INTO jobs(kind, subject_id, run_at, created_at) SELECT k, '', $2, $2 FROM unnest($1::text[]) AS k
     ON CONFLICT (kind, subject_id) DO NOTHING`,
    [kinds, now],
  );
}

/**
 * The one claim: at most `limit` due jobs, oldest first, each leased to `holder` (of `instance`)
 * until `leaseUntil`; a job another holder is running is skipped.
 */
export async function claimJobs(
  db: Queryable,
  o: { limit: number; holder: string; instance: string; now: Date; leaseUntil: Date },
): Promise<ClaimedJob[]> {
  const r = await db.query<ClaimedJob>({
    name: 'jobs_claim',
    text: `UPDATE jobs SET locked_by = $2, holder_instance = $3, run_at = $5, runs = runs + 1
            WHERE id IN (SELECT id FROM jobs WHERE run_at <= $4 ORDER BY run_at, id LIMIT $1 FOR UPDATE SKIP LOCKED)
            RETURNING id::text, kind, subject_id AS "subjectId", runs`,
    values: [o.limit, o.holder, o.instance, o.now, o.leaseUntil],
  });
  return r.rows;
}

/** The job is done: it goes (a recurring job: due again at `next`). False when `holder` no longer holds it. */
export async function completeJob(db: Queryable, id: string, holder: string, next: Date | null): Promise<boolean> {
  const r =
    next === null
      ? await db.query({ name: 'job_complete', text: 'DELETE FROM jobs WHERE id = $1 AND locked_by = $2', values: [id, holder] })
      : await db.query({
          name: 'job_complete_recurring',
          text: `UPDATE jobs SET run_at = $3, runs = 0, locked_by = NULL, holder_instance = NULL, last_error = NULL
                  WHERE id = $1 AND locked_by = $2`,
          values: [id, holder, next],
        });
  return r.rowCount === 1;
}

/** The run failed: the job is due again at `retryAt`, or dropped when null (no run left). False when `holder` no longer holds it. */
export async function failJob(db: Queryable, id: string, holder: string, retryAt: Date | null, error: string): Promise<boolean> {
  const r =
    retryAt === null
      ? await db.query({ name: 'job_drop', text: 'DELETE FROM jobs WHERE id = $1 AND locked_by = $2', values: [id, holder] })
      : await db.query({
          name: 'job_fail',
          text: `UPDATE jobs SET run_at = $3, last_error = $4, locked_by = NULL, holder_instance = NULL WHERE id = $1 AND locked_by = $2`,
          values: [id, holder, retryAt, error.slice(0, 1000)],
        });
  return r.rowCount === 1;
}

/** A long run extends its lease; false when `holder` no longer holds the job (another took it over). */
export async function renewJob(db: Queryable, id: string, holder: string, leaseUntil: Date): Promise<boolean> {
  const r = await db.query({
    name: 'job_renew',
    text: 'UPDATE jobs SET run_at = $3 WHERE id = $1 AND locked_by = $2',
    values: [id, holder, leaseUntil],
  });
  return r.rowCount === 1;
}

/** Jobs held by instances that stopped beating (since `aliveSince`), never `self`'s, are due now; answers how many. */
export async function releaseJobsOfGoneInstances(db: Queryable, aliveSince: Date, now: Date, self: string): Promise<number> {
  const r = await db.query({
    name: 'jobs_release_gone',
    text: `UPDATE jobs SET run_at = $2, locked_by = NULL, holder_instance = NULL
            WHERE locked_by IS NOT NULL AND run_at > $2 AND holder_instance <> $3
              AND holder_instance NOT IN (SELECT id FROM service_instances WHERE heartbeat_at > $1)`,
    values: [aliveSince, now, self],
  });
  return r.rowCount ?? 0;
}

/**
 * FIND_DUE_WORK's statement (mps_find_due_work, migrations/0030): adds the jobs that rows imply
 * (orders past their window, closes left pending, attempts and refunds whose request stalled or
 * whose instance is gone),
 * at most `limit` of each, each due since its work came due. Answers how many jobs it added or made due.
 */
export async function findDueWork(
  db: Queryable,
  o: {
    now: Date;
    aliveSince: Date;
    attemptStalledBefore: Date;
    refundStalledBefore: Date;
    limit: number;
    kinds: { expire: JobKind; close: JobKind; attempt: JobKind; refund: JobKind };
  },
): Promise<number> {
  const r = await db.query<{ n: number }>({
    name: 'jobs_find_due_work',
    text: 'SELECT mps_find_due_work($1, $2, $3, $4, $5, $6, $7, $8, $9) AS n',
    values: [
      o.now,
      o.aliveSince,
      o.attemptStalledBefore,
      o.refundStalledBefore,
      o.limit,
      o.kinds.expire,
      o.kinds.attempt,
      o.kinds.refund,
      o.kinds.close,
    ],
  });
  return r.rows[0]!.n;
}
