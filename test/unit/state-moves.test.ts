/**
 * A move into a fixed state from the state read (src/usecases/state-moves.ts, moveInto), without a
 * database: over every state of the duplicate-refund and delivery machines, and any changes made
 * meanwhile (fast-check). The move is always a transition of the tables from the state the row is
 * in when it is applied; a change committed in between is never overwritten; a final state or the
 * target itself is left as it is.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { DELIVERY_STATES, DUPLICATE_REFUND_STATES, canTransition } from '../../src/domain/states.ts';
import { moveInto } from '../../src/usecases/state-moves.ts';

/** A row whose state concurrent writers change (to each of `meanwhile` in turn), each just before the move's guarded write. */
function row<S extends string>(start: S, meanwhile: S[]) {
  let state: S | null = start;
  const applied: { from: string; to: string }[] = [];
  let pending = [...meanwhile];
  return {
    read: async () => state,
    apply: async (t: { from: string; to: string }) => {
      // A concurrent writer commits first: the guarded write finds the row moved.
      if (pending.length > 0) {
        state = pending[0]!;
        pending = pending.slice(1);
        return false;
      }
      if (state !== t.from) return false;
      applied.push(t);
      state = t.to as S;
      return true;
    },
    get state() {
      return state;
    },
    applied,
  };
}

describe('moveInto: a fixed move from the state read, over every state', () => {
  test('a duplicate found refunded: REFUNDED from the state it is in then; FAILED and REFUNDED stay', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...DUPLICATE_REFUND_STATES),
        fc.array(fc.constantFrom(...DUPLICATE_REFUND_STATES), { maxLength: 4 }),
        async (start, meanwhile) => {
          const r = row(start, meanwhile);
          const out = await moveInto('duplicateRefund', 'test', 'REFUNDED', start, r.read, r.apply);
          // Expected: decided again from each state a writer left, until the row is settled or the move applies.
          let s = start;
          let i = 0;
          while ((s === 'PENDING' || s === 'UNKNOWN') && i < meanwhile.length) s = meanwhile[i++]!;
          const expected = s === 'REFUNDED' ? 'THERE' : s === 'FAILED' ? 'BARRED' : 'MOVED';
          assert.deepEqual(out, { outcome: expected, from: s });
          if (expected === 'MOVED') {
            assert.deepEqual(
              r.applied.map((t) => [t.from, t.to]),
              [[s, 'REFUNDED']],
            );
            assert.ok(canTransition('duplicateRefund', s, 'REFUNDED'));
          } else assert.equal(r.applied.length, 0, 'nothing written');
          assert.equal(r.state, expected === 'BARRED' ? 'FAILED' : 'REFUNDED', 'a final state is left as it is');
        },
      ),
      { numRuns: 1000 },
    );
  });

  test('an operator requeues an event: PENDING from DEAD or DELIVERED; a PENDING event is already there', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...DELIVERY_STATES),
        fc.array(fc.constantFrom(...DELIVERY_STATES), { maxLength: 4 }),
        async (start, meanwhile) => {
          const r = row(start, meanwhile);
          const out = await moveInto('delivery', 'test', 'PENDING', start, r.read, r.apply);
          assert.notEqual(out.outcome, 'BARRED', 'every delivery state leads to PENDING or is it');
          if (out.outcome === 'MOVED') {
            assert.deepEqual(
              r.applied.map((t) => [t.from, t.to]),
              [[out.from, 'PENDING']],
            );
          } else {
            assert.equal(out.outcome, 'THERE');
            assert.equal(r.applied.length, 0);
          }
          assert.equal(r.state, 'PENDING');
        },
      ),
      { numRuns: 1000 },
    );
  });

  test('a row that is gone is not moved', async () => {
    const out = await moveInto(
      'delivery',
      'test',
      'PENDING',
      null,
      async () => null,
      async () => assert.fail('not applied'),
    );
    assert.deepEqual(out, { outcome: 'GONE', from: null });
    let reads = 0;
    const read = async () => {
      reads++;
      return null;
    };
    const later = await moveInto('delivery', 'test', 'PENDING', 'DEAD', read, async () => false);
    assert.deepEqual([later, reads], [{ outcome: 'GONE', from: null }, 1]);
  });
});
