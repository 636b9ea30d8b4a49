/**
 * Close order (seed "Close order"): the provider confirms the order unpaid before it is closed; a
 * paid order is never closed blindly. Shared by the open API (CLOSE_REQUESTED), the back office
 * (MERCHANT_CLOSED), expiry (EXPIRED) and FINISH_CLOSE (src/usecases/provider-checks.ts).
 */
import { DomainError } from '../domain/errors.ts';
import { MERCHANT_NO_RE } from '../domain/order-input.ts';
import { type ClosedReason, isLiveAttempt } from '../domain/states.ts';
import { type CallOptions, ProviderRejectedError } from '../providers/provider.ts';
import { type Tx, withTx } from '../store/db.ts';
import * as attempts from '../store/attempts.ts';
import * as orders from '../store/orders.ts';
import type { OrderRow } from '../store/orders.ts';
import { untilSettled } from './attempts.ts';
import { type Caller, type UseCaseDeps, nowOf } from './deps.ts';
import { decideAndApply } from './payment-state.ts';
import * as changes from '../store/changes.ts';
import { type CloseVerdict, decideClose } from '../domain/payment-decisions.ts';
import type { CloseState, OrderClose } from './results.ts';
import type { RequestUnit } from './request-units.ts';
import type { AttemptRow } from '../store/attempts.ts';

/** How long a close waits for an attempt being created at the provider to settle. */
export const PENDING_WAIT_MS = 10_000;

export type CloseOutcome = 'CLOSED' | 'PAID' | 'UNCERTAIN' | 'REJECTED';
type Outcome = CloseOutcome;

/** Closes one provider order (an attempt's own, or a trade's) at the provider that holds it; a refusal and an uncertain outcome are outcomes too. */
export async function closeAtProvider(d: UseCaseDeps, provider: string, no: string, opts: CallOptions = {}): Promise<CloseOutcome> {
  try {
    return (await d.providers.byName(provider).closePayment(no, opts)).outcome;
  } catch (err) {
    return err instanceof ProviderRejectedError ? 'REJECTED' : 'UNCERTAIN';
  }
}

/** Called in the close's transaction when it changed the order (closed it, or kept the close pending). */
export type CloseRecorder = (
  tx: Tx,
  c: { closeState: 'CLOSE_REQUESTED' | 'UNKNOWN_KEPT'; before: OrderRow; after: OrderRow },
) => Promise<void>;

/** Closes an order, given by id or as the row its caller has just read (not read again). */
export async function closeOrderById(
  d: UseCaseDeps,
  order: string | OrderRow,
  reason: ClosedReason,
  opts: CallOptions = {},
  onChanged?: CloseRecorder,
  unit?: RequestUnit,
): Promise<{ closeState: CloseState; order: OrderRow }> {
  const o = typeof order === 'string' ? await orders.getOrder(d.db, order) : order;
  if (!o) throw new DomainError('NOT_FOUND', undefined, { entity: 'order' });
  if (o.status === 'SUCCEEDED') throw new DomainError('STATE_INVALID', 'The order has already been paid; query the order.');
  if (o.status === 'CLOSED') return { closeState: 'ALREADY_CLOSED', order: o };
  if (o.status === 'FAILED') throw new DomainError('STATE_INVALID', 'The order has failed; it cannot be closed.');
  const markedHold = await markClose(d, o, reason, unit);
  // An attempt still PENDING is being created at the provider right now: a close sent before that
  // call lands would find nothing to close, and the payment would open after it. Wait for it to
  // settle (a request briefly; background work not at all); one still pending is uncertain, and
  // the order is kept (UNKNOWN_KEPT) for FINISH_CLOSE to finish.
  const seen = await untilSettled(
    d,
    () => d.records.read('order', o.id),
    (rec) => rec !== null && rec.attempts.some((a) => a.state === 'PENDING'),
    opts.background ? 0 : PENDING_WAIT_MS,
  );
  const { attempts: outcomes, trades: tradeOutcomes } = await askToClose(d, seen, opts);
  // The records read before the provider's answers are decided from if they are still current
  // (the change is applied only if so); else read again.
  let unread = seen;
  const records = async () => {
    const rec = unread ?? (await d.records.read('order', o.id));
    unread = null;
    return rec;
  };
  const decide = (rec: changes.OrderRecords, now: Date) => {
    const { verdict, change } = decideClose(rec, { attempts: outcomes, trades: tradeOutcomes }, reason, markedHold, now);
    if (verdict === 'FAILED') throw new DomainError('STATE_INVALID', 'The order has failed; it cannot be closed.');
    // The request's answer, recorded with the change when it shows no attempt (the order ended):
    // closeOrder's result is then known from the order the change leaves.
    const answer =
      unit && (verdict === 'CLOSE_REQUESTED' || verdict === 'PROVIDER_PAID_CONFLICT')
        ? (order: OrderRow) =>
            order.status === 'CREATED' || order.status === 'PAYING' ? null : unit.answerFor(closeResult(verdict, order, null))
        : undefined;
    return { verdict, change, answer };
  };
  const answer = (out: { verdict: CloseVerdict; result: { order: OrderRow; withdrawn: boolean } }) => {
    const closeState = out.verdict as CloseState | 'REJECTED';
    const order = closeState === 'REJECTED' && out.result.withdrawn ? { ...out.result.order, closePending: null } : out.result.order;
    return { closeState, order };
  };
  let r: { closeState: CloseState | 'REJECTED'; order: OrderRow };
  if (onChanged) {
    // The caller's record of the change (the back office's audit entry), in the same transaction.
    r = await withTx(d.db, async (tx) => {
      const out = answer((await decideAndApply(d, () => changes.recordsOfOrderLocked(tx, o.id), decide, tx))!);
      if (out.closeState === 'CLOSE_REQUESTED' || out.closeState === 'UNKNOWN_KEPT') {
        await onChanged(tx, { closeState: out.closeState, before: o, after: out.order });
      }
      return out;
    });
  } else {
    const out = (await decideAndApply(d, records, decide))!;
    if (out.result.answer) unit!.answerRecorded(out.result.answer);
    r = answer(out);
  }
  if (r.closeState === 'REJECTED') throw new DomainError('PROVIDER_REJECTED');
  return r as { closeState: CloseState; order: OrderRow };
}

/**
 * The close is recorded first (close_pending, held for CLOSE_HOLD_MS by this instance: should this
 * caller stop, FIND_DUE_WORK finds it once the hold lapses, or at once when this instance is gone,
 * and FINISH_CLOSE finishes it), under the order's lock: a re-create that starts after this answers
 * 409, and the attempt of one that started before is in the list read next. Without this, a
 * re-create racing the close could open a payment the close never saw. The open API's request id
 * is claimed in the same statement (when its unit does not hold it yet). Answers the hold written,
 * by which a refusal withdraws the close if no close marked or kept the order since this one (the
 * hold is still there: another close rewrites it, UNKNOWN_KEPT sets its own), so the last close
 * refused withdraws, and a close kept pending by another caller survives.
 */
async function markClose(d: UseCaseDeps, o: OrderRow, reason: ClosedReason, unit?: RequestUnit): Promise<Date | null> {
  const claim = unit?.joinClaim() ?? null;
  const marked = await orders.markClosePending(d.db, o.id, reason, nowOf(d), d.instanceId, claim);
  let mark = marked.mark;
  if (claim) {
    unit!.joined(marked.claimed);
    if (!marked.claimed) {
      // Taken: the unit waits for it and replays its answer (RequestDecided), or takes it over.
      await unit!.claim();
      ({ mark } = await orders.markClosePending(d.db, o.id, reason, nowOf(d), d.instanceId));
    }
  }
  return mark?.heldUntil ?? null;
}

/**
 * Every way the order can still be paid, closed at its provider: its live attempts (one still
 * PENDING is not asked: its outcome is uncertain) and their trades (JSAPI, Native).
 */
async function askToClose(
  d: UseCaseDeps,
  seen: changes.OrderRecords | null,
  opts: CallOptions,
): Promise<{ attempts: Map<string, Outcome>; trades: Map<string, Outcome> }> {
  const attempts = new Map<string, Outcome>();
  for (const a of (seen?.attempts ?? []).filter(isLiveAttempt)) {
    attempts.set(a.id, a.state === 'PENDING' ? 'UNCERTAIN' : await closeAtProvider(d, a.provider, a.id, opts));
  }
  const trades = new Map<string, Outcome>();
  for (const t of (seen?.trades ?? []).filter((t) => t.state === 'NEW' || t.state === 'OPEN')) {
    trades.set(t.id, await closeAtProvider(d, t.provider, t.id, opts));
  }
  return { attempts, trades };
}

function closeResult(closeState: CloseState, order: OrderRow, latest: AttemptRow | null): OrderClose {
  return { kind: 'order-close', closeState, order, latest };
}

/** The open API's close. `unit`: the request's unit, whose answer the close's change may record. */
export async function closeOrder(d: UseCaseDeps, caller: Caller, outTradeNo: string, unit?: RequestUnit): Promise<OrderClose> {
  if (!MERCHANT_NO_RE.test(outTradeNo)) throw new DomainError('NOT_FOUND');
  // The order read with the queries of the same event-loop turn (one statement).
  const o = (await d.orderReads.withLatest(caller.app.id, outTradeNo))?.order;
  if (!o) throw new DomainError('NOT_FOUND');
  const r = await closeOrderById(d, o, 'CLOSE_REQUESTED', {}, undefined, unit);
  // The receipt shows no attempt (latestAttempt null), but nextAction follows the real one: an
  // order kept as it was (UNKNOWN_KEPT) with a valid attempt needs no new one.
  const latest = r.order.status === 'CREATED' || r.order.status === 'PAYING' ? await attempts.latestAttempt(d.db, r.order.id) : null;
  return closeResult(r.closeState, r.order, latest);
}
