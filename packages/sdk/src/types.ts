/**
 * Request and response shapes of the open API (seed "Resources and their fields", "Endpoints",
 * "Events"; decisions.md section 6 pins the formats the seed leaves open).
 * Timestamps are RFC 3339 UTC strings with milliseconds (e.g. "2026-11-22T08:30:00.000Z");
 * amounts are integer fen.
 */

export type Channel = 'ALIPAY_H5' | 'WECHAT_H5';
export type TradeScope = 'PHYSICAL_FACE_TO_FACE' | 'CARD_VIRTUAL';
export type LinkKind = 'ALIPAY_AGGREGATION_NATIVE' | 'WECHAT_JSAPI';
export type NextAction = 'CREATE_ATTEMPT';
export type CloseState = 'CLOSE_REQUESTED' | 'ALREADY_CLOSED' | 'UNKNOWN_KEPT' | 'PROVIDER_PAID_CONFLICT';
export type OrderStatus = 'CREATED' | 'PAYING' | 'SUCCEEDED' | 'CLOSED' | 'FAILED' | 'UNKNOWN';
export type ClosedReason = 'EXPIRED' | 'CLOSE_REQUESTED' | 'PROVIDER_CLOSED' | 'MERCHANT_CLOSED';
export type AttemptState = 'PENDING' | 'ACCEPTED' | 'UNKNOWN' | 'PAID' | 'CLOSED' | 'FAILED';
export type RefundState = 'REQUESTED' | 'PENDING' | 'SUCCEEDED' | 'FAILED' | 'UNKNOWN';
export type SettlementMode = 'SINGLE' | 'PRIORITY' | 'RATIO';
export type UnavailablePolicy = 'FAIL' | 'NEXT_AVAILABLE' | 'REDISTRIBUTE';
export type EntityType = 'INDIVIDUAL' | 'CORPORATE';
export type EventType = 'PAYMENT_SUCCEEDED' | 'PAYMENT_CLOSED' | 'PAYMENT_FAILED' | 'REFUND_SUCCEEDED' | 'REFUND_FAILED';

/** POST /api/open/v1/payments. The endpoint is strict: any other field gives 400. */
export interface CreateOrderRequest {
  /** 6-64 of A-Z a-z 0-9 _ -; the order's idempotency identity, reuse it verbatim on retries. */
  outTradeNo: string;
  channel: Channel;
  tradeScope?: TradeScope;
  /** Integer fen, at least 1. */
  amountFen: number;
  currency: 'CNY';
  /** Up to 128 characters. */
  subject: string;
  /** Up to 256 characters. */
  description?: string;
  /** Up to 256 characters (after trimming); returned unchanged in events. */
  attach?: string;
  /** Absolute https URL without user info, query or fragment; frozen at first creation. */
  returnUrl?: string;
  /** Public IPv4 or IPv6 address of the buyer's client. */
  payerClientIp: string;
}

/** POST /api/open/v1/refunds. The endpoint is strict: any other field gives 400. */
export interface CreateRefundRequest {
  outTradeNo: string;
  /** 6-64 of A-Z a-z 0-9 _ -; the refund's idempotency identity, reuse it verbatim on retries. */
  outRefundNo: string;
  /** Integer fen, greater than 0. */
  refundAmountFen: number;
  /** Up to 256 characters. */
  reason?: string;
}

/** Fee projection of a payment (decisions.md section 6); all integers. */
export interface FeeProjection {
  companyServiceFeeFen: number;
  companyServiceFeeRateBps: number;
  merchantRateBps: number;
  merchantSettlementFen: number;
  ruleVersion: number;
  thresholdFen: number;
  tier: 'STANDARD' | 'LARGE';
}

/** State and expiry of the latest payment attempt; never any payment material. */
export interface LatestAttempt {
  state: AttemptState;
  expireAt: string;
}

/** The order snapshot common to every order operation. */
export interface OrderSnapshot {
  openOrderId: string;
  outTradeNo: string;
  status: OrderStatus;
  closedReason: ClosedReason | null;
  channel: Channel;
  tradeScope: TradeScope | null;
  /** Payment links frozen for the order; never a voided link. */
  links: LinkKind[];
  amountFen: number;
  currency: 'CNY';
  attach: string | null;
  /** End of the payment window; the server's clock is authoritative. */
  expireAt: string;
  /** Cashier page address: set only by create-order and re-create-attempt (when a valid attempt exists). */
  payUrl: string | null;
  /** Official collection code: only in create/re-create responses of ALIPAY_H5 orders. */
  qrCode?: string | null;
  /** Expiry hint of the payment material, epoch seconds; follows expireAt. */
  payUrlExpireHint: number | null;
  /** Present (CREATE_ATTEMPT) when the order is payable but has no valid attempt. */
  nextAction?: NextAction;
  /** Present in query projections, null in close receipts, absent elsewhere. */
  latestAttempt?: LatestAttempt | null;
  feeProjection: FeeProjection | null;
  /** Only in create-order and re-create-attempt responses. */
  replayed?: boolean;
  /** Only in create-order and re-create-attempt responses, and only when true. */
  unknown?: true;
}

export interface WithRequestId {
  /** The request identity (the X-SVC-Request-Id that was sent). */
  requestId: string;
}

/** 201 new order; 200 idempotent replay with replayed=true. */
export type CreateOrderResponse = WithRequestId & OrderSnapshot & { replayed: boolean };
/** 201 new attempt; 200 projection of a concurrent winner. */
export type RecreateAttemptResponse = WithRequestId & OrderSnapshot & { replayed: boolean };
/** Query projection: payUrl and qrCode always null, latestAttempt present. */
export type QueryOrderResponse = WithRequestId &
  Omit<OrderSnapshot, 'replayed' | 'unknown'> & { payUrl: null; latestAttempt: LatestAttempt | null };
/** Close receipt: closeState plus the snapshot, payUrl and latestAttempt null. */
export type CloseOrderResponse = WithRequestId &
  Omit<OrderSnapshot, 'replayed' | 'unknown'> & { closeState: CloseState; payUrl: null; latestAttempt: null };

/** Refund projection. */
export interface RefundProjection {
  refundAttemptId: string;
  outRefundNo: string;
  outTradeNo: string;
  openOrderId: string;
  amountFen: number;
  state: RefundState;
  reason: string | null;
  createdAt: string;
  updatedAt: string;
  /** In the refund query always true: a projection of an existing record, not necessarily a replay. */
  replayed: boolean;
  /** true while the provider outcome is uncertain (state UNKNOWN; converges by event or query); always present. */
  unknown: boolean;
}

/** 201 accepted; 200 idempotent replay. */
export type CreateRefundResponse = WithRequestId & RefundProjection;
export type QueryRefundResponse = WithRequestId & RefundProjection;

export interface SettlementAccount {
  accountId: string;
  entityType: EntityType;
  entityName: string;
  merchantNo: string;
  /** Last 4 digits of the bank card; no full card number ever appears. */
  cardLast4: string;
}

export interface SettlementRatio {
  accountId: string;
  /** 0 < shareBps < 10000; the shares sum to 10000. */
  shareBps: number;
}

/** The settlement view: a configuration snapshot, not a per-order recomputation. */
export interface SettlementView {
  accounts: SettlementAccount[];
  /** null while the merchant has no allocation configured (participants is then empty). */
  mode: SettlementMode | null;
  /** Participating account ids, in order. */
  participants: string[];
  /** Only when mode is RATIO: 2 to 4 entries. */
  ratios?: SettlementRatio[];
  /** null while the merchant has no allocation configured. */
  unavailablePolicy: UnavailablePolicy | null;
}

export type SettlementResponse = WithRequestId & SettlementView;

/** Body of an event notification (seed "Events", decisions.md section 7). */
export interface WebhookEventPayload {
  /** De-duplicate by this: delivery is at least once. */
  eventId: string;
  eventType: EventType;
  appId: string;
  outTradeNo: string;
  /** null on payment events. */
  outRefundNo: string | null;
  /** Order status (payment events) or refund state (refund events) after the change. */
  status: OrderStatus | RefundState;
  /** closedReason, failure reason or refund reason; else null. */
  reason: string | null;
  /** The amount this event moves: the payment amount or the refund's amount. */
  eventAmountFen: number;
  /** The order's amount. */
  grossAmountFen: number;
  attach: string | null;
  occurredAt: string;
  /** Per order, shared with its refunds, +1 per state change: order events by it. */
  stateVersion: number;
  /** Present on PAYMENT_SUCCEEDED. */
  feeProjection?: FeeProjection | null;
}

/** Count and sum of a kind of statement row. */
export interface CountAndAmount {
  count: number;
  amountFen: number;
}

/** A statement's rows added up (docs/statements.md, "Totals"). */
export interface StatementTotals {
  rowCount: number;
  paymentsSucceeded: CountAndAmount;
  paymentsClosed: CountAndAmount;
  paymentsFailed: CountAndAmount;
  refundsSucceeded: CountAndAmount;
  refundsFailed: CountAndAmount;
  companyServiceFeeFen: number;
  merchantSettlementFen: number;
  /** paymentsSucceeded.amountFen - refundsSucceeded.amountFen. */
  netAmountFen: number;
}

/** GET /api/open/v1/statements/{settlementDate}: the summary of a day's statement. */
export interface StatementResponse extends WithRequestId {
  appId: string;
  /** The Asia/Shanghai day, YYYY-MM-DD. */
  settlementDate: string;
  timeZone: 'Asia/Shanghai';
  periodStart: string;
  periodEnd: string;
  format: 'CSV';
  formatVersion: number;
  compression: 'NONE' | 'GZIP';
  contentType: 'text/csv; charset=utf-8' | 'application/gzip';
  fileName: string;
  rowCount: number;
  /** The file's size in bytes, as served. */
  sizeBytes: number;
  /** Lower-case hex SHA-256 of the file's bytes, as served. */
  sha256: string;
  totals: StatementTotals;
  /** Path (and query) of the file: GET it, signed. */
  filePath: string;
}

export type DeliveryStatus = 'PENDING' | 'DELIVERED' | 'DEAD';

/** One delivery attempt of an event. */
export interface DeliveryAttempt {
  attemptNo: number;
  attemptedAt: string;
  /** Your endpoint's status; null when none came back. */
  httpStatus: number | null;
  /** Why no status came back (TIMEOUT, CONNECTION_REFUSED, ...), or REDIRECT_NOT_FOLLOWED; null otherwise. */
  error: string | null;
  durationMs: number;
  /** The first 200 characters of your endpoint's answer. */
  responseExcerpt: string | null;
}

/** An event of the app's log. */
export interface EventLogEntry {
  eventId: string;
  eventType: EventType;
  occurredAt: string;
  stateVersion: number;
  /** Delivery status. */
  status: DeliveryStatus;
  deliveryAttempts: number;
  lastAttempt: DeliveryAttempt | null;
  nextAttemptAt: string | null;
  deliveredAt: string | null;
  /** The body exactly as delivered. */
  payload: WebhookEventPayload;
}

export interface EventListResponse extends WithRequestId {
  events: EventLogEntry[];
  /** Pass as `cursor` for the next (older) page; null on the last page. */
  nextCursor: string | null;
}

export type EventResponse = WithRequestId & EventLogEntry & { deliveries: DeliveryAttempt[] };

export interface RedeliveryResponse extends WithRequestId {
  eventId: string;
  status: 'PENDING';
  nextAttemptAt: string;
}

/** Filters of GET /api/open/v1/events. */
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
