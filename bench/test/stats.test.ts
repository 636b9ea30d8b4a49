/** Figures over repeated runs (bench/lib/stats.ts): median, range, paired ratios. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { formatSpread, pairedRatios, spread } from '../lib/stats.ts';

test('spread: median of an odd and an even count, the range, and nothing for no values', () => {
  assert.deepEqual(spread([3, 1, 2]), { median: 2, min: 1, max: 3, n: 3 });
  assert.deepEqual(spread([4, 1, 3, 2]), { median: 2.5, min: 1, max: 4, n: 4 });
  assert.deepEqual(spread([7]), { median: 7, min: 7, max: 7, n: 1 });
  assert.equal(spread([]), null);
  assert.deepEqual(spread([NaN, 5, Infinity]), { median: 5, min: 5, max: 5, n: 1 }, 'non-finite values are left out');
});

test('formatSpread: the median with its range, the range only over more than one run', () => {
  assert.equal(formatSpread(spread([1200, 1234.4, 1300])), '1,234 [1,200-1,300]');
  assert.equal(formatSpread(spread([12.34]), 1, ' ms'), '12.3 ms');
  assert.equal(formatSpread(spread([50, 40]), 0, '%'), '45% [40-50]');
  assert.equal(formatSpread(null), 'n/a');
});

test('pairedRatios: run by run, skipping runs where a side is missing or zero', () => {
  assert.deepEqual(pairedRatios([90, 100, 50], [100, 100, 100]), [0.9, 1, 0.5]);
  assert.deepEqual(pairedRatios([90, undefined, 80], [100, 100, 0]), [0.9]);
  assert.deepEqual(pairedRatios([1, 2], [1]), [1]);
});
