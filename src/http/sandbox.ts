/**
 * Sandbox helpers under /api/sandbox/v1 (decisions.md section 8): admin token required, present
 * only with the sandbox provider. The buyer's actions go through the sandbox provider, which
 * notifies the service through the provider-notification path.
 */
import type { FastifyInstance } from 'fastify';
import { AdminError } from '../domain/errors.ts';
import type { FaultOperation, FaultOutcome, SandboxProvider } from '../providers/sandbox/sandbox.ts';
import type { Services } from '../services.ts';
import { attemptsOf, getOrder } from '../store/orders.ts';
import { faultSchema, noFieldsSchema, sandboxPaySchema } from './admin-schemas.ts';
import { bodyOf, installBackOffice, optionalBodyOf } from './admin.ts';

export async function sandboxPlugin(
  scope: FastifyInstance,
  opts: { svc: Services; sandbox: SandboxProvider; adminToken: string },
): Promise<void> {
  const { svc, sandbox, adminToken } = opts;
  installBackOffice(scope, adminToken, 'sandbox helper failed');

  scope.post('/faults', async (req, reply) => {
    const b = bodyOf(req, faultSchema);
    if (b.outcome === 'DELAY_MS' && b.delayMs === undefined) throw new AdminError('ADMIN_VALIDATION_FAILED', 'DELAY_MS requires delayMs');
    if (b.outcome !== 'DELAY_MS' && b.delayMs !== undefined)
      throw new AdminError('ADMIN_VALIDATION_FAILED', 'delayMs goes only with DELAY_MS');
    const times = (b.times as number | undefined) ?? 1;
    await sandbox.programFault(b.operation as FaultOperation, b.outcome as FaultOutcome, times, (b.delayMs as number | undefined) ?? null);
    return reply
      .code(201)
      .send({ operation: b.operation, outcome: b.outcome, times, ...(b.delayMs !== undefined ? { delayMs: b.delayMs } : {}) });
  });
  scope.get('/faults', async () => ({ faults: await sandbox.listFaults() }));
  scope.delete('/faults', async (req) => {
    optionalBodyOf(req, noFieldsSchema);
    await sandbox.clearFaults();
    return { faults: [] };
  });

  const buyer = (action: 'PAY' | 'FAIL') => async (req: import('fastify').FastifyRequest<{ Params: { openOrderId: string } }>) => {
    const b = optionalBodyOf(req, sandboxPaySchema);
    const order = await getOrder(svc.db, req.params.openOrderId);
    if (!order) throw new AdminError('ADMIN_NOT_FOUND', 'order not found');
    const attempts = await attemptsOf(svc.db, order.id);
    const target =
      typeof b.attemptId === 'string'
        ? attempts.find((a) => a.id === b.attemptId)
        : [...attempts].reverse().find((a) => a.state === 'ACCEPTED' || a.state === 'UNKNOWN');
    if (!target) throw new AdminError('ADMIN_STATE_INVALID', 'the order has no attempt the buyer can pay');
    const r = await sandbox.buyerAction(target.id, action);
    if (r === 'NOT_FOUND') throw new AdminError('ADMIN_STATE_INVALID', 'the provider has no payment for this attempt');
    if (r === 'NOT_OPEN') throw new AdminError('ADMIN_STATE_INVALID', 'the payment is no longer open at the provider');
    if (r === 'EXPIRED') throw new AdminError('ADMIN_STATE_INVALID', 'the payment window has ended: the buyer can no longer pay');
    const fresh = (await getOrder(svc.db, order.id))!;
    return { openOrderId: fresh.id, attemptId: target.id, status: fresh.status };
  };
  scope.post('/payments/:openOrderId/pay', buyer('PAY'));
  scope.post('/payments/:openOrderId/fail', buyer('FAIL'));

  /** Ends the payment window now (the expiry worker then closes the order): for testing expiry. */
  scope.post<{ Params: { openOrderId: string } }>('/payments/:openOrderId/expire', async (req) => {
    optionalBodyOf(req, noFieldsSchema);
    // One statement (one now()): the attempts' material ends exactly when the order's window does.
    const r = await svc.db.query(
      `WITH o AS (
         UPDATE orders SET expire_at = now() - interval '1 millisecond', updated_at = now()
          WHERE id = $1 AND status IN ('CREATED', 'PAYING', 'UNKNOWN') RETURNING id, expire_at),
       a AS (UPDATE attempts SET expire_at = LEAST(attempts.expire_at, o.expire_at) FROM o WHERE attempts.order_id = o.id
              RETURNING attempts.id, o.expire_at),
       p AS (UPDATE sandbox_payments SET expire_at = a.expire_at, updated_at = now() FROM a WHERE sandbox_payments.attempt_id = a.id)
       SELECT id FROM o`,
      [req.params.openOrderId],
    );
    if (r.rowCount === 0) {
      if (!(await getOrder(svc.db, req.params.openOrderId))) throw new AdminError('ADMIN_NOT_FOUND', 'order not found');
      throw new AdminError('ADMIN_STATE_INVALID', 'the order is not open');
    }
    svc.wakeWorkers?.();
    return { openOrderId: req.params.openOrderId, expired: true };
  });
}
