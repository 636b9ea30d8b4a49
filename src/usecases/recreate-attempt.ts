/**
 * Re-create attempt (seed "Re-create attempt"): closes the order's in-progress attempt at the
 * provider and makes a new one. Concurrent re-creates of one order make one attempt: the first to
 * take the order's lock is the winner; the others, which overlapped it, answer with a projection
 * of the winner. Which requests overlapped is decided by database facts only (several instances
 * may share the database): the attempt being made is PENDING, and a made attempt records when
 * its request recorded the outcome (`made_at`); a re-create that arrived before that overlapped it.
 */
import { DomainError } from '../domain/errors.ts';
import { decideRecreateClose } from '../domain/attempt-decisions.ts';
import { newId } from '../domain/ids.ts';
import { decidePaymentNotice } from '../domain/payment-decisions.ts';
import { exceedsSingleCeiling } from '../domain/money.ts';
import { MERCHANT_NO_RE } from '../domain/order-input.ts';
import { type Tx, withTx } from '../store/db.ts';
import * as attempts from '../store/attempts.ts';
import type { AttemptRow } from '../store/attempts.ts';
import * as orders from '../store/orders.ts';
import type { OrderRow } from '../store/orders.ts';
import * as recreateRequests from '../store/recreate-requests.ts';
import * as trades from '../store/trades.ts';
import { runAttempt, settledLatest } from './attempts.ts';
import { type CloseOutcome, closeAtProvider } from './close-order.ts';
import { type Caller, type UseCaseDeps, nowOf } from './deps.ts';
import { decideAndApply } from './payment-state.ts';
import * as changes from '../store/changes.ts';
import type { OrderOutcome } from './results.ts';

const FLOW = 're-create attempt';

type MerchantConfig = Awaited<ReturnType<UseCaseDeps['merchantConfig']['get']>>;

type Start =
  { kind: 'loser'; order: OrderRow; awaiting?: string } | { kind: 'winner'; order: OrderRow; attempt: AttemptRow; previous: AttemptRow[] };

export async function recreateAttempt(d: UseCaseDeps, caller: Caller, outTradeNo: string): Promise<OrderOutcome> {
  if (!MERCHANT_NO_RE.test(outTradeNo)) throw new DomainError('NOT_FOUND');
  // The order's latest attempt as this request found it, before queueing for the order's lock.
  const seen = (await d.orderReads.withLatest(caller.app.id, outTradeNo))?.attempt ?? null;
  const mc = await d.merchantConfig.get(caller.app.merchantId);
  const start = await startRecreate(d, caller, outTradeNo, seen, mc);
  if (start.kind === 'loser') {
    // A concurrent re-create is making the attempt: answer with a projection of that winner.
    const { order, attempt } = await settledLatest(d, start.order.id);
    if (
      start.awaiting !== undefined &&
      !['CREATED', 'PAYING', 'UNKNOWN'].includes(order.status) &&
      order.paidAttemptId !== start.awaiting
    ) {
      // There was no winner: the order was paid (by an older attempt) or closed while that
      // attempt was being made, and it was withdrawn. Answered as that re-create was: 409.
      throw new DomainError('STATE_INVALID', `The order is ${order.status}; no new attempt can be created.`);
    }
    return { kind: 'order', order, attempt, replayed: true };
  }
  return makeAttempt(d, start);
}

/**
 * Under the order's lock: this request's part in the re-creates of the order. A retry of a
 * re-create already seen, or one that overlapped a concurrent re-create (one being made, or one
 * made after this request arrived), is a loser; else the new attempt is recorded PENDING and this
 * request is the winner, with the accepted attempts to close first.
 */
function startRecreate(d: UseCaseDeps, caller: Caller, outTradeNo: string, seen: AttemptRow | null, mc: MerchantConfig): Promise<Start> {
  return withTx(d.db, async (tx): Promise<Start> => {
    const o = await orders.findOrderLocked(tx, caller.app.id, outTradeNo);
    if (!o) throw new DomainError('NOT_FOUND');
    const now = nowOf(d);
    // This request id was already a re-create of this order (the winner that made an attempt, or a
    // loser that overlapped one): this is its retry, after it was cut off before its answer was
    // recorded, or after a loser's 503 (the winner's attempt was still being created). Answered
    // from the order as it is now; no attempt.
    if (await recreateRequests.recreateRequestSeen(tx, o.id, caller.requestId)) return { kind: 'loser', order: o };
    const record = (attemptId: string | null) => recreateRequests.recordRecreateRequest(tx, o.id, caller.requestId, attemptId, now);
    if (!['CREATED', 'PAYING', 'UNKNOWN'].includes(o.status) || o.expireAt.getTime() <= now.getTime()) {
      throw new DomainError(
        'STATE_INVALID',
        `The order is ${o.status}${o.status === 'CREATED' || o.status === 'PAYING' ? ' and its payment window has ended' : ''}; no new attempt can be created.`,
      );
    }
    if (o.closePending !== null) {
      // A close the provider has not confirmed yet (UNKNOWN_KEPT), or one running now: new
      // material would be closed with the order.
      throw new DomainError('STATE_INVALID', 'A close of this order is being completed; query the order.');
    }
    const provider = providerForNewAttempt(d, caller, o, mc);
    const all = await attempts.attemptsOf(tx, o.id);
    const beingMade = all.find((a) => a.state === 'PENDING');
    if (beingMade) {
      await record(null);
      return { kind: 'loser', order: o, awaiting: beingMade.id };
    }
    // A concurrent re-create that finished before this one got the order's lock: the latest
    // attempt is live and was being made, or did not exist, when this request first looked, or
    // its request recorded its outcome after this request arrived. The two overlapped; that one
    // is the winner. A re-create sent after the winner's answer finds it settled, and makes a new
    // attempt. (An attempt the provider check settled has no made_at and does not count.)
    const latest = all.at(-1);
    if (
      latest &&
      (latest.state === 'ACCEPTED' || latest.state === 'UNKNOWN') &&
      (seen === null ||
        latest.seq > seen.seq ||
        seen.state === 'PENDING' ||
        (latest.madeAt !== null && latest.madeAt.getTime() > caller.receivedAtMs))
    ) {
      await record(null);
      return { kind: 'loser', order: o };
    }
    const fresh = await attempts.insertAttempt(
      tx,
      o,
      { id: newId.attempt(), cashierToken: newId.cashierToken(), provider: provider.name, createdBy: d.instanceId },
      now,
    );
    await record(fresh.id);
    return { kind: 'winner', order: o, attempt: fresh, previous: all.filter((a) => a.state === 'ACCEPTED') };
  });
}

/**
 * The new attempt is judged like a new order (seed: 422 for channel, declared trade form and
 * platform limits, "order and attempt leg"): by the app's channels and trade forms and the
 * receiving accounts' ceilings as they are now (a voided link kind is left out of `links`, as at
 * creation; it does not refuse the attempt). Answers the provider of the order's channel.
 */
function providerForNewAttempt(d: UseCaseDeps, caller: Caller, o: OrderRow, mc: MerchantConfig) {
  const app = caller.app;
  const provider = d.providers.forChannel(o.channel);
  if (!app.channels.includes(o.channel) || provider === null) throw new DomainError('CHANNEL_UNAVAILABLE');
  if (o.tradeScope !== null && !app.tradeScopes.includes(o.tradeScope)) throw new DomainError('TRADE_SCOPE_UNAVAILABLE');
  if (exceedsSingleCeiling(o.amountFen, caller.merchantEntityType, mc.allocation, mc.accounts)) {
    throw new DomainError('LIMIT_EXCEEDED', undefined, { details: { scopes: ['SINGLE_AMOUNT'] } });
  }
  return provider;
}

/**
 * Closes the in-progress attempts at the provider first, their trades (JSAPI, Native) with them
 * (their material must not stay payable), then makes the new one.
 */
async function makeAttempt(d: UseCaseDeps, start: { order: OrderRow; attempt: AttemptRow; previous: AttemptRow[] }): Promise<OrderOutcome> {
  for (const old of start.previous) {
    for (const t of await trades.liveTradesOfAttempt(d.db, old.id, null)) {
      await closeOld(d, start, t.id, await closeAtProvider(d, t.provider, t.id));
    }
    await closeOld(d, start, old.id, await closeAtProvider(d, old.provider, old.id));
  }
  return runAttempt(d, start.order, start.attempt, FLOW);
}

/**
 * Records the provider's answer to closing one of an old attempt's provider orders (its own or a
 * trade's): closed, or not known to be (closed again afterwards; the re-create goes on). A refusal
 * or a payment stops the re-create (thrown).
 */
async function closeOld(d: UseCaseDeps, start: { order: OrderRow; attempt: AttemptRow }, no: string, outcome: CloseOutcome): Promise<void> {
  if (outcome === 'CLOSED' || outcome === 'UNCERTAIN') {
    await decideAndApply(
      d,
      () => d.records.read('order', start.order.id),
      (rec, now) => ({ change: decideRecreateClose(rec, no, outcome, now), verdict: null }),
    );
    return;
  }
  const stop = await withTx(d.db, (tx) => stopRecreate(d, tx, start, no, outcome));
  d.wakeWorkers();
  throw stop;
}

/**
 * An old attempt's provider order could not be closed (refused), or was paid: the new attempt never
 * reached the provider and is withdrawn, so the order is left exactly as it was (its latest attempt
 * is again the one that still pays, or the one that paid). A payment is applied.
 */
async function stopRecreate(
  d: UseCaseDeps,
  tx: Tx,
  start: { order: OrderRow; attempt: AttemptRow },
  no: string,
  outcome: 'PAID' | 'REJECTED',
): Promise<DomainError> {
  await orders.lockOrder(tx, start.order.id);
  await attempts.withdrawPendingAttempt(tx, start.attempt.id);
  if (outcome === 'PAID') {
    // Applied as the provider's word of a payment is (the order succeeds, or it is a duplicate, refunded).
    const word = { tradeNo: no, state: 'PAID', providerRef: null, reason: null } as const;
    await decideAndApply(
      d,
      () => changes.recordsOfOrderLocked(tx, start.order.id),
      (rec, now) => ({ change: decidePaymentNotice(rec, word, now), verdict: null }),
      tx,
    );
    return new DomainError('STATE_INVALID', 'The order has been paid; query the order.');
  }
  return new DomainError('PROVIDER_REJECTED');
}
