/** Statements: a day of an app (Asia/Shanghai), its totals, and its file to download (CSV or gzip). */
import { useState } from 'preact/hooks';
import { get, query } from '../../../ui/api.ts';
import type { StatementResponse, StatementTotals } from '../../../ui/api-types.ts';
import { ErrorNote, Field, Loading, Section, formValues, useAction, useLoad } from '../../../ui/components.tsx';
import { money, today } from '../../../ui/format.ts';
import { t } from '../../../ui/i18n.ts';

/** The summary the portal answers: the open API's statement summary (generated from its schema), without requestId. */
type Summary = Omit<StatementResponse, 'requestId'>;
type CountAndAmount = StatementTotals['paymentsSucceeded'];

const both = (x: CountAndAmount) => `${x.count} · ${money(x.amountFen)}`;

export function StatementsPage() {
  const apps = useLoad(() => get<{ apps: { appId: string }[] }>('/apps'), []);
  const [summary, setSummary] = useState<{ appId: string; day: string; compression: string; s: Summary } | null>(null);
  const load = useAction();
  const yesterday = new Date(Date.parse(`${today()}T00:00:00+08:00`) - 86_400_000 + 8 * 3600_000).toISOString().slice(0, 10);
  return (
    <>
      <h1>{t('Statements')}</h1>
      <Section title={t('A settlement day (Asia/Shanghai)')}>
        <Loading loaded={apps}>
          {(a) => (
            <form
              class="inline-form"
              aria-label={t('Find a statement')}
              onSubmit={(e) => {
                const v = formValues(e);
                void load.run(async () => {
                  setSummary(null);
                  const compression = v.compression === 'gzip' ? 'gzip' : 'none';
                  const s = await get<Summary>(`/apps/${encodeURIComponent(v.appId!)}/statements/${v.day}${query({ compression })}`);
                  setSummary({ appId: v.appId!, day: v.day!, compression, s });
                });
              }}
            >
              <Field label={t('App')}>
                <select name="appId">
                  {a.apps.map((x) => (
                    <option key={x.appId}>{x.appId}</option>
                  ))}
                </select>
              </Field>
              <Field label={t('Day')}>
                <input name="day" type="date" required defaultValue={yesterday} />
              </Field>
              <Field label={t('File')}>
                <select name="compression">
                  <option value="none">CSV</option>
                  <option value="gzip">CSV (gzip)</option>
                </select>
              </Field>
              <button type="submit" class="primary" disabled={load.busy}>
                {t('Show')}
              </button>
            </form>
          )}
        </Loading>
        <ErrorNote error={load.error} />
        <p class="muted">{t('A day is given from 00:10 the next day (Asia/Shanghai), once it is closed.')}</p>
      </Section>
      {summary ? (
        <Section title={t('Statement of {day}', { day: summary.s.settlementDate })}>
          <dl class="facts">
            <dt>{t('Rows')}</dt>
            <dd>{summary.s.rowCount}</dd>
            <dt>{t('Payments succeeded')}</dt>
            <dd>{both(summary.s.totals.paymentsSucceeded)}</dd>
            <dt>{t('Payments closed')}</dt>
            <dd>{both(summary.s.totals.paymentsClosed)}</dd>
            <dt>{t('Payments failed')}</dt>
            <dd>{both(summary.s.totals.paymentsFailed)}</dd>
            <dt>{t('Refunds succeeded')}</dt>
            <dd>{both(summary.s.totals.refundsSucceeded)}</dd>
            <dt>{t('Refunds failed')}</dt>
            <dd>{both(summary.s.totals.refundsFailed)}</dd>
            <dt>{t('Service fees')}</dt>
            <dd>{money(summary.s.totals.companyServiceFeeFen)}</dd>
            <dt>{t('Settled to you')}</dt>
            <dd>{money(summary.s.totals.merchantSettlementFen)}</dd>
            <dt>{t('Net (paid less refunded)')}</dt>
            <dd>{money(summary.s.totals.netAmountFen)}</dd>
            <dt>{t('File')}</dt>
            <dd class="mono">
              {summary.s.fileName} · {summary.s.sizeBytes} B
            </dd>
            <dt>SHA-256</dt>
            <dd class="mono small wrap">{summary.s.sha256}</dd>
          </dl>
          <a
            class="button primary"
            href={`/portal/api/apps/${encodeURIComponent(summary.appId)}/statements/${summary.day}/file${query({ compression: summary.compression })}`}
            download={summary.s.fileName}
          >
            {t('Download')}
          </a>
        </Section>
      ) : null}
    </>
  );
}
