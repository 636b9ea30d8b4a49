/** The changes to the merchant's things, by its users or by the platform, newest first. */
import { useEffect, useState } from 'preact/hooks';
import { get, query } from '../../../ui/api.ts';
import { DayRangeFields, ErrorNote, Field, Section, formValues, useAction } from '../../../ui/components.tsx';
import { dayRange } from '../../../ui/format.ts';
import { t } from '../../../ui/i18n.ts';
import { type AuditEntry, AuditTable } from '../../../ui/views.tsx';

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
  }, []);
  return (
    <>
      <h1>{t('Audit log')}</h1>
      <Section title={t('Filter')}>
        <form
          class="inline-form"
          aria-label={t('Filter the audit log')}
          onSubmit={(e) => {
            const v = formValues(e);
            const f = { action: v.action ?? '', ...dayRange(v.from, v.to) };
            setFilter(f);
            void fetchPage(f, null);
          }}
        >
          <Field label={t('Action')}>
            <input name="action" placeholder="appKey.add" />
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
