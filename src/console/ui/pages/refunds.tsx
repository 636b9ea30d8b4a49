/** Refunds, newest first, by state. */
import { t } from '../../../ui/i18n.ts';
import { RefundFilter } from '../../../ui/lists.tsx';
import { useState } from 'preact/hooks';
import { get, query } from '../../../ui/api.ts';
import { Loading, Section, Status, Table, useLoad } from '../../../ui/components.tsx';
import { money, time } from '../../../ui/format.ts';

interface Refund {
  refundAttemptId: string;
  openOrderId: string;
  appId: string;
  outRefundNo: string;
  amountFen: number;
  state: string;
  automatic: boolean;
  failureReason: string | null;
  createdAt: string;
}

export function RefundsPage() {
  const [state, setState] = useState('');
  const loaded = useLoad(() => get<{ refunds: Refund[] }>(`/refunds${query({ state, limit: 200 })}`), [state]);
  return (
    <>
      <h1>{t('Refunds')}</h1>
      <RefundFilter onFilter={setState} />
      <Section title={t('Refunds, newest first')}>
        <Loading loaded={loaded}>
          {(d) => (
            <Table head={[t('Refund no.'), t('Order'), t('Amount'), t('State'), t('Kind'), t('Created')]} empty={d.refunds.length === 0}>
              {d.refunds.map((r) => (
                <tr key={r.refundAttemptId}>
                  <td class="mono">{r.outRefundNo}</td>
                  <td class="mono">
                    <a href={`#/orders/${r.openOrderId}`}>{r.openOrderId}</a>
                  </td>
                  <td class="num">{money(r.amountFen)}</td>
                  <td>
                    <Status value={r.state} /> {r.failureReason ?? ''}
                  </td>
                  <td>{r.automatic ? t('automatic (duplicate payment)') : t('merchant')}</td>
                  <td class="when">{time(r.createdAt)}</td>
                </tr>
              ))}
            </Table>
          )}
        </Loading>
      </Section>
    </>
  );
}
