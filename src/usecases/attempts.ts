/**
 * Making a payment attempt at the provider, shared by create order and re-create attempt: the
 * PENDING attempt is recorded first, the provider is called outside any transaction, then its
 * outcome is decided (src/domain/attempt-decisions.ts) and applied.
 */
import type { Clock } from '../domain/clock.ts';
import { DomainError } from '../domain/errors.ts';
import { type AttemptOutcome, decideAttemptOutcome } from '../domain/attempt-decisions.ts';
import { transition } from '../domain/states.ts';
import { type CreateAttemptResult, ProviderRejectedError, ProviderUncertainError } from '../providers/provider.ts';
import * as attempts from '../store/attempts.ts';
import type { AttemptRow } from '../store/attempts.ts';
import * as orders from '../store/orders.ts';
import type { OrderRow } from '../store/orders.ts';
import { type UseCaseDeps, nowOf } from './deps.ts';
import { decideAndApply } from './payment-state.ts';
import type { RequestUnit } from './request-units.ts';
import type { OrderOutcome } from './results.ts';

/** The fast path's change (src/store/attempt-acceptance.ts acceptAttempts), checked against the tables once. */
export const ACCEPT_TRANSITIONS = {
  attempt: transition('attempt', 'create attempt', 'PENDING', 'ACCEPTED'),
  order: transition('order', 'create attempt', 'CREATED', 'PAYING'),
} as const;

/** How long a replay or a re-create loser waits for an attempt being created by another request. */
const SETTLE_WAIT_MS = 20_000;

/**
 * Reads again (after 10, 20, 40 ... 100 ms) while an attempt is being created at the provider
 * (`pending`), for at most `waitMs` on the service's clock; returns the last read.
 */
export async function untilSettled<T>(
  d: { clock: Clock },
  read: () => Promise<T>,
  pending: (value: T) => boolean,
  waitMs: number,
): Promise<T> {
  const deadline = d.clock.now() + waitMs;
  let delay = 10;
  for (;;) {
    const value = await read();
    if (!pending(value) || d.clock.now() >= deadline) return value;
    await new Promise((r) => setTimeout(r, delay));
    delay = Math.min(delay * 2, 100);
  }
}

/**
 * The order and its latest attempt once no attempt of it is being created by a concurrent request
 * (bounded wait). One still being created after that (a slow provider, or a request cut off by a
 * crash, until the provider check settles it) is UNAVAILABLE: an answer without the attempt's outcome
 * would be kept for the request id, and the retry it asks for gets the real one.
 */
export async function settledLatest(d: UseCaseDeps, orderId: string): Promise<{ order: OrderRow; attempt: AttemptRow | null }> {
  const attempt = await untilSettled(
    d,
    () => attempts.latestAttempt(d.db, orderId),
    (a) => a?.state === 'PENDING',
    SETTLE_WAIT_MS,
  );
  if (attempt?.state === 'PENDING') {
    throw new DomainError(
      'UNAVAILABLE',
      'An attempt of this order is still being created at the provider; retry with the same X-SVC-Request-Id, or query the order.',
      { retryAfterSeconds: 5 },
    );
  }
  return { order: (await orders.getOrder(d.db, orderId))!, attempt };
}

export type CreateOutcome = CreateAttemptResult | 'REJECTED' | 'UNCERTAIN';
type Outcome = CreateOutcome;

/** The provider's answer as the decision takes it. */
function toOutcome(result: Outcome): AttemptOutcome {
  if (result === 'REJECTED' || result === 'UNCERTAIN') return { kind: result };
  if (result.outcome === 'PAID') return { kind: 'PAID', providerRef: result.providerRef };
  return { kind: 'ACCEPTED', providerRef: result.providerRef, qrCode: result.material.qrCode, redirectUrl: result.material.redirectUrl };
}

/**
 * Calls the attempt's provider; a refusal and an uncertain outcome are outcomes too. The same
 * attempt asked again is the identical order (same number and parameters), which the providers
 * answer with the same material: how the provider check recovers the material of an answer lost.
 */
export async function callProvider(d: UseCaseDeps, order: OrderRow, attempt: AttemptRow): Promise<Outcome> {
  try {
    return await d.providers.byName(attempt.provider).createAttempt({
      attemptId: attempt.id,
      openOrderId: order.id,
      channel: order.channel,
      amountFen: order.amountFen,
      currency: 'CNY',
      subject: order.subject,
      expireAt: order.expireAt,
      payerClientIp: order.payerClientIp,
      returnUrl: order.returnUrl,
    });
  } catch (err) {
    if (err instanceof ProviderRejectedError) return 'REJECTED';
    if (!(err instanceof ProviderUncertainError)) {
      d.log.warn({ err, attemptId: attempt.id }, 'provider call failed; outcome treated as uncertain');
    }
    return 'UNCERTAIN';
  }
}

/**
 * Calls the provider for a PENDING attempt and records the outcome: the order with the attempt
 * (accepted, or uncertain), or PROVIDER_REJECTED. `unit`: the request's unit, whose answer the
 * common outcome records in its own transaction.
 */
export async function runAttempt(
  d: UseCaseDeps,
  order: OrderRow,
  attempt: AttemptRow,
  flow: string,
  unit?: RequestUnit,
): Promise<OrderOutcome> {
  const result = await callProvider(d, order, attempt);
  const now = nowOf(d);
  if (result !== 'REJECTED' && result !== 'UNCERTAIN' && result.outcome === 'ACCEPTED' && order.status === 'CREATED') {
    // The common outcome in one statement (acceptAttempts): the same change as the general path
    // below, and the answer recorded for request-id replay in the same transaction. The outcome is
    // the rows as they will be; the statement applies them only if the order is still CREATED and
    // the attempt still PENDING (so exactly that), else changes nothing and the general path runs.
    const outcome: OrderOutcome = {
      kind: 'order',
      order: { ...order, status: 'PAYING', stateVersion: order.stateVersion + 1 },
      attempt: {
        ...attempt,
        state: 'ACCEPTED',
        providerRef: result.providerRef,
        qrCode: result.material.qrCode ?? attempt.qrCode,
        redirectUrl: result.material.redirectUrl ?? attempt.redirectUrl,
        madeAt: now,
      },
      replayed: false,
    };
    const answer = unit?.answerFor(outcome) ?? null;
    const r = await d.acceptor.accept(
      {
        orderId: order.id,
        attemptId: attempt.id,
        providerRef: result.providerRef,
        qrCode: result.material.qrCode,
        redirectUrl: result.material.redirectUrl,
        answer,
      },
      now,
    );
    if (r.applied) {
      if (answer && r.answerRecorded) unit!.answerRecorded(answer);
      return outcome;
    }
  }
  // Any other outcome, or an order that moved meanwhile: decided from the order's records as they
  // are now (src/domain/attempt-decisions.ts), applied only if they are still so.
  const out = toOutcome(result);
  const applied = await decideAndApply(
    d,
    () => d.records.read('order', order.id),
    (rec, at) => ({ change: decideAttemptOutcome(rec, attempt.id, out, at, flow), verdict: null }),
  );
  // Follow-ups this may have written (a stray close, a duplicate's refund) start now.
  d.wakeWorkers();
  if (result === 'REJECTED') throw new DomainError('PROVIDER_REJECTED');
  const after = { order: applied?.result.order ?? order, attempt: (await attempts.getAttempt(d.db, attempt.id)) ?? attempt };
  return { kind: 'order', order: after.order, attempt: after.attempt, replayed: false };
}
