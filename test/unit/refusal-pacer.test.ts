/**
 * The refusals' pace per address (src/gate/refusal-pacer.ts) on a clock that moves only when told:
 * a burst at once, then one interval apart; never held past the longest hold nor owed beyond it;
 * at most so many held at once and so many addresses remembered; IPv6 by its /64.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { RefusalPacer, paceKey } from '../../src/gate/refusal-pacer.ts';

function pacer(o: Partial<ConstructorParameters<typeof RefusalPacer>[0]> = {}) {
  const clock = { at: 1_000_000 };
  const p = new RefusalPacer({ perSecond: 10, burst: 3, maxHoldMs: 500, maxHeld: 100, maxTracked: 1000, ...o }, () => clock.at);
  return { p, clock };
}

test('a burst is answered at once, then each refusal one interval after the one before', () => {
  const { p, clock } = pacer();
  assert.deepEqual(
    Array.from({ length: 6 }, () => p.delayFor('a')),
    [0, 0, 0, 100, 200, 300],
  );
  assert.equal(p.delayFor('b'), 0, 'another address has its own budget');
  clock.at += 1000;
  assert.deepEqual(
    Array.from({ length: 4 }, () => p.delayFor('a')),
    [0, 0, 0, 100],
  );
});

test('no refusal is held past the longest hold, and a client far over its budget is owed no more than that', () => {
  const { p, clock } = pacer();
  const delays = Array.from({ length: 20 }, () => p.delayFor('a'));
  assert.ok(delays.every((d) => d <= 500));
  assert.equal(delays.at(-1), 500);
  clock.at += 500 + 300; // the longest hold, and the burst's tolerance: back at its full burst
  assert.equal(p.delayFor('a'), 0);
});

test('past maxHeld answers held at once, the next is answered at once', async () => {
  const { p } = pacer({ burst: 1, maxHeld: 2 });
  p.delayFor('a');
  const held: number[] = [];
  for (let i = 0; i < 2; i++) {
    const d = p.delayFor('a');
    assert.ok(d > 0);
    p.hold(d, () => held.push(i));
  }
  assert.equal(p.held, 2);
  assert.equal(p.delayFor('a'), 0);
  p.releaseAll();
  assert.deepEqual(held, [0, 1]);
  assert.equal(p.held, 0);
  assert.equal(p.heldTotal, 2);
  let now = false;
  p.hold(0, () => (now = true));
  assert.ok(now, 'a zero delay answers at once');
});

test('at most maxTracked addresses are remembered: the least recently refused is forgotten', () => {
  const { p } = pacer({ burst: 1, maxTracked: 2 });
  p.delayFor('a');
  p.delayFor('b');
  p.delayFor('c'); // forgets a
  assert.equal(p.delayFor('a'), 0);
  assert.equal(p.delayFor('c'), 100);
});

test('the key of an address: IPv4 itself, IPv4-mapped as IPv4, IPv6 by its /64', () => {
  assert.equal(paceKey('203.0.113.7'), '203.0.113.7');
  assert.equal(paceKey('::ffff:203.0.113.7'), '203.0.113.7');
  assert.equal(paceKey('2001:db8:1:2::1'), paceKey('2001:db8:1:2:ffff::9'));
  assert.notEqual(paceKey('2001:db8:1:2::1'), paceKey('2001:db8:1:3::1'));
  assert.equal(paceKey('not an address'), 'not an address');
});
