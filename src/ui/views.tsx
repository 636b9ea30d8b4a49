/**
 * Views both the console and the portal show: an event's delivery log, the audit log's entries
 * (who changed what, before and after), an order's attempts with their provider trades, and an
 * order's timeline.
 */
import type { ComponentChildren } from 'preact';
import { Pre, Section, Status, Table } from './components.tsx';
import { money, time } from './format.ts';
import { t } from './i18n.ts';
import type { Attempt, AuditEntry, Delivery, Trade } from './rows.ts';

export type { Attempt, AuditEntry, Delivery, Trade };

export function Deliveries({ deliveries }: { deliveries: Delivery[] }) {
  return (
    <Table head={[t('#'), t('At'), t('Answer'), t('Error'), t('Took')]} empty={deliveries.length === 0}>
      {deliveries.map((x) => (
        <tr key={x.attemptNo}>
          <td>{x.attemptNo}</td>
          <td>{time(x.attemptedAt)}</td>
          <td>{x.statusCode ?? '—'}</td>
          <td class="wrap">{x.error ?? ''}</td>
          <td class="num">{x.durationMs} ms</td>
        </tr>
      ))}
    </Table>
  );
}

function show(v: unknown): string {
  return typeof v === 'string' ? v : JSON.stringify(v);
}

function Changes({ e }: { e: AuditEntry }) {
  const keys = [...new Set([...Object.keys(e.before ?? {}), ...Object.keys(e.after ?? {})])];
  if (keys.length === 0) return <span class="muted">—</span>;
  return (
    <ul class="changes">
      {keys.map((k) => (
        <li key={k}>
          <strong>{k}</strong>: {e.before ? <del>{show(e.before[k] ?? null)}</del> : null} {e.before ? '→ ' : ''}
          <ins>{show(e.after?.[k] ?? null)}</ins>
        </li>
      ))}
    </ul>
  );
}

/** The audit log's entries; the table fits a 1280 px screen (long values wrap inside their cells). */
export function AuditTable({ entries }: { entries: AuditEntry[] }) {
  return (
    <Table head={[t('When'), t('Who'), t('From'), t('Action'), t('Entity'), t('Changes'), t('Request id')]} empty={entries.length === 0}>
      {entries.map((e) => (
        <tr key={e.id} data-action={e.action}>
          <td class="when">{time(e.at)}</td>
          <td class="wrap">
            {e.actor} <small class="muted">({e.channel})</small>
          </td>
          <td class="mono wrap">{e.sourceIp ?? '—'}</td>
          <td class="mono wrap">{e.action}</td>
          <td class="wrap">
            {e.entityType} <span class="mono">{e.entityId}</span>
          </td>
          <td class="changes-cell">
            <Changes e={e} />
          </td>
          <td class="mono small wrap">{e.requestId}</td>
        </tr>
      ))}
    </Table>
  );
}

/**
 * A provider trade of an attempt beyond its own provider order (docs/cashier.md): a JSAPI order
 * inside WeChat, a Native code on a computer. The APIs never give its payer or material.
 */

function productLabel(p: string): string {
  return p === 'JSAPI' ? t('JSAPI (inside WeChat)') : p === 'NATIVE' ? t('Native (a code scanned)') : p;
}

/** An order's attempts, then (when the cashier made any) each attempt's provider trades. */
export function AttemptsSection({ attempts }: { attempts: Attempt[] }) {
  const trades = attempts.flatMap((a) => a.trades.map((x) => ({ seq: a.seq, ...x })));
  return (
    <Section title={t('Attempts')}>
      <Table head={[t('#'), t('Attempt id'), t('State'), t('Created'), t('Expires')]} empty={attempts.length === 0}>
        {attempts.map((a) => (
          <tr key={a.attemptId}>
            <td>{a.seq}</td>
            <td class="mono">{a.attemptId}</td>
            <td>
              <Status value={a.state} />
            </td>
            <td class="when">{time(a.createdAt)}</td>
            <td class="when">{time(a.expireAt)}</td>
          </tr>
        ))}
      </Table>
      {trades.length > 0 ? (
        <div class="trades">
          <h3>{t('Provider trades')}</h3>
          <p class="muted">
            {t('Provider orders the cashier made for an attempt where its own cannot be paid (inside WeChat, on a computer).')}
          </p>
          <Table head={[t('Attempt'), t('Product'), t('Trade no.'), t('State'), t('Created'), t('Paid')]}>
            {trades.map((x) => (
              <tr key={x.tradeNo} data-trade={x.tradeNo}>
                <td>#{x.seq}</td>
                <td>{productLabel(x.product)}</td>
                <td class="mono">{x.tradeNo}</td>
                <td>
                  <Status value={x.state} />
                </td>
                <td class="when">{time(x.createdAt)}</td>
                <td class="when">{time(x.paidAt)}</td>
              </tr>
            ))}
          </Table>
        </div>
      ) : null}
    </Section>
  );
}

/** What an order's timeline is made of (the console's and the portal's order pages). */
export interface TimelineSource {
  createdAt: string | null;
  amountFen: number;
  channel: string;
  paidAt: string | null;
  attempts: { attemptId: string; seq: number; state: string; createdAt: string; trades?: Trade[] }[];
  refunds: { outRefundNo: string; amountFen: number; state: string; createdAt: string; updatedAt: string }[];
  events: { eventId: string; eventType: string; createdAt: string; deliveries: Delivery[] }[];
  audit: AuditEntry[];
}

/** Everything that happened to an order, oldest first. */
export function timeline(d: TimelineSource): { at: string; what: string }[] {
  const items: { at: string; what: string }[] = [];
  if (d.createdAt)
    items.push({ at: d.createdAt, what: t('Order created ({amount}, {channel})', { amount: money(d.amountFen), channel: d.channel }) });
  for (const a of d.attempts) {
    items.push({ at: a.createdAt, what: t('Attempt #{seq} {id} created (now {state})', { seq: a.seq, id: a.attemptId, state: a.state }) });
    for (const x of a.trades ?? []) {
      const vars = { seq: a.seq, no: x.tradeNo, product: productLabel(x.product), state: x.state };
      items.push({ at: x.createdAt, what: t('Attempt #{seq}: {product} trade {no} made (now {state})', vars) });
      if (x.paidAt) items.push({ at: x.paidAt, what: t('Provider trade {no} paid', vars) });
    }
  }
  if (d.paidAt) items.push({ at: d.paidAt, what: t('Order paid') });
  for (const r of d.refunds) {
    items.push({ at: r.createdAt, what: t('Refund {no} of {amount} requested', { no: r.outRefundNo, amount: money(r.amountFen) }) });
    if (r.updatedAt !== r.createdAt)
      items.push({ at: r.updatedAt, what: t('Refund {no} now {state}', { no: r.outRefundNo, state: r.state }) });
  }
  for (const e of d.events) {
    items.push({ at: e.createdAt, what: t('Event {type} {id} recorded', { type: e.eventType, id: e.eventId }) });
    for (const x of e.deliveries) {
      items.push({
        at: x.attemptedAt,
        what: t('Event {type} delivery #{n}: {result}', {
          type: e.eventType,
          n: x.attemptNo,
          result: String(x.statusCode ?? x.error ?? t('no answer')),
        }),
      });
    }
  }
  for (const a of d.audit) {
    items.push({
      at: a.at,
      what: t('{action} by {actor} from {ip} ({channel})', { action: a.action, actor: a.actor, ip: a.sourceIp ?? '?', channel: a.channel }),
    });
  }
  return items.sort((a, b) => Date.parse(a.at) - Date.parse(b.at));
}

export function Timeline({ source }: { source: TimelineSource }) {
  return (
    <ol class="timeline">
      {timeline(source).map((x, i) => (
        <li key={i}>
          <time>{time(x.at)}</time> {x.what}
        </li>
      ))}
    </ol>
  );
}

/** An event as both surfaces show it: what it is, its payload as delivered, and its delivery log. */
export interface EventView {
  eventId: string;
  appId: string;
  openOrderId: string;
  eventType: string;
  status: string;
  nextAttemptAt: string;
  createdAt: string;
  deliveredAt: string | null;
  payload: unknown;
  deliveries: Delivery[];
}

export function EventSections({ e, actions }: { e: EventView; actions: ComponentChildren }) {
  return (
    <>
      <Section title={t('Event')} actions={actions}>
        <dl class="facts">
          <dt>{t('Type')}</dt>
          <dd>{e.eventType}</dd>
          <dt>{t('Status')}</dt>
          <dd>
            <Status value={e.status} />
          </dd>
          <dt>{t('Order')}</dt>
          <dd class="mono">
            <a href={`#/orders/${e.openOrderId}`}>{e.openOrderId}</a>
          </dd>
          <dt>{t('App')}</dt>
          <dd class="mono">{e.appId}</dd>
          <dt>{t('Created')}</dt>
          <dd>{time(e.createdAt)}</dd>
          <dt>{t('Delivered')}</dt>
          <dd>{time(e.deliveredAt)}</dd>
          <dt>{t('Next try')}</dt>
          <dd>{e.status === 'PENDING' ? time(e.nextAttemptAt) : '—'}</dd>
        </dl>
      </Section>
      <Section title={t('Payload (as signed and sent)')}>
        <Pre value={e.payload} />
      </Section>
      <Section title={t('Delivery log')}>
        <Deliveries deliveries={e.deliveries} />
      </Section>
    </>
  );
}
