/** How the console writes amounts and times. */

/** Fen as yuan: `¥1,234.50`. */
export function money(fen: number | null | undefined): string {
  if (fen === null || fen === undefined) return '—';
  const sign = fen < 0 ? '-' : '';
  const abs = Math.abs(fen);
  const yuan = Math.floor(abs / 100).toLocaleString('en-US');
  return `${sign}¥${yuan}.${String(abs % 100).padStart(2, '0')}`;
}

/** An instant in the browser's time zone: `2025-01-31 14:05:09`. */
export function time(iso: string | null | undefined): string {
  if (!iso) return '—';
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return iso;
  const p = (n: number) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}

export function percent(r: number | null): string {
  return r === null ? '—' : `${(r * 100).toFixed(1)}%`;
}
