/** The merchant's settlement accounts and collection allocation (read-only: the platform sets them). */
import { get } from '../../../ui/api.ts';
import { Loading, Section, useLoad } from '../../../ui/components.tsx';
import { time } from '../../../ui/format.ts';
import { t } from '../../../ui/i18n.ts';
import { AccountsTable } from '../../../ui/merchant-views.tsx';
import type { Settlement } from '../rows.ts';

export function SettlementPage() {
  const loaded = useLoad(() => get<Settlement>('/settlement'), []);
  return (
    <>
      <h1>{t('Settlement accounts')}</h1>
      <p class="muted">{t('Read-only: the platform sets them up with you.')}</p>
      <Loading loaded={loaded}>
        {(d) => (
          <>
            <Section title={t('Accounts')}>
              <AccountsTable accounts={d.accounts} />
            </Section>
            <Section title={t('Collection allocation')}>
              {d.allocation === null ? (
                <p class="muted">{t('None set.')}</p>
              ) : (
                <dl class="facts">
                  <dt>{t('Mode')}</dt>
                  <dd>{d.allocation.mode}</dd>
                  <dt>{t('Participants, in order')}</dt>
                  <dd class="mono">{d.allocation.participants.join(', ')}</dd>
                  {d.allocation.ratios ? (
                    <>
                      <dt>{t('Ratios')}</dt>
                      <dd class="mono">{d.allocation.ratios.map((r) => `${r.accountId}: ${(r.shareBps / 100).toFixed(2)}%`).join(', ')}</dd>
                    </>
                  ) : null}
                  <dt>{t('When an account is unavailable')}</dt>
                  <dd>{d.allocation.unavailablePolicy}</dd>
                  <dt>{t('Changed')}</dt>
                  <dd>{time(d.allocation.updatedAt)}</dd>
                </dl>
              )}
            </Section>
          </>
        )}
      </Loading>
    </>
  );
}
