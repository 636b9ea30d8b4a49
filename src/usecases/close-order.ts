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
import * as trades from '../store/trades.ts';
import { untilSettled } from './attempts.ts';
import { type Caller, type UseCaseDeps, nowOf } from './deps.ts';
import { confirmPaid, setAttempt, setOrderStatus, setTrade } from './payment-state.ts';
import type { CloseState, OrderClose } from './results.ts';

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
): Promise<{ closeState: CloseState; order: OrderRow }> {
  const flow = `close order (${reason})`;
  const o = typeof order === 'string' ? await orders.getOrder(d.db, order) : order;
  if (!o) throw new DomainError('NOT_FOUND', undefined, { entity: 'order' });
  if (o.status === 'SUCCEEDED') throw new DomainError('STATE_INVALID', 'The order has already been paid; query the order.');
  if (o.status === 'CLOSED') return { closeState: 'ALREADY_CLOSED', order: o };
  if (o.status === 'FAILED') throw new DomainError('STATE_INVALID', 'The order has failed; it cannot be closed.');
  // The close is recorded first (close_pending, held for CLOSE_HOLD_MS: should this caller stop,
  // FIND_DUE_WORK finds it once the hold lapses, and FINISH_CLOSE finishes it), under the order's
  // lock: a re-create that starts after this answers 409, and the attempt of one that started
  // before is in the list read next. Without this, a re-create racing the close could open a
  // payment the close never saw.
  const mark = await orders.markClosePending(d.db, o.id, reason, nowOf(d));
  // Withdrawn on a refusal if no close marked or kept the order since this one (the hold it wrote
  // is still there: another close rewrites it, UNKNOWN_KEPT sets its own), so the last close
  // refused withdraws, and a close kept pending by another caller survives.
  const markedHold = mark?.heldUntil ?? null;
  // An attempt still PENDING is being created at the provider right now: a close sent before that
  // call lands would find nothing to close, and the payment would open after it. Wait for it to
  // settle (a request briefly; background work not at all); one still pending is uncertain, and
  // the order is kept (UNKNOWN_KEPT) for FINISH_CLOSE to finish.
  const all = await untilSettled(
    d,
    () => attempts.attemptsOf(d.db, o.id),
    (all) => all.some((a) => a.state === 'PENDING'),
    opts.background ? 0 : PENDING_WAIT_MS,
  );
  const outcomes = new Map<string, Outcome>();
  for (const a of all.filter(isLiveAttempt)) {
    outcomes.set(a.id, a.state === 'PENDING' ? 'UNCERTAIN' : await closeAtProvider(d, a.provider, a.id, opts));
  }
  // Every way the order can still be paid is closed: its attempts' trades too (JSAPI, Native).
  const tradeOutcomes = new Map<string, Outcome>();
  for (const t of await trades.liveTradesOfOrder(d.db, o.id)) tradeOutcomes.set(t.id, await closeAtProvider(d, t.provider, t.id, opts));
  const values = [...outcomes.values(), ...tradeOutcomes.values()];
  const decide = async (tx: Tx): Promise<{ closeState: CloseState | 'REJECTED'; order: OrderRow }> => {
    let order = (await orders.getOrderLocked(tx, o.id))!;
    const now = nowOf(d);
    if (order.status === 'SUCCEEDED') return { closeState: 'PROVIDER_PAID_CONFLICT', order };
    if (order.status === 'CLOSED') return { closeState: 'ALREADY_CLOSED', order };
    if (order.status === 'FAILED') throw new DomainError('STATE_INVALID', 'The order has failed; it cannot be closed.');
    for (const [id, outcome] of tradeOutcomes) {
      const t = (await trades.getTrade(tx, id))!;
      if (outcome === 'PAID') {
        order = (await confirmPaid(tx, flow, order, (await attempts.getAttempt(tx, t.attemptId))!, now, t)).order;
      } else if (outcome === 'CLOSED' && (t.state === 'NEW' || t.state === 'OPEN')) {
        await setTrade(tx, flow, t, 'CLOSED', {}, now);
      }
    }
    for (const [id, outcome] of outcomes) {
      const a = (await attempts.getAttempt(tx, id))!;
      if (outcome === 'PAID') {
        order = (await confirmPaid(tx, flow, order, a, now)).order;
      } else if (outcome === 'CLOSED' && isLiveAttempt(a)) {
        await setAttempt(tx, flow, a, 'CLOSED', {}, now);
      }
    }
    if (values.includes('PAID')) return { closeState: 'PROVIDER_PAID_CONFLICT', order };
    // Refused: the order stays as it was (the close this call recorded is withdrawn), but the
    // attempts the provider did close are recorded as closed (their material no longer pays), so
    // the order shows nextAction when it has none left.
    if (values.includes('REJECTED')) {
      // An expiry the provider refuses is tried again by its own job's backoff (EXPIRE_ORDER).
      const withdrawn = markedHold !== null && (await orders.withdrawClosePending(tx, order.id, markedHold));
      return { closeState: 'REJECTED', order: withdrawn ? { ...order, closePending: null } : order };
    }
    if (values.includes('UNCERTAIN')) {
      // Held briefly: FINISH_CLOSE finishes it once the hold lapses.
      await orders.keepClosePending(tx, order.id, reason, now);
      return { closeState: 'UNKNOWN_KEPT', order: (await orders.getOrder(tx, order.id))! };
    }
    order = await setOrderStatus(tx, flow, order, 'CLOSED', { closedReason: reason }, now);
    return { closeState: 'CLOSE_REQUESTED', order };
  };
  const r = await withTx(d.db, async (tx) => {
    const out = await decide(tx);
    // The caller's record of the change (the back office's audit entry), in the same transaction.
    if (onChanged && (out.closeState === 'CLOSE_REQUESTED' || out.closeState === 'UNKNOWN_KEPT')) {
      await onChanged(tx, { closeState: out.closeState, before: o, after: out.order });
    }
    return out;
  });
  // The order's event (closed, or paid after all) is delivered now rather than at the next worker
  // pass; a payment may also have left follow-ups.
  if (values.includes('PAID') || r.closeState === 'CLOSE_REQUESTED') d.wakeWorkers();
  if (r.closeState === 'REJECTED') throw new DomainError('PROVIDER_REJECTED');
  return r as { closeState: CloseState; order: OrderRow };
}

export async function closeOrder(d: UseCaseDeps, caller: Caller, outTradeNo: string): Promise<OrderClose> {
  if (!MERCHANT_NO_RE.test(outTradeNo)) throw new DomainError('NOT_FOUND');
  const o = await orders.findOrder(d.db, caller.app.id, outTradeNo);
  if (!o) throw new DomainError('NOT_FOUND');
  const r = await closeOrderById(d, o, 'CLOSE_REQUESTED');
  // The receipt shows no attempt (latestAttempt null), but nextAction follows the real one: an
  // order kept as it was (UNKNOWN_KEPT) with a valid attempt needs no new one.
  const latest = r.order.status === 'CREATED' || r.order.status === 'PAYING' ? await attempts.latestAttempt(d.db, r.order.id) : null;
  return { kind: 'order-close', closeState: r.closeState, order: r.order, latest };
}
