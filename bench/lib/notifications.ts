/**
 * Accounting of event notifications at the benchmark's receiver: per eventId the first
 * acknowledgement and how many times it arrived, per order whether a first arrival came after one of
 * a higher `stateVersion` (decisions.md section 7: merchants order by it); and, per phase, what
 * its requests should have produced against what arrived: delivered, lost, duplicates, lag.
 */
import type { Item } from './corpus.ts';
import { type LatencyStats, latencyStats } from './load.ts';

/** The payload fields the accounting reads (WebhookEventPayload). */
export interface EventFields {
  eventId: string;
  eventType: string;
  outTradeNo: string;
  outRefundNo: string | null;
  stateVersion: number;
  occurredAt: string;
}

export interface Arrival {
  eventId: string;
  key: string;
  stateVersion: number;
  occurredAtMs: number;
  /** epoch ms when the first delivery was acknowledged (answered 2xx); 0 until then */
  firstAckMs: number;
  /** deliveries received (a second one of the same eventId is a duplicate) */
  count: number;
  /** its first arrival came after the first arrival of an event of the same order with a higher stateVersion */
  outOfOrder: boolean;
}

/** What identifies an event independently of its id: its type and the order (and refund) it reports. */
export function eventKey(eventType: string, outTradeNo: string, outRefundNo: string | null = null): string {
  return `${eventType} ${outTradeNo}${outRefundNo ? ` ${outRefundNo}` : ''}`;
}

/** The event a request answered `status` must produce (with the sandbox provider), or null. */
export function expectedEvent(it: Item, status: number): string | null {
  if (!it.tradeNo) return null;
  if (it.kind === 'pay' && status === 200) return eventKey('PAYMENT_SUCCEEDED', it.tradeNo);
  if (it.kind === 'close' && status === 200) return eventKey('PAYMENT_CLOSED', it.tradeNo);
  if (it.kind === 'refund' && status === 201) {
    const outRefundNo = (JSON.parse(it.body) as { outRefundNo: string }).outRefundNo;
    return eventKey('REFUND_SUCCEEDED', it.tradeNo, outRefundNo);
  }
  return null;
}

/** The receiver's record of every event it was sent. */
export class ArrivalLog {
  readonly #byId = new Map<string, Arrival>();
  readonly #highest = new Map<string, number>();

  /** A verified delivery arrived; returns its record (count 1 on the first). */
  arrived(e: EventFields): Arrival {
    const seen = this.#byId.get(e.eventId);
    if (seen) {
      seen.count++;
      return seen;
    }
    const highest = this.#highest.get(e.outTradeNo) ?? -Infinity;
    if (e.stateVersion > highest) this.#highest.set(e.outTradeNo, e.stateVersion);
    const a: Arrival = {
      eventId: e.eventId,
      key: eventKey(e.eventType, e.outTradeNo, e.outRefundNo),
      stateVersion: e.stateVersion,
      occurredAtMs: Date.parse(e.occurredAt),
      firstAckMs: 0,
      count: 1,
      outOfOrder: e.stateVersion < highest,
    };
    this.#byId.set(e.eventId, a);
    return a;
  }

  all(): Arrival[] {
    return [...this.#byId.values()];
  }
}

export interface NotificationStats {
  /** events the phase's answered requests must produce */
  expected: number;
  /** of those, acknowledged by the receiver */
  delivered: number;
  /** expected and never acknowledged by the end of the drain wait */
  lost: number;
  /** extra deliveries of an acknowledged eventId (at least once: reported, not an error) */
  duplicates: number;
  /** first arrivals after an event of the same order with a higher stateVersion */
  outOfOrder: number;
  /** delivered / (last acknowledgement - fromMs) */
  deliveredPerSec: number;
  /** from the event's occurredAt (the state change) to the receiver's acknowledgement */
  lagMs: LatencyStats;
  /** the lag's p50 / p99 / max by event type */
  lagByType: Record<string, { n: number; p50: number; p99: number; max: number }>;
  /** from fromMs to the last acknowledgement */
  spanMs: number;
  /** the receiver's refusals so far (bad signature, ...), by the SDK's reason */
  rejected?: Record<string, number>;
}

/** The notification figures of a phase: `expected` keys (eventKey), the receiver's arrivals, the phase's start. */
export function notificationStats(expected: Iterable<string>, arrivals: readonly Arrival[], fromMs: number): NotificationStats {
  const want = new Set(expected);
  const lags: number[] = [];
  const byType = new Map<string, number[]>();
  let duplicates = 0;
  let outOfOrder = 0;
  let last = fromMs;
  const got = new Set<string>();
  for (const a of arrivals) {
    if (!want.has(a.key) || a.firstAckMs === 0 || got.has(a.key)) continue;
    got.add(a.key);
    duplicates += a.count - 1;
    if (a.outOfOrder) outOfOrder++;
    const lag = a.firstAckMs - a.occurredAtMs;
    lags.push(lag);
    const type = a.key.slice(0, a.key.indexOf(' '));
    const list = byType.get(type);
    if (list) list.push(lag);
    else byType.set(type, [lag]);
    if (a.firstAckMs > last) last = a.firstAckMs;
  }
  const spanMs = last - fromMs;
  return {
    expected: want.size,
    delivered: got.size,
    lost: want.size - got.size,
    duplicates,
    outOfOrder,
    deliveredPerSec: spanMs > 0 ? (got.size * 1000) / spanMs : 0,
    lagMs: latencyStats(Float64Array.from(lags)),
    lagByType: Object.fromEntries(
      [...byType].map(([t, v]) => {
        const l = latencyStats(Float64Array.from(v));
        return [t, { n: v.length, p50: l.p50, p99: l.p99, max: l.max }];
      }),
    ),
    spanMs,
  };
}
