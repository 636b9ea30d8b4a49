/** What the hosted cashier page shows behind one cashier token: that attempt, its order and merchant, from the ledger only. */
import { getMerchant } from '../store/merchants.ts';
import * as attempts from '../store/attempts.ts';
import type { AttemptRow } from '../store/attempts.ts';
import * as orders from '../store/orders.ts';
import type { OrderRow } from '../store/orders.ts';
import type { UseCaseDeps } from './deps.ts';

export interface CashierAttempt {
  order: OrderRow;
  attempt: AttemptRow;
  /** The highest attempt number of the order (an older attempt's page is superseded). */
  latestSeq: number;
}

export async function cashierAttempt(d: UseCaseDeps, token: string): Promise<CashierAttempt | null> {
  const found = await attempts.findAttemptByCashierToken(d.db, token);
  if (!found) return null;
  const order = await orders.getOrder(d.db, found.attempt.orderId);
  return order ? { order, attempt: found.attempt, latestSeq: found.latestSeq } : null;
}

export async function merchantName(d: UseCaseDeps, merchantId: string): Promise<string> {
  return (await getMerchant(d.db, merchantId))?.name ?? '';
}
