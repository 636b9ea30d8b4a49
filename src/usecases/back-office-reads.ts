/** The console's reads: the dashboard's figures, the order search, the refund list (src/store/back-office-reads.ts). */
import { shanghaiDay } from '../domain/money.ts';
import * as reads from '../store/back-office-reads.ts';
import type { OrderSearch } from '../store/back-office-reads.ts';
import { type UseCaseDeps, nowOf } from './deps.ts';

type Deps = Pick<UseCaseDeps, 'db' | 'clock'>;

/**
 * Today (the Asia/Shanghai calendar day, as the daily ceilings count it): orders created, their
 * amount, how many are paid and the success rate (paid / created, null before the first order);
 * what needs an operator now (attempts and refunds UNKNOWN, events pending and dead, duplicate
 * payments); and the last 24 hours by hour.
 */
export async function dashboard(d: Deps) {
  const now = nowOf(d);
  const dayStart = new Date(`${shanghaiDay(now)}T00:00:00+08:00`);
  const [f, hours] = await Promise.all([reads.dashboardFigures(d.db, dayStart), reads.hourlyOrders(d.db, now)]);
  return {
    at: now,
    day: shanghaiDay(now),
    today: {
      orders: f.ordersToday,
      amountFen: f.amountTodayFen,
      paid: f.paidToday,
      paidAmountFen: f.paidAmountTodayFen,
      successRate: f.ordersToday === 0 ? null : f.paidToday / f.ordersToday,
    },
    attention: {
      attemptsUnknown: f.attemptsUnknown,
      refundsUnknown: f.refundsUnknown,
      eventsPending: f.eventsPending,
      eventsDead: f.eventsDead,
      duplicatePayments: f.duplicatePayments,
      duplicatePaymentsOpen: f.duplicatePaymentsOpen,
    },
    last24Hours: hours,
  };
}

export function searchOrders(d: Deps, f: OrderSearch) {
  return reads.searchOrders(d.db, f);
}

export function listRefunds(d: Deps, f: { state: string | null; appId: string | null; limit: number }) {
  return reads.listRefunds(d.db, f);
}
