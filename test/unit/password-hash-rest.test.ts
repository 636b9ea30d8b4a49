/** How long a hashing thread rests after a hash (PASSWORD_HASH_BUSY_PERCENT; src/lib/password-hash.ts). */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { restAfterHash, setPasswordHashBusyPercent } from '../../src/lib/password-hash.ts';

test('a thread allowed all its time never rests', () => {
  assert.equal(restAfterHash(208, 100), 0);
});

test('a thread allowed a share of its time rests so that it is busy that share', () => {
  assert.equal(restAfterHash(200, 50), 200);
  assert.equal(restAfterHash(200, 25), 600);
  const busy = 210;
  const rest = restAfterHash(busy, 40);
  assert.ok(Math.abs(busy / (busy + rest) - 0.4) < 1e-9);
});

test('no rest after a hash that took no time', () => {
  assert.equal(restAfterHash(0, 50), 0);
});

test('the share is a whole percentage from 1 to 100', () => {
  assert.throws(() => setPasswordHashBusyPercent(0));
  assert.throws(() => setPasswordHashBusyPercent(101));
  assert.throws(() => setPasswordHashBusyPercent(12.5));
  setPasswordHashBusyPercent(100);
});
