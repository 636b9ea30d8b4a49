/**
 * Request and response shapes of the open API (seed "Resources and their fields", "Endpoints",
 * "Events"; decisions.md section 6 pins the formats the seed leaves open), by the names the SDK
 * has always published. Each is the type generated from the schema the service serves and
 * validates with (./api-types.ts, `npm run gen:types`), so none is written twice; the few
 * refinements below only narrow a generated type where the schema's description says more than
 * its constraints (a null the answer always has).
 * Timestamps are RFC 3339 UTC strings with milliseconds (e.g. "2026-11-22T08:30:00.000Z");
 * amounts are integer fen.
 */
import type {
  EventLogEntry,
  OrderCloseResponse,
  OrderCreateResponse,
  OrderQueryResponse,
  OrderSnapshot,
  RefundProjection,
  RefundResponse,
  SettlementAccount,
  SettlementRatios,
  SettlementView,
  StatementTotals,
  WebhookEventPayload as WebhookEventSchema,
} from './api-types.ts';

export type {
  Channel,
  CreateOrderRequest,
  CreateRefundRequest,
  DeliveryAttempt,
  EventListResponse,
  EventLogEntry,
  EventResponse,
  FeeProjection,
  LatestAttempt,
  OrderSnapshot,
  RedeliveryResponse,
  RefundProjection,
  SettlementAccount,
  SettlementResponse,
  SettlementView,
  StatementResponse,
  StatementTotals,
  TradeScope,
} from './api-types.ts';

export type LinkKind = OrderSnapshot['links'][number];
export type NextAction = NonNullable<OrderSnapshot['nextAction']>;
export type CloseState = OrderCloseResponse['closeState'];
export type OrderStatus = OrderSnapshot['status'];
export type ClosedReason = NonNullable<OrderSnapshot['closedReason']>;
export type AttemptState = NonNullable<OrderSnapshot['latestAttempt']>['state'];
export type RefundState = RefundProjection['state'];
export type SettlementMode = NonNullable<SettlementView['mode']>;
export type UnavailablePolicy = NonNullable<SettlementView['unavailablePolicy']>;
export type EntityType = SettlementAccount['entityType'];
export type EventType = EventLogEntry['eventType'];
export type DeliveryStatus = EventLogEntry['status'];

export interface WithRequestId {
  /** The request identity (the X-SVC-Request-Id that was sent). */
  requestId: string;
}

/** 201 new order; 200 idempotent replay with replayed=true. */
export type CreateOrderResponse = OrderCreateResponse;
/** 201 new attempt; 200 projection of a concurrent winner. */
export type RecreateAttemptResponse = OrderCreateResponse;
/** Query projection: payUrl and qrCode always null, latestAttempt present. */
export type QueryOrderResponse = OrderQueryResponse & { payUrl: null };
/** Close receipt: closeState plus the snapshot, payUrl and latestAttempt null. */
export type CloseOrderResponse = OrderCloseResponse & { payUrl: null; latestAttempt: null };

/** 201 accepted; 200 idempotent replay. */
export type CreateRefundResponse = RefundResponse;
export type QueryRefundResponse = RefundResponse;

/** One account's share of a RATIO allocation: 0 < shareBps < 10000; the shares sum to 10000. */
export type SettlementRatio = SettlementRatios[number];

/** Body of an event notification (seed "Events", decisions.md section 7): its status is the order's or the refund's. */
export type WebhookEventPayload = WebhookEventSchema & { status: OrderStatus | RefundState };

/** Count and sum of a kind of statement row. */
export type CountAndAmount = StatementTotals['paymentsSucceeded'];

/** Filters of GET /api/open/v1/events (query parameters, not a body). */
export interface EventFilter {
  type?: EventType;
  status?: DeliveryStatus;
  /** RFC 3339; inclusive. */
  from?: string;
  /** RFC 3339; exclusive. */
  to?: string;
  /** 1-100 (default 20). */
  limit?: number;
  cursor?: string;
}
