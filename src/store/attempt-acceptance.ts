/**
 * Repository: the common outcome of a create (the provider accepted the first attempt), several
 * orders in one statement, batched per event-loop turn (src/store/batcher.ts).
 */
import { orderEventType } from '../domain/events.ts';
import type { Transition } from '../domain/states.ts';
import { TurnBatcher } from './batcher.ts';
import type { Db, Queryable } from './db.ts';

/** The answer recorded for a request id in the same transaction as the change it reports. */
export interface RecordedAnswer {
  appId: string;
  requestId: string;
  holder: string;
  status: number;
  body: string;
}

/** The provider accepted a PENDING attempt of a CREATED order (see acceptAttempts). */
export interface AttemptAcceptance {
  orderId: string;
  attemptId: string;
  providerRef: string | null;
  qrCode: string | null;
  redirectUrl: string | null;
  answer: RecordedAnswer | null;
}

export interface AcceptanceResult {
  /** The attempt and the order moved (if not, nothing changed). */
  applied: boolean;
  /** The answer was recorded (its holder still held the request id). */
  answerRecorded: boolean;
}

/**
 * The common outcome of creating an order, for several orders in one statement: each order still
 * in `order.from` with no close pending is locked (in id order, so concurrent batches cannot
 * deadlock), its attempt moves `attempt.from -> attempt.to` with its provider reference and
 * material, the order `order.from -> order.to` (stateVersion + 1; no event: the target state has
 * none), and its request id's answer is recorded, fenced by its holder. An item whose order or
 * attempt is no longer in the source state changes nothing (the caller takes the general path).
 * Every row is re-checked as it is updated, so a change committed by another transaction while
 * this one waited for a lock is seen.
 */
export async function acceptAttempts(
  db: Queryable,
  items: AttemptAcceptance[],
  t: { attempt: Transition<'attempt'>; order: Transition<'order'> },
  now: Date,
): Promise<AcceptanceResult[]> {
  // The statement writes no event: only a transition into a state that reports none may take it.
  if (orderEventType(t.order.to) !== null) throw new Error(`acceptAttempts: ${t.order.to} reports an event`);
  const r = await db.query<{ order_id: string; answered: boolean }>({
    name: 'accept_attempts',
    // The statement is mps_accept_attempts (migrations/0012): a function only so that it plans with
    // sequential scans off; the transition is this call's.
    text: 'SELECT order_id, answered FROM mps_accept_attempts($1::json, $7::text[], $8::text[], $2, $3, $4, $5, $6)',
    values: [
      JSON.stringify(
        items.map((a) => ({
          order_id: a.orderId,
          attempt_id: a.attemptId,
          provider_ref: a.providerRef,
          qr_code: a.qrCode,
          redirect_url: a.redirectUrl,
          r_app: a.answer?.appId ?? null,
          r_req: a.answer?.requestId ?? null,
          r_holder: a.answer?.holder ?? null,
          r_status: a.answer?.status ?? null,
          r_body: a.answer?.body ?? null,
        })),
      ),
      t.order.from,
      t.order.to,
      t.attempt.from,
      t.attempt.to,
      now,
      items.map((a) => a.orderId),
      items.map((a) => a.attemptId),
    ],
  });
  const done = new Map(r.rows.map((row) => [row.order_id, row.answered]));
  return items.map((a) => ({ applied: done.has(a.orderId), answerRecorded: done.get(a.orderId) === true }));
}

/** Accepted outcomes of concurrent creates, one statement per event-loop turn. */
export class AttemptAcceptor {
  readonly #batcher: TurnBatcher<AttemptAcceptance & { now: Date }, AcceptanceResult>;
  constructor(db: Db, t: { attempt: Transition<'attempt'>; order: Transition<'order'> }) {
    // The batch's time is its latest item's: the clock only moves forward.
    const latest = (as: { now: Date }[]) => as.reduce((m, a) => (a.now > m ? a.now : m), as[0]!.now);
    this.#batcher = new TurnBatcher({
      one: async (a) => (await acceptAttempts(db, [a], t, a.now))[0]!,
      many: (as) => acceptAttempts(db, as, t, latest(as)),
      key: (a) => a.orderId,
    });
  }

  accept(a: AttemptAcceptance, now: Date): Promise<AcceptanceResult> {
    return this.#batcher.run({ ...a, now });
  }
}
