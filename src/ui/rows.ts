/**
 * The back office's answers as the console's pages read them: rows of its lists and details. The
 * back office has no published schema; each row here is checked against the view that writes the
 * answer (test/unit/ui-rows.types.ts, by `npm run typecheck`): every field a page reads is answered,
 * with its type (a Date as its JSON string). The open API's shapes and the back office's request
 * bodies are generated instead (./api-types.ts).
 */
import type { AllocationBody, FeeRuleBody } from './api-types.ts';

/** One delivery attempt of an event (the receiver's answer excerpt is the merchant's, not shown here). */
export interface Delivery {
  attemptNo: number;
  attemptedAt: string;
  statusCode: number | null;
  error: string | null;
  durationMs: number;
}

/** A provider order of an attempt beyond its own (JSAPI, Native). */
export interface Trade {
  tradeNo: string;
  product: string;
  state: string;
  createdAt: string;
  paidAt: string | null;
}

export interface Attempt {
  attemptId: string;
  seq: number;
  state: string;
  createdAt: string;
  expireAt: string;
  trades: Trade[];
}

export interface Account {
  accountId: string;
  entityType: string;
  entityName: string;
  merchantNo: string;
  cardLast4: string;
  agreedCeilingFen: number | null;
  createdAt: string;
}

export interface App {
  appId: string;
  status: string;
  notifyUrl: string | null;
  channels: string[];
  tradeScopes: string[];
  ipAllowlist: string[];
  paymentWindowSeconds: number;
  dailyAmountCeilingFen: number | null;
  rateLimitPerSecond: number;
  /** null: the instances' default (STATEMENT_DOWNLOADS_PER_APP). */
  statementDownloadsAtOnce: number | null;
  createdAt: string;
}

/** The fee rule as it was set (its request body). */
export type FeeRule = FeeRuleBody;

/** The allocation as it was set (its request body); a mode other than RATIO may carry `ratios: null`. */
export type Allocation = Omit<AllocationBody, 'ratios'> & { ratios?: AllocationBody['ratios'] | null };

export interface MerchantDetail {
  merchantId: string;
  name: string;
  entityType: string;
  createdAt: string;
  apps: App[];
  settlementAccounts: Account[];
  allocation: Allocation | null;
  feeRule: FeeRule | null;
}

export interface EventSummary {
  eventId: string;
  appId: string;
  openOrderId: string;
  eventType: string;
  stateVersion: number;
  status: string;
  attempts: number;
  nextAttemptAt: string;
  lastError: string | null;
  createdAt: string;
  deliveredAt: string | null;
}

export interface EventDetail extends EventSummary {
  payload: unknown;
  deliveries: Delivery[];
}

export interface OrderDetail {
  openOrderId: string;
  appId: string;
  outTradeNo: string;
  status: string;
  closedReason: string | null;
  amountFen: number;
  stateVersion: number;
  expireAt: string;
  attempts: Attempt[];
  refunds: {
    refundAttemptId: string;
    outRefundNo: string;
    amountFen: number;
    state: string;
    reason: string | null;
    failureReason: string | null;
    createdAt: string;
    updatedAt: string;
  }[];
  events: {
    eventId: string;
    eventType: string;
    stateVersion: number;
    status: string;
    attempts: number;
    lastError: string | null;
    deliveredAt: string | null;
  }[];
  duplicatePayments: { id: string; attemptId: string; amountFen: number; refundState: string; createdAt: string }[];
}

/** An audit entry as both surfaces show it. */
export interface AuditEntry {
  id: string;
  at: string;
  actor: string;
  channel: string;
  sourceIp: string | null;
  requestId: string;
  action: string;
  entityType: string;
  entityId: string;
  before: Record<string, unknown> | null;
  after: Record<string, unknown> | null;
}

/** A merchant's portal user, as the portal's owner page and the console's merchant page show it. */
export interface User {
  userId: string;
  login: string;
  role: string;
  status: string;
  totpEnabled: boolean;
  invitationExpiresAt: string | null;
  createdAt: string;
}
