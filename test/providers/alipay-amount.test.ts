/**
 * Fen <-> Alipay yuan strings, exactly. The boundary values are Alipay's documented total_amount
 * range, [0.01, 100000000] yuan (alipay.trade.precreate); the forms refused are the ones Alipay
 * never writes (its amounts have exactly two decimals).
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { ALIPAY_MAX_TRADE_FEN, fenToYuan, yuanToFen } from '../../src/providers/alipay/amount.ts';

describe('fenToYuan', () => {
  for (const [fen, yuan] of [
    [0, '0.00'],
    [1, '0.01'],
    [10, '0.10'],
    [99, '0.99'],
    [100, '1.00'],
    [8888, '88.88'],
    [123456789, '1234567.89'],
    [ALIPAY_MAX_TRADE_FEN, '100000000.00'],
    [Number.MAX_SAFE_INTEGER, '90071992547409.91'],
  ] as const) {
    test(`${fen} -> "${yuan}"`, () => assert.equal(fenToYuan(fen), yuan));
  }

  test('refuses what is not a non-negative safe integer', () => {
    for (const bad of [-1, 0.5, 1.005, Number.NaN, Infinity, Number.MAX_SAFE_INTEGER + 1]) {
      assert.throws(() => fenToYuan(bad), RangeError, String(bad));
    }
  });
});

describe('yuanToFen', () => {
  for (const [yuan, fen] of [
    ['0.00', 0],
    ['0.01', 1],
    ['0.10', 10],
    ['1.00', 100],
    ['88.88', 8888],
    ['100000000.00', ALIPAY_MAX_TRADE_FEN],
    ['90071992547409.91', Number.MAX_SAFE_INTEGER],
  ] as const) {
    test(`"${yuan}" -> ${fen}`, () => assert.equal(yuanToFen(yuan), fen));
  }

  test('refuses every other form', () => {
    for (const bad of [
      '1.234',
      '1e3',
      '1E3',
      '-1.00',
      '+1.00',
      ' 1.00',
      '1.00 ',
      '1.00\n',
      '1',
      '1.0',
      '1.',
      '.50',
      '01.00',
      '00.01',
      '1,000.00',
      '0x10.00',
      '１.００',
      '1.0O',
      '',
      'NaN',
      'Infinity',
      '90071992547409.92',
      '999999999999999.99',
    ]) {
      assert.equal(yuanToFen(bad), null, JSON.stringify(bad));
    }
  });

  test('round trip: every safe amount comes back as it went', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: Number.MAX_SAFE_INTEGER }), (fen) => yuanToFen(fenToYuan(fen)) === fen),
      { numRuns: 2000 },
    );
  });

  test('no float on the way: amounts a float would get wrong come back exactly', () => {
    // 0.29 * 100 = 28.999999999999996 and 1.15 * 100 = 114.99999999999999 in binary floating point.
    assert.equal(yuanToFen('0.29'), 29);
    assert.equal(yuanToFen('1.15'), 115);
    assert.equal(yuanToFen('4.35'), 435);
    assert.equal(fenToYuan(29), '0.29');
  });
});
