/**
 * Decide, then apply, for an attempt's own outcome, a trade's material and the background checks
 * (src/domain/attempt-decisions.ts), without a database: property tests over every state of the
 * order, its attempts, trades and refunds (fast-check). Every move is from the state read and
 * allowed by the tables; deciding again on what a change leaves changes nothing; a payment is
 * never lost; an order is never left PAYING by an attempt without its material.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import {
  type AttemptCheck,
  type AttemptOutcome,
  HANDED_OVER_CHECK_MS,
  REFUND_NOT_RECEIVED_AFTER_MS,
  decideAttemptCheck,
  decideAttemptOutcome,
  decideRecreateClose,
  decideRefundCheck,
  decideStrayClosed,
  decideStrayHandOver,
  decideTradeClosed,
  decideTradeMade,
  type TradeMadeFacts,
} from '../../src/domain/attempt-decisions.ts';
import { refundEventType } from '../../src/domain/events.ts';
import { type Change, FIRST_CHECK_MS, type PaymentFacts, writes } from '../../src/domain/payment-decisions.ts';
import { CLOSED_REASONS, REFUND_NOT_RECEIVED, REFUND_STATES, canTransition, isLiveAttempt } from '../../src/domain/states.ts';
import { NOW, applied, checkMoves, facts } from '../helpers/payment-facts.ts';

const attemptOf = (f: PaymentFacts, i: number) => f.attempts[i % f.attempts.length]!;
const jobOf = (c: Change, kind: string, id: string) => c.jobs.find((j) => j.kind === kind && j.subjectId === id);
/** Deciding again on what the change left writes nothing. */
const settled = (c: Change) => assert.ok(!writes(c) || (c.order === null && c.attempts.length === 0 && c.trades.length === 0));

const outcome: fc.Arbitrary<AttemptOutcome> = fc.oneof(
  fc.record({
    kind: fc.constant('ACCEPTED' as const),
    providerRef: fc.constant('ref_1'),
    qrCode: fc.constantFrom(null, 'qr'),
    redirectUrl: fc.constantFrom(null, 'https://pay.example/x'),
  }),
  fc.record({ kind: fc.constant('PAID' as const), providerRef: fc.constant('ref_1') }),
  fc.constant({ kind: 'REJECTED' as const }),
  fc.constant({ kind: 'UNCERTAIN' as const }),
);

describe("a new attempt's provider outcome, over every state", () => {
  test('every move from the state read and allowed; recorded as made only from PENDING', () => {
    fc.assert(
      fc.property(facts, fc.nat(), outcome, (f, i, out) => {
        const a = attemptOf(f, i);
        const c = decideAttemptOutcome(f, a.id, out, NOW, 'create attempt');
        checkMoves(f, c);
        const m = c.attempts.find((x) => x.id === a.id);
        if (a.state !== 'PENDING') {
          assert.equal(m?.madeAt, undefined);
          if (out.kind !== 'PAID' || a.state === 'PAID') assert.equal(m, undefined);
          return;
        }
        assert.equal(m!.madeAt, NOW);
        const to = { REJECTED: 'FAILED', UNCERTAIN: 'UNKNOWN', PAID: 'PAID', ACCEPTED: 'ACCEPTED' }[out.kind];
        assert.equal(m!.to, to);
        if (out.kind === 'UNCERTAIN') assert.equal(jobOf(c, 'CHECK_ATTEMPT', a.id)?.at.getTime(), NOW.getTime() + FIRST_CHECK_MS);
        if (out.kind === 'REJECTED') assert.equal(jobOf(c, 'CLOSE_STRAY_ATTEMPT', a.id), undefined);
        if (out.kind === 'ACCEPTED') {
          assert.equal(m!.qrCode ?? null, out.qrCode);
          assert.equal(m!.redirectUrl ?? null, out.redirectUrl);
        }
      }),
      { numRuns: 2000 },
    );
  });

  test('a payment is never lost: the order is paid by it, or it is a duplicate to refund', () => {
    fc.assert(
      fc.property(facts, fc.nat(), (f, i) => {
        const a = attemptOf(f, i);
        const c = decideAttemptOutcome(f, a.id, { kind: 'PAID', providerRef: 'ref_1' }, NOW, 'create attempt');
        const after = applied(f, c);
        if (a.state === 'PAID') return;
        assert.equal(after.attempts.find((x) => x.id === a.id)!.state, 'PAID');
        const paidHere = after.order.status === 'SUCCEEDED' && after.order.paidAttemptId === a.id;
        assert.ok(paidHere || c.duplicate?.attemptId === a.id, 'paid here or a duplicate');
      }),
      { numRuns: 2000 },
    );
  });

  test('an accepted attempt the order cannot use is closed at the provider afterwards; the order is PAYING only by an accepted one', () => {
    fc.assert(
      fc.property(facts, fc.nat(), outcome, (f, i, out) => {
        const a = attemptOf(f, i);
        const c = decideAttemptOutcome(f, a.id, out, NOW, 'create attempt');
        const after = applied(f, c);
        const state = after.attempts.find((x) => x.id === a.id)!.state;
        if (
          out.kind !== 'REJECTED' &&
          ((state === 'ACCEPTED' && after.order.status !== 'PAYING') || state === 'CLOSED' || state === 'FAILED')
        ) {
          assert.ok(jobOf(c, 'CLOSE_STRAY_ATTEMPT', a.id));
        }
        if (c.order?.to === 'PAYING') assert.equal(state, 'ACCEPTED');
      }),
      { numRuns: 2000 },
    );
  });

  test('deciding the same outcome again on what the change left changes nothing', () => {
    fc.assert(
      fc.property(facts, fc.nat(), outcome, (f, i, out) => {
        const a = attemptOf(f, i);
        const first = decideAttemptOutcome(f, a.id, out, NOW, 'create attempt');
        settled(decideAttemptOutcome(applied(f, first), a.id, out, NOW, 'create attempt'));
      }),
      { numRuns: 1000 },
    );
  });
});

const check: fc.Arbitrary<AttemptCheck> = fc.oneof(
  fc.record({
    state: fc.constant('OPEN' as const),
    providerRef: fc.constantFrom(null, 'ref_1'),
    qrCode: fc.constantFrom(null, 'qr'),
    redirectUrl: fc.constantFrom(null, 'https://pay.example/x'),
    unrecoverable: fc.boolean(),
  }),
  fc.record({ state: fc.constantFrom('FAILED' as const, 'CLOSED' as const, 'NOT_FOUND' as const) }),
);

describe("a provider check's answer about an attempt, over every state", () => {
  test('only an attempt still uncertain moves, from the state read, as the tables allow; then it is settled', () => {
    fc.assert(
      fc.property(facts, fc.nat(), check, (f, i, q) => {
        const a = attemptOf(f, i);
        const c = decideAttemptCheck(f, a.id, q, NOW);
        checkMoves(f, c);
        if (a.state !== 'UNKNOWN' && a.state !== 'PENDING') {
          assert.ok(!writes(c));
          return;
        }
        const state = applied(f, c).attempts.find((x) => x.id === a.id)!.state;
        assert.equal(state, q.state === 'OPEN' ? 'ACCEPTED' : q.state === 'CLOSED' ? 'CLOSED' : 'FAILED');
        assert.equal(c.attempts.find((x) => x.id === a.id)!.madeAt, undefined, 'a check does not make the attempt');
        settled(decideAttemptCheck(applied(f, c), a.id, q, NOW));
      }),
      { numRuns: 2000 },
    );
  });

  test('never PAYING without a way to pay; an open attempt the order cannot use is closed afterwards', () => {
    fc.assert(
      fc.property(facts, fc.nat(), check, (f, i, q) => {
        const a = attemptOf(f, i);
        const c = decideAttemptCheck(f, a.id, q, NOW);
        const after = applied(f, c);
        if (c.order?.to === 'PAYING') {
          assert.equal(q.state, 'OPEN');
          assert.ok(q.state === 'OPEN' && !q.unrecoverable);
        }
        if (q.state === 'OPEN' && writes(c) && after.order.status !== 'PAYING') assert.ok(jobOf(c, 'CLOSE_STRAY_ATTEMPT', a.id));
        if (q.state === 'OPEN' && q.unrecoverable && writes(c)) assert.ok(jobOf(c, 'CLOSE_STRAY_ATTEMPT', a.id));
        // The latest attempt ended: its order, if it was waiting on it (UNKNOWN), is no longer.
        const latest = f.attempts[f.attempts.length - 1]!;
        if (writes(c) && latest.id === a.id && f.order.status === 'UNKNOWN' && !(q.state === 'OPEN' && !q.unrecoverable)) {
          assert.notEqual(after.order.status, 'UNKNOWN');
        }
      }),
      { numRuns: 2000 },
    );
  });
});

describe('closes of stray attempts and trades, over every state', () => {
  test('a stray closed: an open attempt is recorded closed; a PAYING order with nothing live is payable again', () => {
    fc.assert(
      fc.property(facts, fc.nat(), (f, i) => {
        const a = attemptOf(f, i);
        const c = decideStrayClosed(f, a.id, NOW);
        checkMoves(f, c);
        const after = applied(f, c);
        if (a.state === 'ACCEPTED' || a.state === 'UNKNOWN') {
          assert.equal(after.attempts.find((x) => x.id === a.id)!.state, 'CLOSED');
          if (f.order.status === 'PAYING') assert.equal(after.order.status, after.attempts.some(isLiveAttempt) ? 'PAYING' : 'CREATED');
        } else assert.ok(!writes(c));
        settled(decideStrayClosed(after, a.id, NOW));
      }),
      { numRuns: 2000 },
    );
  });

  test('a stray close given up: only an ACCEPTED attempt becomes UNKNOWN, checked soon', () => {
    fc.assert(
      fc.property(facts, fc.nat(), (f, i) => {
        const a = attemptOf(f, i);
        const c = decideStrayHandOver(f, a.id, NOW);
        checkMoves(f, c);
        if (a.state !== 'ACCEPTED') return assert.ok(!writes(c));
        assert.deepEqual(
          c.attempts.map((m) => m.to),
          ['UNKNOWN'],
        );
        assert.equal(jobOf(c, 'CHECK_ATTEMPT', a.id)?.at.getTime(), NOW.getTime() + HANDED_OVER_CHECK_MS);
        assert.equal(c.order, null);
      }),
      { numRuns: 1000 },
    );
  });

  test('a trade closed: only a NEW or OPEN trade moves, to CLOSED; nothing else', () => {
    fc.assert(
      fc.property(facts, fc.nat(), (f, i) => {
        if (f.trades.length === 0) return;
        const t = f.trades[i % f.trades.length]!;
        const c = decideTradeClosed(f, t.id, NOW);
        checkMoves(f, c);
        assert.deepEqual(
          c.trades.map((m) => [m.id, m.to]),
          t.state === 'NEW' || t.state === 'OPEN' ? [[t.id, 'CLOSED']] : [],
        );
        assert.equal(c.order, null);
        assert.deepEqual(c.attempts, []);
      }),
      { numRuns: 1000 },
    );
  });

  test("a re-create's close of an old provider order: closed is recorded, uncertain never closes", () => {
    fc.assert(
      fc.property(facts, fc.nat(), fc.constantFrom('CLOSED' as const, 'UNCERTAIN' as const), (f, i, answer) => {
        const nos = [...f.attempts.map((a) => a.id), ...f.trades.map((t) => t.id)];
        const no = nos[i % nos.length]!;
        const c = decideRecreateClose(f, no, answer, NOW);
        checkMoves(f, c);
        assert.equal(c.order, null);
        const after = applied(f, c);
        const trade = f.trades.find((t) => t.id === no);
        const before = trade?.state ?? f.attempts.find((a) => a.id === no)!.state;
        const now = trade ? after.trades.find((t) => t.id === no)!.state : after.attempts.find((a) => a.id === no)!.state;
        if (answer === 'UNCERTAIN') {
          if (before !== 'CLOSED') assert.notEqual(now, 'CLOSED');
          if (trade && (trade.state === 'NEW' || trade.state === 'OPEN')) assert.ok(jobOf(c, 'CLOSE_TRADE', no));
          if (!trade && before === 'ACCEPTED') assert.equal(now, 'UNKNOWN');
        } else if (['NEW', 'OPEN', 'ACCEPTED', 'UNKNOWN'].includes(before)) assert.equal(now, 'CLOSED');
        else assert.equal(now, before);
      }),
      { numRuns: 2000 },
    );
  });
});

describe("a trade's material recorded (the cashier), over every state", () => {
  /** The records with the order's window and pending close, and the attempts' expiry: each before or after now. */
  const made = fc
    .record({
      f: facts,
      orderLeftMs: fc.integer({ min: -60_000, max: 60_000 }),
      attemptLeftMs: fc.integer({ min: -60_000, max: 60_000 }),
      closePending: fc.constantFrom(null, ...CLOSED_REASONS),
    })
    .filter((g) => g.f.trades.length > 0)
    .map((g) => ({
      f: {
        ...g.f,
        order: { ...g.f.order, expireAt: new Date(NOW.getTime() + g.orderLeftMs), closePending: g.closePending },
      } satisfies TradeMadeFacts,
      attemptExpireAt: new Date(NOW.getTime() + g.attemptLeftMs),
    }));
  const leaves = (f: TradeMadeFacts, c: Change): TradeMadeFacts => {
    const after = applied(f, c);
    return { ...after, order: { ...f.order, ...after.order } };
  };

  test('only a NEW or OPEN trade moves, to OPEN with its material; nothing else moves, no event', () => {
    fc.assert(
      fc.property(made, fc.nat(), ({ f, attemptExpireAt }, i) => {
        const t = f.trades[i % f.trades.length]!;
        const { change: c, state } = decideTradeMade(f, t.id, 'material_1', attemptExpireAt, NOW);
        checkMoves(f, c);
        const live = t.state === 'NEW' || t.state === 'OPEN';
        assert.deepEqual(
          c.trades.map((m) => [m.id, m.from, m.to, m.material]),
          live ? [[t.id, t.state, 'OPEN', 'material_1']] : [],
        );
        assert.equal(state, live ? 'OPEN' : t.state);
        assert.equal(leaves(f, c).trades.find((x) => x.id === t.id)!.state, state);
        assert.equal(c.order, null);
        assert.equal(c.bump, false);
        assert.deepEqual(c.attempts, []);
        assert.equal(c.duplicate, null);
        assert.equal(c.closePending, null);
      }),
      { numRuns: 2000 },
    );
  });

  test('the provider is left holding an order nobody may pay only until it is closed there (CLOSE_TRADE)', () => {
    fc.assert(
      fc.property(made, fc.nat(), ({ f, attemptExpireAt }, i) => {
        const t = f.trades[i % f.trades.length]!;
        const { change: c, state } = decideTradeMade(f, t.id, 'material_1', attemptExpireAt, NOW);
        const a = f.attempts.find((x) => x.id === t.attemptId)!;
        const o = f.order;
        // Payable (stated here apart from validAttempt): accepted, the order PAYING with no close pending, neither window over.
        const payable =
          a.state === 'ACCEPTED' &&
          o.status === 'PAYING' &&
          o.closePending === null &&
          attemptExpireAt.getTime() > NOW.getTime() &&
          o.expireAt.getTime() > NOW.getTime();
        const close = state === 'CLOSED' || (state === 'OPEN' && !payable);
        assert.deepEqual(
          c.jobs.map((j) => [j.kind, j.subjectId, j.at.getTime()]),
          close ? [['CLOSE_TRADE', t.id, NOW.getTime()]] : [],
        );
      }),
      { numRuns: 2000 },
    );
  });

  test('answered again (the identical order): the trade stays as the first answer left it, with the material', () => {
    fc.assert(
      fc.property(made, fc.nat(), ({ f, attemptExpireAt }, i) => {
        const t = f.trades[i % f.trades.length]!;
        const first = decideTradeMade(f, t.id, 'material_1', attemptExpireAt, NOW);
        const after = leaves(f, first.change);
        const again = decideTradeMade(after, t.id, 'material_1', attemptExpireAt, NOW);
        checkMoves(after, again.change);
        assert.equal(again.state, first.state);
        for (const m of again.change.trades) assert.deepEqual([m.from, m.to, m.material], ['OPEN', 'OPEN', 'material_1']);
        assert.deepEqual(again.change.jobs, first.change.jobs);
      }),
      { numRuns: 1000 },
    );
  });
});

describe("a provider check's answer about a refund, over every state", () => {
  test('a settled refund never moves; else the move is allowed, with its event and the order counter; lost only after the wait', () => {
    fc.assert(
      fc.property(
        fc.constantFrom(...REFUND_STATES),
        fc.constantFrom('SUCCEEDED' as const, 'FAILED' as const, 'PENDING' as const, 'NOT_FOUND' as const),
        fc.boolean(),
        fc.integer({ min: 0, max: 2 * REFUND_NOT_RECEIVED_AFTER_MS }),
        (state, found, gone, ageMs) => {
          const r = { id: 'rf_1', state, failureReason: null, createdAt: new Date(NOW.getTime() - ageMs) };
          const { change: c, again } = decideRefundCheck(r, found, gone, NOW);
          if (state === 'SUCCEEDED' || state === 'FAILED') {
            assert.ok(!writes(c));
            assert.equal(again, false);
            return;
          }
          const m = c.refund;
          if (m) {
            assert.equal(m.from, state);
            assert.ok(canTransition('refund', m.from, m.to), `${m.from} -> ${m.to}`);
            assert.equal(c.event, refundEventType(m.to));
            assert.ok(c.bump);
          }
          if (found === 'SUCCEEDED' || found === 'FAILED') {
            assert.equal(m?.to, found);
            assert.equal(again, false);
          } else if (found === 'PENDING') {
            assert.equal(again, true);
            assert.equal(m?.to ?? state, 'PENDING');
          } else {
            const lost = ageMs > REFUND_NOT_RECEIVED_AFTER_MS || (state === 'REQUESTED' && gone);
            assert.equal(m?.to, lost ? 'FAILED' : undefined);
            if (lost) assert.equal(m!.failureReason, REFUND_NOT_RECEIVED);
            assert.equal(again, !lost);
          }
        },
      ),
      { numRuns: 1000 },
    );
  });
});
