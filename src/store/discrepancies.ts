/**
 * Repository: what a provider said that does not match the ledger, or that needs an operator
 * (migrations/0012, provider_discrepancies). Never applied: kept here, one row per provider,
 * source, kind and subject, until an operator resolves it.
 */
import type { Queryable } from './db.ts';

export const DISCREPANCY_SOURCES = ['NOTICE', 'QUERY', 'ANSWER', 'STATEMENT'] as const;
export type DiscrepancySource = (typeof DISCREPANCY_SOURCES)[number];

export interface NewDiscrepancy {
  provider: string;
  source: DiscrepancySource;
  kind: string;
  subjectId: string;
  expected: unknown;
  reported: unknown;
}

export interface DiscrepancyRow extends NewDiscrepancy {
  id: string;
  status: 'OPEN' | 'RESOLVED';
  createdAt: Date;
  resolvedAt: Date | null;
}

const COLS = `id::text, provider, source, kind, subject_id AS "subjectId", expected, reported, status, created_at AS "createdAt",
  resolved_at AS "resolvedAt"`;

/** Records it (once: the same discrepancy reported again is the same row); answers whether it is new. */
export async function recordDiscrepancy(db: Queryable, d: NewDiscrepancy, now: Date): Promise<boolean> {
  const r = await db.query(
    `INSERT INTO provider_discrepancies(provider, source, kind, subject_id, expected, reported, created_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (provider, source, kind, subject_id) DO NOTHING`,
    [d.provider, d.source, d.kind, d.subjectId, JSON.stringify(d.expected ?? null), JSON.stringify(d.reported ?? null), now],
  );
  return r.rowCount === 1;
}

export async function listDiscrepancies(
  db: Queryable,
  f: { status: 'OPEN' | 'RESOLVED' | null; source?: DiscrepancySource | null; provider?: string | null; limit: number },
): Promise<DiscrepancyRow[]> {
  const r = await db.query<DiscrepancyRow>(
    `SELECT ${COLS} FROM provider_discrepancies
      WHERE ($1::text IS NULL OR status = $1) AND ($3::text IS NULL OR source = $3) AND ($4::text IS NULL OR provider = $4)
      ORDER BY created_at DESC, id DESC LIMIT $2`,
    [f.status, f.limit, f.source ?? null, f.provider ?? null],
  );
  return r.rows;
}

/** Marks it resolved; answers the row, or null when there is none open with this id. */
export async function resolveDiscrepancy(db: Queryable, id: string, now: Date): Promise<DiscrepancyRow | null> {
  if (!/^\d{1,18}$/.test(id)) return null;
  const r = await db.query<DiscrepancyRow>(
    `UPDATE provider_discrepancies SET status = 'RESOLVED', resolved_at = $2 WHERE id = $1 AND status = 'OPEN' RETURNING ${COLS}`,
    [id, now],
  );
  return r.rows[0] ?? null;
}

/** Every discrepancy counted by provider, source, kind and status: found = open + resolved (the metrics). */
export async function countDiscrepancies(
  db: Queryable,
): Promise<{ provider: string; source: string; kind: string; status: string; n: number }[]> {
  const r = await db.query<{ provider: string; source: string; kind: string; status: string; n: number }>(
    `SELECT provider, source, kind, status, count(*)::int AS n FROM provider_discrepancies GROUP BY provider, source, kind, status`,
  );
  return r.rows;
}
