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
