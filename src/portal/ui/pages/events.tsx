/** The merchant's events: by status and app; one event's payload and delivery log; redelivery. */
import { useState } from 'preact/hooks';
import { ApiError, get, post, query } from '../../../ui/api.ts';
import { ActionNote, Loading, Section, Status, Table, useAction, useCan, useLoad } from '../../../ui/components.tsx';
import { time } from '../../../ui/format.ts';
import { t } from '../../../ui/i18n.ts';
import { EventFilter } from '../../../ui/lists.tsx';
import { EventSections } from '../../../ui/views.tsx';
import type { EventDetail, EventSummary } from '../rows.ts';

/** Asks for the event to be delivered again (once a minute per event, 20 a minute per app). */
export function RedeliverButton({ event, onDone }: { event: { eventId: string; status: string }; onDone: () => void }) {
  const can = useCan();
  const action = useAction();
  if (!can('events.redeliver')) return null;
  return (
    <div>
      <button
        type="button"
        disabled={action.busy}
        onClick={() =>
          void action.run(async () => {
            try {
              await post(`/events/${encodeURIComponent(event.eventId)}/redeliver`);
            } catch (err) {
              if (err instanceof ApiError && err.status === 429) {
                throw new Error(t('Too soon: try again in {seconds} s.', { seconds: err.retryAfter ?? '60' }), { cause: err });
              }
              throw err;
            }
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
  const [filter, setFilter] = useState<{ status: string; appId: string }>({ status: '', appId: '' });
  const loaded = useLoad(
    () => get<{ events: EventSummary[] }>(`/events${query({ ...filter, limit: 200 })}`),
    [filter.status, filter.appId],
  );
  return (
    <>
      <h1>{t('Events')}</h1>
      <EventFilter filter={filter} onFilter={setFilter} />
      <Section title={t('Events, newest first')}>
        <Loading loaded={loaded}>
          {(d) => (
            <Table
              head={[t('Event id'), t('Type'), t('Order'), t('Status'), t('Tries'), t('Last error'), t('Created')]}
              empty={d.events.length === 0}
            >
              {d.events.map((e) => (
                <tr key={e.eventId} data-event={e.eventId}>
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
                  <td class="wrap">{e.lastError ?? ''}</td>
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
        <a href="#/events">← {t('Events')}</a>
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
