/** Back-office operations on orders, events and duplicate payments (under the admin scope of src/http/admin.ts). */
import type { FastifyInstance } from 'fastify';
import { AdminError } from '../domain/errors.ts';
import type { Services } from '../services.ts';
import * as bo from '../usecases/back-office.ts';
import { noFieldsSchema } from './admin-schemas.ts';
import { optionalBodyOf } from './admin-common.ts';

type O = { Params: { openOrderId: string } };
type E = { Params: { eventId: string } };

export function registerAdminOperations(scope: FastifyInstance, svc: Services): void {
  const d = svc.backOffice;

  scope.get<O>('/orders/:openOrderId', async (req) => {
    const { order: o, attempts, refunds, events, duplicates } = await bo.orderDetail(d, req.params.openOrderId);
    return {
      openOrderId: o.id,
      appId: o.appId,
      outTradeNo: o.outTradeNo,
      status: o.status,
      closedReason: o.closedReason,
      amountFen: o.amountFen,
      stateVersion: o.stateVersion,
      expireAt: o.expireAt.toISOString(),
      // No payment material (qr codes, cashier tokens) leaves through the back office either.
      attempts: attempts.map((a) => ({
        attemptId: a.id,
        seq: a.seq,
        state: a.state,
        expireAt: a.expireAt.toISOString(),
        createdAt: a.createdAt.toISOString(),
      })),
      refunds: refunds.map((r) => ({
        refundAttemptId: r.id,
        outRefundNo: r.outRefundNo,
        amountFen: r.amountFen,
        state: r.state,
        reason: r.reason,
        failureReason: r.failureReason,
        createdAt: r.createdAt,
        updatedAt: r.updatedAt,
      })),
      events: events.map((e) => ({
        eventId: e.eventId,
        eventType: e.eventType,
        stateVersion: e.stateVersion,
        status: e.status,
        attempts: e.attempts,
        nextAttemptAt: e.nextAttemptAt,
        lastError: e.lastError,
        deliveredAt: e.deliveredAt,
      })),
      duplicatePayments: duplicates.map((x) => ({
        id: x.id,
        attemptId: x.attemptId,
        amountFen: x.amountFen,
        refundState: x.refundState,
        createdAt: x.createdAt,
      })),
    };
  });

  /** Back-office close: closedReason MERCHANT_CLOSED, same provider confirmation as the API close. */
  scope.post<O>('/orders/:openOrderId/close', async (req) => {
    optionalBodyOf(req, noFieldsSchema);
    const r = await bo.closeOrderByOperator(d, req.params.openOrderId);
    return { closeState: r.closeState, openOrderId: r.order.id, status: r.order.status, closedReason: r.order.closedReason };
  });

  scope.get<{ Querystring: { status?: string; appId?: string; limit?: string } }>('/events', async (req) => {
    const unknown = Object.keys(req.query as object).find((k) => k !== 'status' && k !== 'appId' && k !== 'limit');
    if (unknown !== undefined) throw new AdminError('ADMIN_VALIDATION_FAILED', 'the query parameters are status, appId and limit');
    const { status, appId } = req.query;
    if (status !== undefined && !['PENDING', 'DELIVERED', 'DEAD'].includes(status)) {
      throw new AdminError('ADMIN_VALIDATION_FAILED', 'status must be PENDING, DELIVERED or DEAD');
    }
    if (appId !== undefined && typeof appId !== 'string') throw new AdminError('ADMIN_VALIDATION_FAILED', 'appId must be given once');
    // Decimal digits only: `0x10`, `1e2` or ` 5` are not a limit.
    const rawLimit: unknown = req.query.limit;
    if (rawLimit !== undefined && (typeof rawLimit !== 'string' || !/^[0-9]{1,4}$/.test(rawLimit))) {
      throw new AdminError('ADMIN_VALIDATION_FAILED', 'limit must be 1 to 500');
    }
    const limit = rawLimit === undefined ? 100 : Number(rawLimit);
    if (limit < 1 || limit > 500) throw new AdminError('ADMIN_VALIDATION_FAILED', 'limit must be 1 to 500');
    return { events: await bo.listEvents(d, { status: status ?? null, appId: appId ?? null, limit }) };
  });

  scope.get<E>('/events/:eventId', async (req) => {
    const { event: e, deliveries } = await bo.eventDetail(d, req.params.eventId);
    return {
      eventId: e.eventId,
      appId: e.appId,
      openOrderId: e.openOrderId,
      eventType: e.eventType,
      stateVersion: e.stateVersion,
      status: e.status,
      attempts: e.attempts,
      nextAttemptAt: e.nextAttemptAt,
      lastError: e.lastError,
      payload: e.payload,
      createdAt: e.createdAt,
      deliveredAt: e.deliveredAt,
      deliveries,
    };
  });

  /** Redelivery of a dead or delivered event: it goes back to the queue with a fresh schedule. */
  scope.post<E>('/events/:eventId/redeliver', async (req, reply) => {
    optionalBodyOf(req, noFieldsSchema);
    await bo.redeliverEvent(d, req.params.eventId);
    return reply.code(202).send({ eventId: req.params.eventId, status: 'PENDING' });
  });

  scope.get('/duplicate-payments', async () => ({
    duplicatePayments: (await bo.listDuplicates(d)).map((x) => ({
      id: x.id,
      openOrderId: x.orderId,
      outTradeNo: x.outTradeNo,
      appId: x.appId,
      attemptId: x.attemptId,
      amountFen: x.amountFen,
      refundState: x.refundState,
      createdAt: x.createdAt,
      updatedAt: x.updatedAt,
    })),
  }));

  scope.get<{ Querystring: { status?: string; limit?: string } }>('/provider-discrepancies', async (req) => {
    const unknown = Object.keys(req.query as object).find((k) => k !== 'status' && k !== 'limit');
    if (unknown !== undefined) throw new AdminError('ADMIN_VALIDATION_FAILED', 'the query parameters are status and limit');
    const { status } = req.query;
    if (status !== undefined && status !== 'OPEN' && status !== 'RESOLVED') {
      throw new AdminError('ADMIN_VALIDATION_FAILED', 'status must be OPEN or RESOLVED');
    }
    const rawLimit: unknown = req.query.limit;
    if (
      rawLimit !== undefined &&
      (typeof rawLimit !== 'string' || !/^[0-9]{1,3}$/.test(rawLimit) || Number(rawLimit) < 1 || Number(rawLimit) > 500)
    ) {
      throw new AdminError('ADMIN_VALIDATION_FAILED', 'limit must be 1 to 500');
    }
    const rows = await bo.listDiscrepancies(d, { status: status ?? null, limit: rawLimit === undefined ? 100 : Number(rawLimit) });
    return { discrepancies: rows };
  });

  scope.post<{ Params: { id: string } }>('/provider-discrepancies/:id/resolve', async (req) => {
    optionalBodyOf(req, noFieldsSchema);
    return bo.resolveDiscrepancy(d, req.params.id);
  });
}
