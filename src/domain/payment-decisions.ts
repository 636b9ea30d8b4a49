/**
 * Decide, then apply: what a provider's word (a payment notice, a refund's outcome or notice, the
 * answers to a close) does to an order, its attempts, its trades and its refunds. Pure: each
 * function takes the records as they were read and answers a `Change` (the transitions, checked
 * against the tables of states.ts, the event and the follow-up jobs), which the store applies in
 * one statement only if the records are still as they were read (src/store/changes.ts).
 */
import { type EventType, orderEventType, refundEventType } from './events.ts';
import type { JobKind } from './jobs.ts';
import {
  type AttemptState,
  type ClosedReason,
  type OrderStatus,
  type RefundState,
  REFUND_NOT_RECEIVED,
  type TradeState,
  canTransition,
  transition,
} from './states.ts';

/** An uncertain outcome is first asked about again this soon (then with the job's backoff). */
export const FIRST_CHECK_MS = 2_000;
/** A refund the provider accepted (PENDING) is first asked about this soon. */
export const PENDING_REFUND_CHECK_MS = 5_000;
/** How soon a close kept pending (UNKNOWN_KEPT) is finished by FINISH_CLOSE. */
export const KEPT_CLOSE_RETRY_MS = 2_000;

export interface OrderFacts {
  id: string;
  status: OrderStatus;
  amountFen: number;
  paidAttemptId: string | null;
  paidTradeNo: string | null;
}
export interface AttemptFacts {
  id: string;
  seq: number;
  state: AttemptState;
  provider: string;
}
export interface TradeFacts {
  id: string;
  attemptId: string;
  state: TradeState;
  provider: string;
  providerRef: string | null;
}
export interface RefundFacts {
  id: string;
  state: RefundState;
  failureReason: string | null;
}
/** An order with every attempt (by seq) and every trade of it, as read. */
export interface PaymentFacts {
  order: OrderFacts;
  attempts: readonly AttemptFacts[];
  trades: readonly TradeFacts[];
}

export interface OrderMove {
  from: OrderStatus;
  to: OrderStatus;
  closedReason?: ClosedReason;
  failureReason?: string;
  paidAttemptId?: string;
  paidTradeNo?: string;
}
export interface RowMove<S> {
  id: string;
  from: S;
  to: S;
  providerRef: string | null;
}
/** An attempt's move, with what the provider's answer gave it (kept as it was where null or absent). */
export interface AttemptMove extends RowMove<AttemptState> {
  qrCode?: string | null;
  redirectUrl?: string | null;
  /** When the request that made the attempt recorded its outcome (read by concurrent re-creates). */
  madeAt?: Date;
}
/** What an attempt's move may carry beyond its state. */
export type AttemptExtra = Pick<AttemptMove, 'qrCode' | 'redirectUrl' | 'madeAt'>;
/** A trade's move, with the material the provider's answer gave it (kept as it was where absent). */
export interface TradeMove extends RowMove<TradeState> {
  material?: string;
}
export interface RefundMove extends RowMove<RefundState> {
  failureReason: string | null;
}
export interface JobWrite {
  kind: JobKind;
  subjectId: string;
  at: Date;
}
/** A second payment of an order, recorded to be refunded (REFUND_DUPLICATE, written with it). */
export interface DuplicateWrite {
  id: string;
  attemptId: string;
  tradeNo: string;
  amountFen: number;
  provider: string;
}

/** What one decision writes, all in one statement with the records as read. */
export interface Change {
  order: OrderMove | null;
  /** The order's stateVersion moves without a status of its own (a refund's change). */
  bump: boolean;
  attempts: AttemptMove[];
  trades: TradeMove[];
  refund: RefundMove | null;
  duplicate: DuplicateWrite | null;
  /** The event the change reports (at the order's stateVersion + 1). */
  event: EventType | null;
  jobs: JobWrite[];
  /** A close kept pending (held until then), or withdrawn if its hold is still the one written. */
  closePending: { keep: ClosedReason; until: Date } | { withdrawHeld: Date } | null;
  /** What the decision saw worth a warning in the log (not applied differently for it). */
  notes: string[];
}

export function emptyChange(): Change {
  return {
    order: null,
    bump: false,
    attempts: [],
    trades: [],
    refund: null,
    duplicate: null,
    event: null,
    jobs: [],
    closePending: null,
    notes: [],
  };
}

/** Whether the change writes anything. */
export function writes(c: Change): boolean {
  return (
    c.order !== null ||
    c.bump ||
    c.attempts.length > 0 ||
    c.trades.length > 0 ||
    c.refund !== null ||
    c.duplicate !== null ||
    c.jobs.length > 0 ||
    c.closePending !== null
  );
}

/**
 * Builds a Change over a working copy of the records: each move checked against the tables, from
 * the state the records are in by then. Shared by the decisions of this module and of
 * attempt-decisions.ts (one confirmation of a payment, `confirmPaid`).
 */
export class Planner {
  readonly c = emptyChange();
  readonly order: OrderFacts;
  readonly attempts: AttemptFacts[];
  readonly trades: TradeFacts[];
  readonly flow: string;
  readonly now: Date;
  constructor(flow: string, f: PaymentFacts, now: Date) {
    this.flow = flow;
    this.now = now;
    this.order = { ...f.order };
    this.attempts = f.attempts.map((a) => ({ ...a }));
    this.trades = f.trades.map((t) => ({ ...t }));
  }

  attempt(id: string): AttemptFacts | undefined {
    return this.attempts.find((a) => a.id === id);
  }

  moveAttempt(a: AttemptFacts, to: AttemptState, providerRef: string | null = null, extra: AttemptExtra = {}): void {
    let m = this.c.attempts.find((x) => x.id === a.id);
    if (a.state !== to) transition('attempt', this.flow, a.state, to);
    if (!m) {
      m = { id: a.id, from: a.state, to, providerRef: null };
      this.c.attempts.push(m);
    }
    m.to = to;
    if (providerRef !== null) m.providerRef = providerRef;
    if (extra.qrCode != null) m.qrCode = extra.qrCode;
    if (extra.redirectUrl != null) m.redirectUrl = extra.redirectUrl;
    if (extra.madeAt) m.madeAt = extra.madeAt;
    const ended = a.state !== to && (to === 'CLOSED' || to === 'FAILED');
    a.state = to;
    if (ended) this.closeTradesLater(a.id, null);
  }

  moveTrade(t: TradeFacts, to: TradeState, providerRef: string | null = null): void {
    if (t.state === to) return;
    transition('trade', this.flow, t.state, to);
    const m = this.c.trades.find((x) => x.id === t.id);
    if (m) m.to = to;
    else this.c.trades.push({ id: t.id, from: t.state, to, providerRef });
    t.state = to;
  }

  moveOrder(to: OrderStatus, change: Omit<OrderMove, 'from' | 'to'>): void {
    if (this.order.status === to) return;
    transition('order', this.flow, this.order.status, to);
    this.c.order = { ...change, from: this.c.order?.from ?? this.order.status, to };
    this.order.status = to;
    this.c.event = orderEventType(to);
  }

  job(kind: JobKind, subjectId: string, at: Date = this.now): void {
    const same = this.c.jobs.find((j) => j.kind === kind && j.subjectId === subjectId);
    if (same) {
      if (at < same.at) same.at = at;
    } else this.c.jobs.push({ kind, subjectId, at });
  }

  /** CLOSE_TRADE for the attempt's trades still live at the provider, but `except`. */
  closeTradesLater(attemptId: string, except: string | null): void {
    for (const t of this.trades) {
      if (t.attemptId === attemptId && t.id !== except && (t.state === 'NEW' || t.state === 'OPEN')) this.job('CLOSE_TRADE', t.id);
    }
  }

  /**
   * A payment of `a`, through its own provider order or through `trade`: the order succeeds if it
   * still can, and its other ways to pay are closed afterwards; else it is a duplicate, refunded.
   */
  confirmPaid(a: AttemptFacts, trade: TradeFacts | null, tradeProviderRef: string | null = null): void {
    const tradeNo = trade?.id ?? a.id;
    if (trade && trade.state !== 'PAID') this.moveTrade(trade, 'PAID', tradeProviderRef ?? trade.providerRef);
    const o = this.order;
    const paidHere = o.paidAttemptId === a.id && (o.paidTradeNo ?? a.id) === tradeNo;
    if (a.state === 'PAID' && paidHere) return;
    if (a.state !== 'PAID') this.moveAttempt(a, 'PAID');
    if (canTransition('order', o.status, 'SUCCEEDED')) {
      this.moveOrder('SUCCEEDED', trade ? { paidAttemptId: a.id, paidTradeNo: trade.id } : { paidAttemptId: a.id });
      o.paidAttemptId = a.id;
      o.paidTradeNo = trade ? trade.id : null;
      for (const s of this.attempts) if (s.id !== a.id && s.state === 'ACCEPTED') this.job('CLOSE_STRAY_ATTEMPT', s.id);
      this.closeTradesLater(a.id, tradeNo);
      if (trade) this.job('CLOSE_TRADE', a.id);
      return;
    }
    this.c.duplicate = {
      id: `dup_${tradeNo.slice(4)}`,
      attemptId: a.id,
      tradeNo,
      amountFen: o.amountFen,
      provider: trade?.provider ?? a.provider,
    };
  }
}

/** A provider's word about a payment: the provider order it names (an attempt's own or a trade's), and what became of it. */
export interface PaymentWord {
  tradeNo: string;
  state: 'PAID' | 'FAILED' | 'CLOSED';
  providerRef: string | null;
  reason: string | null;
}

/** What a payment notice (or the provider check's finding) does to the records: nothing when they already say it. */
export function decidePaymentNotice(f: PaymentFacts, n: PaymentWord, now: Date): Change {
  const p = new Planner(`provider notice ${n.state}`, f, now);
  const trade = p.trades.find((t) => t.id === n.tradeNo) ?? null;
  const a = p.attempt(trade ? trade.attemptId : n.tradeNo);
  if (!a) throw new Error(`payment notice: ${n.tradeNo} is not of order ${f.order.id}`);
  if (trade) {
    // A trade of the attempt: paid, the attempt is paid through it; failed or closed, only that
    // way to pay ended (the attempt's other orders may still be paid).
    if (n.state === 'PAID') {
      if (a.state === 'PENDING') p.moveAttempt(a, 'ACCEPTED');
      p.confirmPaid(a, trade, n.providerRef);
    } else if (trade.state === 'NEW' || trade.state === 'OPEN') {
      p.moveTrade(trade, 'CLOSED');
    }
    return p.c;
  }
  if (n.state === 'PAID') {
    if (a.state === 'PENDING') p.moveAttempt(a, 'ACCEPTED');
    if (n.providerRef) p.moveAttempt(a, a.state, n.providerRef);
    if (a.state === 'CLOSED' || a.state === 'FAILED') {
      // The provider took the money although the attempt was recorded as ended (its close
      // crossed the payment): the money is real. The order succeeds if it still can, else the
      // payment is a duplicate, refunded automatically.
      p.c.notes.push(`provider reports a payment of attempt ${a.id} recorded as ${a.state}; applied`);
    }
    p.confirmPaid(a, null);
    return p.c;
  }
  if (a.state === 'PAID' || a.state === 'CLOSED' || a.state === 'FAILED') return p.c;
  p.moveAttempt(a, n.state === 'FAILED' ? 'FAILED' : 'CLOSED');
  const latest = p.attempts.reduce<AttemptFacts | null>((m, x) => (m === null || x.seq > m.seq ? x : m), null);
  const o = p.order;
  if (latest?.id === a.id && (o.status === 'PAYING' || o.status === 'UNKNOWN')) {
    if (n.state === 'FAILED') p.moveOrder('FAILED', { failureReason: n.reason ?? 'PAYMENT_FAILED' });
    else p.moveOrder('CLOSED', { closedReason: 'PROVIDER_CLOSED' });
  }
  return p.c;
}

/** What the provider said of a refund: its answer to the request, or a later notice. */
export type RefundWord =
  | { kind: 'ANSWER'; outcome: 'PENDING' | 'SUCCEEDED'; providerRef: string | null }
  | { kind: 'REJECTED'; reason: string }
  | { kind: 'UNCERTAIN' }
  | { kind: 'NOTICE'; state: 'SUCCEEDED' | 'FAILED'; reason: string | null; providerRef: string | null };

/**
 * A refund's decision: a change, nothing (the ledger already says it, or another word got there
 * first), a refund judged lost that the provider accepted after all (`REVIVE`: its change, after
 * which the caller checks the sum of refunds against the amount paid), or a contradiction of a
 * settled refund (logged).
 */
export type RefundDecision =
  | { kind: 'CHANGE'; change: Change }
  | { kind: 'NOTHING' }
  | { kind: 'REVIVE'; change: Change }
  | { kind: 'CONTRADICTION'; recorded: RefundState; reported: string };

function refundChange(
  flow: string,
  r: RefundFacts,
  to: RefundState,
  c: { providerRef: string | null; failureReason: string | null; checkAt?: Date },
): Change {
  const change = emptyChange();
  transition('refund', flow, r.state, to);
  change.refund = { id: r.id, from: r.state, to, providerRef: c.providerRef, failureReason: c.failureReason };
  change.bump = true;
  change.event = refundEventType(to);
  if (c.checkAt) change.jobs.push({ kind: 'CHECK_REFUND', subjectId: r.id, at: c.checkAt });
  return change;
}

/** Whether a FAILED refund may be revived: only one the platform judged lost, never one the provider refused. */
export function revivable(r: RefundFacts): boolean {
  return r.state === 'FAILED' && r.failureReason === REFUND_NOT_RECEIVED;
}

/**
 * A FAILED refund the provider reports accepted (PENDING) or settled (SUCCEEDED): one the platform
 * judged lost was received after all, and the money moved, so it takes the provider's state (and
 * counts toward the cumulative limit again), with its event; one the provider itself refused
 * contradicts the ledger and is never revived.
 */
function revival(r: RefundFacts, to: 'PENDING' | 'SUCCEEDED', providerRef: string | null, now: Date): RefundDecision {
  if (!revivable(r)) return { kind: 'CONTRADICTION', recorded: r.state, reported: to };
  const change = refundChange('refund reported after it was judged lost', r, to, {
    providerRef,
    failureReason: null,
    checkAt: to === 'PENDING' ? new Date(now.getTime() + PENDING_REFUND_CHECK_MS) : undefined,
  });
  change.notes.push(`refund ${r.id} judged lost was accepted by the provider after all (${to}); recorded`);
  return { kind: 'REVIVE', change };
}

/** The change of a refund's decision (none for nothing or a contradiction). */
export function changeOf(d: RefundDecision): Change {
  return d.kind === 'CHANGE' || d.kind === 'REVIVE' ? d.change : emptyChange();
}

export function decideRefund(r: RefundFacts, w: RefundWord, now: Date): RefundDecision {
  if (w.kind === 'NOTICE') {
    if (r.state === 'FAILED' && w.state === 'SUCCEEDED') return revival(r, 'SUCCEEDED', w.providerRef, now);
    if (r.state === 'SUCCEEDED' || r.state === 'FAILED') {
      return r.state === w.state ? { kind: 'NOTHING' } : { kind: 'CONTRADICTION', recorded: r.state, reported: w.state };
    }
    return {
      kind: 'CHANGE',
      change: refundChange(`provider refund notice ${w.state}`, r, w.state, { providerRef: w.providerRef, failureReason: w.reason }),
    };
  }
  const flow = 'create refund';
  if (r.state !== 'REQUESTED') {
    // A notification or the provider check got there first. A refund the platform judged lost that
    // the provider accepted after all: the provider's word stands.
    if (r.state === 'FAILED' && w.kind === 'ANSWER') return revival(r, w.outcome, w.providerRef, now);
    return { kind: 'NOTHING' };
  }
  if (w.kind === 'REJECTED')
    return { kind: 'CHANGE', change: refundChange(flow, r, 'FAILED', { providerRef: null, failureReason: w.reason }) };
  if (w.kind === 'UNCERTAIN') {
    return {
      kind: 'CHANGE',
      change: refundChange(flow, r, 'UNKNOWN', {
        providerRef: null,
        failureReason: null,
        checkAt: new Date(now.getTime() + FIRST_CHECK_MS),
      }),
    };
  }
  return {
    kind: 'CHANGE',
    change: refundChange(flow, r, w.outcome, {
      providerRef: w.providerRef,
      failureReason: null,
      checkAt: w.outcome === 'PENDING' ? new Date(now.getTime() + PENDING_REFUND_CHECK_MS) : undefined,
    }),
  };
}

/** The provider's answer to closing one of its orders. */
export type CloseAnswer = 'CLOSED' | 'PAID' | 'UNCERTAIN' | 'REJECTED';
export type CloseVerdict = 'CLOSE_REQUESTED' | 'UNKNOWN_KEPT' | 'ALREADY_CLOSED' | 'PROVIDER_PAID_CONFLICT' | 'REJECTED' | 'FAILED';

/**
 * A close, given the provider's answers for the attempts (by id) and trades (by id) it asked to
 * close: any payment makes it a conflict (the payment applied); a refusal leaves the order as it
 * was (the close this caller marked, `markedHold`, withdrawn); an uncertain answer keeps the
 * close pending; else the order is closed. Attempts and trades the provider did close are
 * recorded closed whatever the verdict. `FAILED`: the order failed meanwhile (the caller refuses).
 */
export function decideClose(
  f: PaymentFacts,
  answers: { attempts: ReadonlyMap<string, CloseAnswer>; trades: ReadonlyMap<string, CloseAnswer> },
  reason: ClosedReason,
  markedHold: Date | null,
  now: Date,
): { verdict: CloseVerdict; change: Change } {
  const p = new Planner(`close order (${reason})`, f, now);
  const status = p.order.status;
  if (status === 'SUCCEEDED') return { verdict: 'PROVIDER_PAID_CONFLICT', change: p.c };
  if (status === 'CLOSED') return { verdict: 'ALREADY_CLOSED', change: p.c };
  if (status === 'FAILED') return { verdict: 'FAILED', change: p.c };
  for (const [id, answer] of answers.trades) {
    const t = p.trades.find((x) => x.id === id);
    if (!t) continue;
    if (answer === 'PAID') p.confirmPaid(p.attempt(t.attemptId)!, t);
    else if (answer === 'CLOSED' && (t.state === 'NEW' || t.state === 'OPEN')) p.moveTrade(t, 'CLOSED');
  }
  for (const [id, answer] of answers.attempts) {
    const a = p.attempt(id);
    if (!a) continue;
    if (answer === 'PAID') p.confirmPaid(a, null);
    else if (answer === 'CLOSED' && (a.state === 'PENDING' || a.state === 'ACCEPTED' || a.state === 'UNKNOWN')) p.moveAttempt(a, 'CLOSED');
  }
  const all = [...answers.attempts.values(), ...answers.trades.values()];
  if (all.includes('PAID')) return { verdict: 'PROVIDER_PAID_CONFLICT', change: p.c };
  if (all.includes('REJECTED')) {
    if (markedHold !== null) p.c.closePending = { withdrawHeld: markedHold };
    return { verdict: 'REJECTED', change: p.c };
  }
  if (all.includes('UNCERTAIN')) {
    p.c.closePending = { keep: reason, until: new Date(now.getTime() + KEPT_CLOSE_RETRY_MS) };
    return { verdict: 'UNKNOWN_KEPT', change: p.c };
  }
  p.moveOrder('CLOSED', { closedReason: reason });
  return { verdict: 'CLOSE_REQUESTED', change: p.c };
}

/** What a refund request reads: the refund of its number (if any), and its order with the refunds that count. */
export interface RefundRequestFacts {
  /** The refund already under this app's refund number, with its digest, and its order's status. */
  existing: { digest: string } | null;
  order: { status: OrderStatus; amountFen: number } | null;
  /** The order's refunds that hold refundable amount (REFUND_COUNTING_STATES), in fen. */
  countedFen: number;
}

export type RefundRequestDecision = 'REPLAY' | 'CONFLICT' | 'NOT_FOUND' | 'STATE_INVALID' | 'LIMIT_EXCEEDED' | 'RESERVE';

/**
 * A refund request (decisions.md section 6): the refund number first (a number already used is a
 * replay, or a conflict with other content, whatever order it names), then the order, paid, with
 * room for the amount. RESERVE: a REQUESTED refund is written (it holds its amount), only if the
 * order is still as read.
 */
export function decideRefundRequest(f: RefundRequestFacts, req: { digest: string; amountFen: number }): RefundRequestDecision {
  if (f.existing) return f.existing.digest === req.digest ? 'REPLAY' : 'CONFLICT';
  if (!f.order) return 'NOT_FOUND';
  if (f.order.status !== 'SUCCEEDED') return 'STATE_INVALID';
  if (f.countedFen + req.amountFen > f.order.amountFen) return 'LIMIT_EXCEEDED';
  return 'RESERVE';
}
