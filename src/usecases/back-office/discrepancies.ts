/** The back office's provider discrepancies (what reconciliation found): the list, and an operator's resolution. */
import { DomainError } from '../../domain/errors.ts';
import type { Actor } from '../../domain/operators.ts';
import * as discrepancies from '../../store/discrepancies.ts';
import { audited } from '../audit.ts';
import { nowOf } from '../deps.ts';
import type { BackOfficeDeps } from './common.ts';

export function listDiscrepancies(
  d: BackOfficeDeps,
  f: { status: 'OPEN' | 'RESOLVED' | null; source: discrepancies.DiscrepancySource | null; provider: string | null; limit: number },
) {
  return discrepancies.listDiscrepancies(d.db, f);
}

/** An operator has dealt with it (with the provider, or by hand in the ledger). */
export async function resolveDiscrepancy(d: BackOfficeDeps, actor: Actor, id: string) {
  return audited(d, actor, async (tx, record) => {
    const r = await discrepancies.resolveDiscrepancy(tx, id, nowOf(d));
    if (!r) throw new DomainError('NOT_FOUND', undefined, { entity: 'open discrepancy' });
    await record({
      action: 'discrepancy.resolve',
      entityType: 'discrepancy',
      entityId: id,
      before: { status: 'OPEN' },
      after: { status: r.status },
    });
    return r;
  });
}
