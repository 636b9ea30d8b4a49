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

test('unavailablePolicy: a leg whose account cannot take it goes on (NEXT_AVAILABLE), is spread (REDISTRIBUTE), or refuses the order (FAIL)', () => {
  const acc = new Map<string, ReceivingAccount>([
    ['i1', { accountId: 'i1', entityType: 'INDIVIDUAL', agreedCeilingFen: null }], // 500,000
    ['i2', { accountId: 'i2', entityType: 'INDIVIDUAL', agreedCeilingFen: 300_000 }],
    ['co', { accountId: 'co', entityType: 'CORPORATE', agreedCeilingFen: null }],
  ]);
  const priority = (participants: string[], unavailablePolicy: Allocation['unavailablePolicy']): Allocation => ({
    mode: 'PRIORITY',
    participants,
    ratios: null,
    unavailablePolicy,
  });
  // PRIORITY: FAIL judges the first participant only; the others take the whole amount from the first that can.
  assert.equal(exceedsSingleCeiling(600_000, 'CORPORATE', priority(['i1', 'co'], 'FAIL'), acc), true);
  assert.equal(exceedsSingleCeiling(600_000, 'CORPORATE', priority(['i1', 'co'], 'NEXT_AVAILABLE'), acc), false);
  assert.equal(exceedsSingleCeiling(600_000, 'CORPORATE', priority(['i1', 'co'], 'REDISTRIBUTE'), acc), false);
  assert.equal(exceedsSingleCeiling(400_000, 'CORPORATE', priority(['i2', 'i1'], 'NEXT_AVAILABLE'), acc), false, 'i1 takes it');
  assert.equal(exceedsSingleCeiling(500_001, 'CORPORATE', priority(['i2', 'i1'], 'NEXT_AVAILABLE'), acc), true, 'nobody can');

  const ratio = (shares: [string, number][], unavailablePolicy: Allocation['unavailablePolicy']): Allocation => ({
    mode: 'RATIO',
    participants: shares.map(([a]) => a),
    ratios: shares.map(([accountId, shareBps]) => ({ accountId, shareBps })),
    unavailablePolicy,
  });
  // 1,000,000 fen at 50/50 over i2 (300,000) and i1 (500,000): i2's 500,000 does not fit.
  const half: [string, number][] = [
    ['i2', 5000],
    ['i1', 5000],
  ];
  assert.equal(exceedsSingleCeiling(1_000_000, 'CORPORATE', ratio(half, 'FAIL'), acc), true);
  // NEXT_AVAILABLE: i2's share goes to i1, which cannot take 1,000,000 either: refused; at 700,000
  // i2's 350,000 goes to i1 with its own 350,000 = 700,000, past 500,000: refused; a corporate next takes anything.
  assert.equal(exceedsSingleCeiling(1_000_000, 'CORPORATE', ratio(half, 'NEXT_AVAILABLE'), acc), true);
  assert.equal(
    exceedsSingleCeiling(
      1_000_000,
      'CORPORATE',
      ratio(
        [
          ['i2', 5000],
          ['co', 5000],
        ],
        'NEXT_AVAILABLE',
      ),
      acc,
    ),
    false,
  );
  // The last participant's share has no next one.
  assert.equal(
    exceedsSingleCeiling(
      1_000_000,
      'CORPORATE',
      ratio(
        [
          ['co', 5000],
          ['i2', 5000],
        ],
        'NEXT_AVAILABLE',
      ),
      acc,
    ),
    true,
  );
  // REDISTRIBUTE: i2 dropped, i1 left alone with all of it: refused at 1,000,000, taken at 500,000 (no leg too big anyway).
  assert.equal(exceedsSingleCeiling(1_000_000, 'CORPORATE', ratio(half, 'REDISTRIBUTE'), acc), true);
  const three: [string, number][] = [
    ['i2', 4000],
    ['co', 3000],
    ['i1', 3000],
  ];
  // 1,000,000: i2's 400,000 is past 300,000; spread over co and i1 (500,000 each): i1 takes exactly its ceiling.
  assert.equal(exceedsSingleCeiling(1_000_000, 'CORPORATE', ratio(three, 'FAIL'), acc), true);
  assert.equal(exceedsSingleCeiling(1_000_000, 'CORPORATE', ratio(three, 'REDISTRIBUTE'), acc), false);
  // 1,000,002: i1's 500,001 is then past its ceiling too; dropped, the corporate account takes it all.
  assert.equal(exceedsSingleCeiling(1_000_002, 'CORPORATE', ratio(three, 'REDISTRIBUTE'), acc), false);
  const individuals: [string, number][] = [
    ['i2', 4000],
    ['i1', 6000],
  ];
  assert.equal(
    exceedsSingleCeiling(800_000, 'CORPORATE', ratio(individuals, 'REDISTRIBUTE'), acc),
    true,
    "i2's 320,000 is past 300,000, and i1 alone cannot take 800,000",
  );
  assert.equal(exceedsSingleCeiling(700_000, 'CORPORATE', ratio(individuals, 'REDISTRIBUTE'), acc), false, '280,000 and 420,000 fit');
});
