/**
 * A merchant never sees or changes another merchant's data through the portal (docs/portal.md):
 * the owner of one merchant calls every route of the portal's API with the ids of another
 * merchant's order, event, app, key, statement and user, and gets the neutral 404 (or, for a list
 * filtered by another merchant's app, nothing), with nothing changed. The routes tried are checked
 * against the routes the service mounts, so a new route cannot be left out.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { type Merchant, type TestApp, call, merchantKeyPair, orderBody, provision, startTestApp } from '../helpers/app.ts';
import { PORTAL_ROUTES } from '../../src/portal/portal.ts';
import { createPortalUser, portalCall, portalSignIn, type PortalSession } from '../helpers/portal.ts';

let t: TestApp;
let mine: Merchant;
let theirs: Merchant;
let owner: PortalSession;
let theirOrder: string;
let theirEvent: string;
let theirUser: string;

before(async () => {
  t = await startTestApp();
  mine = await provision(t, { name: 'Mine' });
  theirs = await provision(t, { name: 'Theirs', app: { notifyUrl: 'https://theirs.example.com/hook' } });
  await createPortalUser(t, mine.merchantId, 'owner@mine.test', 'owner');
  theirUser = (await createPortalUser(t, theirs.merchantId, 'owner@theirs.test', 'owner')).userId;
  owner = await portalSignIn(t, 'owner@mine.test');
  const c = await call(t, theirs, 'POST', '/api/open/v1/payments', orderBody());
  assert.equal(c.statusCode, 201, c.body);
  theirOrder = c.json().openOrderId;
  assert.equal((await t.sandbox('POST', `/payments/${theirOrder}/pay`)).statusCode, 200);
  const ev = await t.admin('GET', `/orders/${theirOrder}`);
  theirEvent = ev.json().events[0].eventId;
});
after(async () => {
  await t?.stop();
});

/** Every route of the portal's API, with another merchant's ids where it takes one. */
function routes(): { method: string; url: string; route: string; body?: unknown; list?: string }[] {
  const app = theirs.appId;
  const day = '2020-01-01';
  return [
    { method: 'GET', route: '/orders/:openOrderId', url: `/orders/${theirOrder}` },
    { method: 'GET', route: '/orders', url: `/orders?openOrderId=${theirOrder}`, list: 'orders' },
    { method: 'GET', route: '/refunds', url: `/refunds?appId=${app}`, list: 'refunds' },
    { method: 'GET', route: '/events', url: `/events?appId=${app}`, list: 'events' },
    { method: 'GET', route: '/events/:eventId', url: `/events/${theirEvent}` },
    { method: 'POST', route: '/events/:eventId/redeliver', url: `/events/${theirEvent}/redeliver` },
    { method: 'GET', route: '/apps/:appId', url: `/apps/${app}` },
    { method: 'PATCH', route: '/apps/:appId', url: `/apps/${app}`, body: { notifyUrl: 'https://mine.example.com/stolen' } },
    {
      method: 'POST',
      route: '/apps/:appId/keys',
      url: `/apps/${app}/keys`,
      body: { keyId: 'planted', publicKeyPem: merchantKeyPair().publicKeyPem },
    },
    {
      method: 'POST',
      route: '/apps/:appId/keys/:keyId/retire',
      url: `/apps/${app}/keys/${theirs.keyId}/retire`,
      body: { afterSeconds: 0 },
    },
    { method: 'GET', route: '/apps/:appId/statements/:day', url: `/apps/${app}/statements/${day}` },
    { method: 'GET', route: '/apps/:appId/statements/:day/file', url: `/apps/${app}/statements/${day}/file` },
    { method: 'PATCH', route: '/users/:userId', url: `/users/${theirUser}`, body: { status: 'DISABLED' } },
    { method: 'POST', route: '/users/:userId/invitation', url: `/users/${theirUser}/invitation` },
  ];
}

/** Routes that take no other merchant's id: what they answer is the caller's own merchant's only. */
const OWN_ONLY = [
  'GET /session',
  'POST /session',
  'DELETE /session',
  'POST /password',
  'GET /invitations/:token',
  'POST /invitations/:token/accept',
  'POST /totp',
  'GET /totp/qr.svg',
  'POST /totp/confirm',
  'POST /totp/disable',
  'GET /apps',
  'GET /platform-keys',
  'GET /settlement',
  'GET /audit',
  'GET /users',
  'POST /users',
];

test('every route of the portal is tried here or takes no id of another merchant', () => {
  const mounted = PORTAL_ROUTES;
  assert.ok(mounted.size > 20, [...mounted].join(', '));
  const covered = new Set([...routes().map((r) => `${r.method} ${r.route}`), ...OWN_ONLY]);
  assert.deepEqual([...mounted].filter((r) => !covered.has(r)).sort(), []);
});

test('another merchant’s ids: the neutral 404, or nothing listed, and nothing changed', async () => {
  for (const r of routes()) {
    const res = await portalCall(t, owner, r.method, r.url, r.body);
    if (r.list) {
      assert.equal(res.statusCode, 200, `${r.method} ${r.url}: ${res.body}`);
      assert.deepEqual(res.json()[r.list], [], `${r.method} ${r.url}`);
    } else {
      assert.equal(res.statusCode, 404, `${r.method} ${r.url}: ${res.body}`);
      assert.equal(res.json().code, 'PORTAL_NOT_FOUND');
    }
  }
  // Nothing of theirs changed: the app, its keys, the user.
  const app = (await t.admin('GET', `/apps/${theirs.appId}`)).json();
  assert.equal(app.notifyUrl, 'https://theirs.example.com/hook');
  const keys = (await t.admin('GET', `/apps/${theirs.appId}/keys`)).json().keys as { keyId: string; validUntil: string | null }[];
  assert.deepEqual(
    keys.map((k) => [k.keyId, k.validUntil]),
    [[theirs.keyId, null]],
  );
  const users = (await t.admin('GET', `/merchants/${theirs.merchantId}/users`)).json().users as { status: string }[];
  assert.deepEqual(
    users.map((u) => u.status),
    ['ACTIVE'],
  );
  // Their requests still go through, and their audit log has no entry of ours.
  assert.equal((await call(t, theirs, 'GET', '/api/open/v1/settlement/accounts')).statusCode, 200);
  const theirsSession = await portalSignIn(t, 'owner@theirs.test');
  const entries = (await portalCall(t, theirsSession, 'GET', '/audit')).json().entries as { actor: string }[];
  assert.ok(entries.every((e) => !e.actor.includes('owner@mine.test')));
  // Our own lists do not show theirs either.
  for (const path of ['/orders', '/events', '/refunds']) {
    const res = (await portalCall(t, owner, 'GET', path)).json();
    assert.equal(JSON.stringify(res).includes(theirs.appId), false, path);
  }
  const apps = (await portalCall(t, owner, 'GET', '/apps')).json().apps as { appId: string }[];
  assert.deepEqual(
    apps.map((a) => a.appId),
    [mine.appId],
  );
});
