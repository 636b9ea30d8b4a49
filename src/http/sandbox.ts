/**
 * Sandbox helpers under /api/sandbox/v1 (decisions.md section 8): admin token required, present
 * only with the sandbox provider. The buyer's actions go through the sandbox provider, which
 * notifies the service through the provider-notification path.
 */
import type { FastifyInstance } from 'fastify';
import { AdminError } from '../backoffice-http/errors.ts';
import { type BuyerAction, type FaultOperation, type FaultOutcome, type SandboxProvider, faultFits } from '../providers/sandbox/sandbox.ts';
import { MAX_ATTEMPTS } from '../events/dispatcher.ts';
import type { Services } from '../services.ts';
import { sandboxBuyerAction, sandboxEndPaymentWindow, sandboxLastDeliveryAttempt } from '../usecases/sandbox-helpers.ts';
import { faultSchema, noFieldsSchema, sandboxPaySchema } from '../backoffice-http/schemas.ts';
import { bodyOf, installBackOffice, optionalBodyOf } from '../backoffice-http/common.ts';

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
    if (!faultFits(b.operation as FaultOperation, b.outcome as FaultOutcome)) {
      throw new AdminError(
        'ADMIN_VALIDATION_FAILED',
        'NOTICE_LOST goes only with PAY, AMOUNT_DIFFERS with CREATE_ATTEMPT, LOST with REFUND; PAY takes only NOTICE_LOST',
      );
    }
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

  const buyer = (action: BuyerAction) => async (req: import('fastify').FastifyRequest<{ Params: { openOrderId: string } }>) => {
    const b = optionalBodyOf(req, sandboxPaySchema);
    const r = await sandboxBuyerAction(svc, sandbox, req.params.openOrderId, action, b.attemptId as string | undefined);
    return { openOrderId: r.orderId, attemptId: r.attemptId, status: r.status };
  };
  scope.post('/payments/:openOrderId/pay', buyer('PAY'));
  scope.post('/payments/:openOrderId/fail', buyer('FAIL'));
  /** The provider closes the payment of itself (its own timeout): the order is CLOSED, PROVIDER_CLOSED. */
  scope.post('/payments/:openOrderId/provider-close', buyer('CLOSE'));

  /** The event's next delivery attempt is its last, due now: for testing dead events. */
  scope.post<{ Params: { eventId: string } }>('/events/:eventId/last-attempt', async (req) => {
    optionalBodyOf(req, noFieldsSchema);
    await sandboxLastDeliveryAttempt(svc, req.params.eventId);
    return { eventId: req.params.eventId, status: 'PENDING', attempts: MAX_ATTEMPTS - 1 };
  });

  /** Ends the payment window now (the expiry worker then closes the order): for testing expiry. */
  scope.post<{ Params: { openOrderId: string } }>('/payments/:openOrderId/expire', async (req) => {
    optionalBodyOf(req, noFieldsSchema);
    await sandboxEndPaymentWindow(svc, sandbox, req.params.openOrderId);
    return { openOrderId: req.params.openOrderId, expired: true };
  });
}
