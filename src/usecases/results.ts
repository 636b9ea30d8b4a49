/**
 * What the open-API use cases answer: domain results, rendered by each surface (the open API's
 * renderer is src/http/open-answers.ts). `replayed`: the answer is a projection of what already
 * existed rather than something this request created.
 */
import type { AttemptRow } from '../store/attempts.ts';
import type { OrderRow } from '../store/orders.ts';
import type { RefundRow } from '../store/refunds.ts';
import type { AccountRow } from '../store/merchants.ts';
import type { Allocation } from '../domain/money.ts';
import type { StatementCompression, StatementDay } from '../domain/statements.ts';
import type { AppEventRow, DeliveryRow } from '../store/events.ts';
import type { StatementFileDigest } from '../store/statements.ts';
import type { EventCursor } from '../domain/event-log.ts';
import type { PublishedPlatformKey } from '../domain/platform-keys.ts';

export type CloseState = 'CLOSE_REQUESTED' | 'ALREADY_CLOSED' | 'UNKNOWN_KEPT' | 'PROVIDER_PAID_CONFLICT';

/** Create order and re-create attempt: the order with its latest attempt. */
export interface OrderOutcome {
  kind: 'order';
  order: OrderRow;
  attempt: AttemptRow | null;
  replayed: boolean;
}

export interface OrderQuery {
  kind: 'order-query';
  order: OrderRow;
  attempt: AttemptRow | null;
}

export interface OrderClose {
  kind: 'order-close';
  closeState: CloseState;
  order: OrderRow;
  /** The order's latest attempt while it is still payable (it decides nextAction), else null. */
  latest: AttemptRow | null;
}

export interface RefundOutcome {
  kind: 'refund';
  refund: RefundRow;
  order: OrderRow;
  replayed: boolean;
}

export interface RefundQuery {
  kind: 'refund-query';
  refund: RefundRow;
  order: OrderRow;
}

export interface SettlementView {
  kind: 'settlement';
  accounts: AccountRow[];
  allocation: Allocation | null;
}

/** A statement's summary: the day, and its file's digest, size, rows and totals. */
export interface StatementSummary {
  kind: 'statement';
  appId: string;
  day: StatementDay;
  compression: StatementCompression;
  formatVersion: number;
  digest: StatementFileDigest;
}

/** A page of the app's event log, newest first; `next` is where the next page starts, or null at the end. */
export interface EventPage {
  kind: 'event-page';
  events: AppEventRow[];
  next: EventCursor | null;
}

export interface EventDetail {
  kind: 'event';
  event: AppEventRow;
  deliveries: DeliveryRow[];
}

/** A redelivery accepted: the event is queued, due at `nextAttemptAt`. */
export interface EventRedelivery {
  kind: 'event-redelivery';
  eventId: string;
  nextAttemptAt: Date;
}

/** The platform's published public keys, with their validity and endorsements (the platform-keys read). */
export interface PlatformKeysView {
  kind: 'platform-keys';
  keys: PublishedPlatformKey[];
}

export type OpenResult =
  | OrderOutcome
  | OrderQuery
  | OrderClose
  | RefundOutcome
  | RefundQuery
  | SettlementView
  | StatementSummary
  | EventPage
  | EventDetail
  | EventRedelivery
  | PlatformKeysView;
