/**
 * The transition tables (src/domain/states.ts) directly, and docs/state-machines.md against them
 * both ways: every table row of the doc is the code's row, and every state of the code has one.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import {
  ATTEMPT_STATES,
  ATTEMPT_TRANSITIONS,
  DELIVERY_STATES,
  DELIVERY_TRANSITIONS,
  DUPLICATE_REFUND_STATES,
  DUPLICATE_REFUND_TRANSITIONS,
  REQUEST_UNIT_STATES,
  REQUEST_UNIT_TRANSITIONS,
  RUN_STATES,
  RUN_TRANSITIONS,
  ORDER_STATUSES as ORDER_STATES,
  ORDER_TRANSITIONS,
  REFUND_STATES,
  REFUND_TRANSITIONS,
  TRADE_STATES,
  TRADE_TRANSITIONS,
  TransitionError,
  canTransition,
  transition,
} from '../../src/domain/states.ts';
import { ACCEPT_TRANSITIONS } from '../../src/usecases/attempts.ts';

const TABLES = {
  order: { states: ORDER_STATES as readonly string[], table: ORDER_TRANSITIONS as Record<string, readonly string[]>, heading: 'Order' },
  attempt: {
    states: ATTEMPT_STATES as readonly string[],
    table: ATTEMPT_TRANSITIONS as Record<string, readonly string[]>,
    heading: 'Payment attempt',
  },
  refund: { states: REFUND_STATES as readonly string[], table: REFUND_TRANSITIONS as Record<string, readonly string[]>, heading: 'Refund' },
  trade: {
    states: TRADE_STATES as readonly string[],
    table: TRADE_TRANSITIONS as Record<string, readonly string[]>,
    heading: 'Provider trade',
  },
  duplicateRefund: {
    states: DUPLICATE_REFUND_STATES as readonly string[],
    table: DUPLICATE_REFUND_TRANSITIONS as Record<string, readonly string[]>,
    heading: 'Duplicate-payment refund',
  },
  delivery: {
    states: DELIVERY_STATES as readonly string[],
    table: DELIVERY_TRANSITIONS as Record<string, readonly string[]>,
    heading: 'Event delivery',
  },
  run: {
    states: RUN_STATES as readonly string[],
    table: RUN_TRANSITIONS as Record<string, readonly string[]>,
    heading: 'Reconciliation run',
  },
  requestUnit: {
    states: REQUEST_UNIT_STATES as readonly string[],
    table: REQUEST_UNIT_TRANSITIONS as Record<string, readonly string[]>,
    heading: 'Request unit',
  },
} as const;

/** The one move onto itself a table declares: a run whose holder stopped is started again (one try more). */
const RESTARTS = ['run RUNNING'];

describe('transition tables', () => {
  test('every state has a row, and every target is a state of the same entity', () => {
    for (const [entity, { states, table }] of Object.entries(TABLES)) {
      assert.deepEqual(Object.keys(table).sort(), [...states].sort(), entity);
      for (const [from, tos] of Object.entries(table)) {
        for (const to of tos) assert.ok(states.includes(to), `${entity}: ${from} -> ${to}`);
        if (!RESTARTS.includes(`${entity} ${from}`)) assert.ok(!tos.includes(from), `${entity}: ${from} does not move to itself`);
      }
    }
  });

  test('final states are final, and only the money moving leaves an ended attempt or a lost refund', () => {
    for (const s of ['SUCCEEDED', 'CLOSED', 'FAILED'] as const) assert.deepEqual(ORDER_TRANSITIONS[s], [], s);
    assert.deepEqual(ATTEMPT_TRANSITIONS.PAID, []);
    assert.deepEqual(ATTEMPT_TRANSITIONS.CLOSED, ['PAID']);
    assert.deepEqual(ATTEMPT_TRANSITIONS.FAILED, ['PAID']);
    assert.deepEqual(REFUND_TRANSITIONS.SUCCEEDED, []);
    assert.deepEqual([...REFUND_TRANSITIONS.FAILED].sort(), ['PENDING', 'SUCCEEDED']);
    assert.deepEqual(TRADE_TRANSITIONS.PAID, []);
    assert.deepEqual(TRADE_TRANSITIONS.CLOSED, ['PAID']);
    assert.deepEqual(DUPLICATE_REFUND_TRANSITIONS.REFUNDED, [], 'a refunded duplicate is never overwritten');
    assert.deepEqual(DUPLICATE_REFUND_TRANSITIONS.FAILED, []);
    assert.deepEqual(RUN_TRANSITIONS.COMPLETED, []);
    assert.deepEqual(REQUEST_UNIT_TRANSITIONS.DONE, [], 'a kept answer is never changed');
  });

  test('canTransition follows the table; transition() refuses the rest, naming the flow and what was allowed', () => {
    for (const [entity, { states, table }] of Object.entries(TABLES)) {
      for (const from of states) {
        for (const to of states) {
          const ok = table[from]!.includes(to);
          assert.equal(canTransition(entity as 'order', from as never, to as never), ok, `${entity} ${from} -> ${to}`);
          if (ok) assert.deepEqual(transition(entity as 'order', 'test', from as never, to as never), { entity, from, to });
          else assert.throws(() => transition(entity as 'order', 'a flow', from as never, to as never), TransitionError);
        }
      }
    }
    assert.throws(
      () => transition('order', 'close order', 'SUCCEEDED', 'CLOSED'),
      /close order: order cannot go from SUCCEEDED to CLOSED \(allowed from SUCCEEDED: none, it is final\)/,
    );
  });

  test("the create's fast path takes its transitions from the tables", () => {
    assert.equal(canTransition('attempt', ACCEPT_TRANSITIONS.attempt.from, ACCEPT_TRANSITIONS.attempt.to), true);
    assert.equal(canTransition('order', ACCEPT_TRANSITIONS.order.from, ACCEPT_TRANSITIONS.order.to), true);
  });
});

describe('docs/state-machines.md', () => {
  const doc = fs.readFileSync(path.resolve(import.meta.dirname, '../../docs/state-machines.md'), 'utf8');

  /** The `| from | to |` table under a heading: each source state with the targets its row names. */
  function docTable(heading: string, states: readonly string[]): Map<string, string[]> {
    const section = doc.split(/\n## /).find((s) => s.startsWith(`${heading}\n`));
    assert.ok(section, `a section "## ${heading}"`);
    const rows = section.split('\n').filter((l) => l.startsWith('| `'));
    const out = new Map<string, string[]>();
    const named = (cell: string) => [...cell.matchAll(/`([A-Z_]+)`/g)].map((m) => m[1]!).filter((x) => states.includes(x));
    for (const row of rows) {
      const [, from, to] = row.split('|').map((c) => c.trim());
      for (const f of named(from!)) {
        assert.ok(!out.has(f), `${heading}: ${f} has one row`);
        out.set(f, /^final\b/.test(to!) ? [] : named(to!));
      }
    }
    return out;
  }

  for (const { states, table, heading } of Object.values(TABLES)) {
    test(`the ${heading} table is the code's, both ways`, () => {
      const fromDoc = docTable(heading, states);
      assert.deepEqual([...fromDoc.keys()].sort(), [...states].sort(), 'every state has a row');
      for (const s of states) assert.deepEqual([...fromDoc.get(s)!].sort(), [...table[s]!].sort(), `${heading}: from ${s}`);
    });
  }

  test('every edge of the order diagram is allowed by the table', () => {
    const edges = [...doc.matchAll(/^\s+([A-Z_]+) --> ([A-Z_]+)/gm)].map((m) => [m[1]!, m[2]!] as const);
    assert.ok(edges.length > 5);
    for (const [from, to] of edges) assert.ok(ORDER_TRANSITIONS[from as 'CREATED']?.includes(to as 'PAYING'), `${from} --> ${to}`);
  });
});
