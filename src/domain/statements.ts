/**
 * The merchant's statement of a settlement day (docs/statements.md): which day is asked for and
 * whether it can be given, the file's stable CSV format, and its totals. Pure: no I/O.
 *
 * A row is one final state change of the day: a payment that succeeded, closed or failed, a
 * refund that succeeded or failed. Each such change is an event written in the same transaction
 * as the change and never changed afterwards (src/usecases/payment-state.ts), so the rows of a
 * closed day never change: the file of a day is the same bytes every time it is made.
 */
import { DomainError, invalidQuery } from './errors.ts';
import type { EventType } from './events.ts';

/** The day of a statement: the Asia/Shanghai calendar day (UTC+8, no daylight saving), as the daily ceiling. */
export const STATEMENT_TIME_ZONE = 'Asia/Shanghai';
const SHANGHAI_OFFSET_MS = 8 * 3600_000;
const DAY_MS = 86_400_000;

/**
 * A day is closed, and its statement given, this long after it ended: a change stamped just before
 * midnight by a transaction still committing, or by an instance whose clock runs a little late,
 * is then in the ledger.
 */
export const STATEMENT_CLOSE_DELAY_MS = 10 * 60_000;
/** The oldest day given: this many days before today (Asia/Shanghai). */
export const STATEMENT_MAX_AGE_DAYS = 366;
/** Version of the file format below; a change of columns is a new version. */
export const STATEMENT_FORMAT_VERSION = 1;

export type StatementCompression = 'NONE' | 'GZIP';

export interface StatementDay {
  /** YYYY-MM-DD */
  day: string;
  /** The day's first instant (00:00 Asia/Shanghai) and the next day's. */
  start: Date;
  end: Date;
  /** When the statement can be given. */
  availableAt: Date;
}

/**
 * The first instant of an Asia/Shanghai day written YYYY-MM-DD, or null when the text is no real
 * date, or a year 0000 (JavaScript's 1 BC, which PostgreSQL's dates do not take in this form).
 */
export function shanghaiDayStart(text: string): number | null {
  const start = /^(?!0000)\d{4}-\d{2}-\d{2}$/.test(text) ? Date.parse(`${text}T00:00:00+08:00`) : NaN;
  return Number.isNaN(start) || new Date(start + SHANGHAI_OFFSET_MS).toISOString().slice(0, 10) !== text ? null : start;
}

/**
 * The day named in a path. A malformed or impossible date names no statement: the neutral 404, as
 * for any malformed reference (seed "Query order"). A day too old is no longer kept: 404 too. A
 * day not closed yet is a valid request the current state refuses: 409 OPEN_API_STATE_INVALID,
 * saying from when the statement is available (docs/decisions.md, "Statements").
 */
export function statementDay(text: string, nowMs: number): StatementDay {
  const start = shanghaiDayStart(text);
  if (start === null) throw new DomainError('NOT_FOUND');
  const end = start + DAY_MS;
  const availableAt = end + STATEMENT_CLOSE_DELAY_MS;
  const today = Date.parse(`${new Date(nowMs + SHANGHAI_OFFSET_MS).toISOString().slice(0, 10)}T00:00:00+08:00`);
  if (start < today - STATEMENT_MAX_AGE_DAYS * DAY_MS) throw new DomainError('NOT_FOUND');
  if (nowMs < availableAt) {
    throw new DomainError(
      'STATE_INVALID',
      `The statement of ${text} is not closed yet: it is available from ${new Date(availableAt).toISOString()}.`,
    );
  }
  return { day: text, start: new Date(start), end: new Date(end), availableAt: new Date(availableAt) };
}

/** A file's bytes are kept this many days after its day when the environment sets nothing (STATEMENT_FILES_KEPT_DAYS). */
export const STATEMENT_FILES_KEPT_DAYS = 62;

/**
 * The oldest day (YYYY-MM-DD, Asia/Shanghai) whose file's bytes are kept at `nowMs`: those of a day
 * are kept until `keptDays` days after it, then dropped (a later download makes the file from the
 * rows). With 0, no closed day's bytes are kept.
 */
export function firstKeptDay(nowMs: number, keptDays: number): string {
  return new Date(nowMs + SHANGHAI_OFFSET_MS - keptDays * DAY_MS).toISOString().slice(0, 10);
}

/** The query of a statement request: `compression=gzip|none` (default none), nothing else. */
export function statementCompression(search: URLSearchParams): StatementCompression {
  let compression: StatementCompression = 'NONE';
  const seen = new Set<string>();
  for (const [name, value] of search) {
    if (seen.has(name)) throw invalidQuery(name, `The query parameter ${name} is given more than once.`);
    seen.add(name);
    if (name !== 'compression') throw invalidQuery(name, `Unknown query parameter ${name}; the only one is compression.`);
    if (value !== 'gzip' && value !== 'none') throw invalidQuery(name, 'compression must be gzip or none.');
    compression = value === 'gzip' ? 'GZIP' : 'NONE';
  }
  return compression;
}

/** One row of the statement, as the ledger gives it. */
export interface StatementRow {
  eventId: string;
  at: Date;
  eventType: EventType;
  openOrderId: string;
  outTradeNo: string;
  refundId: string | null;
  outRefundNo: string | null;
  channel: string;
  orderAmountFen: number;
  /** The refund's amount (refund rows). */
  refundAmountFen: number | null;
  /** The order's fee projection (rows of payments that succeeded). */
  fee: {
    companyServiceFeeFen: number;
    companyServiceFeeRateBps: number;
    merchantSettlementFen: number;
    ruleVersion: number;
    tier: string;
  } | null;
}

/** The columns of format version 1, in order (docs/statements.md, "The file"). */
export const STATEMENT_COLUMNS = [
  'type',
  'occurredAt',
  'eventId',
  'openOrderId',
  'outTradeNo',
  'refundAttemptId',
  'outRefundNo',
  'channel',
  'state',
  'amountFen',
  'orderAmountFen',
  'companyServiceFeeFen',
  'companyServiceFeeRateBps',
  'merchantSettlementFen',
  'feeRuleVersion',
  'feeTier',
] as const;

/** RFC 4180: CRLF line ends; a field holding a comma, quote or line break is quoted (ids, numbers and codes never do). */
export const STATEMENT_HEADER = `${STATEMENT_COLUMNS.join(',')}\r\n`;

const STATE_OF: Record<EventType, ['PAYMENT' | 'REFUND', string]> = {
  PAYMENT_SUCCEEDED: ['PAYMENT', 'SUCCEEDED'],
  PAYMENT_CLOSED: ['PAYMENT', 'CLOSED'],
  PAYMENT_FAILED: ['PAYMENT', 'FAILED'],
  REFUND_SUCCEEDED: ['REFUND', 'SUCCEEDED'],
  REFUND_FAILED: ['REFUND', 'FAILED'],
};

function field(v: string | number | null): string {
  if (v === null) return '';
  const s = String(v);
  return /[",\r\n]/.test(s) ? `"${s.replaceAll('"', '""')}"` : s;
}

/** One row as a CSV line (CRLF included). */
export function statementLine(r: StatementRow): string {
  const [type, state] = STATE_OF[r.eventType];
  const f = r.fee;
  return `${[
    type,
    r.at.toISOString(),
    r.eventId,
    r.openOrderId,
    r.outTradeNo,
    r.refundId,
    r.outRefundNo,
    r.channel,
    state,
    type === 'REFUND' ? r.refundAmountFen : r.orderAmountFen,
    r.orderAmountFen,
    f?.companyServiceFeeFen ?? null,
    f?.companyServiceFeeRateBps ?? null,
    f?.merchantSettlementFen ?? null,
    f?.ruleVersion ?? null,
    f?.tier ?? null,
  ]
    .map(field)
    .join(',')}\r\n`;
}

export interface CountAndAmount {
  count: number;
  amountFen: number;
}

/** The statement's totals (docs/statements.md, "Totals"). */
export interface StatementTotals {
  rowCount: number;
  paymentsSucceeded: CountAndAmount;
  paymentsClosed: CountAndAmount;
  paymentsFailed: CountAndAmount;
  refundsSucceeded: CountAndAmount;
  refundsFailed: CountAndAmount;
  /** Of the payments that succeeded: the fee projections' fees and settlements. */
  companyServiceFeeFen: number;
  merchantSettlementFen: number;
  /** Money in less money out: paymentsSucceeded.amountFen - refundsSucceeded.amountFen. */
  netAmountFen: number;
}

export function emptyTotals(): StatementTotals {
  const z = () => ({ count: 0, amountFen: 0 });
  return {
    rowCount: 0,
    paymentsSucceeded: z(),
    paymentsClosed: z(),
    paymentsFailed: z(),
    refundsSucceeded: z(),
    refundsFailed: z(),
    companyServiceFeeFen: 0,
    merchantSettlementFen: 0,
    netAmountFen: 0,
  };
}

const TOTAL_OF: Record<
  EventType,
  keyof Omit<StatementTotals, 'rowCount' | 'companyServiceFeeFen' | 'merchantSettlementFen' | 'netAmountFen'>
> = {
  PAYMENT_SUCCEEDED: 'paymentsSucceeded',
  PAYMENT_CLOSED: 'paymentsClosed',
  PAYMENT_FAILED: 'paymentsFailed',
  REFUND_SUCCEEDED: 'refundsSucceeded',
  REFUND_FAILED: 'refundsFailed',
};

/** Adds a row to the totals (in place). */
export function addToTotals(t: StatementTotals, r: StatementRow): void {
  const amount = STATE_OF[r.eventType][0] === 'REFUND' ? (r.refundAmountFen ?? 0) : r.orderAmountFen;
  const bucket = t[TOTAL_OF[r.eventType]];
  bucket.count += 1;
  bucket.amountFen += amount;
  t.rowCount += 1;
  if (r.eventType === 'PAYMENT_SUCCEEDED') {
    t.companyServiceFeeFen += r.fee?.companyServiceFeeFen ?? 0;
    t.merchantSettlementFen += r.fee?.merchantSettlementFen ?? 0;
  }
  t.netAmountFen = t.paymentsSucceeded.amountFen - t.refundsSucceeded.amountFen;
}

/** The file's name: statement-{appId}-{day}.csv[.gz]. */
export function statementFileName(appId: string, day: string, compression: StatementCompression): string {
  return `statement-${appId}-${day}.csv${compression === 'GZIP' ? '.gz' : ''}`;
}
