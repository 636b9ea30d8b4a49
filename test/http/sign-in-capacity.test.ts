/**
 * The instance's cap on sign-ins in progress (SIGN_IN_MAX_CONCURRENT, usecases/sessions.ts): beyond
 * it a console or portal sign-in is refused at once, 503 `_UNAVAILABLE` with Retry-After, before
 * anything is counted, so the refused ones are no failures of the name or the address. Sign-ins
 * from many addresses at once are the flood the per-name and per-address throttles do not see.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { type TestApp, startTestApp } from '../helpers/app.ts';
import { FakeClock } from '../helpers/events.ts';
import { PASSWORD, createOperator } from '../helpers/operators.ts';

let t: TestApp;
const CAP = 2;

before(async () => {
  t = await startTestApp({ SIGN_IN_MAX_CONCURRENT: String(CAP) }, { clock: new FakeClock() });
});
after(() => t.stop());

const signInAt = (surface: 'console' | 'portal', body: Record<string, string>, remoteAddress: string) =>
  t.server.inject({
    method: 'POST',
    url: `/${surface}/api/session`,
    remoteAddress,
    headers: { 'content-type': 'application/json' },
    payload: JSON.stringify(body),
  });

/** `n` sign-ins sent at once, each from an address of its own. */
async function flood(surface: 'console' | 'portal', n: number, body: (i: number) => Record<string, string>, net: string) {
  return Promise.all(Array.from({ length: n }, (_, i) => signInAt(surface, body(i), `${net}.${i + 1}`)));
}

function tally(rs: { statusCode: number }[]): Record<number, number> {
  const out: Record<number, number> = {};
  for (const r of rs) out[r.statusCode] = (out[r.statusCode] ?? 0) + 1;
  return out;
}

describe('the cap on sign-ins in progress', () => {
  test('console: beyond the cap, 503 ADMIN_UNAVAILABLE with Retry-After, at once', async () => {
    const rs = await flood('console', 8, (i) => ({ name: `nobody-${i}`, password: 'wrong password!' }), '203.0.113');
    assert.deepEqual(tally(rs), { 401: CAP, 503: 8 - CAP });
    for (const r of rs.filter((x) => x.statusCode === 503)) {
      assert.equal(r.json().code, 'ADMIN_UNAVAILABLE');
      assert.equal(r.json().message, 'too many sign-ins at once: try again in a moment');
      assert.equal(r.headers['retry-after'], '1');
    }
    // The slots are given back: a sign-in alone is judged.
    assert.equal((await signInAt('console', { name: 'nobody-0', password: 'wrong password!' }, '203.0.113.99')).statusCode, 401);
  });

  test('portal: the same cap, 503 PORTAL_UNAVAILABLE with Retry-After', async () => {
    const rs = await flood('portal', 6, (i) => ({ login: `nobody-${i}@shop.example`, password: 'wrong password!' }), '198.51.100');
    assert.deepEqual(tally(rs), { 401: CAP, 503: 6 - CAP });
    for (const r of rs.filter((x) => x.statusCode === 503)) {
      assert.equal(r.json().code, 'PORTAL_UNAVAILABLE');
      assert.equal(r.headers['retry-after'], '1');
    }
  });

  test('a sign-in refused by the cap is no failure of its name: the throttle counts only those judged', async () => {
    await createOperator(t, 'crowded', 'support');
    // Eight wrong passwords at once: two judged (two failures), six refused unjudged.
    const rs = await flood('console', 8, () => ({ name: 'crowded', password: 'wrong password!' }), '192.0.2');
    assert.deepEqual(tally(rs), { 401: CAP, 503: 8 - CAP });
    for (let i = 0; i < 2; i++)
      assert.equal((await signInAt('console', { name: 'crowded', password: 'wrong password!' }, '192.0.2.50')).statusCode, 401);
    // Four failures so far: the fifth is still judged, and the right password signs in.
    const ok = await signInAt('console', { name: 'crowded', password: PASSWORD }, '192.0.2.51');
    assert.equal(ok.statusCode, 200, ok.body);
  });
});
