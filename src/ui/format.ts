/**
 * How the pages write amounts and times. Every time is shown in Asia/Shanghai (the platform's
 * settlement day and daily ceilings are that zone's), whatever the browser's zone, and labelled so.
 */

/** Fen as yuan: `¥1,234.50`. */
export function money(fen: number | null | undefined): string {
  if (fen === null || fen === undefined) return '—';
  const sign = fen < 0 ? '-' : '';
  const abs = Math.abs(fen);
  const yuan = Math.floor(abs / 100).toLocaleString('en-US');
  return `${sign}¥${yuan}.${String(abs % 100).padStart(2, '0')}`;
}

export const ZONE = 'Asia/Shanghai';
/** The zone's label after every time (China has had no daylight saving time since 1991). */
export const ZONE_LABEL = 'UTC+8';

const parts = new Intl.DateTimeFormat('en-GB', {
  timeZone: ZONE,
  year: 'numeric',
  month: '2-digit',
  day: '2-digit',
  hour: '2-digit',
  minute: '2-digit',
  second: '2-digit',
  hourCycle: 'h23',
});

/** An instant in Asia/Shanghai, labelled: `2025-01-31 14:05:09 UTC+8`. */
export function time(iso: string | null | undefined): string {
  if (!iso) return '—';
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return iso;
  const p = Object.fromEntries(parts.formatToParts(d).map((x) => [x.type, x.value]));
  // (a no-break space keeps the zone with the hour)
  return `${p.year}-${p.month}-${p.day} ${p.hour}:${p.minute}:${p.second}\u00a0${ZONE_LABEL}`;
}

/** The hour of an instant in Asia/Shanghai (0-23). */
export function hourOf(iso: string): number {
  const p = parts.formatToParts(new Date(iso)).find((x) => x.type === 'hour');
  return Number(p?.value ?? 0);
}

/** Today's date in Asia/Shanghai, `2025-01-31`. */
export function today(): string {
  return time(new Date().toISOString()).slice(0, 10);
}

/**
 * A day filter of the pages, "from" and "to, inclusive" (Asia/Shanghai days), as the instants the
 * APIs take: from that day's start, to the start of the day after `to` (the APIs' `to` is exclusive).
 */
export function dayRange(from: string | undefined, to: string | undefined): { from: string; to: string } {
  const start = (day: string) => new Date(`${day}T00:00:00+08:00`);
  return {
    from: from ? start(from).toISOString() : '',
    to: to ? new Date(start(to).getTime() + 86_400_000).toISOString() : '',
  };
}

export function percent(r: number | null): string {
  return r === null ? '—' : `${(r * 100).toFixed(1)}%`;
}
