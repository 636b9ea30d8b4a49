/** The audit log: who changed what, when, from where; filters, pages, CSV export. */
import { t } from '../../../ui/i18n.ts';
import { useEffect, useState } from 'preact/hooks';
import { get, query, urlOf } from '../../../ui/api.ts';
import { DayRangeFields, ErrorNote, Field, Section, formValues, useAction } from '../../../ui/components.tsx';
import { dayRange } from '../../../ui/format.ts';
import { type AuditEntry, AuditTable } from '../../../ui/views.tsx';

export type { AuditEntry } from '../../../ui/views.tsx';

const FILTERS = ['operator', 'action', 'entityType', 'entityId'] as const;

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
      <h1>{t('Audit log')}</h1>
      <Section
        title={t('Filter')}
        actions={
          <a class="button" href={urlOf(`/audit/export.csv${query(filter)}`)} download>
            {t('Export CSV')}
          </a>
        }
      >
        <form
          class="inline-form"
          aria-label={t('Filter the audit log')}
          onSubmit={(e) => {
            const v = formValues(e);
            const f = { ...Object.fromEntries(FILTERS.map((k) => [k, v[k] ?? ''])), ...dayRange(v.from, v.to) };
            setFilter(f);
            void fetchPage(f, null);
          }}
        >
          <Field label={t('Operator')}>
            <input name="operator" />
          </Field>
          <Field label={t('Action')}>
            <input name="action" placeholder="feeRule.set" />
          </Field>
          <Field label={t('Entity type')}>
            <input name="entityType" placeholder="merchant" />
          </Field>
          <Field label={t('Entity id')}>
            <input name="entityId" />
          </Field>
          <DayRangeFields />
          <button type="submit" class="primary" disabled={load.busy}>
            {t('Show')}
          </button>
        </form>
        <ErrorNote error={load.error} />
      </Section>
      <Section title={t('Entries, newest first')}>
        {entries === null ? <p class="muted">{t('Loading…')}</p> : <AuditTable entries={entries} />}
        {next ? (
          <button type="button" disabled={load.busy} onClick={() => void fetchPage(filter, next)}>
            {t('Load more')}
          </button>
        ) : null}
      </Section>
    </>
  );
}
