/**
 * Step 2 of the gate: the platform source-IP policy and its seven `details.reason` values
 * (decisions.md section 2), from the environment and from the back office, through HTTP; the
 * observed address never echoed; TEMPORARILY_BLOCKED after AUTH_FAILURE_LIMIT failed
 * authentications from one address, reset by a success.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { CidrList } from '../../src/net/ip.ts';
import { resolveSource } from '../../src/net/source-ip.ts';
import { type Merchant, type SignOptions, type TestApp, provision, startTestApp } from '../helpers/app.ts';
import { FakeClock } from '../helpers/events.ts';

const clock = new FakeClock();
import { OPEN, type Resp, assertNoAddressLeak, expectRejection, expectSuccess, send } from './gate-kit.test.ts';

let t: TestApp;
let m: Merchant;

const SETTLEMENT = `${OPEN}/settlement/accounts`;
const PROXY = '10.0.0.1';
const PROXY6 = 'fd00::1';
const LIMIT = 3;
const BLOCK_SECONDS = 2;

before(async () => {
  t = await startTestApp(
    {
      TRUSTED_PROXIES: `${PROXY}, 10.1.0.0/16, ${PROXY6}`,
      AUTH_FAILURE_LIMIT: String(LIMIT),
      AUTH_FAILURE_WINDOW_SECONDS: '60',
      AUTH_BLOCK_SECONDS: String(BLOCK_SECONDS),
    },
    { clock },
  );
  m = await provision(t);
});
after(() => t.stop());

async function policy(body: Record<string, unknown>): Promise<void> {
  const r = await t.admin('PUT', '/platform/ip-policy', body);
  assert.equal(r.statusCode, 200, r.body);
}
const RESET = {
  trustedProxies: [`${PROXY}/32`, '10.1.0.0/16', `${PROXY6}/128`],
  allowlist: null,
  denylist: [],
  allowIpv4: true,
  allowIpv6: true,
};

async function rejected(r: Resp, requestId: string | undefined, reason: string, ...addresses: string[]): Promise<void> {
  await expectRejection(t, r, { status: 403, code: 'OPEN_API_SOURCE_IP_REJECTED', step: 2, sentRequestId: requestId, details: { reason } });
  assertNoAddressLeak(r, ...addresses);
}

const get = (o: SignOptions) => send(t, m, 'GET', SETTLEMENT, undefined, o);

describe('the seven reasons', () => {
  test('SOURCE_ADDRESS_MISSING: no usable peer address', async () => {
    for (const peer of ['not-an-address', 'fe80::1%eth0', '1.2.3']) {
      const { r, requestId } = await get({ remoteAddress: peer });
      await rejected(r, requestId, 'SOURCE_ADDRESS_MISSING', peer);
    }
    // inject always supplies some peer; an absent one is judged the same way.
    const none = resolveSource(
      undefined,
      { xForwardedFor: [], forwarded: [], xRealIp: [] },
      {
        trustedProxies: CidrList.EMPTY,
        allowlist: null,
        denylist: CidrList.EMPTY,
        allowIpv4: true,
        allowIpv6: true,
      },
    );
    assert.deepEqual(none, { ok: false, reason: 'SOURCE_ADDRESS_MISSING' });
  });

  test('SOURCE_ADDRESS_MALFORMED: a forwarding header from a trusted proxy that does not parse', async () => {
    for (const headers of [
      { 'X-Forwarded-For': 'not-an-ip' } as Record<string, string>,
      { 'X-Forwarded-For': '203.0.113.9,' },
      { 'X-Forwarded-For': '203.0.113.256' },
      { Forwarded: 'for=unknown' },
      { Forwarded: 'for=2001:db8::1' },
      { Forwarded: 'by=203.0.113.9' },
      { 'X-Real-IP': '203.0.113.9, 203.0.113.10' },
    ]) {
      const { r, requestId } = await get({ remoteAddress: PROXY, headers });
      await rejected(r, requestId, 'SOURCE_ADDRESS_MALFORMED', PROXY);
    }
  });

  test('FORWARDER_UNTRUSTED: a forwarding header from a peer that is not a trusted proxy', async () => {
    for (const headers of [
      { 'X-Forwarded-For': '8.8.8.8' } as Record<string, string>,
      { Forwarded: 'for=8.8.8.8' },
      { 'X-Real-IP': '8.8.8.8' },
      { 'X-Forwarded-For': 'junk' },
    ]) {
      const { r, requestId } = await get({ remoteAddress: '192.0.2.10', headers });
      await rejected(r, requestId, 'FORWARDER_UNTRUSTED', '192.0.2.10', '8.8.8.8');
    }
  });

  test('ADDRESS_FAMILY_DISABLED: IPv6 off, then IPv4 off (IPv4-mapped counts as IPv4)', async () => {
    try {
      await policy({ allowIpv6: false });
      const v6 = await get({ remoteAddress: '2001:db8::77' });
      await rejected(v6.r, v6.requestId, 'ADDRESS_FAMILY_DISABLED', '2001:db8::77');
      const fwd6 = await get({ remoteAddress: PROXY, headers: { 'X-Forwarded-For': '2001:db8::78' } });
      await rejected(fwd6.r, fwd6.requestId, 'ADDRESS_FAMILY_DISABLED', '2001:db8::78', PROXY);
      const mapped = await get({ remoteAddress: '::ffff:127.0.0.1' });
      await expectSuccess(t, mapped.r, mapped.requestId, 200);
      const v4 = await get({});
      await expectSuccess(t, v4.r, v4.requestId, 200);

      await policy({ allowIpv6: true, allowIpv4: false });
      const four = await get({ remoteAddress: '203.0.113.20' });
      await rejected(four.r, four.requestId, 'ADDRESS_FAMILY_DISABLED', '203.0.113.20');
      const mapped4 = await get({ remoteAddress: '::ffff:203.0.113.21' });
      await rejected(mapped4.r, mapped4.requestId, 'ADDRESS_FAMILY_DISABLED', '203.0.113.21');
      const six = await get({ remoteAddress: '2001:db8::79' });
      await expectSuccess(t, six.r, six.requestId, 200);
    } finally {
      await policy(RESET);
    }
  });

  test('ADDRESS_FAMILY_DISABLED from SOURCE_IP_FAMILIES=ipv4 in the environment', async () => {
    const t4 = await startTestApp({ SOURCE_IP_FAMILIES: 'ipv4' });
    try {
      const m4 = await provision(t4);
      const r = await send(t4, m4, 'GET', SETTLEMENT, undefined, { remoteAddress: '2001:db8::1' });
      await expectRejection(t4, r.r, {
        status: 403,
        code: 'OPEN_API_SOURCE_IP_REJECTED',
        step: 2,
        sentRequestId: r.requestId,
        details: { reason: 'ADDRESS_FAMILY_DISABLED' },
      });
      assertNoAddressLeak(r.r, '2001:db8::1');
      const ok = await send(t4, m4, 'GET', SETTLEMENT);
      await expectSuccess(t4, ok.r, ok.requestId, 200);
    } finally {
      await t4.stop();
    }
  });

  test('PLATFORM_DENYLISTED: the peer, or the client behind a trusted proxy', async () => {
    try {
      await policy({ denylist: ['198.51.100.0/24', '2001:db8:dead::/48'] });
      const direct = await get({ remoteAddress: '198.51.100.7' });
      await rejected(direct.r, direct.requestId, 'PLATFORM_DENYLISTED', '198.51.100.7');
      const v6 = await get({ remoteAddress: '2001:db8:dead::5' });
      await rejected(v6.r, v6.requestId, 'PLATFORM_DENYLISTED', '2001:db8:dead::5');
      const proxied = await get({ remoteAddress: PROXY, headers: { 'X-Forwarded-For': '198.51.100.8' } });
      await rejected(proxied.r, proxied.requestId, 'PLATFORM_DENYLISTED', '198.51.100.8', PROXY);
      const fwd = await get({ remoteAddress: PROXY6, headers: { Forwarded: 'for="[2001:db8:dead::9]:443"' } });
      await rejected(fwd.r, fwd.requestId, 'PLATFORM_DENYLISTED', '2001:db8:dead::9', PROXY6);
      const mapped = await get({ remoteAddress: '::ffff:198.51.100.9' });
      await rejected(mapped.r, mapped.requestId, 'PLATFORM_DENYLISTED', '198.51.100.9');
      const other = await get({ remoteAddress: '198.51.101.7' });
      await expectSuccess(t, other.r, other.requestId, 200);
    } finally {
      await policy(RESET);
    }
  });

  test('PLATFORM_DENYLIST from the environment', async () => {
    const td = await startTestApp({ PLATFORM_IP_DENYLIST: '192.0.2.0/24' });
    try {
      const md = await provision(td);
      const r = await send(td, md, 'GET', SETTLEMENT, undefined, { remoteAddress: '192.0.2.55' });
      await expectRejection(td, r.r, {
        status: 403,
        code: 'OPEN_API_SOURCE_IP_REJECTED',
        step: 2,
        sentRequestId: r.requestId,
        details: { reason: 'PLATFORM_DENYLISTED' },
      });
      assertNoAddressLeak(r.r, '192.0.2.55');
    } finally {
      await td.stop();
    }
  });

  test('NOT_IN_PLATFORM_ALLOWLIST: a platform allowlist is set and the address is outside it', async () => {
    try {
      await policy({ allowlist: ['203.0.113.0/24'] });
      const out = await get({ remoteAddress: '127.0.0.1' });
      await rejected(out.r, out.requestId, 'NOT_IN_PLATFORM_ALLOWLIST', '127.0.0.1');
      const v6 = await get({ remoteAddress: '2001:db8::1' });
      await rejected(v6.r, v6.requestId, 'NOT_IN_PLATFORM_ALLOWLIST', '2001:db8::1');
      const inside = await get({ remoteAddress: '203.0.113.30' });
      await expectSuccess(t, inside.r, inside.requestId, 200);
      // Behind a trusted proxy the client is judged, not the proxy.
      const proxied = await get({ remoteAddress: PROXY, headers: { 'X-Forwarded-For': '203.0.113.31' } });
      await expectSuccess(t, proxied.r, proxied.requestId, 200);
      const proxiedOut = await get({ remoteAddress: PROXY, headers: { 'X-Forwarded-For': '8.8.4.4' } });
      await rejected(proxiedOut.r, proxiedOut.requestId, 'NOT_IN_PLATFORM_ALLOWLIST', '8.8.4.4', PROXY);
      // An empty allowlist admits nobody; null removes it.
      await policy({ allowlist: [] });
      const none = await get({ remoteAddress: '203.0.113.30' });
      await rejected(none.r, none.requestId, 'NOT_IN_PLATFORM_ALLOWLIST', '203.0.113.30');
    } finally {
      await policy(RESET);
    }
    const back = await get({});
    await expectSuccess(t, back.r, back.requestId, 200);
  });

  test('the platform check runs before the headers: a rejected source without any header is 403', async () => {
    try {
      await policy({ denylist: ['198.51.100.0/24'] });
      const r = await t.server.inject({ method: 'POST', url: `${OPEN}/payments`, remoteAddress: '198.51.100.1' });
      await rejected(r, undefined, 'PLATFORM_DENYLISTED', '198.51.100.1');
    } finally {
      await policy(RESET);
    }
  });
});

describe('TEMPORARILY_BLOCKED', () => {
  const badSig: SignOptions = { sign: 'A'.repeat(344) };

  test(`after ${LIMIT} failed authentications from one address, that address is blocked, others are not`, async () => {
    const addr = '203.0.113.101';
    for (let i = 0; i < LIMIT; i++) {
      const { r, requestId } = await get({ ...badSig, remoteAddress: addr });
      await expectRejection(t, r, { status: 401, code: 'OPEN_API_AUTH_FAILED', step: 4, sentRequestId: requestId });
    }
    // Even a correctly signed request, and a request without headers, is now refused at step 2.
    const good = await get({ remoteAddress: addr });
    await rejected(good.r, good.requestId, 'TEMPORARILY_BLOCKED', addr);
    const bare = await t.server.inject({ method: 'GET', url: SETTLEMENT, remoteAddress: addr });
    await rejected(bare, undefined, 'TEMPORARILY_BLOCKED', addr);
    const other = await get({ remoteAddress: '203.0.113.102' });
    await expectSuccess(t, other.r, other.requestId, 200);
    // The block ends after AUTH_BLOCK_SECONDS (on the service's clock).
    clock.advance(BLOCK_SECONDS * 1000 + 200);
    const after = await get({ remoteAddress: addr });
    await expectSuccess(t, after.r, after.requestId, 200);
  });

  test('every step-4 failure counts: stale timestamp, unknown app, unknown key, bad signature', async () => {
    const addr = '203.0.113.103';
    const stale = String(Math.floor(Date.now() / 1000) - 1000);
    for (const o of [{ timestamp: stale }, { appId: 'svcop_' + 'Q'.repeat(16) }, { keyId: 'no-such-key' }]) {
      const { r } = await get({ ...o, remoteAddress: addr });
      assert.equal(r.statusCode, 401);
    }
    const { r, requestId } = await get({ remoteAddress: addr });
    await rejected(r, requestId, 'TEMPORARILY_BLOCKED', addr);
  });

  test('a success resets the count', async () => {
    const addr = '2001:db8:1::5';
    for (let round = 0; round < 3; round++) {
      for (let i = 0; i < LIMIT - 1; i++) assert.equal((await get({ ...badSig, remoteAddress: addr })).r.statusCode, 401);
      const ok = await get({ remoteAddress: addr });
      await expectSuccess(t, ok.r, ok.requestId, 200);
    }
    for (let i = 0; i < LIMIT; i++) assert.equal((await get({ ...badSig, remoteAddress: addr })).r.statusCode, 401);
    const blocked = await get({ remoteAddress: addr });
    await rejected(blocked.r, blocked.requestId, 'TEMPORARILY_BLOCKED', addr);
  });

  test('header-form failures (step 3) are not authentications and do not block', async () => {
    const addr = '203.0.113.104';
    for (let i = 0; i < LIMIT * 3; i++) assert.equal((await get({ remoteAddress: addr, omit: ['X-SVC-Nonce'] })).r.statusCode, 400);
    const ok = await get({ remoteAddress: addr });
    await expectSuccess(t, ok.r, ok.requestId, 200);
  });

  test('behind a trusted proxy the client address is blocked, not the proxy', async () => {
    const client = '203.0.113.105';
    for (let i = 0; i < LIMIT; i++) {
      assert.equal((await get({ ...badSig, remoteAddress: '10.1.2.3', headers: { 'X-Forwarded-For': client } })).r.statusCode, 401);
    }
    const blocked = await get({ remoteAddress: '10.1.2.4', headers: { 'X-Forwarded-For': client } });
    await rejected(blocked.r, blocked.requestId, 'TEMPORARILY_BLOCKED', client, '10.1.2.4');
    const direct = await get({ remoteAddress: client });
    await rejected(direct.r, direct.requestId, 'TEMPORARILY_BLOCKED', client);
    const neighbour = await get({ remoteAddress: '10.1.2.3', headers: { 'X-Forwarded-For': '203.0.113.106' } });
    await expectSuccess(t, neighbour.r, neighbour.requestId, 200);
  });

  test('an IPv4-mapped peer and its IPv4 form share one count', async () => {
    const addr = '203.0.113.107';
    for (let i = 0; i < LIMIT; i++) {
      const peer = i % 2 === 0 ? `::ffff:${addr}` : addr;
      assert.equal((await get({ ...badSig, remoteAddress: peer })).r.statusCode, 401);
    }
    const blocked = await get({ remoteAddress: addr });
    await rejected(blocked.r, blocked.requestId, 'TEMPORARILY_BLOCKED', addr);
  });
});

describe('the policy holder', () => {
  test('concurrent requests share one refresh of the stored policy', async () => {
    const { IpPolicyHolder } = await import('../../src/gate/ip-policy.ts');
    let queries = 0;
    let answer!: () => void;
    const fakeDb = {
      query: async () => {
        queries++;
        // The stored policy's read is slow: every request arrives while it is in flight.
        await new Promise<void>((res) => (answer = res));
        return { rows: [{ value: { denylist: ['192.0.2.0/24'] } }] };
      },
    };
    const clock = new FakeClock();
    const holder = new IpPolicyHolder(fakeDb as never, clock, {
      trustedProxies: [],
      allowlist: null,
      denylist: [],
      allowIpv4: true,
      allowIpv6: true,
    });
    const waiting = Promise.all(Array.from({ length: 25 }, () => holder.current()));
    await new Promise((res) => setImmediate(res));
    answer();
    const policies = await waiting;
    assert.equal(queries, 1);
    for (const p of policies) assert.equal(p, policies[0]);
    assert.deepEqual(holder.view().denylist, ['192.0.2.0/24']);
    await holder.current();
    assert.equal(queries, 1, 'fresh for a few seconds');
    clock.advance(60_000);
    const again = holder.current();
    await new Promise((res) => setImmediate(res));
    answer();
    await again;
    assert.equal(queries, 2, 'read again once its lifetime passed on the service clock');
  });

  test('a failed refresh fails the requests waiting on it, and the next request tries again', async () => {
    const { IpPolicyHolder } = await import('../../src/gate/ip-policy.ts');
    let fail = true;
    const fakeDb = {
      query: async () => {
        if (fail) throw new Error('db down');
        return { rows: [] };
      },
    };
    const holder = new IpPolicyHolder(fakeDb as never, new FakeClock(), {
      trustedProxies: [],
      allowlist: null,
      denylist: [],
      allowIpv4: true,
      allowIpv6: true,
    });
    const rs = await Promise.allSettled([holder.current(), holder.current()]);
    assert.deepEqual(
      rs.map((r) => r.status),
      ['rejected', 'rejected'],
    );
    fail = false;
    await holder.current();
  });
});

describe('the app allowlist (step 6) judges the resolved client', () => {
  test('a client behind a trusted proxy matches the app allowlist; the proxy itself does not', async () => {
    const fenced = await provision(t, { app: { ipAllowlist: ['203.0.113.200/32'] } });
    const viaProxy = await send(t, fenced, 'GET', SETTLEMENT, undefined, {
      remoteAddress: PROXY,
      headers: { 'X-Forwarded-For': '203.0.113.200' },
    });
    await expectSuccess(t, viaProxy.r, viaProxy.requestId, 200);
    const miss = await send(t, fenced, 'GET', SETTLEMENT, undefined, {
      remoteAddress: PROXY,
      headers: { 'X-Forwarded-For': '203.0.113.201' },
    });
    const b = await expectRejection(t, miss.r, {
      status: 403,
      code: 'OPEN_API_SOURCE_IP_REJECTED',
      step: 6,
      sentRequestId: miss.requestId,
    });
    assert.equal(b.details, undefined);
    assertNoAddressLeak(miss.r, '203.0.113.201', PROXY);
  });
});
