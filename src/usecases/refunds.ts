/**
 * Create refund, query refund, read settlement (seed "Create refund", "Query refund", "Read
 * settlement"). The cumulative limit is enforced with the order row locked, so concurrent refunds
 * of one order are serialized on the row that owns the invariant.
 */
import { ApiError } from '../domain/errors.ts';
import { newId } from '../domain/ids.ts';
import type { CreateRefundInput } from '../domain/open-schemas.ts';
import { MERCHANT_NO_RE, refundDigest } from '../domain/order-input.ts';
import { REFUND_COUNTING_STATES, REFUND_NOT_RECEIVED, type RefundState, assertTransition } from '../domain/states.ts';
import type { OpenResult } from '../gate/gate.ts';
import { bumpStateVersion, writeEvent } from '../events/outbox.ts';
import { ProviderRejectedError, type RefundResult } from '../providers/provider.ts';
import type { Services } from '../services.ts';
import { type Tx, withTx } from '../store/db.ts';
import { getAllocation, listAccounts } from '../store/merchants.ts';
import { type OrderRow, type RefundRow, findOrder, findRefund, getOrder, getRefund } from '../store/orders.ts';
import type { Caller } from './orders.ts';
import { nextCheckAt } from './payment-state.ts';
import { refundProjection } from './projection.ts';

/** Moves a refund to `to`, bumps the order's stateVersion, writes REFUND_SUCCEEDED / REFUND_FAILED. */
export async function setRefundState(
  tx: Tx,
  flow: string,
  refund: RefundRow,
  to: RefundState,
  extra: { providerRef?: string | null; failureReason?: string | null; nextCheckAt?: Date | null } = {},
  now: Date = new Date(),
): Promise<RefundRow> {
  if (refund.state === to) return refund;
  assertTransition('refund', flow, refund.state, to);
  // A refund that leaves FAILED for the provider's success (reviveLostRefund) sheds its failure.
  await tx.query(
    `UPDATE refunds SET state = $2, provider_ref = COALESCE($3, provider_ref),
            failure_reason = CASE WHEN $2 IN ('PENDING', 'SUCCEEDED') THEN NULL ELSE COALESCE($4, failure_reason) END,
            next_check_at = $5, updated_at = $6 WHERE id = $1`,
    [refund.id, to, extra.providerRef ?? null, extra.failureReason ?? null, extra.nextCheckAt ?? null, now],
  );
  const version = await bumpStateVersion(tx, refund.orderId);
  const fresh = (await getRefund(tx, refund.id))!;
  const type = to === 'SUCCEEDED' ? 'REFUND_SUCCEEDED' : to === 'FAILED' ? 'REFUND_FAILED' : null;
  if (type) await writeEvent(tx, type, (await getOrder(tx, refund.orderId))!, version, now, fresh);
  return fresh;
}

/** A unique violation on refunds(app_id, out_refund_no): the same refund number raced on two orders. */
function isRefundNoRace(err: unknown): boolean {
  const e = err as { code?: string; table?: string; constraint?: string } | null;
  return e?.code === '23505' && e.table === 'refunds' && e.constraint !== 'refunds_pkey';
}

export async function createRefund(svc: Services, caller: Caller, input: CreateRefundInput): Promise<OpenResult> {
  const flow = 'create refund';
  const digest = refundDigest(input);
  // Requests for one order are serialized on the order row; two requests with the same
  // outRefundNo naming two different orders are not, and the loser hits the unique index. It runs
  // once more and then finds the winner's row (a replay or, with other content, the conflict).
  let step;
  try {
    step = await reserveRefund(svc, caller, input, digest);
  } catch (err) {
    if (!isRefundNoRace(err)) throw err;
    step = await reserveRefund(svc, caller, input, digest);
  }
  if (step.kind === 'replay') {
    return { status: 200, body: { requestId: caller.requestId, ...refundProjection(step.refund, step.order, true) } };
  }
  return submitRefund(svc, caller, flow, step.order, step.refund);
}

/** Transaction 1: idempotency, state and cumulative-limit checks, then the REQUESTED row (holds the amount). */
async function reserveRefund(svc: Services, caller: Caller, input: CreateRefundInput, digest: string) {
  return withTx(svc.db, async (tx) => {
    // The refund number first (refund identity is (app, outRefundNo)): a number already used is a
    // replay or a conflict whatever order this request names, even one that does not exist.
    const used = async () => {
      const existing = await findRefund(tx, caller.app.id, input.outRefundNo);
      if (!existing) return null;
      if (existing.digest !== digest) throw new ApiError('OPEN_API_IDEMPOTENCY_CONFLICT');
      return { kind: 'replay' as const, order: (await getOrder(tx, existing.orderId))!, refund: existing };
    };
    const before = await used();
    if (before) return before;
    const order = await findOrder(tx, caller.app.id, input.outTradeNo, true);
    if (!order) throw new ApiError('OPEN_API_NOT_FOUND');
    // Again under the order's lock: a concurrent refund of this number that held the lock is
    // committed now, and this one replays it (not judged against the amount it took). One of
    // another order is caught by the unique number on insert (the caller runs this again).
    const after = await used();
    if (after) return after;
    if (order.status !== 'SUCCEEDED') {
      throw new ApiError('OPEN_API_STATE_INVALID', `Only SUCCEEDED orders can be refunded; the order is ${order.status}.`);
    }
    if ((await countedRefundsFen(tx, order.id)) + input.refundAmountFen > order.amountFen) {
      throw new ApiError('OPEN_API_LIMIT_EXCEEDED', 'The refund would exceed the amount paid.', {
        scope: 'REFUND_CUMULATIVE',
        outRefundNo: input.outRefundNo,
      });
    }
    const id = newId.refund();
    const now = new Date(svc.clock.now());
    await tx.query(
      `INSERT INTO refunds(id, order_id, app_id, out_refund_no, amount_fen, reason, digest, state, next_check_at, created_at, updated_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, 'REQUESTED', now() + interval '60 seconds', $8, $8)`,
      [id, order.id, caller.app.id, input.outRefundNo, input.refundAmountFen, input.reason, digest, now],
    );
    await bumpStateVersion(tx, order.id);
    return { kind: 'new' as const, order, refund: (await getRefund(tx, id))! };
  });
}

/** The provider call (outside any transaction), then transaction 2 records its outcome. */
async function submitRefund(svc: Services, caller: Caller, flow: string, order: OrderRow, reserved: RefundRow): Promise<OpenResult> {
  let result: RefundResult | 'REJECTED' | 'UNCERTAIN';
  let rejectReason = 'PROVIDER_REJECTED';
  try {
    result = await svc.provider.refund({
      refundId: reserved.id,
      paidAttemptId: order.paidAttemptId!,
      amountFen: reserved.amountFen,
      paymentAmountFen: order.amountFen,
      reason: reserved.reason,
    });
  } catch (err) {
    if (err instanceof ProviderRejectedError) {
      result = 'REJECTED';
      rejectReason = err.reason;
    } else {
      result = 'UNCERTAIN';
    }
  }
  const refund = await withTx(svc.db, async (tx) => {
    await tx.query('SELECT 1 FROM orders WHERE id = $1 FOR UPDATE', [order.id]);
    const r = (await getRefund(tx, reserved.id))!;
    const now = new Date(svc.clock.now());
    if (r.state !== 'REQUESTED') {
      // A notification or the reconciler got there first. A refund the platform judged lost
      // (FAILED, never received) that the provider accepted after all: the provider's word stands.
      if (r.state === 'FAILED' && typeof result === 'object') {
        return reviveLostRefund(svc, tx, r, result.outcome, result.providerRef, now);
      }
      return r;
    }
    if (result === 'REJECTED') return setRefundState(tx, flow, r, 'FAILED', { failureReason: rejectReason }, now);
    if (result === 'UNCERTAIN') return setRefundState(tx, flow, r, 'UNKNOWN', { nextCheckAt: nextCheckAt(now, 0) }, now);
    return setRefundState(
      tx,
      flow,
      r,
      result.outcome,
      { providerRef: result.providerRef, nextCheckAt: result.outcome === 'PENDING' ? new Date(now.getTime() + 5000) : null },
      now,
    );
  });
  if (result === 'REJECTED') throw new ApiError('OPEN_API_PROVIDER_REJECTED');
  return { status: 201, body: { requestId: caller.requestId, ...refundProjection(refund, order, false) } };
}

/**
 * A refund recorded FAILED because the provider did not know it for 5 minutes, which the provider
 * then reports accepted or settled: the money moved, so the refund takes the provider's state
 * (and counts toward the cumulative limit again). A FAILED refund the provider itself rejected is
 * never revived. Runs in the caller's transaction, with the order row locked.
 */
export async function reviveLostRefund(
  svc: Services,
  tx: Tx,
  r: RefundRow,
  to: 'PENDING' | 'SUCCEEDED',
  providerRef: string | null,
  now: Date,
): Promise<RefundRow> {
  if (r.state !== 'FAILED' || r.failureReason !== REFUND_NOT_RECEIVED) {
    svc.log.error({ refundId: r.id, recorded: r.state, provider: to }, 'provider reports a refund outcome that contradicts the ledger');
    return r;
  }
  svc.log.warn({ refundId: r.id, provider: to }, 'a refund judged lost was accepted by the provider after all; recorded');
  const fresh = await setRefundState(
    tx,
    'refund reported after it was judged lost',
    r,
    to,
    {
      providerRef,
      nextCheckAt: to === 'PENDING' ? new Date(now.getTime() + 5000) : null,
    },
    now,
  );
  const o = (await getOrder(tx, r.orderId))!;
  const refunded = await countedRefundsFen(tx, r.orderId);
  if (refunded > o.amountFen) {
    svc.log.error(
      { orderId: o.id, refunded, paid: o.amountFen },
      'refunds above the amount paid at the provider; needs manual reconciliation',
    );
  }
  return fresh;
}

/** The refunds of an order that hold refundable amount (decisions.md section 6), in fen. */
async function countedRefundsFen(tx: Tx, orderId: string): Promise<number> {
  const r = await tx.query<{ total: number }>(
    'SELECT COALESCE(SUM(amount_fen), 0)::bigint AS total FROM refunds WHERE order_id = $1 AND state = ANY($2)',
    [orderId, REFUND_COUNTING_STATES],
  );
  return r.rows[0]!.total;
}

export async function queryRefund(svc: Services, caller: Caller, outRefundNo: string): Promise<OpenResult> {
  if (!MERCHANT_NO_RE.test(outRefundNo)) throw new ApiError('OPEN_API_NOT_FOUND');
  const r = await findRefund(svc.db, caller.app.id, outRefundNo);
  if (!r) throw new ApiError('OPEN_API_NOT_FOUND');
  const o = (await getOrder(svc.db, r.orderId))!;
  return { status: 200, body: { requestId: caller.requestId, ...refundProjection(r, o, true) } };
}

/** decisions.md section 6: the settlement view; only the last 4 card digits ever leave the database. */
export async function readSettlement(svc: Services, caller: Caller): Promise<OpenResult> {
  const merchantId = caller.app.merchantId;
  const [accounts, allocation] = await Promise.all([listAccounts(svc.db, merchantId), getAllocation(svc.db, merchantId)]);
  const body: Record<string, unknown> = {
    requestId: caller.requestId,
    accounts: accounts.map((a) => ({
      accountId: a.accountId,
      entityType: a.entityType,
      entityName: a.entityName,
      merchantNo: a.merchantNo,
      cardLast4: a.cardLast4,
    })),
    mode: allocation?.mode ?? null,
    participants: allocation?.participants ?? [],
  };
  // Ratios are a configuration snapshot in participant order; jsonb does not keep key order, so
  // each entry is rebuilt as {accountId, shareBps}.
  if (allocation?.mode === 'RATIO') body.ratios = (allocation.ratios ?? []).map((r) => ({ accountId: r.accountId, shareBps: r.shareBps }));
  body.unavailablePolicy = allocation?.unavailablePolicy ?? null;
  return { status: 200, body };
}
