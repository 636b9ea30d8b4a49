/**
 * What the two acquirers' bill readers share (src/providers/alipay/bill.ts,
 * src/providers/wechatpay/bill.ts, and their adapters' downloadStatement): a row's columns found by
 * the header's names (the documents warn that the order of columns may change), amounts in yuan
 * read exactly, times in Beijing time, the statement of a day without a bill.
 */
import { yuanToFen } from '../domain/money.ts';
import { type ProviderStatementLine, ProviderUncertainError } from './provider.ts';

/** The statement of a day the acquirer has no bill for (no trades): no line. */
export async function* emptyStatement(): AsyncGenerator<ProviderStatementLine> {}

/** A bill that cannot be read as its format says: the reconciliation of that day is tried again later. */
export function malformed(provider: string, why: string): ProviderUncertainError {
  return new ProviderUncertainError(`${provider} bill: ${why}`);
}

/** The index of each named column; a missing required one makes the bill unreadable. */
export function columnsOf<N extends string>(
  provider: string,
  header: readonly string[],
  required: readonly N[],
  optional: readonly N[] = [],
): Record<N, number> {
  const at = {} as Record<N, number>;
  for (const name of [...required, ...optional]) {
    const i = header.indexOf(name);
    if (i === -1 && (required as readonly string[]).includes(name)) throw malformed(provider, `the header has no column ${name}`);
    at[name] = i;
  }
  return at;
}

/** A yuan amount of a bill as positive fen (refund rows of Alipay's bill are negative). */
export function billFen(provider: string, text: string): number {
  const fen = yuanToFen(text.replace(/^-/, ''));
  if (fen === null) throw malformed(provider, `an amount is not yuan with two decimals: ${JSON.stringify(text.slice(0, 40))}`);
  return fen;
}

/** `yyyy-MM-dd HH:mm:ss` in Beijing time (full-width colons too, as old WeChat bills write them), or null. */
export function beijingTime(text: string): Date | null {
  const t = text.replaceAll('：', ':');
  if (!/^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}$/.test(t)) return null;
  const ms = Date.parse(`${t.replace(' ', 'T')}+08:00`);
  return Number.isNaN(ms) ? null : new Date(ms);
}
