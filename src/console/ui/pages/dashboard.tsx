/** Today's orders and amount, the success rate, what needs an operator, and the last 24 hours. */
import { t } from '../../../ui/i18n.ts';
import { get } from '../../../ui/api.ts';
import { HourChart, Loading, Section, useLoad } from '../../../ui/components.tsx';
import { money, percent, time } from '../../../ui/format.ts';

interface Dashboard {
  at: string;
  day: string;
  today: { orders: number; amountFen: number; paid: number; paidAmountFen: number; successRate: number | null };
  attention: {
    attemptsUnknown: number;
    refundsUnknown: number;
    eventsPending: number;
    eventsDead: number;
    duplicatePayments: number;
    duplicatePaymentsOpen: number;
  };
  last24Hours: { hour: string; orders: number; paid: number; paidAmountFen: number }[];
}

function Figure({ label, value, href, warn }: { label: string; value: string | number; href?: string; warn?: boolean }) {
  const body = (
    <>
      <span class="figure-value">{value}</span>
      <span class="figure-label">{label}</span>
    </>
  );
  return <div class={warn ? 'figure warn' : 'figure'}>{href ? <a href={href}>{body}</a> : body}</div>;
}

export function DashboardPage() {
  const loaded = useLoad(() => get<Dashboard>('/dashboard'), []);
  return (
    <>
      <h1>{t('Dashboard')}</h1>
      <Loading loaded={loaded}>
        {(d) => (
          <>
            <Section title={t('Today ({day}, Asia/Shanghai)', { day: d.day })}>
              <div class="figures">
                <Figure label={t('orders created')} value={d.today.orders} />
                <Figure label={t('amount ordered')} value={money(d.today.amountFen)} />
                <Figure label={t('paid')} value={`${d.today.paid} · ${money(d.today.paidAmountFen)}`} />
                <Figure label={t('success rate (paid / created)')} value={percent(d.today.successRate)} />
              </div>
            </Section>
            <Section title={t('Needs attention')}>
              <div class="figures">
                <Figure label={t('attempts UNKNOWN')} value={d.attention.attemptsUnknown} warn={d.attention.attemptsUnknown > 0} />
                <Figure
                  label={t('refunds UNKNOWN')}
                  value={d.attention.refundsUnknown}
                  href="#/refunds"
                  warn={d.attention.refundsUnknown > 0}
                />
                <Figure label={t('events pending')} value={d.attention.eventsPending} href="#/events" />
                <Figure label={t('events dead')} value={d.attention.eventsDead} href="#/events" warn={d.attention.eventsDead > 0} />
                <Figure
                  label={t('duplicate payments (not yet refunded)')}
                  value={`${d.attention.duplicatePayments} (${d.attention.duplicatePaymentsOpen})`}
                  warn={d.attention.duplicatePaymentsOpen > 0}
                />
              </div>
            </Section>
            <Section title={t('Last 24 hours: orders per hour (paid darker)')}>
              <HourChart hours={d.last24Hours} />
              <p class="muted">{t('As of {at}.', { at: time(d.at) })}</p>
            </Section>
          </>
        )}
      </Loading>
    </>
  );
}
