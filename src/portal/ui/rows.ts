/**
 * The portal API's answers as the portal's pages read them. The portal API has no published
 * schema; each row here is checked against the function that writes the answer
 * (src/portal/answers.ts, test/unit/portal-rows.types.ts, by `npm run typecheck`): every field a
 * page reads is answered, with its type (a Date as its JSON string). The shapes of the open API
 * (statements, platform keys) and the bodies it sends are generated instead (src/ui/api-types.ts).
 */
import type { AllocationBody } from '../../ui/api-types.ts';
import type { Account, Attempt, AuditEntry, Delivery } from '../../ui/rows.ts';

export interface Key {
  keyId: string;
  status: string;
  valid: boolean;
  validUntil: string | null;
  createdAt: string;
}

export interface App {
  appId: string;
  status: string;
  notifyUrl: string | null;
  channels: string[];
  ipAllowlist: string[];
  keys: Key[];
}

export interface EventSummary {
  eventId: string;
  appId: string;
  openOrderId: string;
  eventType: string;
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

export interface OrderRow {
  openOrderId: string;
  appId: string;
  outTradeNo: string;
  channel: string;
  amountFen: number;
  status: string;
  createdAt: string;
  paidAt: string | null;
}

export interface OrderDetail {
  openOrderId: string;
  appId: string;
  outTradeNo: string;
  channel: string;
  status: string;
  closedReason: string | null;
  amountFen: number;
  subject: string;
  stateVersion: number;
  createdAt: string;
  paidAt: string | null;
  expireAt: string;
  attempts: Attempt[];
  duplicatePayments: { attemptId: string; tradeNo: string; amountFen: number; refundState: string; createdAt: string; updatedAt: string }[];
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
  events: { eventId: string; eventType: string; status: string; createdAt: string; deliveries: Delivery[] }[];
}

export interface Refund {
  refundAttemptId: string;
  outRefundNo: string;
  openOrderId?: string;
  amountFen: number;
  state: string;
  reason?: string | null;
  failureReason: string | null;
  createdAt: string;
}

export interface Settlement {
  accounts: Account[];
  /** As the platform set it (the back office's allocation body, generated from its schema), and when. */
  allocation: (AllocationBody & { updatedAt: string }) | null;
}

/** A page of the merchant's orders. */
export interface OrdersPage {
  orders: OrderRow[];
  nextCursor: string | null;
}

/** A page of the audit log (its entries as the console shows them, with who made each). */
export interface AuditPage {
  entries: AuditEntry[];
  nextBefore: string | null;
}

/** The invited user and its merchant, as the invitation link's page shows them. */
export interface Invitation {
  login: string;
  merchantName: string;
}
