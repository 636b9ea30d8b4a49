/** Shared pieces of the console's and the portal's pages: loading data, running an action, showing a refusal, tables, day filters, the language switch, the chart. */
import type { ComponentChildren } from 'preact';
import { createContext } from 'preact';
import { useCallback, useContext, useEffect, useState } from 'preact/hooks';
import { ApiError } from './api.ts';
import { hourOf } from './format.ts';
import { LANGS, language, refusalText, setLanguage, t } from './i18n.ts';

export const SessionContext = createContext<{ permissions: string[] } | null>(null);

/** Whether the signed-in operator's role allows a permission (the page hides what the server would refuse). */
export function useCan(): (permission: string) => boolean {
  const s = useContext(SessionContext);
  return (p) => s?.permissions.includes(p) ?? false;
}

export interface Loaded<T> {
  data: T | null;
  error: unknown;
  loading: boolean;
  reload: () => void;
}

/** Loads data when a dependency changes; `reload` loads it again (after a change). */
export function useLoad<T>(load: () => Promise<T>, deps: unknown[]): Loaded<T> {
  const [state, setState] = useState<{ data: T | null; error: unknown; loading: boolean }>({ data: null, error: null, loading: true });
  const [tick, setTick] = useState(0);
  useEffect(() => {
    let live = true;
    setState((s) => ({ ...s, loading: true }));
    load().then(
      (data) => live && setState({ data, error: null, loading: false }),
      (error: unknown) => live && setState({ data: null, error, loading: false }),
    );
    return () => {
      live = false;
    };
  }, [...deps, tick]);
  const reload = useCallback(() => setTick((t) => t + 1), []);
  return { ...state, reload };
}

export interface Action {
  run: (f: () => Promise<unknown>, done?: string) => Promise<boolean>;
  busy: boolean;
  error: unknown;
  message: string | null;
}

/** Runs a change: busy while it runs, then its refusal or a short confirmation. */
export function useAction(): Action {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const [message, setMessage] = useState<string | null>(null);
  const run = useCallback(async (f: () => Promise<unknown>, done?: string) => {
    setBusy(true);
    setError(null);
    setMessage(null);
    try {
      await f();
      setMessage(done ?? null);
      return true;
    } catch (err) {
      setError(err);
      return false;
    } finally {
      setBusy(false);
    }
  }, []);
  return { run, busy, error, message };
}

/**
 * A refusal shown to the user: an API's in the page's language with its code (src/ui/errors.ts;
 * the server's own words kept in the title), or the page's own (already in the page's language).
 */
export function ErrorNote({ error }: { error: unknown }) {
  if (!error) return null;
  if (error instanceof ApiError) {
    return (
      <p class="note error" role="alert" title={error.message} data-code={error.code}>
        {t('{message} ({code})', { message: refusalText(error.code, error.message), code: error.code })}
      </p>
    );
  }
  return (
    <p class="note error" role="alert">
      {error instanceof Error ? error.message : String(error)}
    </p>
  );
}

export function ActionNote({ action }: { action: Action }) {
  return (
    <>
      <ErrorNote error={action.error} />
      {action.message ? (
        <p class="note ok" role="status">
          {action.message}
        </p>
      ) : null}
    </>
  );
}

export function Loading<T>({ loaded, children }: { loaded: Loaded<T>; children: (data: T) => ComponentChildren }) {
  if (loaded.error) return <ErrorNote error={loaded.error} />;
  if (loaded.data === null) return <p class="muted">{t('Loading…')}</p>;
  return <>{children(loaded.data)}</>;
}

export function Section({ title, children, actions }: { title: string; children: ComponentChildren; actions?: ComponentChildren }) {
  return (
    <section class="card">
      <header class="card-head">
        <h2>{title}</h2>
        {actions}
      </header>
      {children}
    </section>
  );
}

/** A table that scrolls sideways inside its card on a narrow screen instead of widening the page. */
export function Table({ head, children, empty }: { head: string[]; children: ComponentChildren; empty?: boolean }) {
  return (
    <div class="table-wrap">
      <table>
        <thead>
          <tr>
            {head.map((h) => (
              <th key={h}>{h}</th>
            ))}
          </tr>
        </thead>
        <tbody>
          {children}
          {empty ? (
            <tr>
              <td colSpan={head.length} class="muted">
                {t('Nothing to show.')}
              </td>
            </tr>
          ) : null}
        </tbody>
      </table>
    </div>
  );
}

export function Field({ label, children, hint }: { label: string; children: ComponentChildren; hint?: string }) {
  return (
    <label class="field">
      <span>{label}</span>
      {children}
      {hint ? <small class="muted">{hint}</small> : null}
    </label>
  );
}

export function Status({ value }: { value: string }) {
  return <span class={`badge badge-${value.toLowerCase()}`}>{value}</span>;
}

export function Pre({ value }: { value: unknown }) {
  return <pre class="json">{typeof value === 'string' ? value : JSON.stringify(value, null, 2)}</pre>;
}

/** The form's values as text, by input name. */
export function formValues(e: Event): Record<string, string> {
  e.preventDefault();
  const form = e.currentTarget as HTMLFormElement;
  const out: Record<string, string> = {};
  for (const [k, v] of new FormData(form).entries()) if (typeof v === 'string') out[k] = v.trim();
  return out;
}

/** A small bar chart of the last 24 hours: orders per hour, the paid part darker. */
export function HourChart({ hours }: { hours: { hour: string; orders: number; paid: number }[] }) {
  const w = 24 * 20;
  const h = 120;
  const max = Math.max(1, ...hours.map((x) => x.orders));
  const y = (n: number) => (n / max) * (h - 20);
  return (
    <svg class="chart" viewBox={`-16 0 ${w + 32} ${h + 18}`} role="img" aria-label={t('Orders per hour over the last 24 hours')}>
      {hours.map((x, i) => {
        return (
          <g key={x.hour}>
            <title>{t('{hour}:00 — {orders} orders, {paid} paid', { hour: hourOf(x.hour), orders: x.orders, paid: x.paid })}</title>
            <rect class="bar-all" x={i * 20 + 3} y={h - y(x.orders)} width={14} height={y(x.orders)} />
            <rect class="bar-paid" x={i * 20 + 3} y={h - y(x.paid)} width={14} height={y(x.paid)} />
            {i % 6 === 0 || i === hours.length - 1 ? (
              <text x={i * 20 + 10} y={h + 14} text-anchor="middle">
                {`${String(hourOf(x.hour)).padStart(2, '0')}:00`}
              </text>
            ) : null}
          </g>
        );
      })}
      <line class="axis" x1={0} y1={h} x2={w} y2={h} />
    </svg>
  );
}

export function Confirm({
  label,
  question,
  onConfirm,
  disabled,
  danger,
}: {
  label: string;
  question: string;
  onConfirm: () => void;
  disabled?: boolean;
  danger?: boolean;
}) {
  return (
    <button
      type="button"
      class={danger ? 'danger' : ''}
      disabled={disabled}
      onClick={() => {
        if (window.confirm(question)) onConfirm();
      }}
    >
      {label}
    </button>
  );
}

/**
 * The day filter of every page: "From (day)" and "To (day, inclusive)", Asia/Shanghai days, named
 * `from` and `to` in the form (format.ts dayRange turns them into the APIs' instants).
 */
export function DayRangeFields() {
  return (
    <>
      <Field label={t('From (day)')}>
        <input name="from" type="date" />
      </Field>
      <Field label={t('To (day, inclusive)')}>
        <input name="to" type="date" />
      </Field>
    </>
  );
}

/** English / 中文: the choice is kept in the browser and the page drawn again. */
export function LanguageSwitch() {
  return (
    <span class="lang-switch">
      {LANGS.map((l) => (
        <button
          key={l.lang}
          type="button"
          class="link"
          lang={l.lang}
          aria-pressed={language() === l.lang}
          disabled={language() === l.lang}
          onClick={() => setLanguage(l.lang)}
        >
          {l.label}
        </button>
      ))}
    </span>
  );
}

export interface Pages<T> {
  /** The rows of the pages read so far (null before the first). */
  rows: T[] | null;
  filter: Record<string, string>;
  /** Reads the first page of a filter (the empty filter at first, without a press on Search). */
  search: (filter: Record<string, string>) => void;
  /** Reads the next page, when there is one. */
  more: (() => void) | null;
  action: Action;
}

/** A list read page by page with a cursor, newest first: its first page as soon as it is shown. */
export function usePages<T>(
  read: (filter: Record<string, string>, cursor: string | null) => Promise<{ rows: T[]; next: string | null }>,
): Pages<T> {
  const [filter, setFilter] = useState<Record<string, string>>({});
  const [rows, setRows] = useState<T[] | null>(null);
  const [next, setNext] = useState<string | null>(null);
  const action = useAction();
  const load = (f: Record<string, string>, cursor: string | null) =>
    void action.run(async () => {
      const r = await read(f, cursor);
      setRows((old) => (cursor && old ? [...old, ...r.rows] : r.rows));
      setNext(r.next);
    });
  useEffect(() => load({}, null), []);
  return {
    rows,
    filter,
    search: (f) => {
      setFilter(f);
      load(f, null);
    },
    more: next === null ? null : () => load(filter, next),
    action,
  };
}
