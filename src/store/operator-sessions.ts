/**
 * Repository: console sessions and the sign-in throttle (migrations/0013). A session is found by
 * the SHA-256 of its cookie's id; a session is live while it is not revoked, not past its
 * absolute expiry and used within the idle timeout (both judged by the service's clock).
 */
import type { Role } from '../domain/operators.ts';
import type { Queryable } from './db.ts';

export interface SessionRow {
  idSha256: string;
  operatorId: string;
  operatorName: string;
  role: Role;
  csrfToken: string;
  sourceIp: string | null;
  createdAt: Date;
  lastSeenAt: Date;
  expiresAt: Date;
}

export async function insertSession(
  db: Queryable,
  s: { idSha256: string; operatorId: string; csrfToken: string; sourceIp: string | null; userAgent: string | null; expiresAt: Date },
  now: Date,
): Promise<void> {
  await db.query(
    `INSERT INTO operator_sessions(id_sha256, operator_id, csrf_token, source_ip, user_agent, created_at, last_seen_at, expires_at)
     VALUES ($1, $2, $3, $4, $5, $6, $6, $7)`,
    [s.idSha256, s.operatorId, s.csrfToken, s.sourceIp, s.userAgent, now, s.expiresAt],
  );
}

/** The live session with this id hash, of an active operator; null otherwise. */
export async function liveSession(db: Queryable, idSha256: string, now: Date, idleSeconds: number): Promise<SessionRow | null> {
  const r = await db.query<SessionRow>(
    `SELECT s.id_sha256 AS "idSha256", s.operator_id AS "operatorId", o.name AS "operatorName", o.role, s.csrf_token AS "csrfToken",
            s.source_ip AS "sourceIp", s.created_at AS "createdAt", s.last_seen_at AS "lastSeenAt", s.expires_at AS "expiresAt"
       FROM operator_sessions s JOIN operators o ON o.id = s.operator_id
      WHERE s.id_sha256 = $1 AND s.revoked_at IS NULL AND s.expires_at > $2
        AND s.last_seen_at > $2 - make_interval(secs => $3) AND o.status = 'ACTIVE'`,
    [idSha256, now, idleSeconds],
  );
  return r.rows[0] ?? null;
}

export async function touchSession(db: Queryable, idSha256: string, now: Date): Promise<void> {
  await db.query(`UPDATE operator_sessions SET last_seen_at = $2 WHERE id_sha256 = $1 AND revoked_at IS NULL`, [idSha256, now]);
}

/** Answers whether a live row was revoked. */
export async function revokeSession(db: Queryable, idSha256: string, now: Date): Promise<boolean> {
  const r = await db.query(`UPDATE operator_sessions SET revoked_at = $2 WHERE id_sha256 = $1 AND revoked_at IS NULL`, [idSha256, now]);
  return r.rowCount === 1;
}

/** Revokes every session of an operator (but `keep`, the caller's own); answers how many. */
export async function revokeOperatorSessions(db: Queryable, operatorId: string, now: Date, keep: string | null = null): Promise<number> {
  const r = await db.query(
    `UPDATE operator_sessions SET revoked_at = $2 WHERE operator_id = $1 AND revoked_at IS NULL AND ($3::text IS NULL OR id_sha256 <> $3)`,
    [operatorId, now, keep],
  );
  return r.rowCount ?? 0;
}

/** Drops sessions that ended (revoked or expired) before `before`. */
export async function purgeSessions(db: Queryable, before: Date): Promise<number> {
  const r = await db.query(`DELETE FROM operator_sessions WHERE expires_at < $1 OR revoked_at < $1`, [before]);
  return r.rowCount ?? 0;
}

// --- the sign-in throttle ------------------------------------------------------------------------

/**
 * Counts a sign-in attempt before its password is checked: a row of sign_in_failures, kept when the
 * attempt fails, dropped (dropSignInAttempt) when it is refused unjudged. Its id.
 */
export async function recordSignInAttempt(db: Queryable, name: string, sourceIp: string, now: Date): Promise<string> {
  const r = await db.query<{ id: string }>(`INSERT INTO sign_in_failures(name, source_ip, at) VALUES ($1, $2, $3) RETURNING id`, [
    name,
    sourceIp,
    now,
  ]);
  return r.rows[0]!.id;
}

export async function dropSignInAttempt(db: Queryable, id: string): Promise<void> {
  await db.query(`DELETE FROM sign_in_failures WHERE id = $1`, [id]);
}

/** Failures (and attempts being judged) since `since` for this name and from this address, and the oldest of each (when the window frees a place). */
export async function signInFailures(
  db: Queryable,
  name: string,
  sourceIp: string,
  since: Date,
): Promise<{ byName: number; byAddress: number; oldestByName: Date | null; oldestByAddress: Date | null }> {
  const r = await db.query<{ byName: number; byAddress: number; oldestByName: Date | null; oldestByAddress: Date | null }>(
    `SELECT (SELECT count(*)::int FROM sign_in_failures WHERE name = $1 AND at > $3) AS "byName",
            (SELECT count(*)::int FROM sign_in_failures WHERE source_ip = $2 AND at > $3) AS "byAddress",
            (SELECT min(at) FROM sign_in_failures WHERE name = $1 AND at > $3) AS "oldestByName",
            (SELECT min(at) FROM sign_in_failures WHERE source_ip = $2 AND at > $3) AS "oldestByAddress"`,
    [name, sourceIp, since],
  );
  return r.rows[0]!;
}

/** A successful sign-in clears its name's failures (the address's stay counted). */
export async function clearSignInFailures(db: Queryable, name: string): Promise<void> {
  await db.query(`DELETE FROM sign_in_failures WHERE name = $1`, [name]);
}

export async function purgeSignInFailures(db: Queryable, before: Date): Promise<number> {
  const r = await db.query(`DELETE FROM sign_in_failures WHERE at < $1`, [before]);
  return r.rowCount ?? 0;
}
