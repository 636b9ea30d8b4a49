// Identifiers and random strings (src/domain/ids.ts): their forms, no repeats, and symbols drawn
// uniformly from the pooled random bytes.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { newId, randomAlnum } from '../../src/domain/ids.ts';

test('every identifier has its prefix and form, and 20,000 of each are distinct', () => {
  const forms: [() => string, RegExp][] = [
    [newId.merchant, /^mch_[0-9a-hjkmnp-tv-z]{16}$/],
    [newId.app, /^svcop_[A-Za-z0-9]{16}$/],
    [newId.order, /^ord_[0-9a-hjkmnp-tv-z]{24}$/],
    [newId.attempt, /^att_[0-9a-hjkmnp-tv-z]{24}$/],
    [newId.refund, /^rf_[0-9a-hjkmnp-tv-z]{24}$/],
    [newId.event, /^evt_[0-9a-hjkmnp-tv-z]{24}$/],
    [newId.gateway, /^gw_[0-9a-hjkmnp-tv-z]{24}$/],
    [newId.cashierToken, /^[A-Za-z0-9_-]{43}$/],
    [newId.nonce32, /^[A-Za-z0-9]{32}$/],
  ];
  for (const [make, form] of forms) {
    const seen = new Set<string>();
    for (let i = 0; i < 20_000; i++) {
      const id = make();
      assert.match(id, form);
      seen.add(id);
    }
    assert.equal(seen.size, 20_000, String(form));
  }
});

test('the ids of the large tables and the cashier token lead with the minute they were made, in an order that sorts by time', () => {
  const b32 = '0123456789abcdefghjkmnpqrstvwxyz';
  const decode = (p: string) => [...p].reduce((n, c) => n * 32 + b32.indexOf(c), 0);
  const before = Math.floor(Date.now() / 60_000);
  const made = [newId.order(), newId.attempt(), newId.trade(), newId.refund(), newId.event(), newId.gateway()].map((id) =>
    id.slice(id.indexOf('_') + 1),
  );
  const token = newId.cashierToken();
  const after = Math.floor(Date.now() / 60_000);
  for (const id of [...made, token]) {
    const minute = decode(id.slice(0, 6));
    assert.ok(minute >= before && minute <= after, `${id}: minute ${minute}, now ${before}`);
  }
  // Later minutes sort later (the symbols are in ASCII order), whatever the random rest.
  const enc = (m: number) => Array.from({ length: 6 }, (_, i) => b32[Math.floor(m / 32 ** (5 - i)) % 32]).join('');
  const minutes = [0, 1, 31, 32, 1023, 1024, 29_000_000, 29_000_001, 2 ** 30 - 1];
  const sorted = minutes.map(enc).slice().sort();
  assert.deepEqual(sorted, minutes.map(enc));
  assert.equal(decode(enc(29_000_000)), 29_000_000);
});

test('randomAlnum draws the 62 symbols uniformly (chi-square over 620,000 symbols)', () => {
  const counts = new Map<string, number>();
  for (let i = 0; i < 10_000; i++) for (const c of randomAlnum(62)) counts.set(c, (counts.get(c) ?? 0) + 1);
  assert.equal(counts.size, 62);
  const expected = 10_000;
  let chi = 0;
  for (const n of counts.values()) chi += (n - expected) ** 2 / expected;
  // 61 degrees of freedom: the 99.99th percentile is ~116; a modulo bias (256 % 62) would give thousands.
  assert.ok(chi < 116, `chi-square ${chi.toFixed(1)}`);
  assert.equal(randomAlnum(0), '');
  assert.equal(randomAlnum(5000).length, 5000);
});
