/** Events: filter by status and app, redeliver one or many; one event's payload and delivery log. */
import { refusalText, t } from '../../../ui/i18n.ts';
import { EventFilter } from '../../../ui/lists.tsx';
import { useState } from 'preact/hooks';
import { get, post, query } from '../../../ui/api.ts';
import { ActionNote, Loading, Section, Status, Table, useAction, useCan, useLoad } from '../../../ui/components.tsx';
import { time } from '../../../ui/format.ts';
import type { EventDetail, EventSummary } from '../../../ui/rows.ts';
import { Deliveries, EventSections } from '../../../ui/views.tsx';

export type { EventDetail };

export { Deliveries };

const redeliverable = (status: string) => status === 'DEAD' || status === 'DELIVERED';

export function RedeliverButton({ event, onDone }: { event: { eventId: string; status: string }; onDone: () => void }) {
  const can = useCan();
  const action = useAction();
  if (!can('events.redeliver') || !redeliverable(event.status)) return null;
  return (
    <div>
      <button
        type="button"
        disabled={action.busy}
        onClick={() =>
          void action.run(async () => {
            await post(`/events/${encodeURIComponent(event.eventId)}/redeliver`);
            onDone();
          }, t('Queued for delivery again.'))
        }
      >
        {t('Redeliver')}
      </button>
      <ActionNote action={action} />
    </div>
  );
}

export function EventsPage() {
  const can = useCan();
  const [filter, setFilter] = useState<{ status: string; appId: string }>({ status: '', appId: '' });
  const loaded = useLoad(
    () => get<{ events: EventSummary[] }>(`/events${query({ ...filter, limit: 200 })}`),
    [filter.status, filter.appId],
  );
  const [selected, setSelected] = useState<Set<string>>(new Set());
  const many = useAction();
  const [results, setResults] = useState<{ eventId: string; status?: string; code?: string; message?: string }[]>([]);
  return (
    <>
      <h1>{t('Events')}</h1>
      <EventFilter
        filter={filter}
        onFilter={(f) => {
          setSelected(new Set());
          setFilter(f);
        }}
      />
      <Section
        title={t('Events, newest first')}
        actions={
          can('events.redeliver') ? (
            <button
              type="button"
              disabled={selected.size === 0 || many.busy}
              onClick={() =>
                void many.run(async () => {
                  const r = await post<{ results: typeof results }>('/events/redeliver', { eventIds: [...selected] });
                  setResults(r.results);
                  setSelected(new Set());
                  loaded.reload();
                })
              }
            >
              {t('Redeliver selected ({n})', { n: selected.size })}
            </button>
          ) : null
        }
      >
        <ActionNote action={many} />
        {results.length > 0 ? (
          <ul class="results" role="status">
            {results.map((r) => (
              <li key={r.eventId}>
                <span class="mono">{r.eventId}</span>:{' '}
                {r.status ?? t('{message} ({code})', { message: refusalText(r.code ?? '', r.message ?? ''), code: r.code ?? '' })}
              </li>
            ))}
          </ul>
        ) : null}
        <Loading loaded={loaded}>
          {(d) => (
            <Table
              head={['', t('Event id'), t('Type'), t('Order'), t('Status'), t('Tries'), t('Last error'), t('Created')]}
              empty={d.events.length === 0}
            >
              {d.events.map((e) => (
                <tr key={e.eventId} data-event={e.eventId}>
                  <td>
                    {can('events.redeliver') && redeliverable(e.status) ? (
                      <input
                        type="checkbox"
                        aria-label={`Select ${e.eventId}`}
                        checked={selected.has(e.eventId)}
                        onChange={(ev) => {
                          const next = new Set(selected);
                          if ((ev.currentTarget as HTMLInputElement).checked) next.add(e.eventId);
                          else next.delete(e.eventId);
                          setSelected(next);
                        }}
                      />
                    ) : null}
                  </td>
                  <td class="mono">
                    <a href={`#/events/${e.eventId}`}>{e.eventId}</a>
                  </td>
                  <td>{e.eventType}</td>
                  <td class="mono">
                    <a href={`#/orders/${e.openOrderId}`}>{e.openOrderId}</a>
                  </td>
                  <td>
                    <Status value={e.status} />
                  </td>
                  <td class="num">{e.attempts}</td>
                  <td>{e.lastError ?? ''}</td>
                  <td class="when">{time(e.createdAt)}</td>
                </tr>
              ))}
            </Table>
          )}
        </Loading>
      </Section>
    </>
  );
}

export function EventPage({ eventId }: { eventId: string }) {
  const loaded = useLoad(() => get<EventDetail>(`/events/${encodeURIComponent(eventId)}`), [eventId]);
  return (
    <>
      <p>
        <a href="#/events">{t('← Events')}</a>
      </p>
      <h1>
        {t('Event')} <span class="mono">{eventId}</span>
      </h1>
      <Loading loaded={loaded}>
        {(e) => (
          <>
            <EventSections e={e} actions={<RedeliverButton event={e} onDone={loaded.reload} />} />
          </>
        )}
      </Loading>
    </>
  );
}
