/** The changes to the merchant's things, by its users or by the platform, newest first. */
import { get, query } from '../../../ui/api.ts';
import { DayRangeFields, ErrorNote, Field, Section, formValues, usePages } from '../../../ui/components.tsx';
import { dayRange } from '../../../ui/format.ts';
import { t } from '../../../ui/i18n.ts';
import { AuditTable } from '../../../ui/views.tsx';
import type { AuditPage } from '../rows.ts';

export function AuditPage() {
  const pages = usePages(async (f, before) => {
    const r = await get<AuditPage>(`/audit${query({ ...f, before, limit: 100 })}`);
    return { rows: r.entries, next: r.nextBefore };
  });
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
            pages.search(f);
          }}
        >
          <Field label={t('Action')}>
            <input name="action" placeholder="appKey.add" />
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
