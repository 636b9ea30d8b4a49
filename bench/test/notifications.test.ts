/** Notification accounting of the benchmark (bench/lib/notifications.ts) and the order book it feeds on. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { closeItem, createItems, payItem, refundItem } from '../lib/corpus.ts';
import { ArrivalLog, eventKey, expectedEvent, notificationStats } from '../lib/notifications.ts';
import { OrderBook } from '../lib/orders.ts';

const event = (
  eventId: string,
  eventType: string,
  outTradeNo: string,
  stateVersion: number,
  occurredAt: string,
  outRefundNo: string | null = null,
) => ({
  eventId,
  eventType,
  outTradeNo,
  outRefundNo,
  stateVersion,
  occurredAt,
});

test('expectedEvent: pay, close and refund answered as they must produce their event; other answers none', () => {
  assert.equal(expectedEvent(payItem('T1', 'ord_1', 'tok'), 200), 'PAYMENT_SUCCEEDED T1');
  assert.equal(expectedEvent(payItem('T1', 'ord_1', 'tok'), 409), null);
  assert.equal(expectedEvent(closeItem('T2'), 200), 'PAYMENT_CLOSED T2');
  const r = refundItem('T3', 500);
  const outRefundNo = (JSON.parse(r.body) as { outRefundNo: string }).outRefundNo;
  assert.equal(expectedEvent(r, 201), `REFUND_SUCCEEDED T3 ${outRefundNo}`);
  assert.equal(expectedEvent(r, 502), null);
  assert.equal(expectedEvent(createItems(1)[0]!, 201), null);
});

test('ArrivalLog: a second delivery of an eventId is counted, not a new event; a lower stateVersion after a higher one is out of order', () => {
  const log = new ArrivalLog();
  const a = log.arrived(event('e1', 'PAYMENT_SUCCEEDED', 'T1', 2, '2026-01-01T00:00:00.000Z'));
  assert.equal(a.count, 1);
  assert.equal(a.outOfOrder, false);
  assert.equal(log.arrived(event('e1', 'PAYMENT_SUCCEEDED', 'T1', 2, '2026-01-01T00:00:00.000Z')).count, 2);
  assert.equal(log.arrived(event('e3', 'REFUND_SUCCEEDED', 'T1', 5, '2026-01-01T00:00:01.000Z', 'R1')).outOfOrder, false);
  assert.equal(log.arrived(event('e2', 'REFUND_SUCCEEDED', 'T1', 4, '2026-01-01T00:00:01.000Z', 'R0')).outOfOrder, true);
  assert.equal(log.arrived(event('e9', 'PAYMENT_SUCCEEDED', 'T9', 1, '2026-01-01T00:00:01.000Z')).outOfOrder, false, 'another order');
  assert.equal(log.all().length, 4);
});

test('notificationStats: delivered, lost, duplicates, out of order, lag from occurredAt to the acknowledgement, rate over the span', () => {
  const log = new ArrivalLog();
  const t0 = Date.parse('2026-01-01T00:00:00.000Z');
  const ack = (e: ReturnType<typeof event>, atMs: number) => (log.arrived(e).firstAckMs = atMs);
  ack(event('e1', 'PAYMENT_SUCCEEDED', 'T1', 2, '2026-01-01T00:00:00.100Z'), t0 + 150);
  log.arrived(event('e1', 'PAYMENT_SUCCEEDED', 'T1', 2, '2026-01-01T00:00:00.100Z')); // a duplicate
  ack(event('e2', 'PAYMENT_CLOSED', 'T2', 2, '2026-01-01T00:00:00.200Z'), t0 + 1000);
  ack(event('e3', 'PAYMENT_CLOSED', 'T3', 2, '2026-01-01T00:00:00.200Z'), t0 + 400); // not expected by this phase
  log.arrived(event('e4', 'PAYMENT_CLOSED', 'T4', 2, '2026-01-01T00:00:00.300Z')); // arrived, never acknowledged
  const expected = [
    eventKey('PAYMENT_SUCCEEDED', 'T1'),
    eventKey('PAYMENT_CLOSED', 'T2'),
    eventKey('PAYMENT_CLOSED', 'T4'),
    eventKey('REFUND_SUCCEEDED', 'T1', 'R1'),
  ];
  const s = notificationStats(expected, log.all(), t0);
  assert.equal(s.expected, 4);
  assert.equal(s.delivered, 2);
  assert.equal(s.lost, 2);
  assert.equal(s.duplicates, 1);
  assert.equal(s.outOfOrder, 0);
  assert.equal(s.spanMs, 1000);
  assert.equal(s.deliveredPerSec, 2);
  assert.deepEqual([s.lagMs.p50, s.lagMs.max], [50, 800]);
  assert.equal(notificationStats([], log.all(), t0).deliveredPerSec, 0);
});

test('OrderBook: open orders by whether their openOrderId is known, paid ones for refunds, none taken twice', () => {
  const book = new OrderBook();
  const [a, b, c] = createItems(3);
  book.onAnswer(a!, 201, JSON.stringify({ openOrderId: 'ord_a', outTradeNo: a!.tradeNo }));
  book.onAnswer(b!, 201, ''); // wrk: no body
  book.onAnswer(c!, 409, '{}'); // not created
  book.onAnswer(a!, 201, '{}'); // a replayed answer adds nothing
  assert.deepEqual(book.orders, [a!.tradeNo, b!.tradeNo]);
  assert.deepEqual([book.openCount, book.payableCount], [2, 1]);
  assert.deepEqual(book.takePayable(5), [{ tradeNo: a!.tradeNo, openOrderId: 'ord_a' }]);
  book.onAnswer(payItem(a!.tradeNo!, 'ord_a', 'tok'), 200, '{}');
  assert.deepEqual(book.takePaid(5), [{ tradeNo: a!.tradeNo, amountFen: a!.amountFen }]);
  assert.deepEqual(book.takeClosable(5), [b!.tradeNo]);
  assert.deepEqual([book.openCount, book.paidCount, book.takeClosable(1).length], [0, 0, 0]);
});
