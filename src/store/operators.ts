/** Repository: operators of the back office (migrations/0013). The password hash is read only by `operatorForSignIn`. */
import type { Role } from '../domain/operators.ts';
import type { Queryable } from './db.ts';

export interface OperatorRow {
  id: string;
  name: string;
  role: Role;
  status: 'ACTIVE' | 'DISABLED';
  passwordChangedAt: Date;
  createdAt: Date;
  updatedAt: Date;
}

const COLS = `id, name, role, status, password_changed_at AS "passwordChangedAt", created_at AS "createdAt", updated_at AS "updatedAt"`;

export async function insertOperator(
  db: Queryable,
  o: { id: string; name: string; role: Role; passwordHash: string },
  now: Date,
): Promise<OperatorRow | null> {
  const r = await db.query<OperatorRow>(
    `INSERT INTO operators(id, name, role, password_hash, password_changed_at, created_at, updated_at)
     VALUES ($1, $2, $3, $4, $5, $5, $5) ON CONFLICT (name) DO NOTHING RETURNING ${COLS}`,
    [o.id, o.name, o.role, o.passwordHash, now],
  );
  return r.rows[0] ?? null;
}

export async function getOperator(db: Queryable, id: string, lock = false): Promise<OperatorRow | null> {
  const r = await db.query<OperatorRow>(`SELECT ${COLS} FROM operators WHERE id = $1${lock ? ' FOR UPDATE' : ''}`, [id]);
  return r.rows[0] ?? null;
}

export async function findOperatorByName(db: Queryable, name: string): Promise<OperatorRow | null> {
  const r = await db.query<OperatorRow>(`SELECT ${COLS} FROM operators WHERE name = $1`, [name]);
  return r.rows[0] ?? null;
}

/** The operator and its password hash, for a sign-in or a password change only. */
export async function operatorForSignIn(db: Queryable, name: string): Promise<(OperatorRow & { passwordHash: string }) | null> {
  const r = await db.query<OperatorRow & { passwordHash: string }>(
    `SELECT ${COLS}, password_hash AS "passwordHash" FROM operators WHERE name = $1`,
    [name],
  );
  return r.rows[0] ?? null;
}

export async function listOperators(db: Queryable): Promise<OperatorRow[]> {
  return (await db.query<OperatorRow>(`SELECT ${COLS} FROM operators ORDER BY name`)).rows;
}

export async function countActiveAdmins(db: Queryable): Promise<number> {
  const r = await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM operators WHERE role = 'admin' AND status = 'ACTIVE'`);
  return r.rows[0]!.n;
}

/** Changes the given fields; answers the fresh row, or null when there is no such operator. */
export async function updateOperator(
  db: Queryable,
  id: string,
  c: { role?: Role; status?: 'ACTIVE' | 'DISABLED'; passwordHash?: string },
  now: Date,
): Promise<OperatorRow | null> {
  const r = await db.query<OperatorRow>(
    `UPDATE operators SET role = coalesce($3, role), status = coalesce($4, status), password_hash = coalesce($5, password_hash),
            password_changed_at = CASE WHEN $5::text IS NULL THEN password_changed_at ELSE $2 END, updated_at = $2
      WHERE id = $1 RETURNING ${COLS}`,
    [id, now, c.role ?? null, c.status ?? null, c.passwordHash ?? null],
  );
  return r.rows[0] ?? null;
}
