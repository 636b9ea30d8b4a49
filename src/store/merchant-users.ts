/**
 * Repository: merchant users of the portal (migrations/0060). The password hash and the TOTP
 * secrets are read only by `userForSignIn`; an invitation is found by its SHA-256.
 */
import type { MerchantRole } from '../domain/merchant-users.ts';
import type { Queryable } from './db.ts';

export type MerchantUserStatus = 'INVITED' | 'ACTIVE' | 'DISABLED';

export interface MerchantUserRow {
  id: string;
  merchantId: string;
  login: string;
  role: MerchantRole;
  status: MerchantUserStatus;
  totpEnabled: boolean;
  invitationExpiresAt: Date | null;
  passwordChangedAt: Date | null;
  createdAt: Date;
  updatedAt: Date;
}

export interface MerchantUserSecrets extends MerchantUserRow {
  passwordHash: string | null;
  totpSecret: string | null;
  totpPendingSecret: string | null;
  totpLastStep: number | null;
}

const COLS = `id, merchant_id AS "merchantId", login, role, status, totp_enabled_at IS NOT NULL AS "totpEnabled",
  invitation_expires_at AS "invitationExpiresAt", password_changed_at AS "passwordChangedAt", created_at AS "createdAt", updated_at AS "updatedAt"`;
const SECRET_COLS = `${COLS}, password_hash AS "passwordHash", totp_secret AS "totpSecret", totp_pending_secret AS "totpPendingSecret",
  totp_last_step::float8 AS "totpLastStep"`;

/** A new invited user; null when the login is taken. */
export async function insertUser(
  db: Queryable,
  u: { id: string; merchantId: string; login: string; role: MerchantRole; invitationSha256: string; invitationExpiresAt: Date },
  now: Date,
): Promise<MerchantUserRow | null> {
  const r = await db.query<MerchantUserRow>(
    `INSERT INTO merchant_users(id, merchant_id, login, role, status, invitation_sha256, invitation_expires_at, created_at, updated_at)
     VALUES ($1, $2, $3, $4, 'INVITED', $5, $6, $7, $7) ON CONFLICT (login) DO NOTHING RETURNING ${COLS}`,
    [u.id, u.merchantId, u.login, u.role, u.invitationSha256, u.invitationExpiresAt, now],
  );
  return r.rows[0] ?? null;
}

/** `lock`: FOR UPDATE, for a change that records the row as it was. */
export async function getUser(db: Queryable, id: string, lock = false): Promise<MerchantUserRow | null> {
  const r = await db.query<MerchantUserRow>(`SELECT ${COLS} FROM merchant_users WHERE id = $1${lock ? ' FOR UPDATE' : ''}`, [id]);
  return r.rows[0] ?? null;
}

export async function listUsers(db: Queryable, merchantId: string): Promise<MerchantUserRow[]> {
  const r = await db.query<MerchantUserRow>(`SELECT ${COLS} FROM merchant_users WHERE merchant_id = $1 ORDER BY created_at, id`, [
    merchantId,
  ]);
  return r.rows;
}

/** The user and its secrets, by login (sign-in) or id (a password or second-factor change), `lock` for a change. */
export async function userForSignIn(
  db: Queryable,
  by: { login: string } | { id: string },
  lock = false,
): Promise<MerchantUserSecrets | null> {
  const [col, v] = 'login' in by ? ['login', by.login] : ['id', by.id];
  const r = await db.query<MerchantUserSecrets>(`SELECT ${SECRET_COLS} FROM merchant_users WHERE ${col} = $1${lock ? ' FOR UPDATE' : ''}`, [
    v,
  ]);
  return r.rows[0] ?? null;
}

/** The user an unexpired invitation names, locked. */
export async function userByInvitation(db: Queryable, invitationSha256: string, now: Date): Promise<MerchantUserRow | null> {
  const r = await db.query<MerchantUserRow>(
    `SELECT ${COLS} FROM merchant_users WHERE invitation_sha256 = $1 AND invitation_expires_at > $2 AND status <> 'DISABLED' FOR UPDATE`,
    [invitationSha256, now],
  );
  return r.rows[0] ?? null;
}

/** Owners that are active or invited, other than `except`. */
export async function countOwners(db: Queryable, merchantId: string, except: string): Promise<number> {
  const r = await db.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM merchant_users WHERE merchant_id = $1 AND role = 'owner' AND status <> 'DISABLED' AND id <> $2`,
    [merchantId, except],
  );
  return r.rows[0]!.n;
}

export interface UserChange {
  role?: MerchantRole;
  status?: MerchantUserStatus;
  /** A new password's hash, or null: no password until the user sets one (a reset). */
  passwordHash?: string | null;
  /** A new invitation (its SHA-256 and expiry), or null to clear it. */
  invitation?: { sha256: string; expiresAt: Date } | null;
  /** TOTP: a secret being set up, the secret enabled (or null: second factor off), the last code's step. */
  totpPendingSecret?: string | null;
  totpSecret?: string | null;
  totpLastStep?: number;
}

/** Changes the given fields; answers the fresh row, or null when there is no such user. */
export async function updateUser(db: Queryable, id: string, c: UserChange, now: Date): Promise<MerchantUserRow | null> {
  const sets: string[] = ['updated_at = $2'];
  const values: unknown[] = [id, now];
  const set = (sql: string, v: unknown) => {
    values.push(v);
    sets.push(sql.replace('?', `$${values.length}`));
  };
  if (c.role !== undefined) set('role = ?', c.role);
  if (c.status !== undefined) set('status = ?', c.status);
  if (c.passwordHash !== undefined) {
    set('password_hash = ?', c.passwordHash);
    sets.push('password_changed_at = $2');
  }
  if (c.invitation !== undefined) {
    set('invitation_sha256 = ?', c.invitation?.sha256 ?? null);
    set('invitation_expires_at = ?', c.invitation?.expiresAt ?? null);
  }
  if (c.totpPendingSecret !== undefined) set('totp_pending_secret = ?', c.totpPendingSecret);
  if (c.totpSecret !== undefined) {
    set('totp_secret = ?', c.totpSecret);
    sets.push(c.totpSecret === null ? 'totp_enabled_at = NULL' : 'totp_enabled_at = $2');
  }
  if (c.totpLastStep !== undefined) set('totp_last_step = ?', c.totpLastStep);
  const r = await db.query<MerchantUserRow>(`UPDATE merchant_users SET ${sets.join(', ')} WHERE id = $1 RETURNING ${COLS}`, values);
  return r.rows[0] ?? null;
}
