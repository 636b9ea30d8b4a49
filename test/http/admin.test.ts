/** The back-office API: provisioning, reads, strict validation that changes nothing, auth. */
import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { after, before, test } from 'node:test';
import { type TestApp, merchantKeyPair, startTestApp } from '../helpers/app.ts';

let t: TestApp;
before(async () => {
  t = await startTestApp();
});
after(() => t.stop());

async function merchant(entityType = 'CORPORATE') {
  const r = await t.admin('POST', '/merchants', { name: 'Shop', entityType });
  assert.equal(r.statusCode, 201, r.body);
  return r.json().merchantId as string;
}

function badRequest(r: { statusCode: number; json(): Record<string, unknown> }, re?: RegExp) {
  assert.equal(r.statusCode, 400, JSON.stringify(r.json()));
  const b = r.json();
  assert.deepEqual(Object.keys(b).sort(), ['code', 'message']);
  assert.equal(b.code, 'ADMIN_VALIDATION_FAILED');
  if (re) assert.match(String(b.message), re);
}

test('the admin API requires the bearer token', async () => {
  for (const auth of [undefined, 'Bearer wrong-token-0000000000', 'test-admin-token-0123456789', 'Basic dGVzdA==']) {
    const r = await t.server.inject({ method: 'GET', url: '/api/admin/v1/merchants', headers: auth ? { authorization: auth } : {} });
    assert.equal(r.statusCode, 401);
    assert.deepEqual(r.json(), { code: 'ADMIN_UNAUTHORIZED', message: r.json().message });
  }
  const s = await t.server.inject({ method: 'POST', url: '/api/sandbox/v1/faults', headers: {}, payload: {} });
  assert.equal(s.statusCode, 401, 'sandbox helpers too');
  // The scheme name is case-insensitive.
  for (const scheme of ['bearer', 'BEARER']) {
    const r = await t.server.inject({
      method: 'GET',
      url: '/api/admin/v1/merchants',
      headers: { authorization: `${scheme} test-admin-token-0123456789` },
    });
    assert.equal(r.statusCode, 200, scheme);
  }
});

test('unknown back-office paths: 401 without the token, then 404 {code, message}', async () => {
  for (const url of ['/api/admin/v1/nope', '/api/sandbox/v1/nope']) {
    const anon = await t.server.inject({ method: 'GET', url });
    assert.equal(anon.statusCode, 401, url);
    assert.equal(anon.json().code, 'ADMIN_UNAUTHORIZED');
    const r = await t.server.inject({ method: 'GET', url, headers: { authorization: 'Bearer test-admin-token-0123456789' } });
    assert.equal(r.statusCode, 404, url);
    assert.deepEqual(Object.keys(r.json()).sort(), ['code', 'message']);
    assert.equal(r.json().code, 'ADMIN_NOT_FOUND');
  }
});

test('admin bodies have the 64 KB limit of the open API', async () => {
  const pad = (n: number) => {
    const base = JSON.stringify({ name: 'X', entityType: 'CORPORATE', pad: '' });
    return base.replace('"pad":""', `"pad":"${'p'.repeat(n - base.length)}"`);
  };
  const at = await t.admin('POST', '/merchants', pad(65_536));
  assert.equal(at.statusCode, 400, 'judged as a body (an unknown field)');
  const over = await t.admin('POST', '/merchants', pad(65_537));
  assert.equal(over.statusCode, 413);
  assert.deepEqual(Object.keys(over.json()).sort(), ['code', 'message']);
});

test('full provisioning and reads', async () => {
  const id = await merchant('INDIVIDUAL');
  const app = await t.admin('POST', `/merchants/${id}/apps`, {
    notifyUrl: 'https://merchant.example/hooks',
    channels: ['ALIPAY_H5'],
    tradeScopes: ['CARD_VIRTUAL'],
    ipAllowlist: ['203.0.113.0/24', '2001:db8::/32'],
    paymentWindowSeconds: 600,
  });
  assert.equal(app.statusCode, 201, app.body);
  const a = app.json();
  assert.match(a.appId, /^svcop_[A-Za-z0-9]{16}$/);
  assert.equal(a.rateLimitPerSecond, 1000);
  const k = await t.admin('POST', `/apps/${a.appId}/keys`, { keyId: 'k1', publicKeyPem: merchantKeyPair().publicKeyPem });
  assert.equal(k.statusCode, 201, k.body);
  assert.equal(
    (await t.admin('POST', `/apps/${a.appId}/keys`, { keyId: 'k1', publicKeyPem: merchantKeyPair().publicKeyPem })).statusCode,
    409,
  );
  const acc1 = await t.admin('POST', `/merchants/${id}/settlement-accounts`, {
    entityType: 'INDIVIDUAL',
    entityName: 'Li Lei',
    merchantNo: 'M001',
    cardNumber: '6222020200112345678',
    agreedCeilingFen: 800000,
  });
  assert.equal(acc1.statusCode, 201, acc1.body);
  assert.equal(acc1.json().cardLast4, '5678');
  assert.ok(!acc1.body.includes('6222020200112345678'));
  const acc2 = (
    await t.admin('POST', `/merchants/${id}/settlement-accounts`, {
      entityType: 'CORPORATE',
      entityName: 'Co',
      merchantNo: 'M002',
      cardNumber: '6222020200119999',
    })
  ).json();
  const alloc = await t.admin('PUT', `/merchants/${id}/allocation`, {
    mode: 'RATIO',
    participants: [acc1.json().accountId, acc2.accountId],
    ratios: [
      { accountId: acc2.accountId, shareBps: 4000 },
      { accountId: acc1.json().accountId, shareBps: 6000 },
    ],
    unavailablePolicy: 'REDISTRIBUTE',
  });
  assert.equal(alloc.statusCode, 200, alloc.body);
  assert.deepEqual(alloc.json().ratios, [
    { accountId: acc1.json().accountId, shareBps: 6000 },
    { accountId: acc2.accountId, shareBps: 4000 },
  ]);
  const fee = await t.admin('PUT', `/merchants/${id}/fee-rule`, {
    ruleVersion: 3,
    standardRateBps: 60,
    largeRateBps: 30,
    thresholdFen: 1_000_000,
    merchantRateBps: 38,
  });
  assert.equal(fee.statusCode, 200, fee.body);
  const view = (await t.admin('GET', `/merchants/${id}`)).json();
  assert.equal(view.apps.length, 1);
  assert.equal(view.settlementAccounts.length, 2);
  assert.equal(view.allocation.mode, 'RATIO');
  assert.equal(view.feeRule.ruleVersion, 3);
  assert.ok(!JSON.stringify(view).includes('6222020200112345678'), 'no full card number anywhere');
  const patched = await t.admin('PATCH', `/apps/${a.appId}`, { dailyAmountCeilingFen: 5000, rateLimitPerSecond: 5, notifyUrl: null });
  assert.equal(patched.statusCode, 200, patched.body);
  assert.equal(patched.json().dailyAmountCeilingFen, 5000);
  assert.equal(patched.json().notifyUrl, null);
  const pk = (await t.admin('GET', '/platform-keys')).json();
  assert.equal(pk.keys.length, 1);
  assert.deepEqual(Object.keys(pk.keys[0]).sort(), ['keyId', 'publicKeyPem']);
  assert.match(pk.keys[0].publicKeyPem, /^-----BEGIN PUBLIC KEY-----/);
  assert.ok(!JSON.stringify(pk).includes('PRIVATE'));
});

test('every field of a new app is optional: no body at all is the same as {}', async () => {
  const id = await merchant();
  const bare = await t.admin('POST', `/merchants/${id}/apps`);
  assert.equal(bare.statusCode, 201, bare.body);
  const app = (await t.admin('GET', `/apps/${bare.json().appId}`)).json();
  const empty = (await t.admin('GET', `/apps/${(await t.admin('POST', `/merchants/${id}/apps`, {})).json().appId}`)).json();
  for (const k of ['channels', 'tradeScopes', 'ipAllowlist', 'paymentWindowSeconds', 'notifyUrl']) {
    assert.deepEqual(app[k], empty[k], k);
  }
});

test('bad input gets a clear 400 and changes nothing', async () => {
  const id = await merchant();
  const before = (await t.admin('GET', `/merchants/${id}`)).body;
  const appId = (await t.admin('POST', `/merchants/${id}/apps`, {})).json().appId as string;
  const privatePem = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
  const small = generateKeyPairSync('rsa', { modulusLength: 1024 }).publicKey.export({ type: 'spki', format: 'pem' }).toString();
  const ec = generateKeyPairSync('ec', { namedCurve: 'P-256' }).publicKey.export({ type: 'spki', format: 'pem' }).toString();
  badRequest(await t.admin('POST', '/merchants', { name: 'X', entityType: 'CORPORATE', extra: 1 }), /extra/);
  badRequest(await t.admin('POST', '/merchants', { name: 'X', entityType: 'PERSON' }), /entityType/);
  badRequest(await t.admin('POST', '/merchants', { name: 5, entityType: 'CORPORATE' }), /name/);
  badRequest(await t.admin('POST', '/merchants', '{"name":"a","name":"b","entityType":"CORPORATE"}'), /duplicate/);
  badRequest(await t.admin('POST', '/merchants', '{not json'));
  badRequest(await t.admin('POST', `/merchants/${id}/apps`, { paymentWindowSeconds: 59 }), /paymentWindowSeconds/);
  badRequest(await t.admin('POST', `/merchants/${id}/apps`, { paymentWindowSeconds: '600' }), /paymentWindowSeconds/);
  badRequest(await t.admin('POST', `/merchants/${id}/apps`, { channels: ['ALIPAY_H5', 'ALIPAY_H5'] }), /channels/);
  badRequest(await t.admin('POST', `/merchants/${id}/apps`, { ipAllowlist: ['10.0.0.0/33'] }), /ipAllowlist/);
  badRequest(await t.admin('POST', `/merchants/${id}/apps`, { notifyUrl: 'http://merchant.example/hook' }), /notifyUrl/);
  badRequest(await t.admin('POST', `/merchants/${id}/apps`, { notifyUrl: 'https://10.0.0.5/hook' }), /notifyUrl/);
  badRequest(await t.admin('PATCH', `/apps/${appId}`, {}));
  badRequest(await t.admin('PATCH', `/apps/${appId}`, { rateLimitPerSecond: 0 }), /rateLimitPerSecond/);
  badRequest(await t.admin('POST', `/apps/${appId}/keys`, { keyId: 'k', publicKeyPem: privatePem }), /private key/);
  badRequest(await t.admin('POST', `/apps/${appId}/keys`, { keyId: 'k', publicKeyPem: small }), /2048 to 4096/);
  badRequest(await t.admin('POST', `/apps/${appId}/keys`, { keyId: 'k', publicKeyPem: ec }), /RSA/);
  badRequest(await t.admin('POST', `/apps/${appId}/keys`, { keyId: 'k', publicKeyPem: 'hello' }), /PEM/);
  badRequest(await t.admin('POST', `/apps/${appId}/keys`, { keyId: 'has space', publicKeyPem: merchantKeyPair().publicKeyPem }), /keyId/);
  const acc = (keys: Record<string, unknown>) =>
    t.admin('POST', `/merchants/${id}/settlement-accounts`, {
      entityType: 'CORPORATE',
      entityName: 'E',
      merchantNo: 'M1',
      cardNumber: '6222020200112345',
      ...keys,
    });
  badRequest(await acc({ cardNumber: '6222abc200112345' }), /cardNumber/);
  badRequest(await acc({ cardNumber: '6222 0202 0011 2345' }), /cardNumber/);
  badRequest(await acc({ cardNumber: 6222020200112345 }), /cardNumber/);
  badRequest(await acc({ agreedCeilingFen: 0 }), /agreedCeilingFen/);
  const ids: string[] = [];
  for (let i = 0; i < 5; i++) ids.push((await acc({})).json().accountId as string);
  const ratio = (ratios: [number, number][], extra: Record<string, unknown> = {}) =>
    t.admin('PUT', `/merchants/${id}/allocation`, {
      mode: 'RATIO',
      participants: ratios.map(([i]) => ids[i]),
      ratios: ratios.map(([i, s]) => ({ accountId: ids[i], shareBps: s })),
      unavailablePolicy: 'FAIL',
      ...extra,
    });
  badRequest(
    await ratio([
      [0, 5000],
      [1, 4999],
    ]),
    /10000/,
  );
  badRequest(
    await ratio([
      [0, 5000],
      [1, 5001],
    ]),
    /10000/,
  );
  badRequest(
    await ratio([
      [0, 10000],
      [1, 0],
    ]),
    /shareBps/,
  );
  badRequest(await ratio([[0, 10000]]), /ratios/);
  badRequest(
    await ratio([
      [0, 2000],
      [1, 2000],
      [2, 2000],
      [3, 2000],
      [4, 2000],
    ]),
    /at most 4/,
  );
  badRequest(
    await t.admin('PUT', `/merchants/${id}/allocation`, { mode: 'SINGLE', participants: ['sa_other'], unavailablePolicy: 'FAIL' }),
    /not a settlement account/,
  );
  badRequest(
    await t.admin('PUT', `/merchants/${id}/allocation`, { mode: 'SINGLE', participants: [ids[0], ids[1]], unavailablePolicy: 'FAIL' }),
    /exactly one/,
  );
  badRequest(
    await t.admin('PUT', `/merchants/${id}/allocation`, {
      mode: 'PRIORITY',
      participants: [ids[0]],
      ratios: [],
      unavailablePolicy: 'FAIL',
    }),
  );
  badRequest(
    await t.admin('PUT', `/merchants/${id}/fee-rule`, {
      ruleVersion: '1',
      standardRateBps: 60,
      largeRateBps: 30,
      thresholdFen: 1,
      merchantRateBps: 1,
    }),
    /ruleVersion/,
  );
  badRequest(
    await t.admin('PUT', `/merchants/${id}/fee-rule`, {
      ruleVersion: 1,
      standardRateBps: 10001,
      largeRateBps: 30,
      thresholdFen: 1,
      merchantRateBps: 1,
    }),
    /standardRateBps/,
  );
  badRequest(
    await t.admin('PUT', `/merchants/${id}/fee-rule`, {
      ruleVersion: 1.5,
      standardRateBps: 1,
      largeRateBps: 30,
      thresholdFen: 1,
      merchantRateBps: 1,
    }),
    /ruleVersion/,
  );
  const after = (await t.admin('GET', `/merchants/${id}`)).json();
  assert.equal(after.allocation, null, 'no allocation was stored');
  assert.equal(after.feeRule, null, 'no fee rule was stored');
  assert.equal(after.apps.length, 1);
  assert.equal((await t.admin('GET', `/apps/${appId}/keys`)).json().keys.length, 0);
  assert.ok(before.length > 0);
});

test('sandbox helpers refuse bad bodies as the admin API does: 400, and 413 when too large', async () => {
  badRequest(await t.sandbox('POST', '/faults', '{not json'));
  badRequest(await t.sandbox('POST', '/faults', '{"operation":"CLOSE","operation":"REFUND","outcome":"REJECT","times":1}'), /duplicate/);
  badRequest(await t.sandbox('POST', '/faults', { operation: 'CLOSE', outcome: 'REJECT', times: 1, extra: true }), /extra/);
  badRequest(await t.sandbox('POST', '/payments/ord_nope/pay', '{"attemptId":'));
  const big = await t.sandbox(
    'POST',
    '/faults',
    JSON.stringify({ operation: 'CLOSE', outcome: 'REJECT', times: 1, pad: 'x'.repeat(70_000) }),
  );
  assert.equal(big.statusCode, 413, big.body);
  assert.deepEqual(Object.keys(big.json()).sort(), ['code', 'message']);
  // Nothing was programmed by any of them.
  assert.deepEqual((await t.sandbox('GET', '/faults')).json().faults, []);
});

test('GET /events takes status, appId and limit only: any other parameter is 400', async () => {
  badRequest(await t.admin('GET', '/events?foo=1'), /status, appId and limit/);
  badRequest(await t.admin('GET', '/events?status=PENDING&Limit=5'));
  assert.equal((await t.admin('GET', '/events?status=PENDING&limit=5')).statusCode, 200);
});

test('unknown ids give 404', async () => {
  assert.equal((await t.admin('GET', '/merchants/mch_nope')).statusCode, 404);
  assert.equal((await t.admin('POST', '/merchants/mch_nope/apps', {})).statusCode, 404);
  assert.equal((await t.admin('GET', '/apps/svcop_AAAAAAAAAAAAAAAA')).statusCode, 404);
  assert.equal((await t.admin('PATCH', '/apps/svcop_AAAAAAAAAAAAAAAA', { rateLimitPerSecond: 3 })).statusCode, 404);
  assert.equal((await t.admin('GET', '/orders/ord_nope')).statusCode, 404);
});

test('GET /metrics needs the admin token and exposes request and outbox metrics', async () => {
  assert.equal((await t.server.inject({ method: 'GET', url: '/metrics' })).statusCode, 401);
  await t.server.inject({ method: 'GET', url: '/api/open/v1/payments/T_000001' });
  const r = await t.server.inject({ method: 'GET', url: '/metrics', headers: { authorization: 'Bearer test-admin-token-0123456789' } });
  assert.equal(r.statusCode, 200);
  assert.match(r.body, /mps_http_requests_total\{surface="open",status="400"\} 1/);
  assert.match(r.body, /mps_open_api_failures_total\{code="OPEN_API_HEADER_INVALID"\} 1/);
  assert.match(r.body, /mps_outbox_events/);
  assert.match(r.body, /mps_process_resident_memory_bytes/);
});

test('integer fields at any depth refuse decimal literals such as 5000.0', async () => {
  const id = await merchant();
  const a = (
    await t.admin('POST', `/merchants/${id}/settlement-accounts`, {
      entityType: 'CORPORATE',
      entityName: 'E',
      merchantNo: 'M1',
      cardNumber: '6222020200112345',
    })
  ).json().accountId;
  const b = (
    await t.admin('POST', `/merchants/${id}/settlement-accounts`, {
      entityType: 'CORPORATE',
      entityName: 'E',
      merchantNo: 'M2',
      cardNumber: '6222020200112346',
    })
  ).json().accountId;
  const raw = `{"mode":"RATIO","participants":["${a}","${b}"],"ratios":[{"accountId":"${a}","shareBps":5000.0},{"accountId":"${b}","shareBps":5000}],"unavailablePolicy":"FAIL"}`;
  badRequest(await t.admin('PUT', `/merchants/${id}/allocation`, raw), /shareBps must be an integer, not decimal number/);
  badRequest(await t.admin('POST', `/merchants/${id}/apps`, '{"paymentWindowSeconds":6e2}'), /paymentWindowSeconds/);
  assert.equal((await t.admin('PUT', `/merchants/${id}/allocation`, raw.replace('5000.0', '5000'))).statusCode, 200);
});
