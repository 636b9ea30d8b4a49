// RFC 3339 instants as the open API's time filters read them (src/domain/clock.ts parseInstant):
// every field within its range, so no text is quietly moved to another time.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseInstant } from '../../src/domain/clock.ts';

test('an instant with its offset is read as written', () => {
  assert.equal(parseInstant('2026-11-22T08:30:00.000Z'), Date.UTC(2026, 10, 22, 8, 30));
  assert.equal(parseInstant('2026-11-22T23:59:59+08:00'), Date.UTC(2026, 10, 22, 15, 59, 59));
  assert.equal(parseInstant('2028-02-29T00:00:00Z'), Date.UTC(2028, 1, 29));
  assert.equal(parseInstant('2026-11-22T00:00:00.5-23:59'), Date.UTC(2026, 10, 22, 23, 59, 0, 500));
});

test('as RFC 3339 allows: t and z in lower case, a fraction of any length, a leap second', () => {
  assert.equal(parseInstant('2026-11-22t08:30:00z'), Date.UTC(2026, 10, 22, 8, 30));
  // A fraction past the millisecond is rounded up: the service's times are whole milliseconds, so
  // `from <= t` and `t < to` select the same times as the exact instant would.
  assert.equal(parseInstant('2026-11-22T08:30:00.123000Z'), Date.UTC(2026, 10, 22, 8, 30, 0, 123));
  assert.equal(parseInstant('2026-11-22T08:30:00.123456Z'), Date.UTC(2026, 10, 22, 8, 30, 0, 124));
  assert.equal(parseInstant('2026-11-22T08:30:00.999999999+08:00'), Date.UTC(2026, 10, 22, 0, 30, 1, 0));
  // The leap second: no time of the service falls within it, so it bounds as the next minute's start.
  assert.equal(parseInstant('2026-12-31T23:59:60Z'), Date.UTC(2027, 0, 1));
  assert.equal(parseInstant('2026-12-31T23:59:60.5Z'), Date.UTC(2027, 0, 1));
});

test('a field out of its range is no instant (the hour 24, a day its month has not, a 60th minute, a 61st second)', () => {
  for (const t of [
    '2026-11-22T24:00:00Z',
    '2026-11-22T24:00:00.000+08:00',
    '2026-02-29T00:00:00Z',
    '2026-04-31T00:00:00Z',
    '2026-00-10T00:00:00Z',
    '2026-13-01T00:00:00Z',
    '2026-11-00T00:00:00Z',
    '2026-11-22T23:60:00Z',
    '2026-11-22T23:59:61Z',
    '2026-11-22T10:00:00.Z',
    '2026-11-22 10:00:00Z',
    '2026-11-22T10:00:00+24:00',
    '2026-11-22T10:00:00+08:60',
    '2026-11-22T10:00:00',
    '2026-11-22',
    ' 2026-11-22T10:00:00Z',
  ]) {
    assert.equal(parseInstant(t), null, t);
  }
});
