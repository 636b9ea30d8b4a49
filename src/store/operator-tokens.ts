/** Repository: operators' API tokens for the admin API (migrations/0013). Only a token's SHA-256 is stored. */
import type { Role } from '../domain/operators.ts';
import type { Queryable } from './db.ts';

export interface TokenRow {
  tokenId: string;
  operatorId: string;
  label: string;
  prefix: string;
  createdAt: Date;
  lastUsedAt: Date | null;
  revokedAt: Date | null;
}

const COLS = `id AS "tokenId", operator_id AS "operatorId", label, prefix, created_at AS "createdAt", last_used_at AS "lastUsedAt",
  revoked_at AS "revokedAt"`;

export async function insertToken(
  db: Queryable,
  t: { id: string; operatorId: string; label: string; tokenSha256: string; prefix: string },
  now: Date,
): Promise<TokenRow> {
  const r = await db.query<TokenRow>(
    `INSERT INTO operator_tokens(id, operator_id, label, token_sha256, prefix, created_at) VALUES ($1, $2, $3, $4, $5, $6) RETURNING ${COLS}`,
    [t.id, t.operatorId, t.label, t.tokenSha256, t.prefix, now],
  );
  return r.rows[0]!;
}

export async function listTokens(db: Queryable, operatorId: string): Promise<TokenRow[]> {
  return (await db.query<TokenRow>(`SELECT ${COLS} FROM operator_tokens WHERE operator_id = $1 ORDER BY created_at, id`, [operatorId]))
    .rows;
}

/** The live token with this hash, of an active operator, with the operator's name and current role; null otherwise. */
export async function liveToken(
  db: Queryable,
  tokenSha256: string,
): Promise<{ tokenId: string; operatorId: string; operatorName: string; role: Role; lastUsedAt: Date | null } | null> {
  const r = await db.query<{ tokenId: string; operatorId: string; operatorName: string; role: Role; lastUsedAt: Date | null }>(
    `SELECT t.id AS "tokenId", t.operator_id AS "operatorId", o.name AS "operatorName", o.role, t.last_used_at AS "lastUsedAt"
       FROM operator_tokens t JOIN operators o ON o.id = t.operator_id
      WHERE t.token_sha256 = $1 AND t.revoked_at IS NULL AND o.status = 'ACTIVE'`,
    [tokenSha256],
  );
  return r.rows[0] ?? null;
}

export async function touchToken(db: Queryable, tokenId: string, now: Date): Promise<void> {
  await db.query(`UPDATE operator_tokens SET last_used_at = $2 WHERE id = $1`, [tokenId, now]);
}

/** Answers the revoked row, or null when the operator has no live token with this id. */
export async function revokeToken(db: Queryable, operatorId: string, tokenId: string, now: Date): Promise<TokenRow | null> {
  const r = await db.query<TokenRow>(
    `UPDATE operator_tokens SET revoked_at = $3 WHERE id = $2 AND operator_id = $1 AND revoked_at IS NULL RETURNING ${COLS}`,
    [operatorId, tokenId, now],
  );
  return r.rows[0] ?? null;
}

/** Revokes every live token of the operator (it was disabled); answers how many. */
export async function revokeAllTokens(db: Queryable, operatorId: string, now: Date): Promise<number> {
  const r = await db.query(`UPDATE operator_tokens SET revoked_at = $2 WHERE operator_id = $1 AND revoked_at IS NULL`, [operatorId, now]);
  return r.rowCount ?? 0;
}
