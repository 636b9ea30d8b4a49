/**
 * Create order, re-create attempt, query order, close order (seed "Endpoints"). Each operation
 * records its intent, calls the provider outside any transaction, then records the outcome and
 * its event in one transaction with the order row locked.
 */
import { ApiError } from '../domain/errors.ts';
import { newId } from '../domain/ids.ts';
import { DEFAULT_FEE_RULE, exceedsSingleCeiling, feeProjection, shanghaiDay } from '../domain/money.ts';
import { LINK_OF_CHANNEL, type CreateOrderInput } from '../domain/open-schemas.ts';
import { MERCHANT_NO_RE, orderDigest } from '../domain/order-input.ts';
import { type ClosedReason, isLiveAttempt } from '../domain/states.ts';
import type { OpenResult } from '../gate/gate.ts';
import { LEASE_SECONDS, type ReplayTicket } from '../gate/replay.ts';
import { type CallOptions, type CreateAttemptResult, ProviderRejectedError, ProviderUncertainError } from '../providers/provider.ts';
import type { Services } from '../services.ts';
import { withTx } from '../store/db.ts';
import type { AppRow } from '../store/merchants.ts';
import {
  type AttemptRow,
  type OrderRow,
  attemptsOf,
  findOrder,
  getAttempt,
  insertOrderWithFirstAttempt,
  type NewOrder,
  getOrder,
  latestAttempt,
} from '../store/orders.ts';
import { confirmPaid, insertAttempt, nextCheckAt, setAttempt, setOrderStatus } from './payment-state.ts';
import { orderSnapshot } from './projection.ts';

export interface Caller {
  app: AppRow;
  merchantEntityType: 'INDIVIDUAL' | 'CORPORATE';
  requestId: string;
  /** Date.now() when the request arrived; decides which re-creates overlapped. */
  receivedAtMs?: number;
}

const NOT_FOUND = () => new ApiError('OPEN_API_NOT_FOUND');

function snapshot(svc: Services, caller: Caller, o: OrderRow, a: AttemptRow | null, view: 'create' | 'query' | 'close', replayed = false) {
  return orderSnapshot(o, a, {
    view,
    nowMs: svc.clock.now(),
    publicBaseUrl: svc.config.publicBaseUrl,
    voidedLinks: caller.app.voidedLinks,
    replayed,
  });
}

function ok(status: number, caller: Caller, fields: Record<string, unknown>): OpenResult {
  return { status, body: { requestId: caller.requestId, ...fields } };
}

/** How long a replay or a re-create loser waits for an attempt being created by another request. */
const SETTLE_WAIT_MS = 20_000;

/**
 * Waits (bounded) while an attempt of the order is being created by a concurrent request. One
 * still being created after that (a slow provider, or a request cut off by a crash, until the
 * reconciler settles it) is answered 503: an answer without the attempt's outcome would be kept
 * for the request id, and the retry the 503 asks for gets the real one.
 */
async function settledLatest(svc: Services, orderId: string): Promise<{ order: OrderRow; attempt: AttemptRow | null }> {
  const attempt = await untilSettled(
    () => latestAttempt(svc.db, orderId),
    (a) => a?.state === 'PENDING',
    SETTLE_WAIT_MS,
  );
  if (attempt?.state === 'PENDING') {
    throw new ApiError(
      'OPEN_API_GUARD_UNAVAILABLE',
      'An attempt of this order is still being created at the provider; retry with the same X-SVC-Request-Id, or query the order.',
      undefined,
      { 'Retry-After': '5' },
    );
  }
  return { order: (await getOrder(svc.db, orderId))!, attempt };
}

/**
 * Reads again (after 10, 20, 40 ... 100 ms) while an attempt is being created at the provider
 * (`pending`), for at most `waitMs`; returns the last read.
 */
async function untilSettled<T>(read: () => Promise<T>, pending: (value: T) => boolean, waitMs: number): Promise<T> {
  const deadline = Date.now() + waitMs;
  let delay = 10;
  for (;;) {
    const value = await read();
    if (!pending(value) || Date.now() >= deadline) return value;
    await new Promise((r) => setTimeout(r, delay));
    delay = Math.min(delay * 2, 100);
  }
}

async function replayOrConflict(svc: Services, caller: Caller, existing: OrderRow, digest: string): Promise<OpenResult> {
  if (existing.digest !== digest) throw new ApiError('OPEN_API_IDEMPOTENCY_CONFLICT');
  const { order, attempt } = await settledLatest(svc, existing.id);
  return ok(200, caller, snapshot(svc, caller, order, attempt, 'create', true));
}

export async function createOrder(svc: Services, caller: Caller, input: CreateOrderInput, replay?: ReplayTicket): Promise<OpenResult> {
  const app = caller.app;
  const digest = orderDigest(input);
  // An order number already used is answered from that order (replay or conflict) before any
  // other judgement; it is looked up only when needed: on a rejection below, or when the insert
  // finds the number taken.
  const orExisting = async (err: ApiError): Promise<OpenResult> => {
    const existing = await findOrder(svc.db, app.id, input.outTradeNo);
    if (existing) return replayOrConflict(svc, caller, existing, digest);
    throw err;
  };
  if (!app.channels.includes(input.channel)) return orExisting(new ApiError('OPEN_API_CHANNEL_UNAVAILABLE'));
  if (input.tradeScope !== null && !app.tradeScopes.includes(input.tradeScope)) {
    return orExisting(new ApiError('OPEN_API_TRADE_SCOPE_UNAVAILABLE'));
  }

  const mc = await svc.merchantConfig.get(app.merchantId);
  const singleExceeded = exceedsSingleCeiling(input.amountFen, caller.merchantEntityType, mc.allocation, mc.accounts);
  const ceiling = app.dailyAmountCeilingFen;
  if (singleExceeded && ceiling === null) {
    return orExisting(new ApiError('OPEN_API_LIMIT_EXCEEDED', undefined, { scopes: ['SINGLE_AMOUNT'] }));
  }
  const rule = mc.feeRule ?? DEFAULT_FEE_RULE;
  const now = new Date(svc.clock.now());
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
  const firstAttempt = { id: newId.attempt(), cashierToken: newId.cashierToken() };

  let created: { order: OrderRow; attempt: AttemptRow } | null;
  if (ceiling === null) {
    // The common case: the request-id claim, the order and its first attempt in one statement.
    const inline = replay && !replay.held ? { ...replay.key, leaseSeconds: LEASE_SECONDS } : null;
    const ins = await svc.orderInserts.insert({ order: row, attempt: firstAttempt, claim: inline });
    if (!ins.claimed) {
      // The id was taken: wait for it and answer with its answer (ReplayDecided), or, if its
      // holder gave it up, hold it and insert now.
      await replay!.claim();
      created = (await svc.orderInserts.insert({ order: row, attempt: firstAttempt, claim: null })).created;
    } else {
      if (inline) replay!.claimedInline();
      created = ins.created;
    }
  } else {
    await replay?.claim();
    const day = shanghaiDay(now);
    try {
      created = await withTx(svc.db, async (tx) => {
        // The app's created amount today, reserved atomically against its ceiling. Counted only
        // while the app has a ceiling; started from today's orders when missing.
        await tx.query(
          `INSERT INTO app_daily_amounts(app_id, day, amount_fen)
           SELECT $1, $2::date, COALESCE(SUM(amount_fen), 0)::bigint FROM orders
            WHERE app_id = $1 AND created_at >= ($2::date::timestamp - interval '8 hours') AT TIME ZONE 'UTC'
              AND created_at < ($2::date::timestamp + interval '16 hours') AT TIME ZONE 'UTC'
           ON CONFLICT (app_id, day) DO NOTHING`,
          [app.id, day],
        );
        const cur = await tx.query<{ amount_fen: number }>('SELECT amount_fen FROM app_daily_amounts WHERE app_id = $1 AND day = $2', [
          app.id,
          day,
        ]);
        const dailyExceeded = cur.rows[0]!.amount_fen + input.amountFen > ceiling;
        if (singleExceeded || dailyExceeded) {
          const scopes = [...(singleExceeded ? ['SINGLE_AMOUNT'] : []), ...(dailyExceeded ? ['DAILY_AMOUNT'] : [])];
          throw new ApiError('OPEN_API_LIMIT_EXCEEDED', undefined, { scopes });
        }
        const c = (await insertOrderWithFirstAttempt(tx, row, firstAttempt)).created;
        if (c === null) return null;
        // Last statement before COMMIT: the app's counter row is locked as briefly as possible.
        const reserved = await tx.query(
          `UPDATE app_daily_amounts SET amount_fen = amount_fen + $3 WHERE app_id = $1 AND day = $2 AND amount_fen + $3 <= $4`,
          [app.id, day, input.amountFen, ceiling],
        );
        if (reserved.rowCount === 0) throw new ApiError('OPEN_API_LIMIT_EXCEEDED', undefined, { scopes: ['DAILY_AMOUNT'] });
        return c;
      });
    } catch (err) {
      if (err instanceof ApiError && err.code === 'OPEN_API_LIMIT_EXCEEDED') return orExisting(err);
      throw err;
    }
  }
  if (created === null) {
    // The number is taken (by an earlier or a concurrent create).
    const winner = (await findOrder(svc.db, app.id, input.outTradeNo))!;
    return replayOrConflict(svc, caller, winner, digest);
  }
  const made = await runAttempt(svc, caller, created.order, created.attempt, 'create order', replay);
  noteAttemptMade(created.order.id);
  return made;
}

/** Calls the provider for a PENDING attempt and records the outcome; answers 201, 502 or 201-unknown. */
async function runAttempt(
  svc: Services,
  caller: Caller,
  order: OrderRow,
  attempt: AttemptRow,
  flow: string,
  replay?: ReplayTicket,
): Promise<OpenResult> {
  let result: CreateAttemptResult | 'REJECTED' | 'UNCERTAIN';
  try {
    result = await svc.provider.createAttempt({
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
    if (err instanceof ProviderRejectedError) result = 'REJECTED';
    else if (err instanceof ProviderUncertainError) result = 'UNCERTAIN';
    else {
      svc.log.warn({ err, attemptId: attempt.id }, 'provider call failed; outcome treated as uncertain');
      result = 'UNCERTAIN';
    }
  }
  if (result !== 'REJECTED' && result !== 'UNCERTAIN' && result.outcome === 'ACCEPTED' && order.status === 'CREATED') {
    // The common outcome in one round trip: the same change as the general path below, and the
    // answer stored for request-id replay in the same transaction. The answer is rendered from
    // the rows as they will be; the function applies them only if the order is still CREATED and
    // the attempt still PENDING (so exactly that), else changes nothing and the general path runs.
    const answer = ok(
      201,
      caller,
      snapshot(
        svc,
        caller,
        { ...order, status: 'PAYING', stateVersion: order.stateVersion + 1 },
        { ...attempt, state: 'ACCEPTED', providerRef: result.providerRef, qrCode: result.material.qrCode ?? attempt.qrCode },
        'create',
      ),
    );
    const payload = replay ? JSON.stringify(answer.body) : null;
    const applied = await svc.acceptor.accept({
      orderId: order.id,
      attemptId: attempt.id,
      providerRef: result.providerRef,
      qrCode: result.material.qrCode,
      replay: replay && payload !== null ? { appId: replay.key.appId, requestId: replay.key.requestId, status: 201, body: payload } : null,
    });
    if (applied) {
      if (replay) replay.storedPayload = payload;
      return answer;
    }
  }
  const after = await withTx(svc.db, async (tx): Promise<{ order: OrderRow; attempt: AttemptRow; duplicateId?: string | null }> => {
    const o = (await getOrder(tx, order.id, true))!;
    const a = (await getAttempt(tx, attempt.id))!;
    const now = new Date(svc.clock.now());
    if (a.state !== 'PENDING') {
      // The reconciler got there first (it ends a PENDING attempt the provider did not know after
      // 150 s). A payment the provider reports now is applied all the same: the order succeeds if
      // it can, else the payment is a duplicate, refunded. Never dropped.
      if (typeof result === 'object' && result.outcome === 'PAID' && a.state !== 'PAID') {
        await tx.query('UPDATE attempts SET provider_ref = COALESCE(provider_ref, $2) WHERE id = $1', [a.id, result.providerRef]);
        const r = await confirmPaid(tx, flow, o, a, now);
        return { order: r.order, attempt: a, duplicateId: r.duplicateId };
      }
      return { order: o, attempt: a };
    }
    if (result === 'REJECTED') {
      await setAttempt(tx, flow, a, 'FAILED');
      const fresh = o.status === 'PAYING' || o.status === 'UNKNOWN' ? await setOrderStatus(tx, flow, o, 'CREATED', {}, now) : o;
      return { order: fresh, attempt: a };
    }
    if (result === 'UNCERTAIN') {
      await setAttempt(tx, flow, a, 'UNKNOWN', { nextCheckAt: nextCheckAt(now, 0) });
      const fresh = o.status === 'CREATED' || o.status === 'PAYING' ? await setOrderStatus(tx, flow, o, 'UNKNOWN', {}, now) : o;
      return { order: fresh, attempt: a };
    }
    if (result.outcome === 'PAID') {
      await setAttempt(tx, flow, a, 'ACCEPTED', { providerRef: result.providerRef });
      const r = await confirmPaid(tx, flow, o, a, now);
      return { order: r.order, attempt: a };
    }
    if (o.status === 'CREATED' || o.status === 'UNKNOWN' || o.status === 'PAYING') {
      await setAttempt(tx, flow, a, 'ACCEPTED', { providerRef: result.providerRef, material: result.material });
      const fresh = await setOrderStatus(tx, flow, o, 'PAYING', {}, now);
      return { order: fresh, attempt: { ...a, qrCode: result.material.qrCode } };
    }
    // The order ended (closed or paid) while the provider answered: this attempt must not be payable.
    await setAttempt(tx, flow, a, 'ACCEPTED', { providerRef: result.providerRef, material: result.material });
    return { order: o, attempt: a };
  });
  if (result === 'REJECTED') throw new ApiError('OPEN_API_PROVIDER_REJECTED');
  if (after.duplicateId) svc.tasks.refundDuplicate(after.duplicateId);
  const endedHere = after.attempt.state === 'CLOSED' || after.attempt.state === 'FAILED';
  if ((after.attempt.state === 'ACCEPTED' && after.order.status !== 'PAYING') || endedHere) {
    // The provider holds (or may hold) a payment for an attempt this order can no longer use:
    // closed there; if it turns out paid, the payment is applied (a duplicate is refunded).
    svc.tasks.closeStrayAttempt(after.attempt.id);
  }
  return ok(201, caller, snapshot(svc, caller, after.order, after.attempt, 'create'));
}

/**
 * When this instance last finished making an attempt of an order (Date.now(), the same clock as a
 * request's arrival): a re-create that arrived before that overlapped the one that made it. Only
 * recent orders are kept.
 */
const attemptsMadeAt = new Map<string, number>();
function noteAttemptMade(orderId: string): void {
  attemptsMadeAt.delete(orderId);
  attemptsMadeAt.set(orderId, Date.now());
  if (attemptsMadeAt.size > 10_000) {
    for (const k of [...attemptsMadeAt.keys()].slice(0, 1_000)) attemptsMadeAt.delete(k);
  }
}

function checkNo(outTradeNo: string): void {
  if (!MERCHANT_NO_RE.test(outTradeNo)) throw NOT_FOUND();
}

export async function recreateAttempt(svc: Services, caller: Caller, outTradeNo: string): Promise<OpenResult> {
  checkNo(outTradeNo);
  const nowMs = svc.clock.now();
  // The order's latest attempt as this request found it, before queueing for the order's lock.
  const seen = (await svc.orderReads.withLatest(caller.app.id, outTradeNo))?.attempt ?? null;
  const mc = await svc.merchantConfig.get(caller.app.merchantId);
  const start = await withTx(svc.db, async (tx) => {
    const o = await findOrder(tx, caller.app.id, outTradeNo, true);
    if (!o) throw NOT_FOUND();
    // This request id was already a re-create of this order (the winner that made an attempt, or a
    // loser that overlapped one): this is its retry, after it was cut off before its answer was
    // recorded (its request-id lease lapsed), or after a loser's 503 (the winner's attempt was
    // still being created). Answered from the order as it is now; no attempt.
    const seenBefore = await tx.query({
      name: 'recreate_request_seen',
      text: 'SELECT 1 FROM recreate_requests WHERE order_id = $1 AND request_id = $2',
      values: [o.id, caller.requestId],
    });
    if (seenBefore.rowCount !== 0) return { kind: 'loser' as const, order: o };
    const record = (attemptId: string | null) =>
      tx.query({
        name: 'recreate_request_record',
        text: 'INSERT INTO recreate_requests(order_id, request_id, attempt_id) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING',
        values: [o.id, caller.requestId, attemptId],
      });
    if (!['CREATED', 'PAYING', 'UNKNOWN'].includes(o.status) || o.expireAt.getTime() <= nowMs) {
      throw new ApiError(
        'OPEN_API_STATE_INVALID',
        `The order is ${o.status}${o.status === 'CREATED' || o.status === 'PAYING' ? ' and its payment window has ended' : ''}; no new attempt can be created.`,
      );
    }
    if (o.closePending !== null) {
      // A close the provider has not confirmed yet (UNKNOWN_KEPT), or one running now: new
      // material would be closed with the order.
      throw new ApiError('OPEN_API_STATE_INVALID', 'A close of this order is being completed; query the order.');
    }
    // The new attempt is judged like a new order (seed: 422 for channel, declared trade form and
    // platform limits, "order and attempt leg"): by the app's channels and trade forms and the
    // receiving accounts' ceilings as they are now. (A voided link kind is left out of `links`,
    // as at creation; it does not refuse the attempt.)
    const app = caller.app;
    if (!app.channels.includes(o.channel)) throw new ApiError('OPEN_API_CHANNEL_UNAVAILABLE');
    if (o.tradeScope !== null && !app.tradeScopes.includes(o.tradeScope)) throw new ApiError('OPEN_API_TRADE_SCOPE_UNAVAILABLE');
    if (exceedsSingleCeiling(o.amountFen, caller.merchantEntityType, mc.allocation, mc.accounts)) {
      throw new ApiError('OPEN_API_LIMIT_EXCEEDED', undefined, { scopes: ['SINGLE_AMOUNT'] });
    }
    const attempts = await attemptsOf(tx, o.id);
    const beingMade = attempts.find((a) => a.state === 'PENDING');
    if (beingMade) {
      await record(null);
      return { kind: 'loser' as const, order: o, awaiting: beingMade.id };
    }
    // A concurrent re-create that finished before this one got the order's lock: the latest
    // attempt is live and was being created, or did not exist, when this request arrived (it
    // was PENDING or absent when this request first looked, or this instance finished making it
    // after the arrival; both times on this process's clock). The two overlapped; that one is
    // the winner. A re-create sent after the winner's answer finds it settled, and makes a new
    // attempt. (A reconciler settling the latest attempt meanwhile does not count.)
    const latest = attempts.at(-1);
    if (
      latest &&
      (latest.state === 'ACCEPTED' || latest.state === 'UNKNOWN') &&
      (seen === null ||
        latest.seq > seen.seq ||
        seen.state === 'PENDING' ||
        (caller.receivedAtMs !== undefined && (attemptsMadeAt.get(o.id) ?? 0) > caller.receivedAtMs))
    ) {
      await record(null);
      return { kind: 'loser' as const, order: o };
    }
    const fresh = await insertAttempt(tx, o);
    await record(fresh.id);
    return { kind: 'winner' as const, order: o, attempt: fresh, previous: attempts.filter((a) => a.state === 'ACCEPTED') };
  });
  if (start.kind === 'loser') {
    // A concurrent re-create is creating the attempt: answer with a projection of that winner.
    const { order, attempt } = await settledLatest(svc, start.order.id);
    if ('awaiting' in start && !['CREATED', 'PAYING', 'UNKNOWN'].includes(order.status) && order.paidAttemptId !== start.awaiting) {
      // There was no winner: the order was paid (by an older attempt) or closed while that
      // attempt was being made, and it was withdrawn. Answered as that re-create was: 409.
      throw new ApiError('OPEN_API_STATE_INVALID', `The order is ${order.status}; no new attempt can be created.`);
    }
    return ok(200, caller, snapshot(svc, caller, order, attempt, 'create', true));
  }
  // Until this winner is done, any re-create that arrives overlaps it (noted at once, so even one
  // that reads the order between this commit and the answer is a loser).
  attemptsMadeAt.set(start.order.id, Number.POSITIVE_INFINITY);
  try {
    return await makeAttempt(svc, caller, start);
  } finally {
    noteAttemptMade(start.order.id);
  }
}

async function makeAttempt(
  svc: Services,
  caller: Caller,
  start: { order: OrderRow; attempt: AttemptRow; previous: AttemptRow[] },
): Promise<OpenResult> {
  // Close the in-progress attempts at the provider first: their material must not stay payable.
  for (const old of start.previous) {
    let outcome: 'CLOSED' | 'PAID' | 'UNCERTAIN' | 'REJECTED';
    try {
      outcome = (await svc.provider.closePayment(old.id)).outcome;
    } catch (err) {
      outcome = err instanceof ProviderRejectedError ? 'REJECTED' : 'UNCERTAIN';
    }
    const flow = 're-create attempt';
    const stop = await withTx(svc.db, async (tx) => {
      const o = (await getOrder(tx, start.order.id, true))!;
      const a = (await getAttempt(tx, old.id))!;
      const pending = (await getAttempt(tx, start.attempt.id))!;
      const now = new Date(svc.clock.now());
      if (outcome === 'CLOSED') {
        if (a.state === 'ACCEPTED' || a.state === 'UNKNOWN') await setAttempt(tx, flow, a, 'CLOSED');
        return null;
      }
      if (outcome === 'UNCERTAIN') {
        // Uncertain attempts are not closed; the reconciler converges them.
        if (a.state === 'ACCEPTED') await setAttempt(tx, flow, a, 'UNKNOWN', { nextCheckAt: nextCheckAt(now, 0) });
        return null;
      }
      // The new attempt never reached the provider: it is removed, so the order is left exactly
      // as it was (its latest attempt is again the one that still pays, or the one that paid).
      if (pending.state === 'PENDING') await tx.query(`DELETE FROM attempts WHERE id = $1 AND state = 'PENDING'`, [pending.id]);
      if (outcome === 'PAID') {
        await confirmPaid(tx, flow, o, a, now);
        return new ApiError('OPEN_API_STATE_INVALID', 'The order has been paid; query the order.');
      }
      return new ApiError('OPEN_API_PROVIDER_REJECTED');
    });
    if (stop) throw stop;
  }
  return runAttempt(svc, caller, start.order, start.attempt, 're-create attempt');
}

export async function queryOrder(svc: Services, caller: Caller, outTradeNo: string): Promise<OpenResult> {
  checkNo(outTradeNo);
  const found = await svc.orderReads.withLatest(caller.app.id, outTradeNo);
  if (!found) throw NOT_FOUND();
  return ok(200, caller, snapshot(svc, caller, found.order, found.attempt, 'query'));
}

export type CloseState = 'CLOSE_REQUESTED' | 'ALREADY_CLOSED' | 'UNKNOWN_KEPT' | 'PROVIDER_PAID_CONFLICT';

/**
 * Closes an order after the provider confirms it unpaid (seed "Close order"). Shared by the open
 * API (CLOSE_REQUESTED), the back office (MERCHANT_CLOSED) and expiry (EXPIRED).
 */
export async function closeOrderById(
  svc: Services,
  orderId: string,
  reason: ClosedReason,
  opts: CallOptions = {},
): Promise<{ closeState: CloseState; order: OrderRow }> {
  const flow = `close order (${reason})`;
  const o = await getOrder(svc.db, orderId);
  if (!o) throw NOT_FOUND();
  if (o.status === 'SUCCEEDED') throw new ApiError('OPEN_API_STATE_INVALID', 'The order has already been paid; query the order.');
  if (o.status === 'CLOSED') return { closeState: 'ALREADY_CLOSED', order: o };
  if (o.status === 'FAILED') throw new ApiError('OPEN_API_STATE_INVALID', 'The order has failed; it cannot be closed.');
  // The close is recorded first (close_pending, with a worker lease so the pending-close worker
  // does not run it twice), under the order's lock: a re-create that starts after this answers
  // 409, and the attempt of one that started before is in the list read next. Without this, a
  // re-create racing the close could open a payment the close never saw.
  const mark = await svc.db.query<{ before: string | null; lease: string }>(
    `UPDATE orders o SET close_pending = COALESCE(b.before, $2), worker_lease_until = clock_timestamp() + interval '30 seconds'
       FROM (SELECT id, close_pending AS before FROM orders WHERE id = $1 FOR UPDATE) b
      WHERE o.id = b.id AND o.status IN ('CREATED', 'PAYING', 'UNKNOWN')
      RETURNING b.before, o.worker_lease_until::text AS lease`,
    [o.id, reason],
  );
  // Withdrawn on a rejection if no close marked or kept the order since this one (the lease it
  // wrote is still there: another close rewrites it, UNKNOWN_KEPT sets its own), so the last close
  // refused withdraws, and a close kept pending by another caller survives.
  const markedHere = mark.rowCount === 1 ? mark.rows[0]!.lease : null;
  // An attempt still PENDING is being created at the provider right now: a close sent before that
  // call lands would find nothing to close, and the payment would open after it. Wait for it to
  // settle (a request briefly; background work not at all); one still pending is uncertain, and
  // the order is kept (UNKNOWN_KEPT) for the pending-close worker to finish.
  const attempts = await untilSettled(
    () => attemptsOf(svc.db, o.id),
    (all) => all.some((a) => a.state === 'PENDING'),
    opts.background ? 0 : PENDING_WAIT_MS,
  );
  const live = attempts.filter(isLiveAttempt);
  const outcomes = new Map<string, 'CLOSED' | 'PAID' | 'UNCERTAIN' | 'REJECTED'>();
  for (const a of live) {
    if (a.state === 'PENDING') {
      outcomes.set(a.id, 'UNCERTAIN');
      continue;
    }
    try {
      outcomes.set(a.id, (await svc.provider.closePayment(a.id, opts)).outcome);
    } catch (err) {
      outcomes.set(a.id, err instanceof ProviderRejectedError ? 'REJECTED' : 'UNCERTAIN');
    }
  }
  const values = [...outcomes.values()];
  const r = await withTx(svc.db, async (tx): Promise<{ closeState: CloseState | 'REJECTED'; order: OrderRow }> => {
    let order = (await getOrder(tx, o.id, true))!;
    const now = new Date(svc.clock.now());
    if (order.status === 'SUCCEEDED') return { closeState: 'PROVIDER_PAID_CONFLICT' as const, order };
    if (order.status === 'CLOSED') return { closeState: 'ALREADY_CLOSED' as const, order };
    if (order.status === 'FAILED') throw new ApiError('OPEN_API_STATE_INVALID', 'The order has failed; it cannot be closed.');
    for (const [id, outcome] of outcomes) {
      const a = (await getAttempt(tx, id))!;
      if (outcome === 'PAID') {
        const r = await confirmPaid(tx, flow, order, a, now);
        order = r.order;
      } else if (outcome === 'CLOSED' && isLiveAttempt(a)) {
        await setAttempt(tx, flow, a, 'CLOSED');
      }
    }
    if (values.includes('PAID')) return { closeState: 'PROVIDER_PAID_CONFLICT' as const, order };
    // Rejected: the order stays as it was (the close this call recorded is withdrawn), but the
    // attempts the provider did close are recorded as closed (their material no longer pays), so
    // the order shows nextAction when it has none left.
    if (values.includes('REJECTED')) {
      // Background work keeps the lease: an expiry the provider keeps rejecting is tried again
      // only when it runs out, and cannot crowd the other due orders out of the workers'
      // batches. A request's close frees it, so expiry is not delayed.
      const withdrawn =
        markedHere !== null
          ? (
              await tx.query(
                `UPDATE orders SET close_pending = NULL, worker_lease_until = CASE WHEN $3 THEN worker_lease_until END
                  WHERE id = $1 AND worker_lease_until = $2::timestamptz`,
                [order.id, markedHere, opts.background === true],
              )
            ).rowCount === 1
          : false;
      return { closeState: 'REJECTED' as const, order: withdrawn ? { ...order, closePending: null } : order };
    }
    if (values.includes('UNCERTAIN')) {
      // Finished by the pending-close worker, 2 s from now (not at every tick: an
      // uncertain close must not crowd the other due orders out of the workers' batches).
      await tx.query(`UPDATE orders SET close_pending = $2, worker_lease_until = clock_timestamp() + interval '2 seconds' WHERE id = $1`, [
        order.id,
        reason,
      ]);
      return { closeState: 'UNKNOWN_KEPT' as const, order: (await getOrder(tx, order.id))! };
    }
    order = await setOrderStatus(tx, flow, order, 'CLOSED', { closedReason: reason }, now);
    return { closeState: 'CLOSE_REQUESTED' as const, order };
  });
  if (r.closeState === 'REJECTED') throw new ApiError('OPEN_API_PROVIDER_REJECTED');
  return r as { closeState: CloseState; order: OrderRow };
}

/** How long a close waits for an attempt being created at the provider to settle. */
export const PENDING_WAIT_MS = 10_000;

export async function closeOrder(svc: Services, caller: Caller, outTradeNo: string): Promise<OpenResult> {
  checkNo(outTradeNo);
  const o = await findOrder(svc.db, caller.app.id, outTradeNo);
  if (!o) throw NOT_FOUND();
  const r = await closeOrderById(svc, o.id, 'CLOSE_REQUESTED');
  // The receipt shows no attempt (latestAttempt null), but nextAction follows the real one: an
  // order kept as it was (UNKNOWN_KEPT) with a valid attempt needs no new one.
  const latest = r.order.status === 'CREATED' || r.order.status === 'PAYING' ? await latestAttempt(svc.db, r.order.id) : null;
  return ok(200, caller, { closeState: r.closeState, ...snapshot(svc, caller, r.order, latest, 'close') });
}
