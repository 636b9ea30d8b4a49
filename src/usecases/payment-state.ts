/**
 * Applying provider outcomes to attempts and orders. Each function runs inside one transaction
 * with the order row locked, writes the state change and its event together, and never calls
 * the provider (decisions: "never a transaction held across a provider call").
 */
import { newId } from '../domain/ids.ts';
import {
  type AttemptState,
  type ClosedReason,
  type OrderStatus,
  assertTransition,
  canTransition,
  isLiveAttempt,
} from '../domain/states.ts';
import { writeEvent } from '../events/outbox.ts';
import type { PaymentMaterial } from '../providers/provider.ts';
import type { Tx } from '../store/db.ts';
import { ATTEMPT_COLS, type AttemptRow, ORDER_COLS, type OrderRow, PENDING_RECHECK, attemptsOf } from '../store/orders.ts';

export async function setAttempt(
  tx: Tx,
  flow: string,
  a: AttemptRow,
  to: AttemptState,
  extra: { providerRef?: string | null; material?: PaymentMaterial | null; nextCheckAt?: Date | null } = {},
): Promise<void> {
  if (a.state === to) return;
  assertTransition('attempt', flow, a.state, to);
  await tx.query(
    `UPDATE attempts SET state = $2, provider_ref = COALESCE($3, provider_ref), qr_code = COALESCE($4, qr_code),
            next_check_at = $5, updated_at = now() WHERE id = $1`,
    [a.id, to, extra.providerRef ?? null, extra.material?.qrCode ?? null, extra.nextCheckAt ?? null],
  );
  a.state = to;
}

/** Moves the order to `to`, bumps stateVersion, writes the matching event; returns the fresh row. */
export async function setOrderStatus(
  tx: Tx,
  flow: string,
  o: OrderRow,
  to: OrderStatus,
  extra: { closedReason?: ClosedReason; failureReason?: string; paidAttemptId?: string } = {},
  now: Date = new Date(),
): Promise<OrderRow> {
  if (o.status === to) return o;
  assertTransition('order', flow, o.status, to);
  // One statement: the change, the shared stateVersion bump, and the fresh row.
  const r = await tx.query<OrderRow>({
    name: 'order_set_status',
    text: `UPDATE orders SET status = $2, closed_reason = COALESCE($3, closed_reason), failure_reason = COALESCE($4, failure_reason),
            paid_attempt_id = COALESCE($5, paid_attempt_id), paid_at = CASE WHEN $2 = 'SUCCEEDED' THEN $6 ELSE paid_at END,
            close_pending = CASE WHEN $2 IN ('SUCCEEDED', 'CLOSED', 'FAILED') THEN NULL ELSE close_pending END,
            state_version = state_version + 1, updated_at = now()
      WHERE id = $1 RETURNING ${ORDER_COLS}`,
    values: [o.id, to, extra.closedReason ?? null, extra.failureReason ?? null, extra.paidAttemptId ?? null, now],
  });
  const fresh = r.rows[0]!;
  const version = fresh.stateVersion;
  const type = to === 'SUCCEEDED' ? 'PAYMENT_SUCCEEDED' : to === 'CLOSED' ? 'PAYMENT_CLOSED' : to === 'FAILED' ? 'PAYMENT_FAILED' : null;
  if (type) await writeEvent(tx, type, fresh, version, now);
  return fresh;
}

/**
 * A payment of `attempt` is confirmed. If the order can still succeed, it does; if it already
 * succeeded through another attempt or was closed, this is a second payment: recorded as a
 * duplicate to be refunded automatically. Returns the duplicate id when one was recorded.
 */
export async function confirmPaid(
  tx: Tx,
  flow: string,
  order: OrderRow,
  attempt: AttemptRow,
  now: Date,
): Promise<{ order: OrderRow; duplicateId: string | null }> {
  if (attempt.state === 'PAID' && order.paidAttemptId === attempt.id) return { order, duplicateId: null };
  if (attempt.state !== 'PAID') await setAttempt(tx, flow, attempt, 'PAID');
  if (canTransition('order', order.status, 'SUCCEEDED')) {
    const fresh = await setOrderStatus(tx, flow, order, 'SUCCEEDED', { paidAttemptId: attempt.id }, now);
    return { order: fresh, duplicateId: null };
  }
  const id = `dup_${attempt.id.slice(4)}`;
  const r = await tx.query(
    `INSERT INTO duplicate_payments(id, order_id, attempt_id, amount_fen, refund_state) VALUES ($1, $2, $3, $4, 'PENDING')
     ON CONFLICT (attempt_id) DO NOTHING RETURNING id`,
    [id, order.id, attempt.id, order.amountFen],
  );
  return { order, duplicateId: r.rowCount === 1 ? id : null };
}

export async function insertAttempt(tx: Tx, order: OrderRow): Promise<AttemptRow> {
  const r = await tx.query<AttemptRow>({
    name: 'attempt_insert',
    text: `INSERT INTO attempts(id, order_id, seq, state, cashier_token, expire_at, next_check_at)
     VALUES ($1, $2, (SELECT COALESCE(MAX(seq), 0) + 1 FROM attempts WHERE order_id = $2), 'PENDING', $3, $4, now() + ${PENDING_RECHECK})
     RETURNING ${ATTEMPT_COLS}`,
    values: [newId.attempt(), order.id, newId.cashierToken(), order.expireAt],
  });
  return r.rows[0]!;
}

/** Backoff for re-asking the provider about an uncertain outcome: 2 s, 4 s, ... capped at 5 min. */
export function nextCheckAt(now: Date, checks: number): Date {
  const base = Math.min(2000 * 2 ** Math.min(checks, 10), 300_000);
  return new Date(now.getTime() + base + Math.floor(Math.random() * base * 0.2));
}

/**
 * A PAYING order none of whose attempts is live any more (each closed, failed or never created) is
 * payable again: CREATED, so it answers `nextAction: CREATE_ATTEMPT` rather than read PAYING with
 * nothing to pay. Run, under the order's lock, after an attempt of it ended.
 */
export async function reopenIfNoLiveAttempt(tx: Tx, flow: string, o: OrderRow, now: Date): Promise<void> {
  if (o.status !== 'PAYING') return;
  if ((await attemptsOf(tx, o.id)).some(isLiveAttempt)) return;
  await setOrderStatus(tx, flow, o, 'CREATED', {}, now);
}
