/**
 * Create refund (seed "Create refund"). The cumulative limit is enforced with the order row
 * locked, so concurrent refunds of one order are serialized on the row that owns the invariant:
 * transaction 1 records the REQUESTED refund (it holds its amount), the provider is called outside
 * any transaction, transaction 2 records the outcome.
 */
import { DomainError } from '../domain/errors.ts';
import { newId } from '../domain/ids.ts';
import type { CreateRefundInput } from '../domain/open-schemas.ts';
import { refundDigest } from '../domain/order-input.ts';
import { REFUND_COUNTING_STATES } from '../domain/states.ts';
import { ProviderRejectedError, type RefundResult } from '../providers/provider.ts';
import { RefundNumberTaken } from '../store/errors.ts';
import type { OrderRow } from '../store/orders.ts';
import * as refunds from '../store/refunds.ts';
import type { RefundRow } from '../store/refunds.ts';
import { type Caller, type Log, type UseCaseDeps, nowOf } from './deps.ts';
import { countedRefundsFen, decideAndApply } from './payment-state.ts';
import { type RefundDecision, type RefundWord, changeOf, decideRefund, decideRefundRequest } from '../domain/payment-decisions.ts';
import type { RefundOutcome } from './results.ts';
import type { RequestUnit } from './request-units.ts';

/** `unit`: the request's unit, whose answer the outcome's change may record. */
export async function createRefund(d: UseCaseDeps, caller: Caller, input: CreateRefundInput, unit?: RequestUnit): Promise<RefundOutcome> {
  const digest = refundDigest(input);
  // Requests for one order are serialized on the order row; two requests with the same
  // outRefundNo naming two different orders are not, and the loser hits the unique index. It runs
  // once more and then finds the winner's row (a replay or, with other content, the conflict).
  let step;
  try {
    step = await reserveRefund(d, caller, input, digest, unit);
  } catch (err) {
    if (!(err instanceof RefundNumberTaken)) throw err;
    step = await reserveRefund(d, caller, input, digest, unit);
  }
  if (step.kind === 'replay') {
    // Still REQUESTED: the request that recorded it may never have reached the provider (its
    // commit's answer was lost in a failover, or its instance died before the call). The retry
    // submits it, so the refund the merchant asked for happens instead of failing as not received
    // 5 minutes later; the provider knows a refund by its number (the refund's id), so a second
    // submission of one it already has never refunds twice.
    if (step.refund.state === 'REQUESTED') return submitRefund(d, step.order, step.refund, unit, true);
    return { kind: 'refund', refund: step.refund, order: step.order, replayed: true };
  }
  return submitRefund(d, step.order, step.refund, unit, false);
}

/**
 * Idempotency, state and cumulative-limit checks (decideRefundRequest, from the records read in one
 * statement), then the REQUESTED row (it holds its amount) with the order's stateVersion moved, in
 * one statement only if the order is still as read; else read and decided again. Concurrent
 * refunds of one order are serialized on the order's row and its stateVersion.
 */
async function reserveRefund(
  d: UseCaseDeps,
  caller: Caller,
  input: CreateRefundInput,
  digest: string,
  unit?: RequestUnit,
): Promise<{ kind: 'replay' | 'new'; order: OrderRow; refund: RefundRow }> {
  for (;;) {
    const rec = await refunds.refundRequestRecords(d.db, caller.app.id, input.outRefundNo, input.outTradeNo, REFUND_COUNTING_STATES);
    const decision = decideRefundRequest(rec, { digest, amountFen: input.refundAmountFen });
    if (decision === 'REPLAY') return { kind: 'replay', order: rec.order!, refund: rec.existing! };
    if (decision === 'CONFLICT') throw new DomainError('IDEMPOTENCY_CONFLICT');
    if (decision === 'NOT_FOUND') throw new DomainError('NOT_FOUND');
    const order = rec.order!;
    if (decision === 'STATE_INVALID') {
      throw new DomainError('STATE_INVALID', `Only SUCCEEDED orders can be refunded; the order is ${order.status}.`);
    }
    if (decision === 'LIMIT_EXCEEDED') {
      throw new DomainError('LIMIT_EXCEEDED', 'The refund would exceed the amount paid.', {
        details: { scope: 'REFUND_CUMULATIVE', outRefundNo: input.outRefundNo },
      });
    }
    // The open API's request id is claimed in the same statement (when its unit does not hold it yet).
    const claim = unit?.joinClaim() ?? null;
    const { refund, claimed } = await refunds.reserveRefund(
      d.db,
      {
        id: newId.refund(),
        orderId: order.id,
        appId: caller.app.id,
        outRefundNo: input.outRefundNo,
        amountFen: input.refundAmountFen,
        reason: input.reason,
        digest,
        provider: rec.provider!,
        createdBy: d.instanceId,
      },
      order.stateVersion,
      nowOf(d),
      claim,
    );
    if (claim) {
      unit!.joined(claimed);
      // Taken: the unit waits for it and replays its answer (RequestDecided), or takes it over.
      if (!claimed) await unit!.claim();
    }
    if (refund) return { kind: 'new', order, refund };
  }
}

/** The provider call (outside any transaction), then transaction 2 records its outcome. */
async function submitRefund(
  d: UseCaseDeps,
  order: OrderRow,
  reserved: RefundRow,
  unit: RequestUnit | undefined,
  replayed: boolean,
): Promise<RefundOutcome> {
  let result: RefundResult | 'REJECTED' | 'UNCERTAIN';
  let rejectReason = 'PROVIDER_REJECTED';
  try {
    result = await d.providers.byName(reserved.provider).refund({
      refundId: reserved.id,
      // The provider order that was paid: the attempt's own, or the trade of it that paid.
      paidAttemptId: order.paidTradeNo ?? order.paidAttemptId!,
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
  const word: RefundWord =
    result === 'REJECTED'
      ? { kind: 'REJECTED', reason: rejectReason }
      : result === 'UNCERTAIN'
        ? { kind: 'UNCERTAIN' }
        : { kind: 'ANSWER', outcome: result.outcome, providerRef: result.providerRef };
  const out = (await decideAndApply(
    d,
    () => d.records.read('refund', reserved.id),
    (rec, now) => {
      const decision = decideRefund(rec.refund!, word, now);
      // The request's answer, recorded with the outcome (a refusal is answered as an error, by the surface).
      const answer =
        unit && word.kind !== 'REJECTED'
          ? (_: OrderRow, refund: RefundRow | null) => unit.answerFor({ kind: 'refund', refund: refund!, order, replayed })
          : undefined;
      return { change: changeOf(decision), verdict: decision, answer };
    },
  ))!;
  if (out.result.answer) unit!.answerRecorded(out.result.answer);
  if (out.verdict.kind === 'REVIVE') await warnIfRefundedAbovePaid(d, out.result.order);
  else if (out.verdict.kind === 'CONTRADICTION') logContradiction(d.log, reserved.id, out.verdict);
  // A final outcome wrote its event: delivered now rather than at the next worker pass.
  if (result === 'REJECTED') throw new DomainError('PROVIDER_REJECTED');
  return { kind: 'refund', refund: out.result.refund!, order, replayed };
}

/** A refund's outcome the provider reports that the ledger's settled refund contradicts: for an operator to reconcile. */
export function logContradiction(log: Log, refundId: string, c: Extract<RefundDecision, { kind: 'CONTRADICTION' }>): void {
  log.error(
    { refundId, recorded: c.recorded, provider: c.reported },
    'provider reports a refund outcome that contradicts the ledger; needs manual reconciliation',
  );
}

/**
 * After a refund judged lost was revived (decideRefund, REVIVE): it counts toward the cumulative
 * limit again, and the refunds accepted meanwhile may now exceed the amount paid (the provider
 * accepted both): logged for manual reconciliation (nothing is written).
 */
export async function warnIfRefundedAbovePaid(d: UseCaseDeps, order: OrderRow): Promise<void> {
  const refunded = await countedRefundsFen(d.db, order.id);
  if (refunded > order.amountFen) {
    d.log.error(
      { orderId: order.id, refunded, paid: order.amountFen },
      'refunds above the amount paid at the provider; needs manual reconciliation',
    );
  }
}
