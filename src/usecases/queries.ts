/**
 * The read operations of the open API (seed "Query order", "Query refund", "Read settlement"):
 * answered from the local ledger only; no provider call, no change. A missing, cross-application
 * or malformed reference is the same neutral NOT_FOUND.
 */
import { DomainError } from '../domain/errors.ts';
import { MERCHANT_NO_RE } from '../domain/order-input.ts';
import { getAllocation, listAccounts } from '../store/merchants.ts';
import * as orders from '../store/orders.ts';
import * as refunds from '../store/refunds.ts';
import type { Caller, UseCaseDeps } from './deps.ts';
import type { OrderQuery, RefundQuery, SettlementView } from './results.ts';

export async function queryOrder(d: UseCaseDeps, caller: Caller, outTradeNo: string): Promise<OrderQuery> {
  if (!MERCHANT_NO_RE.test(outTradeNo)) throw new DomainError('NOT_FOUND');
  const found = await d.orderReads.withLatest(caller.app.id, outTradeNo);
  if (!found) throw new DomainError('NOT_FOUND');
  return { kind: 'order-query', order: found.order, attempt: found.attempt };
}

export async function queryRefund(d: UseCaseDeps, caller: Caller, outRefundNo: string): Promise<RefundQuery> {
  if (!MERCHANT_NO_RE.test(outRefundNo)) throw new DomainError('NOT_FOUND');
  const r = await refunds.findRefund(d.db, caller.app.id, outRefundNo);
  if (!r) throw new DomainError('NOT_FOUND');
  return { kind: 'refund-query', refund: r, order: (await orders.getOrder(d.db, r.orderId))! };
}

/** decisions.md section 6: the settlement view; only the last 4 card digits ever leave the database. */
export async function readSettlement(d: UseCaseDeps, caller: Caller): Promise<SettlementView> {
  const merchantId = caller.app.merchantId;
  const [accounts, allocation] = await Promise.all([listAccounts(d.db, merchantId), getAllocation(d.db, merchantId)]);
  return { kind: 'settlement', accounts, allocation };
}
