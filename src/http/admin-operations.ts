/** Back-office operations on orders, events and duplicate payments (under the admin scope of src/http/admin.ts). */
import type { FastifyInstance } from 'fastify';
import { AdminError } from '../backoffice-http/errors.ts';
import { DomainError } from '../domain/errors.ts';
import { CHANNELS } from '../domain/open-schemas.ts';
import { ORDER_STATUSES, REFUND_STATES } from '../domain/states.ts';
import type { Services } from '../services.ts';
import type { BackOfficeDeps } from '../usecases/back-office/common.ts';
import * as discrepancies from '../usecases/back-office/discrepancies.ts';
import * as events from '../usecases/back-office/events.ts';
import * as orders from '../usecases/back-office/orders.ts';
import * as reads from '../usecases/back-office-reads.ts';
import { DISCREPANCY_SOURCES } from '../store/discrepancies.ts';
import { noFieldsSchema, redeliverEventsSchema } from '../backoffice-http/schemas.ts';
import { adminErrorOf, bodyOf, optionalBodyOf } from '../backoffice-http/common.ts';
import { int, nextOrderCursor, oneOf, orderSearchOf, queryOf, text } from '../backoffice-http/query.ts';
import { actorOf, need } from '../backoffice-http/operator-auth.ts';
import { tradesView } from '../backoffice-http/views.ts';

type O = { Params: { openOrderId: string } };
type E = { Params: { eventId: string } };

export function registerAdminOperations(scope: FastifyInstance, svc: Services): void {
  registerOrders(scope, svc.backOffice);
  registerEvents(scope, svc.backOffice);
  registerConsoleReads(scope, svc.backOffice);
  registerDiscrepancies(scope, svc.backOffice);
}

type Detail = Awaited<ReturnType<typeof orders.orderDetail>>;

/** An order with its attempts (and their provider trades), refunds, events and duplicate payments; no payment material. */
export function orderDetailView({ order: o, attempts, refunds, events, duplicates, trades }: Detail) {
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
      trades: tradesView(trades, a.id),
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
      tradeNo: x.tradeNo,
      amountFen: x.amountFen,
      refundState: x.refundState,
      createdAt: x.createdAt,
    })),
  };
}

export function eventDetailView({ event: e, deliveries }: Awaited<ReturnType<typeof events.eventDetail>>) {
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
    // The answers' excerpts are the merchant's event log's (GET /api/open/v1/events/{eventId}).
    deliveries: deliveries.map(({ responseExcerpt: _excerpt, ...x }) => x),
  };
}

/** The list's query: status, appId and limit (1-500, 100 by default), strictly. */
function eventListQuery(query: { status?: string; appId?: string; limit?: string }) {
  const unknown = Object.keys(query as object).find((k) => k !== 'status' && k !== 'appId' && k !== 'limit');
  if (unknown !== undefined) throw new AdminError('ADMIN_VALIDATION_FAILED', 'the query parameters are status, appId and limit');
  const { status, appId } = query;
  if (status !== undefined && !['PENDING', 'DELIVERED', 'DEAD'].includes(status)) {
    throw new AdminError('ADMIN_VALIDATION_FAILED', 'status must be PENDING, DELIVERED or DEAD');
  }
  if (appId !== undefined && typeof appId !== 'string') throw new AdminError('ADMIN_VALIDATION_FAILED', 'appId must be given once');
  // Decimal digits only: `0x10`, `1e2` or ` 5` are not a limit.
  const rawLimit: unknown = query.limit;
  if (rawLimit !== undefined && (typeof rawLimit !== 'string' || !/^[0-9]{1,4}$/.test(rawLimit))) {
    throw new AdminError('ADMIN_VALIDATION_FAILED', 'limit must be 1 to 500');
  }
  const limit = rawLimit === undefined ? 100 : Number(rawLimit);
  if (limit < 1 || limit > 500) throw new AdminError('ADMIN_VALIDATION_FAILED', 'limit must be 1 to 500');
  return { status: status ?? null, appId: appId ?? null, limit };
}

function registerOrders(scope: FastifyInstance, d: BackOfficeDeps): void {
  scope.get<O>('/orders/:openOrderId', need('read'), async (req) => orderDetailView(await orders.orderDetail(d, req.params.openOrderId)));

  /** Back-office close: closedReason MERCHANT_CLOSED, same provider confirmation as the API close. */
  scope.post<O>('/orders/:openOrderId/close', need('orders.close'), async (req) => {
    optionalBodyOf(req, noFieldsSchema);
    const r = await orders.closeOrderByOperator(d, actorOf(req), req.params.openOrderId);
    return { closeState: r.closeState, openOrderId: r.order.id, status: r.order.status, closedReason: r.order.closedReason };
  });

  scope.get('/duplicate-payments', need('read'), async () => ({
    duplicatePayments: (await orders.listDuplicates(d)).map((x) => ({
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
}

function registerEvents(scope: FastifyInstance, d: BackOfficeDeps): void {
  scope.get<{ Querystring: { status?: string; appId?: string; limit?: string } }>('/events', need('read'), async (req) => ({
    events: await events.listEvents(d, eventListQuery(req.query)),
  }));

  scope.get<E>('/events/:eventId', need('read'), async (req) => eventDetailView(await events.eventDetail(d, req.params.eventId)));

  /** Redelivery of a dead or delivered event: it goes back to the queue with a fresh schedule. */
  scope.post<E>('/events/:eventId/redeliver', need('events.redeliver'), async (req, reply) => {
    optionalBodyOf(req, noFieldsSchema);
    await events.redeliverEvent(d, actorOf(req), req.params.eventId);
    return reply.code(202).send({ eventId: req.params.eventId, status: 'PENDING' });
  });

  /** Redelivery of several events: each one as the single route does it, each with its own answer. */
  scope.post('/events/redeliver', need('events.redeliver'), async (req) => {
    const b = bodyOf(req, redeliverEventsSchema);
    const results = [];
    for (const eventId of b.eventIds as string[]) {
      try {
        await events.redeliverEvent(d, actorOf(req), eventId);
        results.push({ eventId, status: 'PENDING' });
      } catch (err) {
        if (!(err instanceof DomainError)) throw err;
        const a = adminErrorOf(err);
        results.push({ eventId, code: a.code, message: a.message });
      }
    }
    return { results };
  });
}

/** The console's reads: dashboard, order search, refunds. */
function registerConsoleReads(scope: FastifyInstance, d: BackOfficeDeps): void {
  scope.get('/dashboard', need('read'), async () => reads.dashboard(d));

  scope.get('/orders', need('read'), async (req) => {
    const f = orderSearchOf(req, ORDER_STATUSES, CHANNELS);
    const rows = await reads.searchOrders(d, f);
    return { orders: rows, nextCursor: nextOrderCursor(rows, f.limit) };
  });

  scope.get('/refunds', need('read'), async (req) => {
    const q = queryOf(req, { state: oneOf(REFUND_STATES), appId: text(64), limit: int(1, 500) });
    return { refunds: await reads.listRefunds(d, { state: q.state, appId: q.appId, limit: q.limit ?? 100 }) };
  });
}

function registerDiscrepancies(scope: FastifyInstance, d: BackOfficeDeps): void {
  scope.get('/provider-discrepancies', need('read'), async (req) => {
    const q = queryOf(req, {
      status: oneOf(['OPEN', 'RESOLVED'] as const),
      source: oneOf(DISCREPANCY_SOURCES),
      provider: text(32),
      limit: int(1, 500),
    });
    const rows = await discrepancies.listDiscrepancies(d, {
      status: q.status,
      source: q.source,
      provider: q.provider,
      limit: q.limit ?? 100,
    });
    return { discrepancies: rows };
  });

  scope.post<{ Params: { id: string } }>('/provider-discrepancies/:id/resolve', need('reconciliation.write'), async (req) => {
    optionalBodyOf(req, noFieldsSchema);
    return discrepancies.resolveDiscrepancy(d, actorOf(req), req.params.id);
  });
}
