/**
 * Repository: browser sessions and the sign-in throttle (migrations/0013, 0060), one set of
 * statements for both kinds of account: operators (the console, `operator_sessions`) and
 * merchant users (the portal, `merchant_user_sessions`). A session is found by the SHA-256 of its
 * cookie's id; it is live while it is not revoked, not past its absolute expiry, used within the
 * idle timeout (both judged by the service's clock), and its account is active.
 */
import type { Queryable } from './db.ts';

/** The two kinds of account that sign in with a password in a browser. */
export type SessionRealm = 'operator' | 'merchantUser';

/** Each realm's table, its account column, and the account's table with what a live session answers of it. */
const REALMS: Record<SessionRealm, { table: string; owner: string; join: string; fields: string }> = {
  operator: {
    table: 'operator_sessions',
    owner: 'operator_id',
    join: 'operators a ON a.id = s.operator_id',
    fields: `a.name AS "ownerName", a.role, NULL::text AS "merchantId"`,
  },
  merchantUser: {
    table: 'merchant_user_sessions',
    owner: 'user_id',
    join: 'merchant_users a ON a.id = s.user_id',
    fields: `a.login AS "ownerName", a.role, a.merchant_id AS "merchantId"`,
  },
};

export interface SessionRow {
  idSha256: string;
  /** The operator's or the merchant user's id. */
  ownerId: string;
  /** The operator's name or the merchant user's login. */
  ownerName: string;
  role: string;
  /** The merchant user's merchant (null for an operator). */
  merchantId: string | null;
  csrfToken: string;
  sourceIp: string | null;
  createdAt: Date;
  lastSeenAt: Date;
  expiresAt: Date;
}

export async function insertSession(
  db: Queryable,
  realm: SessionRealm,
  s: { idSha256: string; ownerId: string; csrfToken: string; sourceIp: string | null; userAgent: string | null; expiresAt: Date },
  now: Date,
): Promise<void> {
  const r = REALMS[realm];
  await db.query(
    `INSERT INTO ${r.table}(id_sha256, ${r.owner}, csrf_token, source_ip, user_agent, created_at, last_seen_at, expires_at)
     VALUES ($1, $2, $3, $4, $5, $6, $6, $7)`,
    [s.idSha256, s.ownerId, s.csrfToken, s.sourceIp, s.userAgent, now, s.expiresAt],
  );
}

/** The live session with this id hash, of an active account; null otherwise. */
export async function liveSession(
  db: Queryable,
  realm: SessionRealm,
  idSha256: string,
  now: Date,
  idleSeconds: number,
): Promise<SessionRow | null> {
  const r = REALMS[realm];
  const q = await db.query<SessionRow>(
    `SELECT s.id_sha256 AS "idSha256", s.${r.owner} AS "ownerId", ${r.fields}, s.csrf_token AS "csrfToken",
            s.source_ip AS "sourceIp", s.created_at AS "createdAt", s.last_seen_at AS "lastSeenAt", s.expires_at AS "expiresAt"
       FROM ${r.table} s JOIN ${r.join}
      WHERE s.id_sha256 = $1 AND s.revoked_at IS NULL AND s.expires_at > $2
        AND s.last_seen_at > $2 - make_interval(secs => $3) AND a.status = 'ACTIVE'`,
    [idSha256, now, idleSeconds],
  );
  return q.rows[0] ?? null;
}

export async function touchSession(db: Queryable, realm: SessionRealm, idSha256: string, now: Date): Promise<void> {
  await db.query(`UPDATE ${REALMS[realm].table} SET last_seen_at = $2 WHERE id_sha256 = $1 AND revoked_at IS NULL`, [idSha256, now]);
}

/** Answers whether a live row was revoked. */
export async function revokeSession(db: Queryable, realm: SessionRealm, idSha256: string, now: Date): Promise<boolean> {
  const r = await db.query(`UPDATE ${REALMS[realm].table} SET revoked_at = $2 WHERE id_sha256 = $1 AND revoked_at IS NULL`, [
    idSha256,
    now,
  ]);
  return r.rowCount === 1;
}

/** Revokes every session of an account (but `keep`, the caller's own); answers how many. */
export async function revokeOwnerSessions(
  db: Queryable,
  realm: SessionRealm,
  ownerId: string,
  now: Date,
  keep: string | null = null,
): Promise<number> {
  const r = REALMS[realm];
  const q = await db.query(
    `UPDATE ${r.table} SET revoked_at = $2 WHERE ${r.owner} = $1 AND revoked_at IS NULL AND ($3::text IS NULL OR id_sha256 <> $3)`,
    [ownerId, now, keep],
  );
  return q.rowCount ?? 0;
}

/** Drops sessions that ended (revoked or expired) before `before`. */
export async function purgeSessions(db: Queryable, realm: SessionRealm, before: Date): Promise<number> {
  const r = await db.query(`DELETE FROM ${REALMS[realm].table} WHERE expires_at < $1 OR revoked_at < $1`, [before]);
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
