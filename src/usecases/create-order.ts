/**
 * Create order (seed "Create order"). The order and its first PENDING attempt are recorded (with
 * the request id's claim, in one statement), the provider is called outside any transaction, then
 * the outcome is recorded. An order number already used answers from that order: a replay, or a
 * conflict when the content differs.
 */
import { DomainError } from '../domain/errors.ts';
import { newId } from '../domain/ids.ts';
import { DEFAULT_FEE_RULE, exceedsSingleCeiling, feeProjection, shanghaiDay } from '../domain/money.ts';
import { LINK_OF_CHANNEL, type CreateOrderInput } from '../domain/open-schemas.ts';
import { orderDigest } from '../domain/order-input.ts';
import type { NewOrder } from '../store/order-inserts.ts';
import * as orders from '../store/orders.ts';
import type { OrderRow } from '../store/orders.ts';
import { runAttempt, settledLatest } from './attempts.ts';
import { type Caller, type UseCaseDeps, nowOf } from './deps.ts';
import type { RequestUnit } from './request-units.ts';
import type { OrderOutcome } from './results.ts';

async function replayOrConflict(d: UseCaseDeps, existing: OrderRow, digest: string): Promise<OrderOutcome> {
  if (existing.digest !== digest) throw new DomainError('IDEMPOTENCY_CONFLICT');
  const { order, attempt } = await settledLatest(d, existing.id);
  return { kind: 'order', order, attempt, replayed: true };
}

export async function createOrder(d: UseCaseDeps, caller: Caller, input: CreateOrderInput, unit?: RequestUnit): Promise<OrderOutcome> {
  const app = caller.app;
  const digest = orderDigest(input);
  // An order number already used is answered from that order (replay or conflict) before any
  // other judgement; it is looked up only when needed: on a refusal below, or when the insert
  // finds the number taken.
  const orExisting = async (err: DomainError): Promise<OrderOutcome> => {
    const existing = await orders.findOrder(d.db, app.id, input.outTradeNo);
    if (existing) return replayOrConflict(d, existing, digest);
    throw err;
  };
  const provider = d.providers.forChannel(input.channel);
  if (!app.channels.includes(input.channel) || provider === null) return orExisting(new DomainError('CHANNEL_UNAVAILABLE'));
  if (input.tradeScope !== null && !app.tradeScopes.includes(input.tradeScope)) {
    return orExisting(new DomainError('TRADE_SCOPE_UNAVAILABLE'));
  }

  const mc = await d.merchantConfig.get(app.merchantId);
  const singleExceeded = exceedsSingleCeiling(input.amountFen, caller.merchantEntityType, mc.allocation, mc.accounts);
  const ceiling = app.dailyAmountCeilingFen;
  if (singleExceeded && ceiling === null) {
    return orExisting(new DomainError('LIMIT_EXCEEDED', undefined, { details: { scopes: ['SINGLE_AMOUNT'] } }));
  }
  const rule = mc.feeRule ?? DEFAULT_FEE_RULE;
  const now = nowOf(d);
  const row: NewOrder = {
    id: newId.order(),
    appId: app.id,
    merchantId: app.merchantId,
    outTradeNo: input.outTradeNo,
    channel: input.channel,
    tradeScope: input.tradeScope,
    amountFen: input.amountFen,
    currency: input.currency,
    subject: input.subject,
    description: input.description,
    attach: input.attach,
    returnUrl: input.returnUrl,
    payerClientIp: input.payerClientIp,
    digest,
    links: [LINK_OF_CHANNEL[input.channel]].filter((l) => !app.voidedLinks.includes(l)),
    expireAt: new Date(now.getTime() + app.paymentWindowSeconds * 1000),
    feeProjection: feeProjection(input.amountFen, rule),
    createdAt: now,
  };
  const firstAttempt = { id: newId.attempt(), cashierToken: newId.cashierToken(), provider: provider.name, createdBy: d.instanceId };

  // With a daily ceiling, the order is kept only within it (judged with the other orders written
  // in the same batch; src/store/order-inserts.ts insertOrders).
  const quota = ceiling === null ? null : { day: shanghaiDay(now), ceilingFen: ceiling, singleExceeded };
  // The request-id claim, the order and its first attempt in one statement (one transaction with
  // the ceiling's counter).
  const claim = unit?.joinClaim() ?? null;
  let ins = await d.orderInserts.insert({ order: row, attempt: firstAttempt, claim, quota });
  unit?.joined(ins.claimed);
  if (!ins.claimed) {
    // The id was taken: wait for it and answer with its answer (RequestDecided), or, if its
    // holder is gone, hold it and insert now.
    await unit!.claim();
    ins = await d.orderInserts.insert({ order: row, attempt: firstAttempt, claim: null, quota });
  }
  for (;;) {
    if (ins.refused) return orExisting(new DomainError('LIMIT_EXCEEDED', undefined, { details: { scopes: ins.refused } }));
    if (ins.created) break;
    // The number is taken (by an earlier or a concurrent create).
    const winner = await orders.findOrder(d.db, app.id, input.outTradeNo);
    if (winner) return replayOrConflict(d, winner, digest);
    // Its holder in the same batch was refused by the ceiling: the number is free again.
    ins = await d.orderInserts.insert({ order: row, attempt: firstAttempt, claim: null, quota });
  }
  const created = ins.created;
  return runAttempt(d, created.order, created.attempt, 'create order', unit);
}
