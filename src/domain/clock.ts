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

const INSTANT_RE = /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?([Zz]|[+-](\d{2}):(\d{2}))$/;

/**
 * The milliseconds of an RFC 3339 instant with its offset (`2026-11-22T08:30:00.000Z`,
 * `...+08:00`), or null when the text is not one. Every field is checked against its range before
 * the text is read as a time: JavaScript's own parser takes `24:00:00` for the next day's midnight
 * and `02-30` for March 2nd, which a filter must refuse rather than move. As RFC 3339 allows: `t`
 * and `z` in lower case, a fraction of any length, rounded up to the next millisecond (the
 * service's times are whole milliseconds, so a bound `from <= t` or `t < to` selects the same
 * times as the exact instant), and a leap second (`:60`), read as the next minute's start (no
 * time of the service falls within one).
 */
export function parseInstant(text: string): number | null {
  const m = INSTANT_RE.exec(text);
  if (!m) return null;
  const [y, mo, d, h, mi, s] = m.slice(1, 7).map(Number) as [number, number, number, number, number, number];
  const daysInMonth = mo >= 1 && mo <= 12 ? new Date(Date.UTC(y, mo, 0)).getUTCDate() : 0;
  if (d < 1 || d > daysInMonth || h > 23 || mi > 59 || s > 60) return null;
  if (m[9] !== undefined && (Number(m[9]) > 23 || Number(m[10]) > 59)) return null;
  const offset = m[8]!.toUpperCase();
  const whole = Date.parse(`${m[1]}-${m[2]}-${m[3]}T${m[4]}:${m[5]}:${s === 60 ? '59' : m[6]}${offset}`);
  if (Number.isNaN(whole)) return null;
  if (s === 60) return whole + 1000;
  const fraction = m[7] ?? '';
  const ms = Number(fraction.slice(0, 3).padEnd(3, '0'));
  return whole + ms + (/[1-9]/.test(fraction.slice(3)) ? 1 : 0);
}
