/** The audit log: who changed what, when, from where; filters, pages, CSV export. */
import { t } from '../../../ui/i18n.ts';
import { get, query, urlOf } from '../../../ui/api.ts';
import { DayRangeFields, ErrorNote, Field, Section, formValues, usePages } from '../../../ui/components.tsx';
import { dayRange } from '../../../ui/format.ts';
import { type AuditEntry, AuditTable } from '../../../ui/views.tsx';

export type { AuditEntry } from '../../../ui/views.tsx';

const FILTERS = ['operator', 'action', 'entityType', 'entityId'] as const;

export function AuditPage() {
  const pages = usePages(async (f, before) => {
    const r = await get<{ entries: AuditEntry[]; nextBefore: string | null }>(`/audit${query({ ...f, before, limit: 100 })}`);
    return { rows: r.entries, next: r.nextBefore };
  });
  return (
    <>
      <h1>{t('Audit log')}</h1>
      <Section
        title={t('Filter')}
        actions={
          <a class="button" href={urlOf(`/audit/export.csv${query(pages.filter)}`)} download>
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
            pages.search(f);
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
          <button type="submit" class="primary" disabled={pages.action.busy}>
            {t('Show')}
          </button>
        </form>
        <ErrorNote error={pages.action.error} />
      </Section>
      <Section title={t('Entries, newest first')}>
        {pages.rows === null ? <p class="muted">{t('Loading…')}</p> : <AuditTable entries={pages.rows} />}
        {pages.more ? (
          <button type="button" disabled={pages.action.busy} onClick={pages.more}>
            {t('Load more')}
          </button>
        ) : null}
      </Section>
    </>
  );
}
