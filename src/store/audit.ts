/**
 * Repository: the audit log (migrations/0013). Append-only: this module only inserts and reads,
 * and the database refuses an UPDATE, DELETE or TRUNCATE of the table.
 */
import type { ActorKind, Channel } from '../domain/operators.ts';
import type { Queryable } from './db.ts';

export interface NewAuditEntry {
  actorKind: ActorKind;
  operatorId: string | null;
  operatorName: string | null;
  tokenId: string | null;
  channel: Channel;
  sourceIp: string | null;
  requestId: string;
  action: string;
  entityType: string;
  entityId: string;
  before: Record<string, unknown> | null;
  after: Record<string, unknown> | null;
  /** The merchant the change concerns (its things, or its users' own changes), else null. */
  merchantId: string | null;
  /** A merchant user who made the change (actor kind MERCHANT_USER). */
  merchantUserId: string | null;
  merchantUserName: string | null;
}

export interface AuditRow extends NewAuditEntry {
  id: string;
  at: Date;
}

export async function insertAuditEntry(db: Queryable, e: NewAuditEntry, now: Date): Promise<void> {
  await db.query(
    `INSERT INTO audit_log(at, actor_kind, operator_id, operator_name, token_id, channel, source_ip, request_id, action, entity_type,
                           entity_id, before, after, merchant_id, merchant_user_id, merchant_user_name)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)`,
    [
      now,
      e.actorKind,
      e.operatorId,
      e.operatorName,
      e.tokenId,
      e.channel,
      e.sourceIp,
      e.requestId,
      e.action,
      e.entityType,
      e.entityId,
      e.before === null ? null : JSON.stringify(e.before),
      e.after === null ? null : JSON.stringify(e.after),
      e.merchantId,
      e.merchantUserId,
      e.merchantUserName,
    ],
  );
}

export interface AuditFilter {
  operatorName: string | null;
  action: string | null;
  entityType: string | null;
  entityId: string | null;
  requestId: string | null;
  /** Only the entries concerning this merchant (the portal's view). */
  merchantId?: string | null;
  from: Date | null;
  to: Date | null;
  /** Entries older than this id (the next page). */
  beforeId: string | null;
  limit: number;
}

/** Newest first (by the row's id: `id` alone would name the text column answered). */
export async function listAuditEntries(db: Queryable, f: AuditFilter): Promise<AuditRow[]> {
  const r = await db.query<AuditRow>(
    `SELECT id::text, at, actor_kind AS "actorKind", operator_id AS "operatorId", operator_name AS "operatorName", token_id AS "tokenId",
            channel, source_ip AS "sourceIp", request_id AS "requestId", action, entity_type AS "entityType", entity_id AS "entityId",
            before, after, merchant_id AS "merchantId", merchant_user_id AS "merchantUserId", merchant_user_name AS "merchantUserName"
       FROM audit_log
      WHERE ($1::text IS NULL OR operator_name = $1)
        AND ($2::text IS NULL OR action = $2)
        AND ($3::text IS NULL OR entity_type = $3)
        AND ($4::text IS NULL OR entity_id = $4)
        AND ($5::text IS NULL OR request_id = $5)
        AND ($6::timestamptz IS NULL OR at >= $6)
        AND ($7::timestamptz IS NULL OR at < $7)
        AND ($8::bigint IS NULL OR audit_log.id < $8)
        AND ($10::text IS NULL OR merchant_id = $10)
      ORDER BY audit_log.id DESC
      LIMIT $9`,
    [f.operatorName, f.action, f.entityType, f.entityId, f.requestId, f.from, f.to, f.beforeId, f.limit, f.merchantId ?? null],
  );
  return r.rows;
}
