/** Orders: search by number, id, status, channel and dates; one order with its attempts, refunds, events, deliveries and timeline. */
import { t } from '../../../ui/i18n.ts';
import { OrderSearch } from '../../../ui/lists.tsx';

import { get, post, query } from '../../../ui/api.ts';
import {
  type Action,
  ActionNote,
  Confirm,
  Loading,
  Section,
  Status,
  Table,
  useAction,
  useCan,
  useLoad,
  usePages,
} from '../../../ui/components.tsx';
import { money, time } from '../../../ui/format.ts';
import type { OrderDetail } from '../../../ui/rows.ts';
import { AttemptsSection, type AuditEntry, AuditTable, Timeline } from '../../../ui/views.tsx';
import { type EventDetail, Deliveries, RedeliverButton } from './events.tsx';

interface OrderRow {
  openOrderId: string;
  appId: string;
  merchantId: string;
  merchantName: string;
  outTradeNo: string;
  channel: string;
  amountFen: number;
  status: string;
  closedReason: string | null;
  createdAt: string;
  paidAt: string | null;
}

export function OrdersPage() {
  const pages = usePages(async (f, cursor) => {
    const r = await get<{ orders: OrderRow[]; nextCursor: string | null }>(`/orders${query({ ...f, cursor })}`);
    return { rows: r.orders, next: r.nextCursor };
  });
  return (
    <>
      <h1>{t('Orders')}</h1>
      <OrderSearch pages={pages} table={(rows) => <OrderTable rows={rows} />} />
    </>
  );
}

function OrderTable({ rows }: { rows: OrderRow[] }) {
  return (
    <Table
      head={[t('Open order id'), t('Order number'), t('Merchant'), t('Channel'), t('Amount'), t('Status'), t('Created')]}
      empty={rows.length === 0}
    >
      {rows.map((o) => (
        <tr key={o.openOrderId} data-order={o.openOrderId}>
          <td class="mono">
            <a href={`#/orders/${o.openOrderId}`}>{o.openOrderId}</a>
          </td>
          <td class="mono">{o.outTradeNo}</td>
          <td class="wrap" data-merchant={o.merchantId}>
            <a href={`#/merchants/${o.merchantId}`}>{o.merchantName}</a>
          </td>
          <td>{o.channel}</td>
          <td class="num">{money(o.amountFen)}</td>
          <td>
            <Status value={o.status} />
          </td>
          <td class="when">{time(o.createdAt)}</td>
        </tr>
      ))}
    </Table>
  );
}

interface OrderPageData {
  order: OrderDetail;
  row: OrderRow | null;
  events: EventDetail[];
  audit: AuditEntry[];
}

async function loadOrder(orderId: string, canAudit: boolean): Promise<OrderPageData> {
  const id = encodeURIComponent(orderId);
  const [order, search] = await Promise.all([
    get<OrderDetail>(`/orders/${id}`),
    get<{ orders: OrderRow[] }>(`/orders${query({ openOrderId: orderId })}`),
  ]);
  const events = await Promise.all(order.events.map((e) => get<EventDetail>(`/events/${encodeURIComponent(e.eventId)}`)));
  const audit = canAudit
    ? (
        await Promise.all(
          [orderId, ...order.events.map((e) => e.eventId)].map((entityId) =>
            get<{ entries: AuditEntry[] }>(`/audit${query({ entityId })}`),
          ),
        )
      ).flatMap((r) => r.entries)
    : [];
  return { order, row: search.orders[0] ?? null, events, audit };
}

export function OrderPage({ orderId }: { orderId: string }) {
  const can = useCan();
  const loaded = useLoad(() => loadOrder(orderId, can('audit.read')), [orderId]);
  const close = useAction();
  return (
    <>
      <p>
        <a href="#/orders">{t('← Orders')}</a>
      </p>
      <h1>
        {t('Order')} <span class="mono">{orderId}</span>
      </h1>
      <Loading loaded={loaded}>
        {(d) => (
          <>
            <OrderSummary d={d} close={close} reload={loaded.reload} />
            <AttemptsSection attempts={d.order.attempts} />
            <RefundsSection refunds={d.order.refunds} />
            {d.order.duplicatePayments.length > 0 ? <DuplicatesSection duplicates={d.order.duplicatePayments} /> : null}
            <EventsSection events={d.events} reload={loaded.reload} />
            <Section title={t('Timeline')}>
              <Timeline
                source={{
                  createdAt: d.row?.createdAt ?? null,
                  amountFen: d.order.amountFen,
                  channel: d.row?.channel ?? '',
                  paidAt: d.row?.paidAt ?? null,
                  attempts: d.order.attempts,
                  refunds: d.order.refunds,
                  events: d.events,
                  audit: d.audit,
                }}
              />
            </Section>
            {can('audit.read') ? (
              <Section title={t("Operators' changes to this order and its events")}>
                <AuditTable entries={d.audit} />
              </Section>
            ) : null}
          </>
        )}
      </Loading>
    </>
  );
}

/** The order's facts, and the close (its action kept by the page, so its note outlives the reload it causes). */
function OrderSummary({ d, close, reload }: { d: OrderPageData; close: Action; reload: () => void }) {
  const can = useCan();
  const o = d.order;
  const closable = ['CREATED', 'PAYING', 'UNKNOWN'].includes(o.status);
  return (
    <Section
      title={t('Summary')}
      actions={
        can('orders.close') && closable ? (
          <Confirm
            label={t('Close order')}
            danger
            question={t('Close order {id}? The provider confirms it unpaid first.', { id: o.openOrderId })}
            disabled={close.busy}
            onConfirm={() =>
              void close.run(async () => {
                const r = await post<{ closeState: string }>(`/orders/${encodeURIComponent(o.openOrderId)}/close`);
                reload();
                return r;
              }, t('Close requested.'))
            }
          />
        ) : null
      }
    >
      <ActionNote action={close} />
      <dl class="facts">
        <dt>{t('Status')}</dt>
        <dd>
          <Status value={o.status} /> {o.closedReason ? `(${o.closedReason})` : ''}
        </dd>
        <dt>{t('Amount')}</dt>
        <dd>{money(o.amountFen)}</dd>
        <dt>{t('Order number')}</dt>
        <dd class="mono">{o.outTradeNo}</dd>
        <dt>{t('App')}</dt>
        <dd class="mono">{o.appId}</dd>
        <dt>{t('Channel')}</dt>
        <dd>{d.row?.channel ?? '—'}</dd>
        <dt>{t('Created')}</dt>
        <dd>{time(d.row?.createdAt)}</dd>
        <dt>{t('Expires')}</dt>
        <dd>{time(o.expireAt)}</dd>
        <dt>{t('State version')}</dt>
        <dd>{o.stateVersion}</dd>
      </dl>
    </Section>
  );
}

function RefundsSection({ refunds }: { refunds: OrderDetail['refunds'] }) {
  return (
    <Section title={t('Refunds')}>
      <Table head={[t('Refund no.'), t('Amount'), t('State'), t('Reason'), t('Created')]} empty={refunds.length === 0}>
        {refunds.map((r) => (
          <tr key={r.refundAttemptId}>
            <td class="mono">{r.outRefundNo}</td>
            <td class="num">{money(r.amountFen)}</td>
            <td>
              <Status value={r.state} /> {r.failureReason ?? ''}
            </td>
            <td>{r.reason ?? '—'}</td>
            <td class="when">{time(r.createdAt)}</td>
          </tr>
        ))}
      </Table>
    </Section>
  );
}

function DuplicatesSection({ duplicates }: { duplicates: OrderDetail['duplicatePayments'] }) {
  return (
    <Section title={t('Duplicate payments')}>
      <Table head={[t('Attempt'), t('Amount'), t('Refund'), t('Found')]}>
        {duplicates.map((x) => (
          <tr key={x.id}>
            <td class="mono">{x.attemptId}</td>
            <td class="num">{money(x.amountFen)}</td>
            <td>
              <Status value={x.refundState} />
            </td>
            <td class="when">{time(x.createdAt)}</td>
          </tr>
        ))}
      </Table>
    </Section>
  );
}

function EventsSection({ events, reload }: { events: EventDetail[]; reload: () => void }) {
  return (
    <Section title={t('Events and their deliveries')}>
      {events.length === 0 ? <p class="muted">{t('No event yet.')}</p> : null}
      {events.map((e) => (
        <article class="event" key={e.eventId} data-event={e.eventId}>
          <h3>
            <a class="mono" href={`#/events/${e.eventId}`}>
              {e.eventId}
            </a>{' '}
            {e.eventType} <Status value={e.status} />
          </h3>
          <RedeliverButton event={e} onDone={reload} />
          <Deliveries deliveries={e.deliveries} />
        </article>
      ))}
    </Section>
  );
}
