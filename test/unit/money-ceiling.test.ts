/**
 * The single-amount ceiling per receiving leg (decisions.md section 6: "the leg's share for
 * RATIO"), judged on the exact share, not on the rounded leg that carries the remainder fen.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { type Allocation, type ReceivingAccount, exceedsSingleCeiling, legShares } from '../../src/domain/money.ts';

const accounts = new Map<string, ReceivingAccount>([
  ['a', { accountId: 'a', entityType: 'INDIVIDUAL', agreedCeilingFen: 100_001 }],
  ['b', { accountId: 'b', entityType: 'CORPORATE', agreedCeilingFen: null }],
  ['c', { accountId: 'c', entityType: 'CORPORATE', agreedCeilingFen: null }],
]);
const ratio: Allocation = {
  mode: 'RATIO',
  participants: ['a', 'b', 'c'],
  ratios: [
    { accountId: 'a', shareBps: 5000 },
    { accountId: 'b', shareBps: 2500 },
    { accountId: 'c', shareBps: 2500 },
  ],
  unavailablePolicy: 'FAIL',
};

test('RATIO: a share exactly at its account ceiling passes, although the rounded leg carries a remainder fen', () => {
  // 200,002 fen: a's share is exactly 100,001; b's and c's are 50,000.5 each, so a split rounded
  // to whole fen would give a 100,002 (100,001 + the remainder fen).
  assert.deepEqual(
    legShares(ratio).map((l) => l.shareBps),
    [5000, 2500, 2500],
  );
  assert.equal(exceedsSingleCeiling(200_002, 'INDIVIDUAL', ratio, accounts), false);
});

test('RATIO: a share one fen past its ceiling is refused', () => {
  assert.equal(exceedsSingleCeiling(200_004, 'INDIVIDUAL', ratio, accounts), true);
  assert.equal(exceedsSingleCeiling(200_003, 'INDIVIDUAL', ratio, accounts), true, 'a share of 100,001.5 is past 100,001');
});

test('SINGLE and PRIORITY: the whole amount against the first account', () => {
  const single: Allocation = { mode: 'SINGLE', participants: ['a'], ratios: null, unavailablePolicy: 'FAIL' };
  assert.equal(exceedsSingleCeiling(100_001, 'INDIVIDUAL', single, accounts), false);
  assert.equal(exceedsSingleCeiling(100_002, 'INDIVIDUAL', single, accounts), true);
  assert.equal(exceedsSingleCeiling(500_000, 'INDIVIDUAL', null, accounts), false, 'no allocation: the merchant default tier');
  assert.equal(exceedsSingleCeiling(500_001, 'INDIVIDUAL', null, accounts), true);
  assert.equal(exceedsSingleCeiling(500_001, 'CORPORATE', null, accounts), false);
});
