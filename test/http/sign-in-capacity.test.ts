/**
 * The instance's cap on sign-ins in progress (SIGN_IN_MAX_CONCURRENT, usecases/sessions.ts): beyond
 * it a console or portal sign-in is refused at once, 503 `_UNAVAILABLE` with Retry-After, before
 * anything is counted, so the refused ones are no failures of the name or the address. Sign-ins
 * from many addresses at once are the flood the per-name and per-address throttles do not see.
 * Every other password hash (an account created, a password set or changed, the current password
 * asked again) takes the same slots: beyond them, the same 503 with Retry-After, nothing written.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { type TestApp, startTestApp } from '../helpers/app.ts';
import { FakeClock } from '../helpers/events.ts';
import { PASSWORD, asSession, createOperator, signIn } from '../helpers/operators.ts';
import { createPortalUser, invitationToken, portalCall, portalSignIn } from '../helpers/portal.ts';

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

describe('other password hashes take the same slots', () => {
  function unavailable(rs: { statusCode: number; headers: Record<string, unknown>; json(): { code: string } }[], code: string) {
    for (const r of rs.filter((x) => x.statusCode === 503)) {
      assert.equal(r.json().code, code);
      assert.equal(r.headers['retry-after'], '1');
    }
  }

  test('operators created at once: as many as the slots, the others 503 ADMIN_UNAVAILABLE with Retry-After and not created', async () => {
    const rs = await Promise.all(
      Array.from({ length: 6 }, (_, i) => t.admin('POST', '/operators', { name: `burst-${i}`, role: 'support', password: PASSWORD })),
    );
    assert.deepEqual(tally(rs), { 201: CAP, 503: 6 - CAP });
    unavailable(rs, 'ADMIN_UNAVAILABLE');
    const names = ((await t.admin('GET', '/operators')).json().operators as { name: string }[]).map((o) => o.name);
    assert.equal(names.filter((n) => n.startsWith('burst-')).length, CAP);
  });

  test("operators' passwords set at once by an admin, and changed by their owners: the same cap", async () => {
    const o = await createOperator(t, 'changer', 'support');
    const set = await Promise.all(
      Array.from({ length: 6 }, () => t.admin('PATCH', `/operators/${o.operatorId}`, { password: `${PASSWORD}!` })),
    );
    assert.deepEqual(tally(set), { 200: CAP, 503: 6 - CAP });
    unavailable(set, 'ADMIN_UNAVAILABLE');
    const s = await signIn(t, 'changer', `${PASSWORD}!`);
    const own = await Promise.all(
      Array.from({ length: 6 }, () =>
        asSession(t, s, 'POST', '/console/api/password', { currentPassword: 'not the password!', newPassword: `${PASSWORD}?` }),
      ),
    );
    assert.deepEqual(tally(own), { 400: CAP, 503: 6 - CAP });
    unavailable(own, 'ADMIN_UNAVAILABLE');
  });

  test('portal: invitations accepted and passwords changed at once, the same cap, 503 PORTAL_UNAVAILABLE', async () => {
    const m = await t.admin('POST', '/merchants', { name: 'Capacity Shop', entityType: 'CORPORATE' });
    const merchantId = m.json().merchantId as string;
    const tokens = [];
    for (let i = 0; i < 6; i++) {
      const r = await t.admin('POST', `/merchants/${merchantId}/users`, { login: `cap-${i}@shop.example`, role: 'developer' });
      assert.equal(r.statusCode, 201, r.body);
      tokens.push(invitationToken(r.json().invitationUrl));
    }
    const accepted = await Promise.all(
      tokens.map((tk) => portalCall(t, null, 'POST', `/invitations/${tk}/accept`, { password: PASSWORD })),
    );
    assert.deepEqual(tally(accepted), { 200: CAP, 503: 6 - CAP });
    unavailable(accepted, 'PORTAL_UNAVAILABLE');
    // A refused acceptance changed nothing: its link still works.
    const again = tokens[accepted.findIndex((r) => r.statusCode === 503)]!;
    assert.equal((await portalCall(t, null, 'POST', `/invitations/${again}/accept`, { password: PASSWORD })).statusCode, 200);

    await createPortalUser(t, merchantId, 'owner-cap@shop.example', 'owner');
    const s = await portalSignIn(t, 'owner-cap@shop.example');
    const own = await Promise.all(
      Array.from({ length: 6 }, () =>
        portalCall(t, s, 'POST', '/password', { currentPassword: 'not the password!', newPassword: `${PASSWORD}?` }),
      ),
    );
    assert.deepEqual(tally(own), { 400: CAP, 503: 6 - CAP });
    unavailable(own, 'PORTAL_UNAVAILABLE');
  });
});
