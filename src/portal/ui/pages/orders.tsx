/** The merchant's orders (recent first, searchable), one order with its attempts, refunds, events and timeline; its refunds. */
import { useState } from 'preact/hooks';
import { get, query } from '../../../ui/api.ts';
import { Loading, Section, Status, Table, useLoad, usePages } from '../../../ui/components.tsx';
import { money, time } from '../../../ui/format.ts';
import { t } from '../../../ui/i18n.ts';
import { OrderSearch, RefundFilter } from '../../../ui/lists.tsx';
import { AttemptsSection, Deliveries, Timeline } from '../../../ui/views.tsx';
import type { OrderDetail, OrdersPage, Refund } from '../rows.ts';
import { RedeliverButton } from './events.tsx';

export function OrdersPage() {
  const pages = usePages(async (f, cursor) => {
    const r = await get<OrdersPage>(`/orders${query({ ...f, cursor })}`);
    return { rows: r.orders, next: r.nextCursor };
  });
  return (
    <>
      <h1>{t('Orders')}</h1>
      <OrderSearch
        pages={pages}
        table={(rows) => (
          <Table
            head={[t('Order number'), t('Open order id'), t('App'), t('Channel'), t('Amount'), t('Status'), t('Created')]}
            empty={rows.length === 0}
          >
            {rows.map((o) => (
              <tr key={o.openOrderId}>
                <td class="mono">
                  <a href={`#/orders/${o.openOrderId}`}>{o.outTradeNo}</a>
                </td>
                <td class="mono">{o.openOrderId}</td>
                <td class="mono">{o.appId}</td>
                <td>{o.channel}</td>
                <td class="num">{money(o.amountFen)}</td>
                <td>
                  <Status value={o.status} />
                </td>
                <td class="when">{time(o.createdAt)}</td>
              </tr>
            ))}
          </Table>
        )}
      />
    </>
  );
}

export function OrderPage({ orderId }: { orderId: string }) {
  const loaded = useLoad(() => get<OrderDetail>(`/orders/${encodeURIComponent(orderId)}`), [orderId]);
  return (
    <>
      <p>
        <a href="#/">← {t('Orders')}</a>
      </p>
      <h1>
        {t('Order')} <span class="mono">{orderId}</span>
      </h1>
      <Loading loaded={loaded}>
        {(o) => (
          <>
            <Section title={t('Summary')}>
              <dl class="facts">
                <dt>{t('Status')}</dt>
                <dd>
                  <Status value={o.status} /> {o.closedReason ? `(${o.closedReason})` : ''}
                </dd>
                <dt>{t('Amount')}</dt>
                <dd>{money(o.amountFen)}</dd>
                <dt>{t('Order number')}</dt>
                <dd class="mono">{o.outTradeNo}</dd>
                <dt>{t('Subject')}</dt>
                <dd>{o.subject}</dd>
                <dt>{t('App')}</dt>
                <dd class="mono">{o.appId}</dd>
                <dt>{t('Channel')}</dt>
                <dd>{o.channel}</dd>
                <dt>{t('Created')}</dt>
                <dd>{time(o.createdAt)}</dd>
                <dt>{t('Paid')}</dt>
                <dd>{time(o.paidAt)}</dd>
                <dt>{t('Expires')}</dt>
                <dd>{time(o.expireAt)}</dd>
                <dt>{t('State version')}</dt>
                <dd>{o.stateVersion}</dd>
              </dl>
            </Section>
            <AttemptsSection attempts={o.attempts} />
            <Section title={t('Refunds')}>
              <RefundTable refunds={o.refunds} />
            </Section>
            {o.duplicatePayments.length > 0 ? (
              <Section title={t('Paid twice: refunded automatically')}>
                <Table head={[t('Provider order'), t('Amount'), t('Refund'), t('Created')]} empty={false}>
                  {o.duplicatePayments.map((x) => (
                    <tr key={x.tradeNo} data-duplicate={x.tradeNo}>
                      <td class="mono">{x.tradeNo}</td>
                      <td>{money(x.amountFen)}</td>
                      <td>
                        <Status value={x.refundState} />
                      </td>
                      <td>{time(x.createdAt)}</td>
                    </tr>
                  ))}
                </Table>
              </Section>
            ) : null}
            <Section title={t('Events and their deliveries')}>
              {o.events.length === 0 ? <p class="muted">{t('No event yet.')}</p> : null}
              {o.events.map((e) => (
                <article class="event" key={e.eventId} data-event={e.eventId}>
                  <h3>
                    <a class="mono" href={`#/events/${e.eventId}`}>
                      {e.eventId}
                    </a>{' '}
                    {e.eventType} <Status value={e.status} />
                  </h3>
                  <RedeliverButton event={e} onDone={loaded.reload} />
                  <Deliveries deliveries={e.deliveries} />
                </article>
              ))}
            </Section>
            <Section title={t('Timeline')}>
              <Timeline source={{ ...o, audit: [] }} />
            </Section>
          </>
        )}
      </Loading>
    </>
  );
}

function RefundTable({ refunds }: { refunds: Refund[] }) {
  return (
    <Table head={[t('Refund no.'), t('Order'), t('Amount'), t('State'), t('Created')]} empty={refunds.length === 0}>
      {refunds.map((r) => (
        <tr key={r.refundAttemptId}>
          <td class="mono">{r.outRefundNo}</td>
          <td class="mono">{r.openOrderId ? <a href={`#/orders/${r.openOrderId}`}>{r.openOrderId}</a> : '—'}</td>
          <td class="num">{money(r.amountFen)}</td>
          <td>
            <Status value={r.state} /> {r.failureReason ?? ''}
          </td>
          <td class="when">{time(r.createdAt)}</td>
        </tr>
      ))}
    </Table>
  );
}

export function RefundsPage() {
  const [state, setState] = useState('');
  const loaded = useLoad(() => get<{ refunds: Refund[] }>(`/refunds${query({ state, limit: 200 })}`), [state]);
  return (
    <>
      <h1>{t('Refunds')}</h1>
      <RefundFilter onFilter={setState} />
      <Section title={t('Refunds, newest first')}>
        <Loading loaded={loaded}>{(d) => <RefundTable refunds={d.refunds} />}</Loading>
      </Section>
    </>
  );
}
