/** Back-office operations on orders, events and duplicate payments. */
import type { FastifyInstance } from 'fastify';
import { AdminError, ApiError } from '../domain/errors.ts';
import type { Services } from '../services.ts';
import { attemptsOf, getOrder } from '../store/orders.ts';
import { closeOrderById } from '../usecases/orders.ts';
import { noFieldsSchema } from './admin-schemas.ts';
import { optionalBodyOf } from './admin.ts';

export function registerAdminOperations(scope: FastifyInstance, svc: Services): void {
  const db = svc.db;

  scope.get<{ Params: { openOrderId: string } }>('/orders/:openOrderId', async (req) => {
    const o = await getOrder(db, req.params.openOrderId);
    if (!o) throw new AdminError('ADMIN_NOT_FOUND', 'order not found');
    const [attempts, refunds, events, duplicates] = await Promise.all([
      attemptsOf(db, o.id),
      db.query(
        `SELECT id AS "refundAttemptId", out_refund_no AS "outRefundNo", amount_fen AS "amountFen", state, reason,
                failure_reason AS "failureReason", created_at AS "createdAt", updated_at AS "updatedAt"
           FROM refunds WHERE order_id = $1 ORDER BY created_at`,
        [o.id],
      ),
      db.query(
        `SELECT id AS "eventId", event_type AS "eventType", state_version AS "stateVersion", status, attempts,
                next_attempt_at AS "nextAttemptAt", last_error AS "lastError", delivered_at AS "deliveredAt" FROM events WHERE order_id = $1 ORDER BY state_version, created_at`,
        [o.id],
      ),
      db.query(
        `SELECT id, attempt_id AS "attemptId", amount_fen AS "amountFen", refund_state AS "refundState", created_at AS "createdAt"
           FROM duplicate_payments WHERE order_id = $1`,
        [o.id],
      ),
    ]);
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
      refunds: refunds.rows,
      events: events.rows,
      duplicatePayments: duplicates.rows,
    };
  });

  /** Back-office close: closedReason MERCHANT_CLOSED, same provider confirmation as the API close. */
  scope.post<{ Params: { openOrderId: string } }>('/orders/:openOrderId/close', async (req) => {
    optionalBodyOf(req, noFieldsSchema);
    try {
      const r = await closeOrderById(svc, req.params.openOrderId, 'MERCHANT_CLOSED');
      return { closeState: r.closeState, openOrderId: r.order.id, status: r.order.status, closedReason: r.order.closedReason };
    } catch (err) {
      if (err instanceof ApiError) {
        if (err.code === 'OPEN_API_NOT_FOUND') throw new AdminError('ADMIN_NOT_FOUND', 'order not found');
        if (err.code === 'OPEN_API_PROVIDER_REJECTED')
          throw new AdminError('ADMIN_PROVIDER_REJECTED', 'the provider rejected the close; the order is unchanged');
        throw new AdminError('ADMIN_STATE_INVALID', err.message);
      }
      throw err;
    }
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
    const r = await db.query(
      `SELECT id AS "eventId", app_id AS "appId", order_id AS "openOrderId", event_type AS "eventType", state_version AS "stateVersion",
              status, attempts, next_attempt_at AS "nextAttemptAt", last_error AS "lastError", created_at AS "createdAt",
              delivered_at AS "deliveredAt"
         FROM events WHERE ($1::text IS NULL OR status = $1) AND ($2::text IS NULL OR app_id = $2)
        ORDER BY created_at DESC LIMIT $3`,
      [status ?? null, appId ?? null, limit],
    );
    return { events: r.rows };
  });

  scope.get<{ Params: { eventId: string } }>('/events/:eventId', async (req) => {
    const e = await db.query(
      `SELECT id AS "eventId", app_id AS "appId", order_id AS "openOrderId", event_type AS "eventType", state_version AS "stateVersion",
              status, attempts, next_attempt_at AS "nextAttemptAt", last_error AS "lastError", payload, created_at AS "createdAt",
              delivered_at AS "deliveredAt"
         FROM events WHERE id = $1`,
      [req.params.eventId],
    );
    if (!e.rows[0]) throw new AdminError('ADMIN_NOT_FOUND', 'event not found');
    const d = await db.query(
      `SELECT attempt_no AS "attemptNo", attempted_at AS "attemptedAt", status_code AS "statusCode", error, duration_ms AS "durationMs"
         FROM event_deliveries WHERE event_id = $1 ORDER BY id`,
      [req.params.eventId],
    );
    return { ...e.rows[0], deliveries: d.rows };
  });

  /** Redelivery of a dead or delivered event: it goes back to the queue with a fresh schedule. */
  scope.post<{ Params: { eventId: string } }>('/events/:eventId/redeliver', async (req, reply) => {
    optionalBodyOf(req, noFieldsSchema);
    // The clock of the dispatcher (svc.clock), not the database's: the event is due for it now.
    // attempts restarts the schedule; the delivery log keeps numbering its rows from where it was.
    const r = await db.query(
      `UPDATE events SET status = 'PENDING', attempts = 0, next_attempt_at = $2, locked_by = NULL, locked_until = NULL
        WHERE id = $1 AND status IN ('DEAD', 'DELIVERED') RETURNING id`,
      [req.params.eventId, new Date(svc.clock.now())],
    );
    if (r.rowCount === 0) {
      const e = await db.query('SELECT status FROM events WHERE id = $1', [req.params.eventId]);
      if (!e.rows[0]) throw new AdminError('ADMIN_NOT_FOUND', 'event not found');
      throw new AdminError('ADMIN_STATE_INVALID', 'the event is already queued for delivery');
    }
    svc.wakeWorkers?.();
    return reply.code(202).send({ eventId: req.params.eventId, status: 'PENDING' });
  });

  scope.get('/duplicate-payments', async () => {
    const r = await db.query(
      `SELECT d.id, d.order_id AS "openOrderId", o.out_trade_no AS "outTradeNo", o.app_id AS "appId", d.attempt_id AS "attemptId",
              d.amount_fen AS "amountFen", d.refund_state AS "refundState", d.created_at AS "createdAt", d.updated_at AS "updatedAt"
         FROM duplicate_payments d JOIN orders o ON o.id = d.order_id ORDER BY d.created_at DESC LIMIT 500`,
    );
    return { duplicatePayments: r.rows };
  });
}
