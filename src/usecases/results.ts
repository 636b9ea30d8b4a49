/**
 * What the open-API use cases answer: domain results, rendered by each surface (the open API's
 * renderer is src/http/open-answers.ts). `replayed`: the answer is a projection of what already
 * existed rather than something this request created.
 */
import type { AttemptRow, OrderRow } from '../store/orders.ts';
import type { RefundRow } from '../store/refunds.ts';
import type { AccountRow } from '../store/merchants.ts';
import type { Allocation } from '../domain/money.ts';

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

export type OpenResult = OrderOutcome | OrderQuery | OrderClose | RefundOutcome | RefundQuery | SettlementView;
