/** The audit log: who changed what, when, from where; filters, pages, CSV export. */
import { useEffect, useState } from 'preact/hooks';
import { get, query, urlOf } from '../../../ui/api.ts';
import { ErrorNote, Field, Section, Table, formValues, useAction } from '../../../ui/components.tsx';
import { time } from '../../../ui/format.ts';

export interface AuditEntry {
  id: string;
  at: string;
  actor: string;
  actorKind: string;
  operatorName: string | null;
  channel: string;
  sourceIp: string | null;
  requestId: string;
  action: string;
  entityType: string;
  entityId: string;
  before: Record<string, unknown> | null;
  after: Record<string, unknown> | null;
}

function show(v: unknown): string {
  return typeof v === 'string' ? v : JSON.stringify(v);
}

function Changes({ e }: { e: AuditEntry }) {
  const keys = [...new Set([...Object.keys(e.before ?? {}), ...Object.keys(e.after ?? {})])];
  if (keys.length === 0) return <span class="muted">—</span>;
  return (
    <ul class="changes">
      {keys.map((k) => (
        <li key={k}>
          <strong>{k}</strong>: {e.before ? <del>{show(e.before[k] ?? null)}</del> : null} {e.before ? '→ ' : ''}
          <ins>{show(e.after?.[k] ?? null)}</ins>
        </li>
      ))}
    </ul>
  );
}

export function AuditTable({ entries }: { entries: AuditEntry[] }) {
  return (
    <Table head={['When', 'Who', 'From', 'Action', 'Entity', 'Changes', 'Request id']} empty={entries.length === 0}>
      {entries.map((e) => (
        <tr key={e.id} data-action={e.action}>
          <td>{time(e.at)}</td>
          <td>
            {e.actor} <small class="muted">({e.channel})</small>
          </td>
          <td class="mono">{e.sourceIp ?? '—'}</td>
          <td class="mono">{e.action}</td>
          <td>
            {e.entityType} <span class="mono">{e.entityId}</span>
          </td>
          <td>
            <Changes e={e} />
          </td>
          <td class="mono small">{e.requestId}</td>
        </tr>
      ))}
    </Table>
  );
}

const FILTERS = ['operator', 'action', 'entityType', 'entityId', 'from', 'to'] as const;

export function AuditPage() {
  const [filter, setFilter] = useState<Record<string, string>>({});
  const [entries, setEntries] = useState<AuditEntry[] | null>(null);
  const [next, setNext] = useState<string | null>(null);
  const load = useAction();
  const fetchPage = (f: Record<string, string>, before: string | null) =>
    load.run(async () => {
      const r = await get<{ entries: AuditEntry[]; nextBefore: string | null }>(`/audit${query({ ...f, before, limit: 100 })}`);
      setEntries((old) => (before ? [...(old ?? []), ...r.entries] : r.entries));
      setNext(r.nextBefore);
    });
  useEffect(() => {
    void fetchPage({}, null);
    // The first page once; the filter form loads the others.
  }, []);
  return (
    <>
      <h1>Audit log</h1>
      <Section
        title="Filter"
        actions={
          <a class="button" href={urlOf(`/audit/export.csv${query(filter)}`)} download>
            Export CSV
          </a>
        }
      >
        <form
          class="inline-form"
          aria-label="Filter the audit log"
          onSubmit={(e) => {
            const v = formValues(e);
            const f = Object.fromEntries(FILTERS.map((k) => [k, v[k] ?? '']));
            setFilter(f);
            void fetchPage(f, null);
          }}
        >
          <Field label="Operator">
            <input name="operator" />
          </Field>
          <Field label="Action">
            <input name="action" placeholder="feeRule.set" />
          </Field>
          <Field label="Entity type">
            <input name="entityType" placeholder="merchant" />
          </Field>
          <Field label="Entity id">
            <input name="entityId" />
          </Field>
          <Field label="From (day)">
            <input name="from" type="date" />
          </Field>
          <Field label="To (day, exclusive)">
            <input name="to" type="date" />
          </Field>
          <button type="submit" class="primary" disabled={load.busy}>
            Show
          </button>
        </form>
        <ErrorNote error={load.error} />
      </Section>
      <Section title="Entries, newest first">
        {entries === null ? <p class="muted">Loading…</p> : <AuditTable entries={entries} />}
        {next ? (
          <button type="button" disabled={load.busy} onClick={() => void fetchPage(filter, next)}>
            Load more
          </button>
        ) : null}
      </Section>
    </>
  );
}
