/**
 * Decide, then apply (src/domain/payment-decisions.ts), the pure part without a database: property
 * tests over every state of the order, its attempts, trades and refunds (fast-check), against the
 * transition tables and the rules the decisions keep (a notice twice changes nothing; a payment is
 * never lost: the order is paid by it or it is a duplicate to refund; a close refused or uncertain
 * never closes the order; a FAILED refund is revived only when the platform judged it lost).
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { refundEventType } from '../../src/domain/events.ts';
import {
  type CloseAnswer,
  PENDING_REFUND_CHECK_MS,
  type PaymentFacts,
  type RefundFacts,
  type RefundWord,
  decideClose,
  decidePaymentNotice,
  decideRefund,
  decideRefundRequest,
  writes,
} from '../../src/domain/payment-decisions.ts';
import { ORDER_STATUSES, REFUND_STATES, REFUND_NOT_RECEIVED, canTransition } from '../../src/domain/states.ts';
import { NOW, applied, checkMoves, facts } from '../helpers/payment-facts.ts';

/** A provider order number of the records (an attempt's own or a trade's). */
const noticeOn = (f: PaymentFacts, i: number) => {
  const nos = [...f.attempts.map((a) => a.id), ...f.trades.map((t) => t.id)];
  return nos[i % nos.length]!;
};

describe('payment notices, over every state', () => {
  const notice = fc.record({
    pick: fc.nat(),
    state: fc.constantFrom('PAID', 'FAILED', 'CLOSED') as fc.Arbitrary<'PAID' | 'FAILED' | 'CLOSED'>,
  });

  test('never refused by the tables: every move from the state read, allowed, with its event', () => {
    fc.assert(
      fc.property(facts, notice, (f, n) => {
        const c = decidePaymentNotice(f, { tradeNo: noticeOn(f, n.pick), state: n.state, providerRef: null, reason: null }, NOW);
        checkMoves(f, c);
      }),
      { numRuns: 2000 },
    );
  });

  test('the same notice twice changes nothing the second time', () => {
    fc.assert(
      fc.property(facts, notice, (f, n) => {
        const word = { tradeNo: noticeOn(f, n.pick), state: n.state, providerRef: null, reason: null };
        const first = decidePaymentNotice(f, word, NOW);
        const again = decidePaymentNotice(applied(f, first), word, NOW);
        assert.equal(again.order, null);
        assert.deepEqual(again.attempts, []);
        assert.deepEqual(again.trades, []);
        assert.equal(again.event, null);
        // A duplicate is recorded once per provider order (the statement's ON CONFLICT): the same one again, or none.
        if (again.duplicate) assert.deepEqual(again.duplicate, first.duplicate);
      }),
      { numRuns: 2000 },
    );
  });

  test('a payment is never lost: the order is paid by it, or it is a duplicate to refund', () => {
    fc.assert(
      fc.property(facts, fc.nat(), (f, pick) => {
        const tradeNo = noticeOn(f, pick);
        const c = decidePaymentNotice(f, { tradeNo, state: 'PAID', providerRef: null, reason: null }, NOW);
        const after = applied(f, c);
        const trade = f.trades.find((t) => t.id === tradeNo);
        const attemptId = trade ? trade.attemptId : tradeNo;
        const paidHere = after.order.paidAttemptId === attemptId && (after.order.paidTradeNo ?? attemptId) === tradeNo;
        assert.ok((after.order.status === 'SUCCEEDED' && paidHere) || c.duplicate?.tradeNo === tradeNo, 'paid here or a duplicate');
        assert.equal(after.attempts.find((a) => a.id === attemptId)!.state, 'PAID');
        if (c.duplicate) assert.ok(c.jobs.every((j) => j.kind !== 'CLOSE_STRAY_ATTEMPT'));
        if (c.order?.to === 'SUCCEEDED') {
          // The order's other ways to pay are closed afterwards.
          for (const a of f.attempts) if (a.id !== attemptId && a.state === 'ACCEPTED') assert.ok(c.jobs.some((j) => j.subjectId === a.id));
        }
      }),
      { numRuns: 2000 },
    );
  });

  test('an ended attempt of the latest number ends an open order; a final order never moves but by a payment', () => {
    fc.assert(
      fc.property(facts, notice, (f, n) => {
        const c = decidePaymentNotice(f, { tradeNo: noticeOn(f, n.pick), state: n.state, providerRef: null, reason: 'X' }, NOW);
        if (['SUCCEEDED', 'CLOSED', 'FAILED'].includes(f.order.status)) assert.equal(c.order, null);
        if (n.state !== 'PAID' && c.order) {
          assert.equal(c.order.to, n.state === 'FAILED' ? 'FAILED' : 'CLOSED');
          assert.equal(c.attempts[0]!.id, f.attempts[f.attempts.length - 1]!.id);
        }
      }),
      { numRuns: 1000 },
    );
  });
});

describe('refund outcomes, over every state', () => {
  const refund: fc.Arbitrary<RefundFacts> = fc.record({
    id: fc.constant('rf_1'),
    state: fc.constantFrom(...REFUND_STATES),
    failureReason: fc.constantFrom(null, REFUND_NOT_RECEIVED, 'PROVIDER_REJECTED'),
  });
  const word: fc.Arbitrary<RefundWord> = fc.oneof(
    fc.record({
      kind: fc.constant('ANSWER' as const),
      outcome: fc.constantFrom('PENDING' as const, 'SUCCEEDED' as const),
      providerRef: fc.constant('ref'),
    }),
    fc.record({ kind: fc.constant('REJECTED' as const), reason: fc.constant('NO') }),
    fc.record({ kind: fc.constant('UNCERTAIN' as const) }),
    fc.record({
      kind: fc.constant('NOTICE' as const),
      state: fc.constantFrom('SUCCEEDED' as const, 'FAILED' as const),
      reason: fc.constant(null),
      providerRef: fc.constant(null),
    }),
  );

  test('a change moves the refund from the state read, as the tables allow, with its event and the order counter', () => {
    fc.assert(
      fc.property(refund, word, (r, w) => {
        const d = decideRefund(r, w, NOW);
        if (d.kind === 'CHANGE' || d.kind === 'REVIVE') {
          const m = d.change.refund!;
          assert.equal(m.from, r.state);
          assert.ok(canTransition('refund', m.from, m.to));
          assert.equal(d.change.event, refundEventType(m.to));
          assert.ok(d.change.bump);
          if (m.to === 'UNKNOWN' || m.to === 'PENDING') assert.ok(d.change.jobs.some((j) => j.kind === 'CHECK_REFUND'));
        }
        // The request's own answer decides only a refund still REQUESTED; a revival only from FAILED.
        if (w.kind !== 'NOTICE' && r.state === 'REQUESTED') assert.equal(d.kind, 'CHANGE');
        if (d.kind === 'REVIVE') assert.equal(r.state, 'FAILED');
        if (r.state === 'SUCCEEDED') assert.ok(d.kind === 'NOTHING' || d.kind === 'CONTRADICTION');
      }),
      { numRuns: 1000 },
    );
  });

  test('a FAILED refund leaves FAILED only for the provider accepting or settling one the platform judged lost; one it refused is a contradiction', () => {
    fc.assert(
      fc.property(refund, word, (r, w) => {
        const d = decideRefund(r, w, NOW);
        if (r.state !== 'FAILED') return assert.notEqual(d.kind, 'REVIVE');
        const to = w.kind === 'ANSWER' ? w.outcome : w.kind === 'NOTICE' && w.state === 'SUCCEEDED' ? w.state : null;
        if (to === null) return assert.equal(d.kind, 'NOTHING');
        if (r.failureReason !== REFUND_NOT_RECEIVED)
          return assert.deepEqual(d, { kind: 'CONTRADICTION', recorded: 'FAILED', reported: to });
        assert.equal(d.kind, 'REVIVE');
        if (d.kind !== 'REVIVE') return;
        const c = d.change;
        assert.deepEqual(c.refund, {
          id: r.id,
          from: 'FAILED',
          to,
          providerRef: w.kind === 'ANSWER' || w.kind === 'NOTICE' ? w.providerRef : null,
          failureReason: null,
        });
        assert.equal(c.event, refundEventType(to));
        assert.ok(c.bump);
        assert.deepEqual(
          c.jobs.map((j) => [j.kind, j.subjectId, j.at.getTime()]),
          to === 'PENDING' ? [['CHECK_REFUND', r.id, NOW.getTime() + PENDING_REFUND_CHECK_MS]] : [],
        );
        assert.equal(c.notes.length, 1, 'logged');
        assert.equal(c.order, null);
      }),
      { numRuns: 1000 },
    );
  });

  test('the same notice twice changes nothing the second time', () => {
    fc.assert(
      fc.property(refund, word, (r, w) => {
        if (w.kind !== 'NOTICE') return;
        const d = decideRefund(r, w, NOW);
        if (d.kind !== 'CHANGE' && d.kind !== 'REVIVE') return;
        const again = decideRefund({ ...r, state: d.change.refund!.to }, w, NOW);
        assert.ok(again.kind === 'NOTHING', again.kind);
      }),
    );
  });
});

describe('close answers, over every state', () => {
  const answer = fc.constantFrom<CloseAnswer>('CLOSED', 'PAID', 'UNCERTAIN', 'REJECTED');
  const close = fc.record({ a: fc.array(answer, { maxLength: 3 }), t: fc.array(answer, { maxLength: 3 }), marked: fc.boolean() });

  test('the verdict follows the answers; only a close every answer allowed closes the order', () => {
    fc.assert(
      fc.property(facts, close, (f, x) => {
        const live = f.attempts.filter((a) => ['PENDING', 'ACCEPTED', 'UNKNOWN'].includes(a.state));
        const liveTrades = f.trades.filter((t) => t.state === 'NEW' || t.state === 'OPEN');
        // An attempt still being made is not asked: its outcome is uncertain.
        const attempts = new Map(live.map((a, i) => [a.id, a.state === 'PENDING' ? 'UNCERTAIN' : (x.a[i] ?? 'CLOSED')] as const));
        const trades = new Map(liveTrades.map((t, i) => [t.id, x.t[i] ?? 'CLOSED'] as const));
        const held = x.marked ? new Date(NOW.getTime() + 30_000) : null;
        const { verdict, change } = decideClose(f, { attempts, trades }, 'CLOSE_REQUESTED', held, NOW);
        checkMoves(f, change);
        const all = [...attempts.values(), ...trades.values()];
        const s = f.order.status;
        if (s === 'SUCCEEDED' || s === 'CLOSED' || s === 'FAILED') {
          assert.equal(verdict, s === 'SUCCEEDED' ? 'PROVIDER_PAID_CONFLICT' : s === 'CLOSED' ? 'ALREADY_CLOSED' : 'FAILED');
          assert.ok(!writes(change));
          return;
        }
        if (all.includes('PAID')) assert.equal(verdict, 'PROVIDER_PAID_CONFLICT');
        else if (all.includes('REJECTED')) {
          assert.equal(verdict, 'REJECTED');
          assert.deepEqual(change.closePending, held ? { withdrawHeld: held } : null);
        } else if (all.includes('UNCERTAIN')) assert.equal(verdict, 'UNKNOWN_KEPT');
        else assert.equal(verdict, 'CLOSE_REQUESTED');
        if (verdict === 'CLOSE_REQUESTED') {
          assert.equal(change.order?.to, 'CLOSED');
          assert.equal(change.order?.closedReason, 'CLOSE_REQUESTED');
        } else if (verdict !== 'PROVIDER_PAID_CONFLICT') {
          assert.equal(change.order, null);
        }
        // What the provider closed is recorded closed, whatever the verdict.
        for (const [id, a] of attempts)
          if (a === 'CLOSED' && !all.includes('PAID')) assert.equal(applied(f, change).attempts.find((x) => x.id === id)!.state, 'CLOSED');
      }),
      { numRuns: 2000 },
    );
  });
});

describe('refund requests, over every state', () => {
  test('the number first, then the order, its status and the room left; reserved only when everything allows it', () => {
    fc.assert(
      fc.property(
        fc.option(fc.constantFrom('d1', 'd2'), { nil: null }),
        fc.option(fc.record({ status: fc.constantFrom(...ORDER_STATUSES), amountFen: fc.integer({ min: 1, max: 1000 }) }), { nil: null }),
        fc.integer({ min: 0, max: 1000 }),
        fc.integer({ min: 1, max: 1000 }),
        (existing, order, countedFen, amountFen) => {
          const d = decideRefundRequest(
            { existing: existing ? { digest: existing } : null, order, countedFen },
            { digest: 'd1', amountFen },
          );
          if (existing) assert.equal(d, existing === 'd1' ? 'REPLAY' : 'CONFLICT');
          else if (!order) assert.equal(d, 'NOT_FOUND');
          else if (order.status !== 'SUCCEEDED') assert.equal(d, 'STATE_INVALID');
          else assert.equal(d, countedFen + amountFen <= order.amountFen ? 'RESERVE' : 'LIMIT_EXCEEDED');
        },
      ),
    );
  });
});
