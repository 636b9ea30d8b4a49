/**
 * Query strings of the back office's lists: only the named parameters, each at most once, each
 * parsed strictly (a refusal names the parameter: 400 ADMIN_VALIDATION_FAILED).
 */
import type { FastifyRequest } from 'fastify';
import { parseInstant } from '../domain/clock.ts';
import { AdminError } from './errors.ts';

type Parser<T> = (v: string, name: string) => T;

const invalid = (message: string) => new AdminError('ADMIN_VALIDATION_FAILED', message);

export function queryOf<S extends Record<string, Parser<unknown>>>(
  req: FastifyRequest,
  spec: S,
): { [K in keyof S]: ReturnType<S[K]> | null } {
  const q = (req.query ?? {}) as Record<string, unknown>;
  const names = Object.keys(spec);
  const unknown = Object.keys(q).find((k) => !names.includes(k));
  if (unknown !== undefined) throw invalid(`the query parameters are ${names.join(', ')}`);
  const out: Record<string, unknown> = {};
  for (const name of names) {
    const v = q[name];
    if (v === undefined || v === '') out[name] = null;
    else if (typeof v !== 'string') throw invalid(`${name} must be given once`);
    else out[name] = spec[name]!(v, name);
  }
  return out as { [K in keyof S]: ReturnType<S[K]> | null };
}

export const text =
  (max = 128): Parser<string> =>
  (v, name) => {
    if (v.length > max) throw invalid(`${name} must have at most ${max} characters`);
    return v;
  };

export const oneOf =
  <T extends string>(values: readonly T[]): Parser<T> =>
  (v, name) => {
    if (!(values as readonly string[]).includes(v)) throw invalid(`${name} must be one of ${values.join(', ')}`);
    return v as T;
  };

export const int =
  (min: number, max: number): Parser<number> =>
  (v, name) => {
    // Decimal digits only: `0x10`, `1e2` or ` 5` are not numbers here.
    if (!/^[0-9]{1,12}$/.test(v) || Number(v) < min || Number(v) > max) throw invalid(`${name} must be ${min} to ${max}`);
    return Number(v);
  };

const TIME_RE = /^(\d{4}-\d{2}-\d{2})(?:T(\d{2}:\d{2})(:\d{2}(?:\.\d{1,3})?)?(Z|[+-]\d{2}:\d{2}))?$/;

/**
 * An ISO 8601 instant with its offset (seconds optional), or a date alone: that day's start in
 * Asia/Shanghai (the platform's day). Each field in its range (domain/clock.ts parseInstant): the
 * hour 24 or a day its month has not is refused, not moved.
 */
export const time: Parser<Date> = (v, name) => {
  const m = TIME_RE.exec(v);
  const ms = !m
    ? null
    : m[2] === undefined
      ? parseInstant(`${m[1]}T00:00:00+08:00`)
      : parseInstant(`${m[1]}T${m[2]}${m[3] ?? ':00'}${m[4]}`);
  if (ms === null) throw invalid(`${name} must be a date (2025-01-31) or an ISO 8601 time with its offset`);
  return new Date(ms);
};

/** `createdAt_openOrderId` of the last order of a page: the next page starts after it. */
function orderCursor(v: string, name: string): { createdAt: Date; id: string } {
  const m = /^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z)_(ord_[A-Za-z0-9]{1,60})$/.exec(v);
  if (!m) throw invalid(`${name} must be a nextCursor this API answered`);
  return { createdAt: new Date(m[1]!), id: m[2]! };
}

/** The order search of a query string (the admin API's and the portal's): its filters, page size and cursor. */
export function orderSearchOf(req: FastifyRequest, statuses: readonly string[], channels: readonly string[]) {
  const q = queryOf(req, {
    openOrderId: text(64),
    outTradeNo: text(64),
    appId: text(64),
    status: oneOf(statuses),
    channel: oneOf(channels),
    from: time,
    to: time,
    cursor: orderCursor,
    limit: int(1, 200),
  });
  const { cursor, limit, ...filters } = q;
  return { ...filters, before: cursor, limit: limit ?? 50 };
}

/** The cursor of the page after `rows` (a full page), or null. */
export function nextOrderCursor(rows: readonly { createdAt: Date; openOrderId: string }[], limit: number): string | null {
  const last = rows.at(-1);
  return rows.length === limit && last ? `${last.createdAt.toISOString()}_${last.openOrderId}` : null;
}
