/** Orders: search by number, id, status, channel and dates; one order with its attempts, refunds, events, deliveries and timeline. */
import { useState } from 'preact/hooks';
import { get, post, query } from '../../../ui/api.ts';
import {
  ActionNote,
  Confirm,
  ErrorNote,
  Field,
  Loading,
  Section,
  Status,
  Table,
  formValues,
  useAction,
  useCan,
  useLoad,
} from '../../../ui/components.tsx';
import { money, time } from '../../../ui/format.ts';
import { type AuditEntry, AuditTable } from './audit.tsx';
import { type EventDetail, Deliveries, RedeliverButton } from './events.tsx';

interface OrderRow {
  openOrderId: string;
  appId: string;
  merchantId: string;
  outTradeNo: string;
  channel: string;
  amountFen: number;
  status: string;
  closedReason: string | null;
  createdAt: string;
  paidAt: string | null;
}

const STATUSES = ['CREATED', 'PAYING', 'SUCCEEDED', 'CLOSED', 'FAILED', 'UNKNOWN'];

export function OrdersPage() {
  const [filter, setFilter] = useState<Record<string, string>>({});
  const [pages, setPages] = useState<OrderRow[][]>([]);
  const [next, setNext] = useState<string | null>(null);
  const search = useAction();
  const load = (f: Record<string, string>, cursor: string | null) =>
    search.run(async () => {
      const r = await get<{ orders: OrderRow[]; nextCursor: string | null }>(`/orders${query({ ...f, cursor })}`);
      setPages((p) => (cursor ? [...p, r.orders] : [r.orders]));
      setNext(r.nextCursor);
    });
  const rows = pages.flat();
  return (
    <>
      <h1>Orders</h1>
      <Section title="Search">
        <form
          class="inline-form"
          aria-label="Search orders"
          onSubmit={(e) => {
            const v = formValues(e);
            const f = {
              openOrderId: v.openOrderId ?? '',
              outTradeNo: v.outTradeNo ?? '',
              status: v.status ?? '',
              channel: v.channel ?? '',
              from: v.from ?? '',
              // The "to" date is inclusive: up to the next day's start.
              to: v.to ? new Date(Date.parse(`${v.to}T00:00:00+08:00`) + 86_400_000).toISOString() : '',
            };
            setFilter(f);
            void load(f, null);
          }}
        >
          <Field label="Open order id">
            <input name="openOrderId" placeholder="ord_…" />
          </Field>
          <Field label="Merchant order number">
            <input name="outTradeNo" />
          </Field>
          <Field label="Status">
            <select name="status">
              <option value="">any</option>
              {STATUSES.map((s) => (
                <option key={s}>{s}</option>
              ))}
            </select>
          </Field>
          <Field label="Channel">
            <select name="channel">
              <option value="">any</option>
              <option>ALIPAY_H5</option>
              <option>WECHAT_H5</option>
            </select>
          </Field>
          <Field label="From (day)">
            <input name="from" type="date" />
          </Field>
          <Field label="To (day, inclusive)">
            <input name="to" type="date" />
          </Field>
          <button type="submit" class="primary" disabled={search.busy}>
            Search
          </button>
        </form>
        <ErrorNote error={search.error} />
      </Section>
      <Section title="Orders, newest first">
        <OrderTable rows={rows} />
        {next ? (
          <button type="button" disabled={search.busy} onClick={() => void load(filter, next)}>
            Load more
          </button>
        ) : null}
      </Section>
    </>
  );
}

function OrderTable({ rows }: { rows: OrderRow[] }) {
  return (
    <Table head={['Open order id', 'Order number', 'Channel', 'Amount', 'Status', 'Created']} empty={rows.length === 0}>
      {rows.map((o) => (
        <tr key={o.openOrderId}>
          <td class="mono">
            <a href={`#/orders/${o.openOrderId}`}>{o.openOrderId}</a>
          </td>
          <td class="mono">{o.outTradeNo}</td>
          <td>{o.channel}</td>
          <td class="num">{money(o.amountFen)}</td>
          <td>
            <Status value={o.status} />
          </td>
          <td>{time(o.createdAt)}</td>
        </tr>
      ))}
    </Table>
  );
}

interface OrderDetail {
  openOrderId: string;
  appId: string;
  outTradeNo: string;
  status: string;
  closedReason: string | null;
  amountFen: number;
  stateVersion: number;
  expireAt: string;
  attempts: { attemptId: string; seq: number; state: string; expireAt: string; createdAt: string }[];
  refunds: {
    refundAttemptId: string;
    outRefundNo: string;
    amountFen: number;
    state: string;
    reason: string | null;
    failureReason: string | null;
    createdAt: string;
    updatedAt: string;
  }[];
  events: {
    eventId: string;
    eventType: string;
    stateVersion: number;
    status: string;
    attempts: number;
    lastError: string | null;
    deliveredAt: string | null;
  }[];
  duplicatePayments: { id: string; attemptId: string; amountFen: number; refundState: string; createdAt: string }[];
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

/** Everything that happened to an order, oldest first. */
function timeline(d: OrderPageData): { at: string; what: string }[] {
  const items: { at: string; what: string }[] = [];
  if (d.row) items.push({ at: d.row.createdAt, what: `Order created (${money(d.row.amountFen)}, ${d.row.channel})` });
  for (const a of d.order.attempts) items.push({ at: a.createdAt, what: `Attempt #${a.seq} ${a.attemptId} created (now ${a.state})` });
  if (d.row?.paidAt) items.push({ at: d.row.paidAt, what: 'Order paid' });
  for (const r of d.order.refunds) {
    items.push({ at: r.createdAt, what: `Refund ${r.outRefundNo} of ${money(r.amountFen)} requested` });
    if (r.updatedAt !== r.createdAt) items.push({ at: r.updatedAt, what: `Refund ${r.outRefundNo} now ${r.state}` });
  }
  for (const e of d.events) {
    items.push({ at: e.createdAt, what: `Event ${e.eventType} ${e.eventId} recorded` });
    for (const x of e.deliveries) {
      items.push({ at: x.attemptedAt, what: `Event ${e.eventType} delivery #${x.attemptNo}: ${x.statusCode ?? x.error ?? 'no answer'}` });
    }
  }
  for (const a of d.audit) items.push({ at: a.at, what: `${a.action} by ${a.actor} from ${a.sourceIp ?? '?'} (${a.channel})` });
  return items.sort((a, b) => Date.parse(a.at) - Date.parse(b.at));
}

export function OrderPage({ orderId }: { orderId: string }) {
  const can = useCan();
  const loaded = useLoad(() => loadOrder(orderId, can('audit.read')), [orderId]);
  const close = useAction();
  return (
    <>
      <p>
        <a href="#/orders">← Orders</a>
      </p>
      <h1>
        Order <span class="mono">{orderId}</span>
      </h1>
      <Loading loaded={loaded}>
        {(d) => {
          const o = d.order;
          const closable = ['CREATED', 'PAYING', 'UNKNOWN'].includes(o.status);
          return (
            <>
              <Section
                title="Summary"
                actions={
                  can('orders.close') && closable ? (
                    <Confirm
                      label="Close order"
                      danger
                      question={`Close order ${o.openOrderId}? The provider confirms it unpaid first.`}
                      disabled={close.busy}
                      onConfirm={() =>
                        void close.run(async () => {
                          const r = await post<{ closeState: string }>(`/orders/${encodeURIComponent(o.openOrderId)}/close`);
                          loaded.reload();
                          return r;
                        }, 'Close requested.')
                      }
                    />
                  ) : null
                }
              >
                <ActionNote action={close} />
                <dl class="facts">
                  <dt>Status</dt>
                  <dd>
                    <Status value={o.status} /> {o.closedReason ? `(${o.closedReason})` : ''}
                  </dd>
                  <dt>Amount</dt>
                  <dd>{money(o.amountFen)}</dd>
                  <dt>Order number</dt>
                  <dd class="mono">{o.outTradeNo}</dd>
                  <dt>App</dt>
                  <dd class="mono">{o.appId}</dd>
                  <dt>Channel</dt>
                  <dd>{d.row?.channel ?? '—'}</dd>
                  <dt>Created</dt>
                  <dd>{time(d.row?.createdAt)}</dd>
                  <dt>Expires</dt>
                  <dd>{time(o.expireAt)}</dd>
                  <dt>State version</dt>
                  <dd>{o.stateVersion}</dd>
                </dl>
              </Section>
              <Section title="Attempts">
                <Table head={['#', 'Attempt id', 'State', 'Created', 'Expires']} empty={o.attempts.length === 0}>
                  {o.attempts.map((a) => (
                    <tr key={a.attemptId}>
                      <td>{a.seq}</td>
                      <td class="mono">{a.attemptId}</td>
                      <td>
                        <Status value={a.state} />
                      </td>
                      <td>{time(a.createdAt)}</td>
                      <td>{time(a.expireAt)}</td>
                    </tr>
                  ))}
                </Table>
              </Section>
              <Section title="Refunds">
                <Table head={['Refund no.', 'Amount', 'State', 'Reason', 'Created']} empty={o.refunds.length === 0}>
                  {o.refunds.map((r) => (
                    <tr key={r.refundAttemptId}>
                      <td class="mono">{r.outRefundNo}</td>
                      <td class="num">{money(r.amountFen)}</td>
                      <td>
                        <Status value={r.state} /> {r.failureReason ?? ''}
                      </td>
                      <td>{r.reason ?? '—'}</td>
                      <td>{time(r.createdAt)}</td>
                    </tr>
                  ))}
                </Table>
              </Section>
              {o.duplicatePayments.length > 0 ? (
                <Section title="Duplicate payments">
                  <Table head={['Attempt', 'Amount', 'Refund', 'Found']}>
                    {o.duplicatePayments.map((x) => (
                      <tr key={x.id}>
                        <td class="mono">{x.attemptId}</td>
                        <td class="num">{money(x.amountFen)}</td>
                        <td>
                          <Status value={x.refundState} />
                        </td>
                        <td>{time(x.createdAt)}</td>
                      </tr>
                    ))}
                  </Table>
                </Section>
              ) : null}
              <Section title="Events and their deliveries">
                {d.events.length === 0 ? <p class="muted">No event yet.</p> : null}
                {d.events.map((e) => (
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
              <Section title="Timeline">
                <ol class="timeline">
                  {timeline(d).map((t, i) => (
                    <li key={i}>
                      <time>{time(t.at)}</time> {t.what}
                    </li>
                  ))}
                </ol>
              </Section>
              {can('audit.read') ? (
                <Section title="Operators' changes to this order and its events">
                  <AuditTable entries={d.audit} />
                </Section>
              ) : null}
            </>
          );
        }}
      </Loading>
    </>
  );
}
