/**
 * Alipay amounts are yuan strings with exactly two decimals ("0.01", "100000000.00"); ours are
 * integer fen. Both directions are computed on the digits, never through a float: a float cannot
 * hold most decimal fractions exactly, and a rounding there would be a wrong amount.
 */

/** The largest amount Alipay takes for one trade (total_amount range [0.01, 100000000]), in fen. */
export const ALIPAY_MAX_TRADE_FEN = 10_000_000_000;

/** Integer fen (0 or more, a safe integer) as Alipay's yuan string: 1 -> "0.01", 12345 -> "123.45". */
export function fenToYuan(fen: number): string {
  if (!Number.isSafeInteger(fen) || fen < 0) throw new RangeError('an amount in fen must be a non-negative safe integer');
  const digits = String(fen).padStart(3, '0');
  return `${digits.slice(0, -2)}.${digits.slice(-2)}`;
}

/** Alipay's yuan string as integer fen (src/domain/money.ts: the form both acquirers write). */
export { yuanToFen } from '../../domain/money.ts';
