/**
 * What the property tests of the decisions share (test/unit/payment-decisions.test.ts,
 * attempt-decisions.test.ts): an order in any state with its attempts and trades, the records as a
 * change leaves them, and the check that every move is from the state read and allowed.
 */
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { orderEventType } from '../../src/domain/events.ts';
import type { AttemptFacts, Change, PaymentFacts, TradeFacts } from '../../src/domain/payment-decisions.ts';
import { ATTEMPT_STATES, ORDER_STATUSES, TRADE_STATES, canTransition } from '../../src/domain/states.ts';

export const NOW = new Date('2026-01-01T00:00:00Z');

/** An order in any status with 1-3 attempts and 0-3 trades of them, each in any state. */
export const facts: fc.Arbitrary<PaymentFacts> = fc
  .record({
    status: fc.constantFrom(...ORDER_STATUSES),
    amountFen: fc.integer({ min: 1, max: 10_000 }),
    attempts: fc.array(fc.record({ state: fc.constantFrom(...ATTEMPT_STATES), provider: fc.constantFrom('sandbox', 'alipay') }), {
      minLength: 1,
      maxLength: 3,
    }),
    trades: fc.array(fc.record({ of: fc.nat(), state: fc.constantFrom(...TRADE_STATES) }), { maxLength: 3 }),
    paidBy: fc.option(fc.nat(), { nil: null }),
  })
  .map((g) => {
    const attempts: AttemptFacts[] = g.attempts.map((a, i) => ({ id: `att_${i}`, seq: i + 1, state: a.state, provider: a.provider }));
    const trades: TradeFacts[] = g.trades.map((t, i) => ({
      id: `trd_${i}`,
      attemptId: attempts[t.of % attempts.length]!.id,
      state: t.state,
      provider: 'sandbox',
      providerRef: null,
    }));
    const paid = g.status === 'SUCCEEDED' ? attempts[(g.paidBy ?? 0) % attempts.length]!.id : null;
    return { order: { id: 'ord_1', status: g.status, amountFen: g.amountFen, paidAttemptId: paid, paidTradeNo: null }, attempts, trades };
  });

/** The records as a change leaves them (what mps_apply_changes writes). */
export function applied(f: PaymentFacts, c: Change): PaymentFacts {
  const order = { ...f.order };
  if (c.order) {
    order.status = c.order.to;
    if (c.order.paidAttemptId) {
      order.paidAttemptId = c.order.paidAttemptId;
      order.paidTradeNo = c.order.paidTradeNo ?? null;
    }
  }
  const attempts = f.attempts.map((a) => ({ ...a, state: c.attempts.find((m) => m.id === a.id)?.to ?? a.state }));
  const trades = f.trades.map((t) => ({ ...t, state: c.trades.find((m) => m.id === t.id)?.to ?? t.state }));
  return { order, attempts, trades };
}

/** Every move is from the state read and allowed by the tables; the event is the one the order's new status reports. */
export function checkMoves(f: PaymentFacts, c: Change): void {
  if (c.order) {
    assert.equal(c.order.from, f.order.status);
    assert.ok(canTransition('order', c.order.from, c.order.to), `order ${c.order.from} -> ${c.order.to}`);
    assert.equal(c.event, orderEventType(c.order.to));
  } else {
    assert.equal(c.event, null);
  }
  for (const m of c.attempts) {
    assert.equal(m.from, f.attempts.find((a) => a.id === m.id)!.state);
    assert.ok(m.from === m.to || canTransition('attempt', m.from, m.to), `attempt ${m.from} -> ${m.to}`);
  }
  for (const m of c.trades) {
    assert.equal(m.from, f.trades.find((t) => t.id === m.id)!.state);
    // A move to the same state carries what the provider gave (a trade's material answered again).
    assert.ok(m.from === m.to ? m.material !== undefined : canTransition('trade', m.from, m.to), `trade ${m.from} -> ${m.to}`);
  }
  assert.equal(new Set(c.jobs.map((j) => `${j.kind}/${j.subjectId}`)).size, c.jobs.length, 'one job per kind and subject');
}
