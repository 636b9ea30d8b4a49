/**
 * Decide, then apply, for an attempt's own outcome and for the answers of the background checks:
 * what a new attempt's provider answer, a trade's material given by the provider, a provider
 * check's answer about an attempt or a refund, and the closes of a stray attempt, a trade or a
 * re-create's old attempt do to an order's records.
 * Pure, as payment-decisions.ts (whose Planner they share, with its one confirmation of a payment):
 * each answers a `Change` that the store applies in one statement only if the records are still
 * as read (src/store/changes.ts).
 */
import {
  type Change,
  FIRST_CHECK_MS,
  type OrderFacts,
  type PaymentFacts,
  Planner,
  type RefundFacts,
  emptyChange,
} from './payment-decisions.ts';
import { type PayableOrder, validAttempt } from './payability.ts';
import { REFUND_NOT_RECEIVED, type RefundState, type TradeState, isLiveAttempt, transition } from './states.ts';
import { refundEventType } from './events.ts';

/** A stray close handed to the provider checks is first checked this soon. */
export const HANDED_OVER_CHECK_MS = 30_000;
/** A refund the provider has not known for this long was never received by it (longer than any provider call may take). */
export const REFUND_NOT_RECEIVED_AFTER_MS = 300_000;

/** What the provider made of a new attempt: accepted (with its material), paid at once, refused, or not known. */
export type AttemptOutcome =
  | { kind: 'ACCEPTED'; providerRef: string; qrCode: string | null; redirectUrl: string | null }
  | { kind: 'PAID'; providerRef: string }
  | { kind: 'REJECTED' }
  | { kind: 'UNCERTAIN' };

function attemptOf(p: Planner, id: string) {
  const a = p.attempt(id);
  if (!a) throw new Error(`${p.flow}: attempt ${id} is not of order ${p.order.id}`);
  return a;
}

/**
 * A new attempt's provider outcome, recorded by the request that made it (`madeAt`). An attempt
 * no longer PENDING was settled meanwhile by a provider check: only a payment reported now is
 * applied (the order succeeds if it can, else a duplicate is refunded; never dropped). A PENDING
 * attempt is refused (the order payable again), uncertain (asked about soon), paid, or accepted
 * (the order PAYING unless it ended meanwhile). An attempt the order can no longer use that the
 * provider holds, or may hold, is closed there afterwards (CLOSE_STRAY_ATTEMPT).
 */
export function decideAttemptOutcome(f: PaymentFacts, attemptId: string, out: AttemptOutcome, now: Date, flow: string): Change {
  const p = new Planner(flow, f, now);
  const a = attemptOf(p, attemptId);
  const o = p.order;
  const made = { madeAt: now };
  if (a.state !== 'PENDING') {
    if (out.kind === 'PAID' && a.state !== 'PAID') {
      p.moveAttempt(a, a.state, out.providerRef);
      p.confirmPaid(a, null);
    }
  } else if (out.kind === 'REJECTED') {
    p.moveAttempt(a, 'FAILED', null, made);
    if (o.status === 'PAYING' || o.status === 'UNKNOWN') p.moveOrder('CREATED', {});
  } else if (out.kind === 'UNCERTAIN') {
    p.moveAttempt(a, 'UNKNOWN', null, made);
    p.job('CHECK_ATTEMPT', a.id, new Date(now.getTime() + FIRST_CHECK_MS));
    if (o.status === 'CREATED' || o.status === 'PAYING') p.moveOrder('UNKNOWN', {});
  } else if (out.kind === 'PAID') {
    p.moveAttempt(a, 'ACCEPTED', out.providerRef, made);
    p.confirmPaid(a, null);
  } else {
    p.moveAttempt(a, 'ACCEPTED', out.providerRef, { ...made, qrCode: out.qrCode, redirectUrl: out.redirectUrl });
    if (o.status === 'CREATED' || o.status === 'UNKNOWN' || o.status === 'PAYING') p.moveOrder('PAYING', {});
  }
  const ended = a.state === 'CLOSED' || a.state === 'FAILED';
  if (out.kind !== 'REJECTED' && ((a.state === 'ACCEPTED' && o.status !== 'PAYING') || ended)) p.job('CLOSE_STRAY_ATTEMPT', a.id);
  return p.c;
}

/**
 * A provider check's answer about an attempt whose outcome is uncertain or whose creating request
 * stalled (a payment is applied as a notice is, decidePaymentNotice). OPEN: accepted with its
 * material (`unrecoverable`: the provider would not give the material again, so the attempt is
 * closed there and the order payable again, never PAYING without a way to pay). FAILED, CLOSED,
 * NOT_FOUND: the attempt is over; the order, if it is the latest attempt, fails or is payable again.
 */
export type AttemptCheck =
  | { state: 'OPEN'; providerRef: string | null; qrCode: string | null; redirectUrl: string | null; unrecoverable: boolean }
  | { state: 'FAILED' | 'CLOSED' | 'NOT_FOUND' };

export function decideAttemptCheck(f: PaymentFacts, attemptId: string, q: AttemptCheck, now: Date): Change {
  const p = new Planner('reconcile attempt', f, now);
  const a = attemptOf(p, attemptId);
  if (a.state !== 'UNKNOWN' && a.state !== 'PENDING') return p.c;
  const o = p.order;
  const latest = p.attempts.reduce((m, x) => (x.seq > m.seq ? x : m));
  const isLatest = latest.id === a.id;
  if (q.state === 'OPEN') {
    p.moveAttempt(a, 'ACCEPTED', q.providerRef, { qrCode: q.qrCode, redirectUrl: q.redirectUrl });
    if (q.unrecoverable) {
      if (isLatest && o.status === 'UNKNOWN') p.moveOrder('CREATED', {});
      p.job('CLOSE_STRAY_ATTEMPT', a.id);
    } else if (isLatest && (o.status === 'UNKNOWN' || o.status === 'CREATED')) {
      p.moveOrder('PAYING', {});
    } else if (!isLatest || o.status !== 'PAYING') {
      // Open at the provider, but the order can no longer use it: closed there afterwards.
      p.job('CLOSE_STRAY_ATTEMPT', a.id);
    }
    return p.c;
  }
  if (q.state === 'FAILED') {
    p.moveAttempt(a, 'FAILED');
    if (isLatest && o.status === 'UNKNOWN') p.moveOrder('FAILED', { failureReason: 'PAYMENT_FAILED' });
    return p.c;
  }
  p.moveAttempt(a, q.state === 'CLOSED' ? 'CLOSED' : 'FAILED');
  if (isLatest && o.status === 'UNKNOWN') p.moveOrder('CREATED', {});
  else if (isLatest && o.status === 'PAYING') {
    // A re-create cut off (a crash) during the new attempt's provider call. If it had closed the
    // old attempts, none is live: the order is payable again (CREATED) now. If it was cut off
    // before closing them, they are closed now, finishing what the merchant asked for; the stray
    // close then reopens the order the same way (decideStrayClosed).
    reopenIfNoLiveAttempt(p);
    for (const x of p.attempts) if (x.state === 'ACCEPTED') p.job('CLOSE_STRAY_ATTEMPT', x.id);
  }
  return p.c;
}

/** A PAYING order none of whose attempts is live any more is payable again: CREATED (nextAction CREATE_ATTEMPT). */
function reopenIfNoLiveAttempt(p: Planner): void {
  if (p.order.status === 'PAYING' && !p.attempts.some(isLiveAttempt)) p.moveOrder('CREATED', {});
}

/** The provider closed a stray attempt: recorded closed (if still open), and its order payable again if nothing else is live. */
export function decideStrayClosed(f: PaymentFacts, attemptId: string, now: Date): Change {
  const p = new Planner('close stray attempt', f, now);
  const a = attemptOf(p, attemptId);
  if (a.state !== 'ACCEPTED' && a.state !== 'UNKNOWN') return p.c;
  p.moveAttempt(a, 'CLOSED');
  reopenIfNoLiveAttempt(p);
  return p.c;
}

/** A stray close given up: an attempt still ACCEPTED becomes UNKNOWN, checked soon (CHECK_ATTEMPT), which closes it again if open. */
export function decideStrayHandOver(f: PaymentFacts, attemptId: string, now: Date): Change {
  const p = new Planner('hand a stray close to the provider checks', f, now);
  const a = attemptOf(p, attemptId);
  if (a.state !== 'ACCEPTED') return p.c;
  p.moveAttempt(a, 'UNKNOWN');
  p.job('CHECK_ATTEMPT', a.id, new Date(now.getTime() + HANDED_OVER_CHECK_MS));
  return p.c;
}

/** The provider closed a trade (CLOSE_TRADE): recorded closed if it is still NEW or OPEN. */
export function decideTradeClosed(f: PaymentFacts, tradeId: string, now: Date, flow = 'close trade'): Change {
  const p = new Planner(flow, f, now);
  const t = p.trades.find((x) => x.id === tradeId);
  if (t && (t.state === 'NEW' || t.state === 'OPEN')) p.moveTrade(t, 'CLOSED');
  return p.c;
}

/** What recording a trade's material reads: the records, with what the order's payability needs. */
export interface TradeMadeFacts extends PaymentFacts {
  order: OrderFacts & PayableOrder;
}

/**
 * The provider answered a trade's order with its material (the cashier, a trade made when the page
 * first needs it, or asked again, identically, while it has none): a NEW trade becomes OPEN with
 * it; an OPEN one takes it (a move from OPEN to OPEN). The provider now holds an open order: if
 * nobody may pay it (the trade was closed while it was being made, or the attempt can no longer be
 * paid: `validAttempt`, with the attempt's expiry `attemptExpireAt`, fixed when it was made), it is
 * closed there afterwards (CLOSE_TRADE). A trade paid meanwhile is left as it is. Answers the
 * change and the trade's state as it leaves it.
 */
export function decideTradeMade(
  f: TradeMadeFacts,
  tradeId: string,
  material: string,
  attemptExpireAt: Date,
  now: Date,
): { change: Change; state: TradeState } {
  const flow = 'make trade';
  const c = emptyChange();
  const t = f.trades.find((x) => x.id === tradeId);
  if (!t) throw new Error(`${flow}: trade ${tradeId} is not of order ${f.order.id}`);
  const a = f.attempts.find((x) => x.id === t.attemptId);
  if (!a) throw new Error(`${flow}: attempt ${t.attemptId} is not of order ${f.order.id}`);
  let state = t.state;
  if (state === 'NEW' || state === 'OPEN') {
    if (state === 'NEW') state = transition('trade', flow, state, 'OPEN').to;
    c.trades.push({ id: t.id, from: t.state, to: state, providerRef: null, material });
  }
  const payable = validAttempt(f.order, { state: a.state, expireAt: attemptExpireAt }, now.getTime()) !== null;
  if (state === 'CLOSED' || (state === 'OPEN' && !payable)) c.jobs.push({ kind: 'CLOSE_TRADE', subjectId: t.id, at: now });
  return { change: c, state };
}

/**
 * A re-create's close of an old attempt's provider order (its own or a trade's), before the new
 * attempt is made: CLOSED is recorded; UNCERTAIN leaves a trade to be closed again afterwards
 * (CLOSE_TRADE) and an accepted attempt UNKNOWN, asked about soon (the provider checks converge it).
 */
export function decideRecreateClose(f: PaymentFacts, tradeNo: string, answer: 'CLOSED' | 'UNCERTAIN', now: Date): Change {
  const flow = 're-create attempt';
  const trade = f.trades.find((t) => t.id === tradeNo);
  if (trade) {
    if (answer === 'CLOSED') return decideTradeClosed(f, tradeNo, now, flow);
    const c = emptyChange();
    if (trade.state === 'NEW' || trade.state === 'OPEN') c.jobs.push({ kind: 'CLOSE_TRADE', subjectId: trade.id, at: now });
    return c;
  }
  const p = new Planner(flow, f, now);
  const a = attemptOf(p, tradeNo);
  if (answer === 'CLOSED') {
    if (a.state === 'ACCEPTED' || a.state === 'UNKNOWN') p.moveAttempt(a, 'CLOSED');
  } else if (a.state === 'ACCEPTED') {
    p.moveAttempt(a, 'UNKNOWN');
    p.job('CHECK_ATTEMPT', a.id, new Date(now.getTime() + FIRST_CHECK_MS));
  }
  return p.c;
}

/** What a provider check found of a refund. */
export type RefundCheck = 'SUCCEEDED' | 'FAILED' | 'PENDING' | 'NOT_FOUND';

/**
 * A provider check's answer about a refund not settled yet: settled (SUCCEEDED, or FAILED by the
 * provider), still pending (asked again: `again`), or not known to the provider. NOT_FOUND for 5
 * minutes, or while the request that asked the provider died with its instance (`requesterGone`):
 * the provider never received it; nothing was refunded, and the amount is released (should the
 * provider report it after all, the refund takes the provider's state again: a revival).
 */
export function decideRefundCheck(
  r: RefundFacts & { createdAt: Date },
  found: RefundCheck,
  requesterGone: boolean,
  now: Date,
): { change: Change; again: boolean } {
  const none = (again: boolean) => ({ change: emptyChange(), again });
  if (r.state === 'SUCCEEDED' || r.state === 'FAILED') return none(false);
  if (found === 'SUCCEEDED' || found === 'FAILED') {
    return { change: refundMove(r, found, found === 'FAILED' ? 'PROVIDER_FAILED' : null), again: false };
  }
  if (found === 'PENDING') return r.state === 'PENDING' ? none(true) : { change: refundMove(r, 'PENDING', null), again: true };
  if (now.getTime() - r.createdAt.getTime() > REFUND_NOT_RECEIVED_AFTER_MS || (r.state === 'REQUESTED' && requesterGone)) {
    return { change: refundMove(r, 'FAILED', REFUND_NOT_RECEIVED), again: false };
  }
  return none(true);
}

function refundMove(r: RefundFacts, to: RefundState, failureReason: string | null): Change {
  const c = emptyChange();
  transition('refund', 'reconcile refund', r.state, to);
  c.refund = { id: r.id, from: r.state, to, providerRef: null, failureReason };
  c.bump = true;
  c.event = refundEventType(to);
  return c;
}
