/**
 * The lists both surfaces show with the same filters: orders (searched by number, id, status,
 * channel and days, the newest at once, page by page), events (by delivery status and app), refunds
 * (by state).
 */
import type { ComponentChildren } from 'preact';
import { DayRangeFields, ErrorNote, Field, type Pages, Section, formValues } from './components.tsx';
import { dayRange } from './format.ts';
import { t } from './i18n.ts';

const ORDER_STATUSES = ['CREATED', 'PAYING', 'SUCCEEDED', 'CLOSED', 'FAILED', 'UNKNOWN'];
const REFUND_STATES = ['REQUESTED', 'PENDING', 'SUCCEEDED', 'FAILED', 'UNKNOWN'];

/** The order search and its pages (usePages of `/orders`); `table` draws the rows read. */
export function OrderSearch<T>({ pages, table }: { pages: Pages<T>; table: (rows: T[]) => ComponentChildren }) {
  return (
    <>
      <Section title={t('Search')}>
        <form
          class="inline-form"
          aria-label={t('Search orders')}
          onSubmit={(e) => {
            const v = formValues(e);
            pages.search({
              openOrderId: v.openOrderId ?? '',
              outTradeNo: v.outTradeNo ?? '',
              status: v.status ?? '',
              channel: v.channel ?? '',
              ...dayRange(v.from, v.to),
            });
          }}
        >
          <Field label={t('Merchant order number')}>
            <input name="outTradeNo" />
          </Field>
          <Field label={t('Open order id')}>
            <input name="openOrderId" placeholder="ord_…" />
          </Field>
          <Field label={t('Status')}>
            <select name="status">
              <option value="">{t('any')}</option>
              {ORDER_STATUSES.map((s) => (
                <option key={s}>{s}</option>
              ))}
            </select>
          </Field>
          <Field label={t('Channel')}>
            <select name="channel">
              <option value="">{t('any')}</option>
              <option>ALIPAY_H5</option>
              <option>WECHAT_H5</option>
            </select>
          </Field>
          <DayRangeFields />
          <button type="submit" class="primary" disabled={pages.action.busy}>
            {t('Search')}
          </button>
        </form>
        <ErrorNote error={pages.action.error} />
      </Section>
      <Section title={t('Orders, newest first')}>
        {pages.rows === null ? <p class="muted">{t('Loading…')}</p> : table(pages.rows)}
        {pages.more ? (
          <button type="button" disabled={pages.action.busy} onClick={pages.more}>
            {t('Load more')}
          </button>
        ) : null}
      </Section>
    </>
  );
}

/** The events' filter: delivery status and app. */
export function EventFilter({
  filter,
  onFilter,
}: {
  filter: { status: string; appId: string };
  onFilter: (f: { status: string; appId: string }) => void;
}) {
  return (
    <Section title={t('Filter')}>
      <form
        class="inline-form"
        aria-label={t('Filter events')}
        onSubmit={(e) => {
          const v = formValues(e);
          onFilter({ status: v.status ?? '', appId: v.appId ?? '' });
        }}
      >
        <Field label={t('Status')}>
          <select name="status" defaultValue={filter.status}>
            <option value="">{t('any')}</option>
            <option>PENDING</option>
            <option>DELIVERED</option>
            <option>DEAD</option>
          </select>
        </Field>
        <Field label={t('App id')}>
          <input name="appId" defaultValue={filter.appId} />
        </Field>
        <button type="submit" class="primary">
          {t('Show')}
        </button>
      </form>
    </Section>
  );
}

/** The refunds' filter: their state. */
export function RefundFilter({ onFilter }: { onFilter: (state: string) => void }) {
  return (
    <Section title={t('Filter')}>
      <form class="inline-form" aria-label={t('Filter refunds')} onSubmit={(e) => onFilter(formValues(e).state ?? '')}>
        <Field label={t('State')}>
          <select name="state">
            <option value="">{t('any')}</option>
            {REFUND_STATES.map((s) => (
              <option key={s}>{s}</option>
            ))}
          </select>
        </Field>
        <button type="submit" class="primary">
          {t('Show')}
        </button>
      </form>
    </Section>
  );
}
