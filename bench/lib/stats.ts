/** Figures over repeated runs: the median with its range, as the summary reports them. */

export interface Spread {
  median: number;
  min: number;
  max: number;
  n: number;
}

/** Median (the mean of the two middle values for an even count) and range; null for no values. */
export function spread(values: readonly number[]): Spread | null {
  const v = values.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  if (v.length === 0) return null;
  const m = v.length >> 1;
  const median = v.length % 2 === 1 ? v[m]! : (v[m - 1]! + v[m]!) / 2;
  return { median, min: v[0]!, max: v[v.length - 1]!, n: v.length };
}

/** "1,234 [1,200-1,300]" (the range only with more than one value). */
export function formatSpread(s: Spread | null, digits = 0, unit = ''): string {
  if (s === null) return 'n/a';
  const f = (x: number) => x.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
  return s.n > 1 ? `${f(s.median)}${unit} [${f(s.min)}-${f(s.max)}]` : `${f(s.median)}${unit}`;
}

/**
 * Ratios of paired figures, one per run (a with-ceiling phase over the no-ceiling phase of the same
 * run): pairs with a missing side are skipped.
 */
export function pairedRatios(a: readonly (number | undefined)[], b: readonly (number | undefined)[]): number[] {
  const out: number[] = [];
  for (let i = 0; i < Math.min(a.length, b.length); i++) {
    const x = a[i];
    const y = b[i];
    if (x !== undefined && y !== undefined && y !== 0) out.push(x / y);
  }
  return out;
}
