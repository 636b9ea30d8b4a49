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

test('a field out of its range is no instant (the hour 24, a day its month has not, a 60th minute or second)', () => {
  for (const t of [
    '2026-11-22T24:00:00Z',
    '2026-11-22T24:00:00.000+08:00',
    '2026-02-29T00:00:00Z',
    '2026-04-31T00:00:00Z',
    '2026-00-10T00:00:00Z',
    '2026-13-01T00:00:00Z',
    '2026-11-00T00:00:00Z',
    '2026-11-22T23:60:00Z',
    '2026-11-22T23:59:60Z',
    '2026-11-22T10:00:00+24:00',
    '2026-11-22T10:00:00+08:60',
    '2026-11-22T10:00:00',
    '2026-11-22',
    ' 2026-11-22T10:00:00Z',
  ]) {
    assert.equal(parseInstant(t), null, t);
  }
});
