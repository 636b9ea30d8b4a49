/**
 * Repository: follow-up work (migrations/0012). A change that needs work after it (closing at the
 * provider an attempt the order can no longer use, refunding a duplicate payment) writes a row in
 * its own transaction; the workers claim due rows with a lease (FOR UPDATE SKIP LOCKED), and every
 * later update is fenced by the claim's token. One row per (kind, subject) at a time.
 */
import type { Queryable } from './db.ts';

/**
 * CLOSE_TRADE (migrations/0020) closes one provider order of an attempt (a trade of it, or its own
 * when another of its trades was paid); it is its own kind so that it moves to a job queue as is.
 */
export type FollowUpKind = 'CLOSE_STRAY_ATTEMPT' | 'REFUND_DUPLICATE' | 'CLOSE_TRADE';

export interface FollowUp {
  id: string;
  kind: FollowUpKind;
  subjectId: string;
  tries: number;
}

/** Adds work due at `dueAt` (no second row while one for the same subject is waiting). */
export async function addFollowUp(db: Queryable, kind: FollowUpKind, subjectId: string, dueAt: Date): Promise<void> {
  await db.query({
    name: 'follow_up_add',
    text: `INSERT INTO follow_ups(kind, subject_id, due_at, created_at) VALUES ($1, $2, $3, $3) ON CONFLICT (kind, subject_id) DO NOTHING`,
    values: [kind, subjectId, dueAt],
  });
}

/** Claims due work not leased by anyone, oldest first; each claimed row is leased to `token` until `leaseUntil`. */
export async function claimFollowUps(db: Queryable, limit: number, token: string, now: Date, leaseUntil: Date): Promise<FollowUp[]> {
  const r = await db.query<FollowUp>(
    `UPDATE follow_ups SET locked_by = $2, locked_until = $4
      WHERE id IN (SELECT id FROM follow_ups WHERE due_at <= $3 AND (locked_until IS NULL OR locked_until <= $3)
                    ORDER BY due_at, id LIMIT $1 FOR UPDATE SKIP LOCKED)
      RETURNING id::text, kind, subject_id AS "subjectId", tries`,
    [limit, token, now, leaseUntil],
  );
  return r.rows;
}

/** The work is done (or handed on): the row goes. */
export async function finishFollowUp(db: Queryable, id: string, token: string): Promise<void> {
  await db.query('DELETE FROM follow_ups WHERE id = $1 AND locked_by = $2', [id, token]);
}

/** The work failed this time: tried again at `dueAt`. */
export async function retryFollowUp(db: Queryable, id: string, token: string, dueAt: Date, error: string): Promise<void> {
  await db.query(
    `UPDATE follow_ups SET tries = tries + 1, due_at = $3, last_error = $4, locked_by = NULL, locked_until = NULL
      WHERE id = $1 AND locked_by = $2`,
    [id, token, dueAt, error],
  );
}
