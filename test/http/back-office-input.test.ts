/**
 * Back-office input that PostgreSQL cannot take, concurrent policy changes, and odd provider
 * notifications: each a clear 4xx that changes nothing (never a 503 from a database error), and
 * concurrent IP-policy changes of different fields all kept.
 */
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { after, before, test } from 'node:test';
import { type TestApp, call, merchantKeyPair, orderBody, provision, startTestApp } from '../helpers/app.ts';

let t: TestApp;
before(async () => {
  t = await startTestApp();
});
after(() => t.stop());

function refused(r: { statusCode: number; body: string }, status: number, code: string, re?: RegExp): void {
  assert.equal(r.statusCode, status, r.body);
  const b = JSON.parse(r.body) as Record<string, unknown>;
  assert.deepEqual(Object.keys(b).sort(), ['code', 'message']);
  assert.equal(b.code, code);
  if (re) assert.match(String(b.message), re);
}

async function rowCounts(): Promise<string> {
  const r = await t.svc.db.query(
    `SELECT (SELECT count(*) FROM merchants) m, (SELECT count(*) FROM apps) a, (SELECT count(*) FROM app_keys) k,
            (SELECT count(*) FROM orders) o, (SELECT count(*) FROM events) e, (SELECT count(*) FROM platform_settings WHERE name = 'ip_policy') p`,
  );
  return JSON.stringify(r.rows[0]);
}

test('a path parameter with U+0000 names nothing: 404 ADMIN_NOT_FOUND on every back-office route, nothing changed', async () => {
  const before = await rowCounts();
  const pem = '-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n';
  const cases: [string, string, unknown?][] = [
    ['GET', '/merchants/%00'],
    ['GET', '/merchants/a%00b'],
    ['POST', '/merchants/%00/apps', { name: 'x' }],
    ['GET', '/merchants/%00/settlement-accounts'],
    ['GET', '/merchants/%00/allocation'],
    ['GET', '/merchants/%00/fee-rule'],
    ['GET', '/apps/%00'],
    ['PATCH', '/apps/%00', { rateLimitPerSecond: 5 }],
    ['GET', '/apps/%00/keys'],
    ['POST', '/apps/%00/keys', { publicKeyPem: pem }],
    ['PATCH', '/apps/app_x/keys/%00', { status: 'REVOKED' }],
    ['GET', '/orders/%00'],
    ['POST', '/orders/%00/close'],
    ['GET', '/events/%00'],
    ['POST', '/events/%00/redeliver'],
  ];
  for (const [method, url, body] of cases) {
    refused(await t.admin(method, url, body), 404, 'ADMIN_NOT_FOUND');
  }
  for (const action of ['pay', 'fail', 'expire']) {
    refused(await t.sandbox('POST', `/payments/%00/${action}`), 404, 'ADMIN_NOT_FOUND');
  }
  assert.equal(await rowCounts(), before);
});

test('a query value with U+0000 is refused: 400 ADMIN_VALIDATION_FAILED naming the parameter', async () => {
  refused(await t.admin('GET', '/events?appId=%00'), 400, 'ADMIN_VALIDATION_FAILED', /appId/);
  refused(await t.admin('GET', '/events?appId=app_1&appId=a%00'), 400, 'ADMIN_VALIDATION_FAILED', /appId/);
});

test('concurrent IP-policy changes of different fields are all kept (no lost update)', async () => {
  const reset = { trustedProxies: [], allowlist: null, denylist: [], allowIpv4: true, allowIpv6: true };
  for (let round = 0; round < 5; round++) {
    assert.equal((await t.admin('PUT', '/platform/ip-policy', reset)).statusCode, 200);
    const rs = await Promise.all([
      t.admin('PUT', '/platform/ip-policy', { denylist: ['203.0.113.0/24'] }),
      t.admin('PUT', '/platform/ip-policy', { trustedProxies: ['10.9.0.0/16'] }),
      t.admin('PUT', '/platform/ip-policy', { allowIpv6: false }),
      t.admin('PUT', '/platform/ip-policy', { allowlist: ['198.51.100.0/24', '127.0.0.0/8', '::1/128'] }),
    ]);
    for (const r of rs) assert.equal(r.statusCode, 200, r.body);
    const got = (await t.admin('GET', '/platform/ip-policy')).json();
    assert.deepEqual(got.denylist, ['203.0.113.0/24'], `round ${round}`);
    assert.deepEqual(got.trustedProxies, ['10.9.0.0/16'], `round ${round}`);
    assert.equal(got.allowIpv6, false, `round ${round}`);
    assert.deepEqual(got.allowlist, ['198.51.100.0/24', '127.0.0.0/8', '::1/128'], `round ${round}`);
  }
  assert.equal((await t.admin('PUT', '/platform/ip-policy', reset)).statusCode, 200);
});

test('an IP-policy change that does not compile changes nothing, even on a database that never stored one', async () => {
  await t.svc.db.query(`DELETE FROM platform_settings WHERE name = 'ip_policy'`);
  const r = await t.admin('PUT', '/platform/ip-policy', { denylist: ['not-a-cidr'] });
  assert.equal(r.statusCode, 400, r.body);
  const rows = await t.svc.db.query(`SELECT 1 FROM platform_settings WHERE name = 'ip_policy'`);
  assert.equal(rows.rowCount, 0);
});

test('an IP policy that would refuse every source (both families off) is 400 and changes nothing, in one change or in two', async () => {
  const reset = { trustedProxies: [], allowlist: null, denylist: [], allowIpv4: true, allowIpv6: true };
  assert.equal((await t.admin('PUT', '/platform/ip-policy', reset)).statusCode, 200);
  refused(
    await t.admin('PUT', '/platform/ip-policy', { allowIpv4: false, allowIpv6: false }),
    400,
    'ADMIN_VALIDATION_FAILED',
    /both be false/,
  );
  assert.equal((await t.admin('PUT', '/platform/ip-policy', { allowIpv6: false })).statusCode, 200);
  refused(await t.admin('PUT', '/platform/ip-policy', { allowIpv4: false }), 400, 'ADMIN_VALIDATION_FAILED', /both be false/);
  const got = (await t.admin('GET', '/platform/ip-policy')).json();
  assert.equal(got.allowIpv4, true);
  assert.equal(got.allowIpv6, false);
  assert.equal((await t.admin('PUT', '/platform/ip-policy', reset)).statusCode, 200);
});

test('a correctly signed provider notification that is not an object, or names an id with U+0000: 400, not 503', async () => {
  const url = '/api/provider/v1/notifications/sandbox';
  const post = (body: string, sig: string) =>
    t.server.inject({ method: 'POST', url, headers: { 'content-type': 'application/json', 'x-sandbox-signature': sig }, payload: body });
  // A well-formed but wrong signature makes the sandbox create its secret; then sign with it.
  assert.equal((await post('{}', '0'.repeat(64))).statusCode, 400);
  const secret = (
    await t.svc.db.query<{ v: string }>(`SELECT value #>> '{}' AS v FROM platform_settings WHERE name = 'sandbox_notify_secret'`)
  ).rows[0]!.v;
  const sign = (body: string) => createHmac('sha256', Buffer.from(secret, 'hex')).update(body).digest('hex');
  for (const body of [
    'null',
    '[]',
    '"PAYMENT"',
    '42',
    JSON.stringify({ kind: 'PAYMENT', attemptId: '\u0000', state: 'PAID' }),
    JSON.stringify({ kind: 'REFUND', refundId: 'r\u0000', state: 'SUCCEEDED' }),
  ]) {
    const r = await post(body, sign(body));
    assert.equal(r.statusCode, 400, `${body}: ${r.body}`);
    assert.equal(r.json().received, false);
  }
});

test('a body string with a lone surrogate is refused (it would be stored as U+FFFD, unlike the value answered)', async () => {
  const before = await rowCounts();
  const r = await t.admin('POST', '/merchants', '{"name":"\\ud800","entityType":"CORPORATE"}');
  refused(r, 400, 'ADMIN_VALIDATION_FAILED', /name.*lone surrogate/);
  const ok = await t.admin('POST', '/merchants', '{"name":"\\ud83d\\ude00 shop","entityType":"CORPORATE"}');
  assert.equal(ok.statusCode, 201, ok.body);
  const got = await t.admin('GET', `/merchants/${ok.json().merchantId}`);
  assert.equal(got.json().name, '\u{1F600} shop', 'a surrogate pair is one character, kept as sent');
  assert.notEqual(await rowCounts(), before);
});

test('two PEM keys pasted together are refused, not cut to the first', async () => {
  const m = await t.admin('POST', '/merchants', { name: 'Shop', entityType: 'CORPORATE' });
  const app = await t.admin('POST', `/merchants/${m.json().merchantId}/apps`, {});
  assert.equal(app.statusCode, 201, app.body);
  const appId = app.json().appId as string;
  const pem = merchantKeyPair().publicKeyPem;
  const other = merchantKeyPair().publicKeyPem;
  refused(
    await t.admin('POST', `/apps/${appId}/keys`, { keyId: 'k1', publicKeyPem: pem + other }),
    400,
    'ADMIN_VALIDATION_FAILED',
    /one PEM public key/,
  );
  assert.equal((await t.admin('GET', `/apps/${appId}/keys`)).json().keys.length, 0);
  assert.equal((await t.admin('POST', `/apps/${appId}/keys`, { keyId: 'k1', publicKeyPem: pem })).statusCode, 201);
});

test('the events list takes a decimal limit and one appId', async () => {
  for (const q of ['limit=0x10', 'limit=1e2', 'limit=%20%205', 'limit=0', 'limit=501', 'limit=1&limit=2', 'appId=a&appId=b']) {
    refused(await t.admin('GET', `/events?${q}`), 400, 'ADMIN_VALIDATION_FAILED');
  }
  for (const q of ['limit=1', 'limit=500', 'limit=050', 'appId=app_none']) {
    assert.equal((await t.admin('GET', `/events?${q}`)).statusCode, 200, q);
  }
});

test('a body with a __proto__ key or nested past 64 levels is refused by the back office too, nothing created', async () => {
  const before = await rowCounts();
  const deep = `${'['.repeat(70)}1${']'.repeat(70)}`;
  for (const raw of [
    '{"name":"x","entityType":"CORPORATE","__proto__":{"admin":true}}',
    '{"name":"x","entityType":"CORPORATE","constructor":{"prototype":{}}}',
    `{"name":"x","entityType":"CORPORATE","z":${deep}}`,
  ]) {
    refused(await t.admin('POST', '/merchants', raw), 400, 'ADMIN_VALIDATION_FAILED', /schema/);
  }
  assert.equal(await rowCounts(), before);
});

test('a provider notification over 64 KB is 413 in the provider envelope {received: false, error}', async () => {
  const r = await t.server.inject({
    method: 'POST',
    url: '/api/provider/v1/notifications/sandbox',
    headers: { 'content-type': 'application/json', 'x-sandbox-signature': '0'.repeat(64) },
    payload: JSON.stringify({ kind: 'PAYMENT', pad: 'x'.repeat(70_000) }),
  });
  assert.equal(r.statusCode, 413, r.body);
  assert.deepEqual(r.json(), { received: false, error: 'the body is over 64 KB' });
});

test('operations that take no fields refuse any field and any non-object body (400), and do nothing; no body or {} is fine', async () => {
  const m = await provision(t);
  const o = await call(t, m, 'POST', '/api/open/v1/payments', orderBody());
  assert.equal(o.statusCode, 201, o.body);
  const id = o.json().openOrderId as string;
  const status = async () => (await t.admin('GET', `/orders/${id}`)).json().status as string;
  assert.equal((await t.sandbox('POST', '/faults', { operation: 'REFUND', outcome: 'REJECT', times: 1 })).statusCode, 201);
  for (const body of [{ unknownField: 1 }, [1], 'null', '"x"', 7]) {
    refused(await t.admin('POST', `/orders/${id}/close`, body), 400, 'ADMIN_VALIDATION_FAILED');
    refused(await t.sandbox('POST', `/payments/${id}/expire`, body), 400, 'ADMIN_VALIDATION_FAILED');
    refused(await t.sandbox('DELETE', '/faults', body), 400, 'ADMIN_VALIDATION_FAILED');
    refused(await t.admin('POST', '/events/evt_none/redeliver', body), 400, 'ADMIN_VALIDATION_FAILED');
  }
  assert.equal(await status(), 'PAYING', 'neither closed nor expired');
  assert.equal((await t.sandbox('GET', '/faults')).json().faults.length, 1, 'the fault is still programmed');
  assert.equal((await t.sandbox('DELETE', '/faults', {})).statusCode, 200);
  assert.equal((await t.sandbox('GET', '/faults')).json().faults.length, 0);
  const closed = await t.admin('POST', `/orders/${id}/close`);
  assert.equal(closed.statusCode, 200, closed.body);
  assert.equal(closed.json().closedReason, 'MERCHANT_CLOSED');
});
