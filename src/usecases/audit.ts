/**
 * The audit log's use cases: every back-office change writes its entry through `audited`, in the
 * same transaction as the change (so there is no change without its entry, nor an entry of a
 * change that was rolled back); reads and the CSV export for the surfaces.
 */
import { type AuditActor, auditDiff } from '../domain/operators.ts';
import * as audit from '../store/audit.ts';
import type { AuditFilter, AuditRow } from '../store/audit.ts';
import { type Tx, withTx } from '../store/db.ts';
import { type UseCaseDeps, nowOf } from './deps.ts';

export interface AuditChange {
  /** `merchant.create`, `app.update`, `feeRule.set`, ... (docs/console.md lists them). */
  action: string;
  entityType: string;
  entityId: string;
  /** The entity before (null for a creation) and after (null for a removal): only changed fields are kept, secrets redacted. */
  before: object | null;
  after: object | null;
  /** The merchant whose things changed (a merchant user's changes are its merchant's whatever this says). */
  merchantId?: string | null;
}

/** Writes an audit entry in `tx` (the change's own transaction). */
export type RecordChange = (c: AuditChange) => Promise<void>;

export function recorder(tx: Tx, actor: AuditActor, now: Date): RecordChange {
  return async (c) => {
    const { before, after } = auditDiff(c.before, c.after);
    await audit.insertAuditEntry(
      tx,
      {
        actorKind: actor.kind,
        operatorId: actor.operatorId,
        operatorName: actor.operatorName,
        tokenId: actor.tokenId,
        channel: actor.channel,
        sourceIp: actor.sourceIp,
        requestId: actor.requestId,
        action: c.action,
        entityType: c.entityType,
        entityId: c.entityId,
        before,
        after,
        merchantId: actor.merchantId ?? c.merchantId ?? null,
        merchantUserId: actor.merchantUserId ?? null,
        merchantUserName: actor.merchantUserName ?? null,
      },
      now,
    );
  };
}

/** Runs a change in a transaction with its audit entries: `fn` makes the change on `tx` and records it. */
export function audited<T>(
  d: Pick<UseCaseDeps, 'db' | 'clock'>,
  actor: AuditActor,
  fn: (tx: Tx, record: RecordChange) => Promise<T>,
): Promise<T> {
  return withTx(d.db, (tx) => fn(tx, recorder(tx, actor, nowOf(d))));
}

export const AUDIT_PAGE_MAX = 500;
export const AUDIT_EXPORT_MAX = 50_000;

export function listAudit(d: Pick<UseCaseDeps, 'db'>, f: AuditFilter): Promise<AuditRow[]> {
  return audit.listAuditEntries(d.db, f);
}

/** Entries matching the filter, newest first, page by page, at most AUDIT_EXPORT_MAX. */
export async function* exportAudit(d: Pick<UseCaseDeps, 'db'>, f: Omit<AuditFilter, 'beforeId' | 'limit'>): AsyncGenerator<AuditRow> {
  let beforeId: string | null = null;
  let n = 0;
  while (n < AUDIT_EXPORT_MAX) {
    const page = await audit.listAuditEntries(d.db, { ...f, beforeId, limit: Math.min(1000, AUDIT_EXPORT_MAX - n) });
    for (const row of page) yield row;
    n += page.length;
    if (page.length < 1000) return;
    beforeId = page.at(-1)!.id;
  }
}
