/**
 * State machines as explicit transition tables (seed "States and transitions"; docs/state-machines.md).
 * A refused transition names the flow, the current state and the states that were allowed.
 */
export const ORDER_STATUSES = ['CREATED', 'PAYING', 'SUCCEEDED', 'CLOSED', 'FAILED', 'UNKNOWN'] as const;
export type OrderStatus = (typeof ORDER_STATUSES)[number];
export const CLOSED_REASONS = ['EXPIRED', 'CLOSE_REQUESTED', 'PROVIDER_CLOSED', 'MERCHANT_CLOSED'] as const;
export type ClosedReason = (typeof CLOSED_REASONS)[number];
export const ATTEMPT_STATES = ['PENDING', 'ACCEPTED', 'UNKNOWN', 'PAID', 'CLOSED', 'FAILED'] as const;
export type AttemptState = (typeof ATTEMPT_STATES)[number];
/** Attempts that may still be paid: being created, payable, or of unknown outcome. */
export const LIVE_ATTEMPT_STATES: readonly AttemptState[] = ['PENDING', 'ACCEPTED', 'UNKNOWN'];
export const isLiveAttempt = (a: { state: AttemptState }): boolean => LIVE_ATTEMPT_STATES.includes(a.state);
export const REFUND_STATES = ['REQUESTED', 'PENDING', 'SUCCEEDED', 'FAILED', 'UNKNOWN'] as const;
export type RefundState = (typeof REFUND_STATES)[number];
/** A provider trade of an attempt beyond its own (migrations/0020): NEW until its material is known. */
export const TRADE_STATES = ['NEW', 'OPEN', 'PAID', 'CLOSED'] as const;
export type TradeState = (typeof TRADE_STATES)[number];
/** Trades that may still be paid at the provider: made (or maybe made: an answer lost), not closed. */
export const LIVE_TRADE_STATES: readonly TradeState[] = ['NEW', 'OPEN'];

export const ORDER_TRANSITIONS: Readonly<Record<OrderStatus, readonly OrderStatus[]>> = {
  // CREATED: recorded, no live attempt (first attempt pending, or the provider refused it).
  CREATED: ['PAYING', 'UNKNOWN', 'SUCCEEDED', 'CLOSED', 'FAILED'],
  // PAYING: a live attempt the buyer can pay. Back to CREATED when a replacement attempt is refused.
  PAYING: ['CREATED', 'UNKNOWN', 'SUCCEEDED', 'CLOSED', 'FAILED'],
  // UNKNOWN: the provider outcome of the latest attempt is uncertain; a provider check (CHECK_ATTEMPT) converges it.
  UNKNOWN: ['CREATED', 'PAYING', 'SUCCEEDED', 'CLOSED', 'FAILED'],
  SUCCEEDED: [],
  CLOSED: [],
  FAILED: [],
};

export const ATTEMPT_TRANSITIONS: Readonly<Record<AttemptState, readonly AttemptState[]>> = {
  PENDING: ['ACCEPTED', 'UNKNOWN', 'PAID', 'CLOSED', 'FAILED'],
  ACCEPTED: ['UNKNOWN', 'PAID', 'CLOSED', 'FAILED'],
  UNKNOWN: ['ACCEPTED', 'PAID', 'CLOSED', 'FAILED'],
  PAID: [],
  // Only the provider's report of a payment leaves an ended attempt: the money moved (a close
  // that crossed the payment). The order succeeds if it can, else it is a refunded duplicate.
  CLOSED: ['PAID'],
  FAILED: ['PAID'],
};

export const REFUND_TRANSITIONS: Readonly<Record<RefundState, readonly RefundState[]>> = {
  REQUESTED: ['PENDING', 'SUCCEEDED', 'FAILED', 'UNKNOWN'],
  PENDING: ['SUCCEEDED', 'FAILED', 'UNKNOWN'],
  UNKNOWN: ['PENDING', 'SUCCEEDED', 'FAILED'],
  SUCCEEDED: [],
  // Only a refund the platform itself judged lost (NOT_RECEIVED_BY_PROVIDER) leaves FAILED, when
  // the provider then reports it accepted or settled: the money moved (refunds.ts).
  FAILED: ['PENDING', 'SUCCEEDED'],
};

export const TRADE_TRANSITIONS: Readonly<Record<TradeState, readonly TradeState[]>> = {
  // NEW: recorded; the provider has not given its material (not asked yet, refused, or its answer
  // was lost). The identical order is sent again when the cashier needs it.
  NEW: ['OPEN', 'PAID', 'CLOSED'],
  OPEN: ['PAID', 'CLOSED'],
  PAID: [],
  // As for attempts: only the provider's report of a payment leaves a closed trade.
  CLOSED: ['PAID'],
};

/** The automatic refund of a duplicate payment (duplicate_payments.refund_state). */
export const DUPLICATE_REFUND_STATES = ['PENDING', 'REFUNDED', 'FAILED', 'UNKNOWN'] as const;
export type DuplicateRefundState = (typeof DUPLICATE_REFUND_STATES)[number];

export const DUPLICATE_REFUND_TRANSITIONS: Readonly<Record<DuplicateRefundState, readonly DuplicateRefundState[]>> = {
  // PENDING: recorded, its refund asked for (or about to be), or accepted by the provider and settling.
  PENDING: ['REFUNDED', 'FAILED', 'UNKNOWN'],
  // UNKNOWN: the refund's request got no certain answer; asked about, or asked again.
  UNKNOWN: ['PENDING', 'REFUNDED', 'FAILED'],
  // The money went back: nothing overwrites it.
  REFUNDED: [],
  // The provider refused the refund: left to the operator (listed as open).
  FAILED: [],
};

/** An event's delivery to the merchant's notify URL (events.status). */
export const DELIVERY_STATES = ['PENDING', 'DELIVERED', 'DEAD'] as const;
export type DeliveryState = (typeof DELIVERY_STATES)[number];

export const DELIVERY_TRANSITIONS: Readonly<Record<DeliveryState, readonly DeliveryState[]>> = {
  // PENDING: due, being delivered, or waiting for its next attempt (a failed attempt stays PENDING).
  PENDING: ['DELIVERED', 'DEAD'],
  // Delivered again when the merchant or an operator asks (redelivery), with a fresh schedule.
  DELIVERED: ['PENDING'],
  DEAD: ['PENDING'],
};

/** A reconciliation run of a provider's statement (reconciliation_runs.status). */
export const RUN_STATES = ['QUEUED', 'RUNNING', 'COMPLETED', 'FAILED'] as const;
export type RunState = (typeof RUN_STATES)[number];

export const RUN_TRANSITIONS: Readonly<Record<RunState, readonly RunState[]>> = {
  QUEUED: ['RUNNING'],
  // RUNNING again: a run whose holder stopped is started afresh (one try more) by the next claim of its job.
  RUNNING: ['RUNNING', 'COMPLETED', 'FAILED'],
  // Tried again at its job's next time.
  FAILED: ['RUNNING'],
  COMPLETED: [],
};

/**
 * A request unit: the record of an X-SVC-Request-Id (request_replays.state). Claimed IN_PROGRESS;
 * a holder that gives it up unanswered (a 429 or 503 is not kept) deletes it, so the id is free again.
 */
export const REQUEST_UNIT_STATES = ['IN_PROGRESS', 'DONE'] as const;
export type RequestUnitState = (typeof REQUEST_UNIT_STATES)[number];

export const REQUEST_UNIT_TRANSITIONS: Readonly<Record<RequestUnitState, readonly RequestUnitState[]>> = {
  // Taking over a unit whose holder is gone changes its holder, not its state.
  IN_PROGRESS: ['DONE'],
  // The answer is kept (24 h at least) and replayed; nothing changes it.
  DONE: [],
};

/** The failure the platform records when the provider has not known a refund for 5 minutes. */
export const REFUND_NOT_RECEIVED = 'NOT_RECEIVED_BY_PROVIDER';

export class TransitionError extends Error {
  override name = 'TransitionError';
}

type Tables = {
  order: [OrderStatus, typeof ORDER_TRANSITIONS];
  attempt: [AttemptState, typeof ATTEMPT_TRANSITIONS];
  refund: [RefundState, typeof REFUND_TRANSITIONS];
  trade: [TradeState, typeof TRADE_TRANSITIONS];
  duplicateRefund: [DuplicateRefundState, typeof DUPLICATE_REFUND_TRANSITIONS];
  delivery: [DeliveryState, typeof DELIVERY_TRANSITIONS];
  run: [RunState, typeof RUN_TRANSITIONS];
  requestUnit: [RequestUnitState, typeof REQUEST_UNIT_TRANSITIONS];
};
const TABLES = {
  order: ORDER_TRANSITIONS,
  attempt: ATTEMPT_TRANSITIONS,
  refund: REFUND_TRANSITIONS,
  trade: TRADE_TRANSITIONS,
  duplicateRefund: DUPLICATE_REFUND_TRANSITIONS,
  delivery: DELIVERY_TRANSITIONS,
  run: RUN_TRANSITIONS,
  requestUnit: REQUEST_UNIT_TRANSITIONS,
};

export function canTransition<K extends keyof Tables>(entity: K, from: Tables[K][0], to: Tables[K][0]): boolean {
  return (TABLES[entity] as Record<string, readonly string[]>)[from]?.includes(to) ?? false;
}

function assertTransition<K extends keyof Tables>(entity: K, flow: string, from: Tables[K][0], to: Tables[K][0]): void {
  if (!canTransition(entity, from, to)) {
    const allowed = (TABLES[entity] as Record<string, readonly string[]>)[from] ?? [];
    throw new TransitionError(
      `${flow}: ${entity} cannot go from ${from} to ${to} (allowed from ${from}: ${allowed.length ? allowed.join(', ') : 'none, it is final'})`,
    );
  }
}

export type Entity = keyof Tables;
export type StateOf<K extends Entity> = Tables[K][0];

/** A change of state the tables allow, checked when it is made (named by the flow that needs it). */
export interface Transition<K extends Entity> {
  readonly entity: K;
  readonly from: StateOf<K>;
  readonly to: StateOf<K>;
}

/** A transition checked against the tables: throws TransitionError when they do not allow it. */
export function transition<K extends Entity>(entity: K, flow: string, from: StateOf<K>, to: StateOf<K>): Transition<K> {
  assertTransition(entity, flow, from, to);
  return { entity, from, to };
}

/** Refund states that hold refundable amount (decisions.md section 6). */
export const REFUND_COUNTING_STATES: readonly RefundState[] = ['REQUESTED', 'PENDING', 'SUCCEEDED', 'UNKNOWN'];
