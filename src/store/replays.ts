/**
 * Repository: request-id records (decisions.md section 5: the first answer of a POST, kept at
 * least 24 h) and the service instances that hold them.
 *
 * A record is IN_PROGRESS while its holder (an instance id and a claim number) executes the
 * request, then DONE with the answer. Only the holder completes or abandons it. A record whose
 * lease ran out, or whose holder's instance stopped beating (service_instances), may be taken over
 * by a retry: that is how a request cut off by a crash is retried within seconds.
 */
import type { RequestUnitState, Transition } from '../domain/states.ts';
import type { Queryable } from './db.ts';

export interface RequestKey {
  appId: string;
  requestId: string;
  method: string;
  target: string;
  bodySha256: string;
}

export interface Holder {
  holder: string;
  instance: string;
  leaseUntil: Date;
}

export interface RequestRecord {
  method: string;
  target: string;
  bodySha256: string;
  state: RequestUnitState;
  /** The kept answer's status, as the surface rendered it (opaque here). */
  answerStatus: number | null;
  body: string | null;
  /** IN_PROGRESS, and its lease ran out or its holder's instance is gone. */
  takeable: boolean;
}

/** Claims the id for `h`; answers false when a record exists. */
export async function claimRequestId(db: Queryable, k: RequestKey, h: Holder, now: Date): Promise<boolean> {
  const r = await db.query({
    name: 'replay_claim',
    text: `INSERT INTO request_replays(app_id, request_id, method, target, body_sha256, state, lease_until, holder, holder_instance, created_at)
     VALUES ($1, $2, $3, $4, $5, 'IN_PROGRESS', $6, $7, $8, $9)
     ON CONFLICT (app_id, request_id) DO NOTHING RETURNING 1`,
    values: [k.appId, k.requestId, k.method, k.target, k.bodySha256, h.leaseUntil, h.holder, h.instance, now],
  });
  return r.rowCount === 1;
}

/** The SQL condition "the holder of this record `r` is gone": its lease ran out, or its instance stopped beating. */
const HOLDER_GONE = `(r.lease_until < $3 OR r.holder_instance IS NULL OR NOT EXISTS (
    SELECT 1 FROM service_instances s WHERE s.id = r.holder_instance AND s.heartbeat_at > $4))`;

export async function readRequestId(
  db: Queryable,
  appId: string,
  requestId: string,
  now: Date,
  aliveSince: Date,
): Promise<RequestRecord | null> {
  const r = await db.query<RequestRecord>({
    name: 'replay_read',
    text: `SELECT method, target, body_sha256 AS "bodySha256", state, status_code AS "answerStatus", response_body AS body,
            (state = 'IN_PROGRESS' AND ${HOLDER_GONE}) AS takeable
       FROM request_replays r WHERE app_id = $1 AND request_id = $2`,
    values: [appId, requestId, now, aliveSince],
  });
  return r.rows[0] ?? null;
}

/** Takes over an IN_PROGRESS record whose holder is gone; answers whether it did. */
export async function takeOverRequestId(db: Queryable, k: RequestKey, h: Holder, now: Date, aliveSince: Date): Promise<boolean> {
  const r = await db.query({
    name: 'replay_take_over',
    text: `UPDATE request_replays r SET lease_until = $5, holder = $6, holder_instance = $7
      WHERE app_id = $1 AND request_id = $2 AND state = 'IN_PROGRESS' AND ${HOLDER_GONE} RETURNING 1`,
    values: [k.appId, k.requestId, now, aliveSince, h.leaseUntil, h.holder, h.instance],
  });
  return r.rowCount === 1;
}

/**
 * Records the answer: `t`, the unit's move from the state its holder's claim left it in
 * (IN_PROGRESS to DONE), applied only over that state and only by the record's holder; answers
 * whether it did.
 */
export async function completeRequestId(
  db: Queryable,
  appId: string,
  requestId: string,
  holder: string,
  t: Transition<'requestUnit'>,
  status: number,
  body: string,
): Promise<boolean> {
  const r = await db.query({
    name: 'replay_complete',
    text: `UPDATE request_replays SET state = $7, status_code = $4, response_body = $5, lease_until = NULL
      WHERE app_id = $1 AND request_id = $2 AND holder = $3 AND state = $6`,
    values: [appId, requestId, holder, status, body, t.from, t.to],
  });
  return r.rowCount === 1;
}

/** Forgets an unanswered record (a 429 or 503 is not kept), only by its holder. */
export async function abandonRequestId(db: Queryable, appId: string, requestId: string, holder: string): Promise<void> {
  await db.query(`DELETE FROM request_replays WHERE app_id = $1 AND request_id = $2 AND holder = $3 AND state = 'IN_PROGRESS'`, [
    appId,
    requestId,
    holder,
  ]);
}

/** Ends the leases of the records an instance holds (a stop that cuts its requests off). */
export async function endLeasesOf(db: Queryable, instance: string, now: Date): Promise<number> {
  const r = await db.query(`UPDATE request_replays SET lease_until = $2 WHERE holder_instance = $1 AND state = 'IN_PROGRESS'`, [
    instance,
    new Date(now.getTime() - 1),
  ]);
  return r.rowCount ?? 0;
}

/**
 * Ends the lease of one holder's claim, if it still holds it: the claim of a write whose commit
 * was not confirmed (the connection was lost), which a retry may then take over at once.
 */
export async function endLease(db: Queryable, appId: string, requestId: string, holder: string, now: Date): Promise<void> {
  await db.query(
    `UPDATE request_replays SET lease_until = $4 WHERE app_id = $1 AND request_id = $2 AND holder = $3 AND state = 'IN_PROGRESS'`,
    [appId, requestId, holder, new Date(now.getTime() - 1)],
  );
}

/**
 * Drops answers older than `before`, and records whose holder died long ago (an IN_PROGRESS row
 * whose lease expired before `before` is never completed).
 */
export async function purgeRequestIds(db: Queryable, before: Date, limit: number): Promise<number> {
  const r = await db.query(
    `DELETE FROM request_replays WHERE ctid IN (SELECT ctid FROM request_replays
      WHERE created_at < $1 AND (state = 'DONE' OR lease_until < $1) LIMIT $2)`,
    [before, limit],
  );
  return r.rowCount ?? 0;
}

// --- service instances --------------------------------------------------------------------------

export async function registerInstance(db: Queryable, id: string, now: Date): Promise<void> {
  await db.query('INSERT INTO service_instances(id, started_at, heartbeat_at) VALUES ($1, $2, $2)', [id, now]);
}

/** The instance is alive now; answers false when its row is gone (it was judged dead and removed). */
export async function beat(db: Queryable, id: string, now: Date): Promise<boolean> {
  const r = await db.query({
    name: 'instance_beat',
    text: 'INSERT INTO service_instances(id, started_at, heartbeat_at) VALUES ($1, $2, $2) ON CONFLICT (id) DO UPDATE SET heartbeat_at = $2',
    values: [id, now],
  });
  return r.rowCount === 1;
}

export async function removeInstance(db: Queryable, id: string): Promise<void> {
  await db.query('DELETE FROM service_instances WHERE id = $1', [id]);
}

/** Removes the instances that have not beaten since `before` (or every other one: `except` alone remains). */
export async function removeInstances(db: Queryable, o: { before?: Date; except?: string }): Promise<number> {
  const r = await db.query(
    'DELETE FROM service_instances WHERE ($1::timestamptz IS NULL OR heartbeat_at < $1) AND id IS DISTINCT FROM $2',
    [o.before ?? null, o.except ?? null],
  );
  return r.rowCount ?? 0;
}

/** How many instances other than `except` have beaten since `aliveSince`. */
export async function liveInstanceCount(db: Queryable, aliveSince: Date, except: string): Promise<number> {
  const r = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM service_instances WHERE heartbeat_at > $1 AND id <> $2', [
    aliveSince,
    except,
  ]);
  return r.rows[0]!.n;
}
