/**
 * The merchants' portal through its API (docs/portal.md): an owner invited by an operator accepts
 * the invitation, signs in (the console's cookie, CSRF and throttle rules; TOTP when turned on, a
 * code good once), rotates the app's key while signed requests with both keys keep being accepted
 * (until the old key's overlap ends, with the service's clock moved), changes the notify URL,
 * redelivers an event and downloads a statement, with every change in the audit log, which the
 * merchant and the operators both read; each role's allowed and refused actions; the merchant's
 * users (invitations by the owner, the last owner kept).
 */
import assert from 'node:assert/strict';
import { createHash, generateKeyPairSync } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { SANDBOX_OPENID } from '../../src/providers/sandbox/sandbox.ts';
import { MERCHANT_PERMISSIONS, MERCHANT_ROLES, type MerchantPermission, merchantCan } from '../../src/domain/merchant-users.ts';
import { type Merchant, type TestApp, call, orderBody, provision, startTestApp } from '../helpers/app.ts';
import { cashierToken, openInWeChat, payByNativeCode } from '../helpers/cashier.ts';
import { FakeClock, Receiver, reopenApp, waitFor } from '../helpers/events.ts';
import { PASSWORD } from '../helpers/operators.ts';
import { type PortalSession, createPortalUser, invitationToken, portalCall, portalSignIn, totpCode } from '../helpers/portal.ts';

const clock = new FakeClock();
let t: TestApp;
let rx: Receiver;
let shop: Merchant;
let owner: PortalSession;

function keyPair(bits = 2048) {
  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: bits });
  return {
    privateKeyPem: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
    publicKeyPem: publicKey.export({ type: 'spki', format: 'pem' }).toString(),
  };
}

const signed = (mch: Merchant, method: string, url: string, body?: unknown) =>
  call(t, mch, method, url, body, { timestamp: String(Math.floor(clock.now() / 1000)) });
/** The same signed request, to another instance's server. */
const signedOn = (server: TestApp['server'], mch: Merchant, method: string, url: string) =>
  call({ ...t, server }, mch, method, url, undefined, { timestamp: String(Math.floor(clock.now() / 1000)) });

before(async () => {
  rx = await Receiver.start();
  t = await startTestApp({ WEBHOOK_ALLOW_LOOPBACK: 'true' }, { clock });
  shop = await provision(t, { name: 'Portal Shop', app: { notifyUrl: rx.url('/shop') } });
  await createPortalUser(t, shop.merchantId, 'owner@shop.test', 'owner');
  owner = await portalSignIn(t, 'owner@shop.test');
});
after(async () => {
  await t?.stop();
  await rx?.close();
});

describe('invitation, sign-in, session', () => {
  test('an operator invites; the link names the user and works once; the user signs in and out', async () => {
    const r = await t.admin('POST', `/merchants/${shop.merchantId}/users`, { login: 'Dev@Shop.test', role: 'developer' });
    assert.equal(r.statusCode, 201, r.body);
    const inv = r.json();
    assert.equal(inv.login, 'dev@shop.test');
    assert.equal(inv.status, 'INVITED');
    assert.match(inv.invitationUrl, /^https:\/\/pay\.example\.test\/portal#\/invitation\/[A-Za-z0-9_-]{43}$/);
    const token = invitationToken(inv.invitationUrl);
    const shown = await portalCall(t, null, 'GET', `/invitations/${token}`);
    assert.deepEqual(shown.json(), { login: 'dev@shop.test', merchantName: 'Portal Shop' });
    // Not signed in yet: the invited user cannot sign in.
    assert.equal((await portalCall(t, null, 'POST', '/session', { login: 'dev@shop.test', password: PASSWORD })).statusCode, 401);
    assert.equal((await portalCall(t, null, 'POST', `/invitations/${token}/accept`, { password: 'short' })).statusCode, 400);
    assert.equal((await portalCall(t, null, 'POST', `/invitations/${token}/accept`, { password: PASSWORD })).statusCode, 200);
    const again = await portalCall(t, null, 'POST', `/invitations/${token}/accept`, { password: PASSWORD });
    assert.equal(again.statusCode, 404);
    assert.equal(again.json().code, 'PORTAL_NOT_FOUND');

    const signIn = await portalCall(t, null, 'POST', '/session', { login: 'dev@shop.test', password: PASSWORD });
    assert.equal(signIn.statusCode, 200, signIn.body);
    const cookie = String(signIn.headers['set-cookie']);
    assert.match(cookie, /^__Host-mps_portal=[A-Za-z0-9_-]{43}; Max-Age=43200; Path=\/; HttpOnly; SameSite=Strict; Secure$/);
    const body = signIn.json();
    assert.equal(body.user.role, 'developer');
    assert.equal(body.merchant.merchantId, shop.merchantId);
    assert.deepEqual(
      body.permissions,
      MERCHANT_PERMISSIONS.filter((p) => merchantCan('developer', p)),
    );
    const s = { cookie: cookie.split(';')[0]!, csrfToken: body.csrfToken as string };
    assert.equal((await portalCall(t, s, 'GET', '/session')).statusCode, 200);
    // A change without the CSRF token, or from another site, is refused.
    const noCsrf = await portalCall(t, s, 'DELETE', '/session', undefined, { csrf: false });
    assert.equal(noCsrf.statusCode, 403);
    assert.equal(noCsrf.json().code, 'PORTAL_FORBIDDEN');
    const foreign = await portalCall(t, s, 'DELETE', '/session', undefined, { headers: { origin: 'https://evil.example' } });
    assert.equal(foreign.statusCode, 403);
    assert.equal((await portalCall(t, s, 'DELETE', '/session')).statusCode, 204);
    assert.equal((await portalCall(t, s, 'GET', '/session')).statusCode, 401);
    // The console's cookie is not the portal's, nor the other way round.
    assert.equal(
      (await t.server.inject({ method: 'GET', url: '/console/api/session', headers: { cookie: owner.cookie } })).statusCode,
      401,
    );
  });

  test('every error is JSON and says so: {code, message} with PORTAL_ codes and an application/json type', async () => {
    const answers = [
      await portalCall(t, null, 'GET', '/session'),
      await portalCall(t, null, 'GET', '/orders'),
      await portalCall(t, owner, 'GET', '/orders/ord_nosuchorder0000000000000'),
      await portalCall(t, owner, 'GET', '/no-such-route'),
      await t.server.inject({ method: 'POST', url: '/portal/api/session', headers: { 'content-type': 'application/json' }, payload: '{' }),
      await portalCall(t, null, 'POST', '/session', { login: 'nobody@shop.test', password: 'not the password at all' }),
    ];
    for (const r of answers) {
      assert.ok(r.statusCode >= 400 && r.statusCode < 500, `${r.statusCode} ${r.body}`);
      assert.match(String(r.headers['content-type']), /^application\/json/, `${r.statusCode} ${r.body}`);
      assert.match(r.json().code, /^PORTAL_/);
      assert.equal(typeof r.json().message, 'string');
    }
  });

  test('a sign-in or a change that is not JSON (what a cross-site form can send) is refused and changes nothing', async () => {
    const before = (await portalCall(t, owner, 'GET', `/apps/${shop.appId}`)).json();
    for (const type of ['text/plain', 'application/x-www-form-urlencoded', null]) {
      const headers: Record<string, string> = type === null ? {} : { 'content-type': type };
      const signIn = await t.server.inject({
        method: 'POST',
        url: '/portal/api/session',
        headers,
        payload: JSON.stringify({ login: 'owner@shop.test', password: PASSWORD }),
      });
      assert.equal(signIn.statusCode, 400, `${type}: ${signIn.body}`);
      assert.equal(signIn.json().code, 'PORTAL_VALIDATION_FAILED');
      assert.equal(signIn.headers['set-cookie'], undefined, 'no session');
      const change = await t.server.inject({
        method: 'PATCH',
        url: `/portal/api/apps/${shop.appId}`,
        headers: { ...headers, cookie: owner.cookie, 'x-csrf-token': owner.csrfToken },
        payload: JSON.stringify({ ipAllowlist: ['10.0.0.0/8'] }),
      });
      assert.equal(change.statusCode, 400, `${type}: ${change.body}`);
    }
    assert.deepEqual((await portalCall(t, owner, 'GET', `/apps/${shop.appId}`)).json(), before);
  });

  test('a wrong password and an unknown login get the same answer; the throttle refuses after 5 failures', async () => {
    await createPortalUser(t, shop.merchantId, 'throttled@shop.test', 'readonly');
    const wrong = await portalCall(t, null, 'POST', '/session', { login: 'throttled@shop.test', password: 'not the password at all' });
    const unknown = await portalCall(t, null, 'POST', '/session', { login: 'nobody@shop.test', password: 'not the password at all' });
    assert.equal(wrong.statusCode, 401);
    assert.deepEqual(wrong.json(), unknown.json());
    for (let i = 0; i < 4; i++)
      await portalCall(t, null, 'POST', '/session', { login: 'throttled@shop.test', password: 'wrong password again' });
    const refused = await portalCall(t, null, 'POST', '/session', { login: 'throttled@shop.test', password: PASSWORD });
    assert.equal(refused.statusCode, 429);
    assert.equal(refused.json().code, 'PORTAL_RATE_LIMITED');
    assert.ok(Number(refused.headers['retry-after']) > 0);
    // An operator of the same spelling is counted apart.
    clock.advance(16 * 60_000);
  });

  test('TOTP: set up with a code, then asked at sign-in; a code is good once; turned off with the password', async () => {
    await createPortalUser(t, shop.merchantId, 'totp@shop.test', 'finance');
    const s = await portalSignIn(t, 'totp@shop.test');
    const setup = await portalCall(t, s, 'POST', '/totp');
    assert.equal(setup.statusCode, 200, setup.body);
    const { secret, uri } = setup.json();
    assert.match(uri, /^otpauth:\/\/totp\/.*secret=/);
    const qr = await portalCall(t, s, 'GET', '/totp/qr.svg');
    assert.equal(qr.statusCode, 200);
    assert.match(qr.headers['content-type'] as string, /^image\/svg\+xml/);
    assert.equal((await portalCall(t, s, 'POST', '/totp/confirm', { code: '000000' })).statusCode, 400);
    const code = totpCode(secret, clock.now());
    assert.equal((await portalCall(t, s, 'POST', '/totp/confirm', { code })).statusCode, 204);

    const noCode = await portalCall(t, null, 'POST', '/session', { login: 'totp@shop.test', password: PASSWORD });
    assert.equal(noCode.statusCode, 401);
    assert.equal(noCode.json().code, 'PORTAL_TOTP_REQUIRED');
    // The code used to turn it on is spent; the next period's code works, once.
    const reused = await portalCall(t, null, 'POST', '/session', { login: 'totp@shop.test', password: PASSWORD, totpCode: code });
    assert.equal(reused.statusCode, 401);
    assert.equal(reused.json().code, 'PORTAL_UNAUTHORIZED');
    clock.advance(30_000);
    const next = totpCode(secret, clock.now());
    const s2 = await portalSignIn(t, 'totp@shop.test', { totpCode: next });
    assert.equal(
      (await portalCall(t, null, 'POST', '/session', { login: 'totp@shop.test', password: PASSWORD, totpCode: next })).statusCode,
      401,
    );
    assert.equal((await portalCall(t, s2, 'GET', '/session')).json().user.totpEnabled, true);
    // While it is on, a session alone cannot put another secret in its place: turning it off asks the password.
    const over = await portalCall(t, s2, 'POST', '/totp');
    assert.equal(over.statusCode, 409, over.body);
    assert.equal(over.json().code, 'PORTAL_STATE_INVALID');
    assert.equal((await portalCall(t, s2, 'POST', '/totp/confirm', { code: totpCode(secret, clock.now()) })).statusCode, 409);
    assert.equal((await portalCall(t, s2, 'POST', '/totp/disable', { currentPassword: 'not my password!!' })).statusCode, 400);
    assert.equal((await portalCall(t, s2, 'POST', '/totp/disable', { currentPassword: PASSWORD })).statusCode, 204);
    await portalSignIn(t, 'totp@shop.test');
  });
});

describe('the owner helps itself', () => {
  test('key rotation: a new key beside the old, both accepted during the overlap chosen, then only the new one', async () => {
    const next = keyPair();
    const weak = keyPair(1024);
    const refusedWeak = await portalCall(t, owner, 'POST', `/apps/${shop.appId}/keys`, { keyId: 'weak', publicKeyPem: weak.publicKeyPem });
    assert.equal(refusedWeak.statusCode, 400);
    assert.match(refusedWeak.json().message, /2048/);
    const refusedPrivate = await portalCall(t, owner, 'POST', `/apps/${shop.appId}/keys`, {
      keyId: 'priv',
      publicKeyPem: next.privateKeyPem,
    });
    assert.equal(refusedPrivate.statusCode, 400);
    // Retiring the only key is refused: add the new one first.
    const alone = await portalCall(t, owner, 'POST', `/apps/${shop.appId}/keys/${shop.keyId}/retire`, { afterSeconds: 3600 });
    assert.equal(alone.statusCode, 409);

    const old: Merchant = shop;
    const fresh: Merchant = { ...shop, keyId: 'key-2', privateKeyPem: next.privateKeyPem };
    // Signed requests keep flowing with the old key while the new one is added and the old one retired.
    let failures = 0;
    let sent = 0;
    const flow = async (mch: Merchant, until: () => boolean) => {
      while (!until()) {
        const r = await signed(mch, 'GET', '/api/open/v1/settlement/accounts');
        sent++;
        if (r.statusCode !== 200) failures++;
      }
    };
    let done = false;
    const oldFlow = flow(old, () => done);
    const added = await portalCall(t, owner, 'POST', `/apps/${shop.appId}/keys`, { keyId: 'key-2', publicKeyPem: next.publicKeyPem });
    assert.equal(added.statusCode, 201, added.body);
    // The new key is accepted at once, beside the old one.
    const newFlow = flow(fresh, () => done);
    const retired = await portalCall(t, owner, 'POST', `/apps/${shop.appId}/keys/${shop.keyId}/retire`, { afterSeconds: 3600 });
    assert.equal(retired.statusCode, 200, retired.body);
    assert.equal(
      retired.json().validUntil,
      new Date(clock.now() + 3600_000).toISOString().slice(0, 19) + retired.json().validUntil.slice(19),
    );
    await new Promise((r) => setTimeout(r, 300));
    done = true;
    await Promise.all([oldFlow, newFlow]);
    assert.ok(sent >= 4, `${sent} requests`);
    assert.equal(failures, 0, `${failures} of ${sent} signed requests failed during the rotation`);

    const keys = (await portalCall(t, owner, 'GET', `/apps/${shop.appId}`)).json().keys as { keyId: string; valid: boolean }[];
    assert.deepEqual(
      keys.map((k) => [k.keyId, k.valid]),
      [
        [shop.keyId, true],
        ['key-2', true],
      ],
    );
    // The overlap ends: the old key is refused like an unknown one, the new one goes on.
    clock.advance(3601_000);
    owner = await portalSignIn(t, 'owner@shop.test'); // an hour unused: the session is over
    assert.equal((await signed(old, 'GET', '/api/open/v1/settlement/accounts')).statusCode, 401);
    assert.equal((await signed(fresh, 'GET', '/api/open/v1/settlement/accounts')).statusCode, 200);
    // Nothing retires the last valid key.
    assert.equal((await portalCall(t, owner, 'POST', `/apps/${shop.appId}/keys/key-2/retire`, { afterSeconds: 0 })).statusCode, 409);
    shop = fresh;

    // In the audit log, read by the merchant and by the operators, with the key's fingerprint.
    const der = (await import('node:crypto')).createPublicKey(next.publicKeyPem).export({ type: 'spki', format: 'der' });
    const fp = `SHA256:${createHash('sha256').update(der).digest('base64')}`;
    const mine = (await portalCall(t, owner, 'GET', '/audit')).json().entries as {
      action: string;
      actor: string;
      after: Record<string, unknown>;
    }[];
    const add = mine.find((e) => e.action === 'appKey.add')!;
    assert.equal(add.actor, `owner@shop.test (merchant ${shop.merchantId})`);
    assert.equal(add.after.fingerprint, fp);
    assert.ok(mine.some((e) => e.action === 'appKey.retire'));
    const ops = (await t.admin('GET', `/audit?entityType=appKey`)).json().entries as {
      action: string;
      actorKind: string;
      merchantId: string;
    }[];
    assert.ok(ops.some((e) => e.action === 'appKey.retire' && e.actorKind === 'MERCHANT_USER' && e.merchantId === shop.merchantId));
    // Nor two retirements one after the other: a key whose own retirement is set does not count.
    const fourth = await portalCall(t, owner, 'POST', `/apps/${shop.appId}/keys`, {
      keyId: 'key-4',
      publicKeyPem: generateKeyPairSync('rsa', { modulusLength: 2048 }).publicKey.export({ type: 'spki', format: 'pem' }),
    });
    assert.equal(fourth.statusCode, 201, fourth.body);
    assert.equal((await portalCall(t, owner, 'POST', `/apps/${shop.appId}/keys/key-2/retire`, { afterSeconds: 86_400 })).statusCode, 200);
    const both = await portalCall(t, owner, 'POST', `/apps/${shop.appId}/keys/key-4/retire`, { afterSeconds: 3600 });
    assert.equal(both.statusCode, 409, both.body);
    // Taken back: key-2 has no end again, so key-4 may be retired.
    assert.equal((await portalCall(t, owner, 'POST', `/apps/${shop.appId}/keys/key-2/retire`, { afterSeconds: null })).statusCode, 200);
    assert.equal((await portalCall(t, owner, 'POST', `/apps/${shop.appId}/keys/key-4/retire`, { afterSeconds: 0 })).statusCode, 200);
  });

  test('a key added through one instance is accepted at once by another, which had just refused it', async () => {
    const other = await reopenApp(t, clock);
    try {
      const k = keyPair();
      const third: Merchant = { ...shop, keyId: 'key-3', privateKeyPem: k.privateKeyPem };
      const onOther = () => signedOn(other.server, third, 'GET', '/api/open/v1/settlement/accounts');
      assert.equal((await onOther()).statusCode, 401);
      const added = await portalCall(t, owner, 'POST', `/apps/${shop.appId}/keys`, { keyId: 'key-3', publicKeyPem: k.publicKeyPem });
      assert.equal(added.statusCode, 201, added.body);
      assert.equal((await onOther()).statusCode, 200);
    } finally {
      await other.close();
    }
  });

  test('the notify URL and the IP allowlist: changed, checked, audited', async () => {
    const bad = await portalCall(t, owner, 'PATCH', `/apps/${shop.appId}`, { notifyUrl: 'http://example.com/hook' });
    assert.equal(bad.statusCode, 400);
    assert.equal((await portalCall(t, owner, 'PATCH', `/apps/${shop.appId}`, { rateLimitPerSecond: 5 })).statusCode, 400);
    const r = await portalCall(t, owner, 'PATCH', `/apps/${shop.appId}`, { notifyUrl: rx.url('/moved'), ipAllowlist: ['127.0.0.0/8'] });
    assert.equal(r.statusCode, 200, r.body);
    assert.equal(r.json().notifyUrl, rx.url('/moved'));
    const entries = (await portalCall(t, owner, 'GET', '/audit?action=app.update')).json().entries;
    assert.equal(entries[0].after.notifyUrl, rx.url('/moved'));
    assert.equal((await signed(shop, 'GET', '/api/open/v1/settlement/accounts')).statusCode, 200);
  });

  test('an order, its event redelivered (limited as the merchant event log is), its statement downloaded', async () => {
    t.workers.start();
    const body = orderBody();
    const c = await signed(shop, 'POST', '/api/open/v1/payments', body);
    assert.equal(c.statusCode, 201, c.body);
    const orderId = c.json().openOrderId as string;
    assert.equal((await t.sandbox('POST', `/payments/${orderId}/pay`)).statusCode, 200);
    const list = await portalCall(t, owner, 'GET', '/orders');
    assert.equal(list.json().orders[0].openOrderId, orderId);
    const detail = await waitFor('the event delivered', async () => {
      const d = (await portalCall(t, owner, 'GET', `/orders/${orderId}`)).json();
      return d.events[0]?.status === 'DELIVERED' ? d : null;
    });
    assert.equal(detail.status, 'SUCCEEDED');
    assert.equal(detail.attempts.length, 1);
    const eventId = detail.events[0].eventId as string;
    const before = rx.at('/moved').length;
    const again = await portalCall(t, owner, 'POST', `/events/${eventId}/redeliver`);
    assert.equal(again.statusCode, 202, again.body);
    await waitFor('redelivered', async () => rx.at('/moved').length > before);
    const tooSoon = await portalCall(t, owner, 'POST', `/events/${eventId}/redeliver`);
    assert.equal(tooSoon.statusCode, 429);
    assert.ok(Number(tooSoon.headers['retry-after']) > 0);
    await t.workers.stop();

    const day = new Date(clock.now() + 8 * 3600_000).toISOString().slice(0, 10);
    const early = await portalCall(t, owner, 'GET', `/apps/${shop.appId}/statements/${day}`);
    assert.equal(early.statusCode, 409);
    clock.advance(26 * 3600_000);
    owner = await portalSignIn(t, 'owner@shop.test');
    const summary = await portalCall(t, owner, 'GET', `/apps/${shop.appId}/statements/${day}`);
    assert.equal(summary.statusCode, 200, summary.body);
    const file = await portalCall(t, owner, 'GET', `/apps/${shop.appId}/statements/${day}/file`);
    assert.equal(file.statusCode, 200);
    assert.match(String(file.headers['content-disposition']), /attachment; filename=".*\.csv"/);
    assert.equal(createHash('sha256').update(file.rawPayload).digest('hex'), summary.json().sha256);
    assert.match(file.body, new RegExp(orderId));
  });
});

describe('an order paid through a provider trade', () => {
  test("the detail lists each attempt's trades (product, number, state, made, paid), as the admin API does; never the payer", async () => {
    const c = await signed(shop, 'POST', '/api/open/v1/payments', orderBody({ channel: 'WECHAT_H5', amountFen: 1290 }));
    assert.equal(c.statusCode, 201, c.body);
    const { openOrderId, payUrl } = c.json() as { openOrderId: string; payUrl: string };
    // Inside WeChat (the sandbox's authorization: its one WeChat user), then on a computer (a Native code), paid.
    const token = cashierToken(payUrl);
    await openInWeChat(t, token);
    await payByNativeCode(t, token);

    const detail = await portalCall(t, owner, 'GET', `/orders/${openOrderId}`);
    assert.equal(detail.statusCode, 200, detail.body);
    const trades = detail.json().attempts[0].trades as Record<string, string | null>[];
    assert.deepEqual(
      trades.map((x) => [x.product, x.state, Object.keys(x).sort().join()]),
      [
        ['JSAPI', 'OPEN', 'createdAt,paidAt,product,state,tradeNo'],
        ['NATIVE', 'PAID', 'createdAt,paidAt,product,state,tradeNo'],
      ],
    );
    const [jsapi, native] = trades as [Record<string, string | null>, Record<string, string | null>];
    assert.match(native.tradeNo!, /^trd_/);
    assert.equal(jsapi.paidAt, null);
    assert.ok(Date.parse(native.paidAt!) >= Date.parse(native.createdAt!));
    const admin = (await t.admin('GET', `/orders/${openOrderId}`)).json();
    assert.deepEqual(admin.attempts[0].trades, trades, 'the same view in the console');
    for (const body of [detail.body, JSON.stringify(admin)]) assert.ok(!body.includes(SANDBOX_OPENID), 'no openid');
  });
});

describe('roles', () => {
  /** Every route of the portal's API that a role may or may not call, with the permission it needs. */
  const ROUTES: [string, string, MerchantPermission, unknown?][] = [
    ['GET', '/orders', 'orders.read'],
    ['GET', '/refunds', 'orders.read'],
    ['GET', '/events', 'events.read'],
    ['POST', '/events/evt_0000000000/redeliver', 'events.redeliver'],
    ['GET', '/apps', 'apps.read'],
    ['GET', '/platform-keys', 'apps.read'],
    ['PATCH', '/apps/APP', 'apps.write', { ipAllowlist: [] }],
    ['POST', '/apps/APP/keys', 'keys.write', { keyId: 'x', publicKeyPem: 'nope' }],
    ['GET', '/apps/APP/statements/2020-01-01', 'statements.read'],
    ['GET', '/settlement', 'settlement.read'],
    ['GET', '/audit', 'audit.read'],
    ['GET', '/users', 'users.manage'],
    ['POST', '/users', 'users.manage', { login: 'x', role: 'readonly' }],
  ];

  for (const role of MERCHANT_ROLES) {
    test(`${role}: what the role table allows, and 403 for the rest`, async () => {
      const login = `role-${role}@shop.test`;
      await createPortalUser(t, shop.merchantId, login, role);
      const s = await portalSignIn(t, login);
      for (const [method, path, permission, body] of ROUTES) {
        const r = await portalCall(t, s, method, path.replace('APP', shop.appId), body);
        if (merchantCan(role, permission)) assert.notEqual(r.statusCode, 403, `${role} ${method} ${path}: ${r.body}`);
        else {
          assert.equal(r.statusCode, 403, `${role} ${method} ${path}: ${r.body}`);
          assert.equal(r.json().code, 'PORTAL_FORBIDDEN');
        }
      }
    });
  }
});

describe('the merchant’s users', () => {
  test('the owner invites, changes a role and disables; the last owner stays; an operator sees them', async () => {
    const inv = await portalCall(t, owner, 'POST', '/users', { login: 'second@shop.test', role: 'owner' });
    assert.equal(inv.statusCode, 201, inv.body);
    const taken = await portalCall(t, owner, 'POST', '/users', { login: 'second@shop.test', role: 'readonly' });
    assert.equal(taken.statusCode, 409);
    const me = (await portalCall(t, owner, 'GET', '/session')).json().user.userId as string;
    const second = inv.json().userId as string;
    assert.equal((await portalCall(t, owner, 'PATCH', `/users/${second}`, { status: 'DISABLED' })).statusCode, 200);
    // (and the owner the role tests made)
    const others = (await portalCall(t, owner, 'GET', '/users')).json().users as { userId: string; login: string }[];
    const roleOwner = others.find((u) => u.login === 'role-owner@shop.test')!.userId;
    assert.equal((await portalCall(t, owner, 'PATCH', `/users/${roleOwner}`, { role: 'readonly' })).statusCode, 200);
    const last = await portalCall(t, owner, 'PATCH', `/users/${me}`, { role: 'readonly' });
    assert.equal(last.statusCode, 409);
    assert.match(last.json().message, /last owner/);
    const ops = await t.admin('GET', `/merchants/${shop.merchantId}/users`);
    assert.ok(
      (ops.json().users as { login: string; status: string }[]).some((u) => u.login === 'second@shop.test' && u.status === 'DISABLED'),
    );
    // A new link for an active user is a password reset: its sessions end, its password stops working.
    const dev = (ops.json().users as { login: string; userId: string }[]).find((u) => u.login === 'role-developer@shop.test')!;
    const devSession = await portalSignIn(t, 'role-developer@shop.test');
    const reset = await t.admin('POST', `/merchants/${shop.merchantId}/users/${dev.userId}/invitation`);
    assert.equal(reset.statusCode, 200, reset.body);
    assert.equal((await portalCall(t, devSession, 'GET', '/session')).statusCode, 401);
    const old = await portalCall(t, null, 'POST', '/session', { login: 'role-developer@shop.test', password: PASSWORD });
    assert.equal(old.statusCode, 401, old.body);
    assert.equal(old.json().code, 'PORTAL_UNAUTHORIZED');
    // The link sets a new one.
    const token = new URL(reset.json().invitationUrl as string).hash.split('/').pop()!;
    const fresh = `${PASSWORD}-new`;
    assert.equal((await portalCall(t, null, 'POST', `/invitations/${token}/accept`, { password: fresh })).statusCode, 200);
    const again = await portalCall(t, null, 'POST', '/session', { login: 'role-developer@shop.test', password: fresh });
    assert.equal(again.statusCode, 200, again.body);
  });
});
