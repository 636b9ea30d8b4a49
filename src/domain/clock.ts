/**
 * The one clock of an instance: every time the service decides by (expiry, leases, retries,
 * timestamps it writes) comes from it, also into SQL as a parameter, so tests move time instead
 * of sleeping. In production it is the system clock.
 */
export interface Clock {
  /** Milliseconds since the epoch. */
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };

const INSTANT_RE = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(\.\d{1,3})?(Z|[+-](\d{2}):(\d{2}))$/;

/**
 * The milliseconds of an RFC 3339 instant with its offset (`2026-11-22T08:30:00.000Z`,
 * `...+08:00`), or null when the text is not one. Every field is checked against its range before
 * the text is read as a time: JavaScript's own parser takes `24:00:00` for the next day's midnight
 * and `02-30` for March 2nd, which a filter must refuse rather than move.
 */
export function parseInstant(text: string): number | null {
  const m = INSTANT_RE.exec(text);
  if (!m) return null;
  const [y, mo, d, h, mi, s] = m.slice(1, 7).map(Number) as [number, number, number, number, number, number];
  const daysInMonth = mo >= 1 && mo <= 12 ? new Date(Date.UTC(y, mo, 0)).getUTCDate() : 0;
  if (d < 1 || d > daysInMonth || h > 23 || mi > 59 || s > 59) return null;
  if (m[9] !== undefined && (Number(m[9]) > 23 || Number(m[10]) > 59)) return null;
  const t = Date.parse(text);
  return Number.isNaN(t) ? null : t;
}
