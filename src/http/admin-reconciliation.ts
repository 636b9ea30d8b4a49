/**
 * Back-office operations of reconciliation (under the admin scope of src/http/admin.ts;
 * docs/reconciliation.md): a run asked for a day, the runs, one run with its lines counted by
 * outcome, and its lines. The findings themselves are provider discrepancies
 * (`GET /provider-discrepancies?source=STATEMENT`), the one place an operator looks.
 */
import type { FastifyInstance } from 'fastify';
import { shanghaiDayStart } from '../domain/statements.ts';
import { AdminError } from '../backoffice-http/errors.ts';
import { RUN_OUTCOMES } from '../domain/reconciliation.ts';
import type { Services } from '../services.ts';
import type { LineRow, RunRow } from '../store/reconciliation.ts';
import { listRuns, requestReconciliation, runDetail, runLines } from '../usecases/reconciliation.ts';
import { reconciliationRequestSchema } from '../backoffice-http/schemas.ts';
import { bodyOf } from '../backoffice-http/common.ts';
import { int, oneOf, queryOf, text } from '../backoffice-http/query.ts';
import { actorOf, need } from '../backoffice-http/operator-auth.ts';

type R = { Params: { runId: string } };

const iso = (d: Date | null) => (d === null ? null : d.toISOString());

export function runView(r: RunRow) {
  return {
    runId: r.id,
    provider: r.provider,
    day: r.day,
    trigger: r.trigger,
    status: r.status,
    tries: r.tries,
    providerLines: r.providerLines,
    ledgerLines: r.ledgerLines,
    matched: r.matched,
    converged: r.converged,
    discrepancies: r.discrepancies,
    error: r.error,
    createdAt: r.createdAt.toISOString(),
    startedAt: iso(r.startedAt),
    finishedAt: iso(r.finishedAt),
    nextTryAt: r.status === 'QUEUED' || r.status === 'FAILED' ? r.dueAt.toISOString() : null,
  };
}

function lineView(l: LineRow) {
  return {
    lineNo: l.lineNo,
    origin: l.origin,
    kind: l.kind,
    subjectId: l.subjectId,
    providerRef: l.providerRef,
    amountFen: l.amountFen,
    state: l.state,
    occurredAt: iso(l.occurredAt),
    outcome: l.outcome,
    discrepancyId: l.discrepancyId,
  };
}

/** A day, YYYY-MM-DD, a real date (its other checks as a day are the use case's). */
function day(v: string, name: string): string {
  if (shanghaiDayStart(v) === null) throw new AdminError('ADMIN_VALIDATION_FAILED', `${name} must be a date YYYY-MM-DD`);
  return v;
}

export function registerReconciliation(scope: FastifyInstance, svc: Services): void {
  scope.post('/reconciliation/runs', need('reconciliation.write'), async (req, reply) => {
    const b = bodyOf(req, reconciliationRequestSchema);
    const runs = await requestReconciliation(svc, actorOf(req), b.day as string, (b.provider as string | undefined) ?? null);
    return reply.code(202).send({ runs: runs.map(runView) });
  });

  scope.get('/reconciliation/runs', need('read'), async (req) => {
    const q = queryOf(req, { provider: text(32), day, limit: int(1, 500) });
    const runs = await listRuns(svc, { provider: q.provider, day: q.day, limit: q.limit ?? 50 });
    return { runs: runs.map(runView) };
  });

  scope.get<R>('/reconciliation/runs/:runId', need('read'), async (req) => {
    const { run, outcomes } = await runDetail(svc, req.params.runId);
    return { ...runView(run), outcomes };
  });

  scope.get<R>('/reconciliation/runs/:runId/lines', need('read'), async (req) => {
    const q = queryOf(req, { outcome: oneOf(RUN_OUTCOMES), after: int(0, 999_999_999), limit: int(1, 1000) });
    const limit = q.limit ?? 100;
    const lines = await runLines(svc, req.params.runId, { outcome: q.outcome, afterLineNo: q.after ?? 0, limit });
    return { lines: lines.map(lineView), nextAfter: lines.length === limit ? lines[lines.length - 1]!.lineNo : null };
  });
}
