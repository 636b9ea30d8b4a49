import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { AuthFailureTracker } from '../../src/gate/auth-failures.ts';
import type { AuthFailureOptions } from '../../src/gate/auth-failures.ts';

function setup(overrides: Partial<AuthFailureOptions> = {}) {
  let t = 1_000_000;
  const clock = {
    now: () => t,
    advance: (ms: number) => {
      t += ms;
    },
  };
  const tracker = new AuthFailureTracker(
    { maxFailures: 3, windowMs: 60_000, blockMs: 300_000, maxTrackedAddresses: 100, ...overrides },
    clock.now,
  );
  return { tracker, clock };
}

describe('AuthFailureTracker', () => {
  it('blocks after maxFailures within the window, for blockMs', () => {
    const { tracker, clock } = setup();
    tracker.recordFailure('1.2.3.4');
    tracker.recordFailure('1.2.3.4');
    assert.equal(tracker.isBlocked('1.2.3.4'), false);
    tracker.recordFailure('1.2.3.4');
    assert.equal(tracker.isBlocked('1.2.3.4'), true);
    assert.equal(tracker.isBlocked('5.6.7.8'), false);
    clock.advance(299_999);
    assert.equal(tracker.isBlocked('1.2.3.4'), true);
    clock.advance(1);
    assert.equal(tracker.isBlocked('1.2.3.4'), false);
  });

  it('counts in a sliding window: old failures fall out', () => {
    const { tracker, clock } = setup();
    tracker.recordFailure('k'); // t=0
    clock.advance(30_000);
    tracker.recordFailure('k'); // t=30s
    clock.advance(30_000);
    tracker.recordFailure('k'); // t=60s: the t=0 failure is exactly windowMs old and no longer counts
    assert.equal(tracker.isBlocked('k'), false);
    clock.advance(29_999);
    tracker.recordFailure('k'); // t=89.999s: 30s, 60s, 89.999s all within 60s
    assert.equal(tracker.isBlocked('k'), true);
  });

  it('spread-out failures never block', () => {
    const { tracker, clock } = setup();
    for (let i = 0; i < 50; i++) {
      tracker.recordFailure('k');
      clock.advance(30_001);
    }
    assert.equal(tracker.isBlocked('k'), false);
  });

  it('a success clears the failure count', () => {
    const { tracker } = setup();
    tracker.recordFailure('k');
    tracker.recordFailure('k');
    tracker.recordSuccess('k');
    tracker.recordFailure('k');
    tracker.recordFailure('k');
    assert.equal(tracker.isBlocked('k'), false);
    tracker.recordFailure('k');
    assert.equal(tracker.isBlocked('k'), true);
  });

  it('a success does not lift an active block', () => {
    const { tracker, clock } = setup();
    for (let i = 0; i < 3; i++) tracker.recordFailure('k');
    tracker.recordSuccess('k');
    assert.equal(tracker.isBlocked('k'), true);
    clock.advance(300_000);
    assert.equal(tracker.isBlocked('k'), false);
  });

  it('failures during a block neither extend it nor carry over', () => {
    const { tracker, clock } = setup();
    for (let i = 0; i < 3; i++) tracker.recordFailure('k');
    clock.advance(299_000);
    tracker.recordFailure('k');
    tracker.recordFailure('k');
    tracker.recordFailure('k');
    clock.advance(1_000);
    assert.equal(tracker.isBlocked('k'), false);
    tracker.recordFailure('k');
    tracker.recordFailure('k');
    assert.equal(tracker.isBlocked('k'), false);
    tracker.recordFailure('k');
    assert.equal(tracker.isBlocked('k'), true);
  });

  it('maxFailures = 1 blocks on the first failure', () => {
    const { tracker } = setup({ maxFailures: 1 });
    tracker.recordFailure('k');
    assert.equal(tracker.isBlocked('k'), true);
  });

  it('blockMs = 0 never blocks and keeps no state', () => {
    const { tracker } = setup({ blockMs: 0 });
    for (let i = 0; i < 10; i++) tracker.recordFailure('k');
    assert.equal(tracker.isBlocked('k'), false);
  });

  it('keys are independent', () => {
    const { tracker } = setup();
    tracker.recordFailure('a');
    tracker.recordFailure('b');
    tracker.recordFailure('a');
    tracker.recordFailure('b');
    tracker.recordFailure('a');
    assert.equal(tracker.isBlocked('a'), true);
    assert.equal(tracker.isBlocked('b'), false);
  });

  it('memory is bounded: the least recently updated key is evicted when full', () => {
    const { tracker } = setup({ maxTrackedAddresses: 3 });
    for (let i = 0; i < 3; i++) tracker.recordFailure('old'); // blocked
    tracker.recordFailure('b');
    tracker.recordFailure('c');
    assert.equal(tracker.size, 3);
    tracker.recordFailure('d'); // evicts 'old'
    assert.equal(tracker.size, 3);
    assert.equal(tracker.isBlocked('old'), false);
    for (let i = 0; i < 10_000; i++) tracker.recordFailure(`flood-${i}`);
    assert.equal(tracker.size, 3);
  });

  it('updating a key makes it recent', () => {
    const { tracker } = setup({ maxTrackedAddresses: 2 });
    tracker.recordFailure('a');
    tracker.recordFailure('b');
    tracker.recordFailure('a'); // a is now the most recent
    tracker.recordFailure('c'); // evicts b
    tracker.recordFailure('a'); // third failure of a: still tracked, so it blocks
    assert.equal(tracker.isBlocked('a'), true);
  });

  it('expired entries are pruned lazily instead of evicting live ones', () => {
    const { tracker, clock } = setup({ maxTrackedAddresses: 3 });
    tracker.recordFailure('stale1');
    tracker.recordFailure('stale2');
    clock.advance(60_000); // both stale now
    for (let i = 0; i < 2; i++) tracker.recordFailure('live');
    tracker.recordFailure('new'); // room made by pruning the stale entries
    assert.equal(tracker.size, 2);
    tracker.recordFailure('live');
    assert.equal(tracker.isBlocked('live'), true);
  });

  it('isBlocked and recordSuccess drop expired entries', () => {
    const { tracker, clock } = setup();
    tracker.recordFailure('a');
    tracker.recordFailure('b');
    for (let i = 0; i < 3; i++) tracker.recordFailure('c');
    assert.equal(tracker.size, 3);
    clock.advance(60_000);
    assert.equal(tracker.isBlocked('a'), false);
    tracker.recordSuccess('b');
    assert.equal(tracker.size, 1); // c is still blocked
    clock.advance(240_000);
    assert.equal(tracker.isBlocked('c'), false);
    assert.equal(tracker.size, 0);
  });

  it('rejects invalid options', () => {
    const base: AuthFailureOptions = { maxFailures: 3, windowMs: 1000, blockMs: 1000, maxTrackedAddresses: 10 };
    for (const bad of [
      { maxFailures: 0 },
      { maxFailures: 1.5 },
      { windowMs: 0 },
      { windowMs: Number.NaN },
      { blockMs: -1 },
      { maxTrackedAddresses: 0 },
      { maxTrackedAddresses: Number.POSITIVE_INFINITY },
    ]) {
      assert.throws(() => new AuthFailureTracker({ ...base, ...bad }, () => 0), RangeError, JSON.stringify(bad));
    }
  });
});
