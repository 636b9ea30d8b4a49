/** The merchant's settlement accounts and collection allocation (read-only: the platform sets them). */
import { get } from '../../../ui/api.ts';
import { Loading, Section, Table, useLoad } from '../../../ui/components.tsx';
import { money, time } from '../../../ui/format.ts';
import { t } from '../../../ui/i18n.ts';

interface Settlement {
  accounts: {
    accountId: string;
    entityType: string;
    entityName: string;
    merchantNo: string;
    cardLast4: string;
    agreedCeilingFen: number | null;
    createdAt: string;
  }[];
  allocation: {
    mode: string;
    participants: string[];
    ratios: { accountId: string; shareBps: number }[] | null;
    unavailablePolicy: string;
    updatedAt: string;
  } | null;
}

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
              <Table
                head={[t('Account id'), t('Entity'), t('Merchant no.'), t('Card'), t('Agreed ceiling'), t('Created')]}
                empty={d.accounts.length === 0}
              >
                {d.accounts.map((a) => (
                  <tr key={a.accountId}>
                    <td class="mono">{a.accountId}</td>
                    <td>
                      {a.entityName} ({a.entityType})
                    </td>
                    <td class="mono">{a.merchantNo}</td>
                    <td class="mono">•••• {a.cardLast4}</td>
                    <td>{a.agreedCeilingFen === null ? '—' : money(a.agreedCeilingFen)}</td>
                    <td class="when">{time(a.createdAt)}</td>
                  </tr>
                ))}
              </Table>
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
