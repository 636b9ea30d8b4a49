/**
 * Operators through HTTP: each role's allowed and refused actions on the admin API (the server
 * refuses, whatever a page shows), API tokens (shown once, hashed at rest, revocable), console
 * sessions (cookie attributes, CSRF, session fixation, sign-out, idle and absolute timeouts), the
 * sign-in throttle per name and per address, and the audit log (every change, who, when, from
 * where, with the request id; secrets never; append-only; CSV export).
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { ADMIN_TOKEN, type TestApp, merchantKeyPair, startTestApp } from '../helpers/app.ts';
import { FakeClock } from '../helpers/events.ts';
import { PASSWORD, type TestOperator, asOperator, asSession, createOperator, signIn } from '../helpers/operators.ts';

let t: TestApp;
const clock = new FakeClock();
const ops: Record<string, TestOperator> = {};

before(async () => {
  t = await startTestApp({}, { clock });
  for (const role of ['admin', 'operations', 'finance', 'support']) ops[role] = await createOperator(t, `${role}-1`, role);
});
after(() => t.stop());

function forbidden(r: { statusCode: number; body: string }, what: string): void {
  assert.equal(r.statusCode, 403, `${what}: ${r.body}`);
  assert.equal(JSON.parse(r.body).code, 'ADMIN_FORBIDDEN', what);
}

async function auditEntries(q: Record<string, string> = {}) {
  const r = await t.admin('GET', `/audit?${new URLSearchParams({ limit: '500', ...q })}`);
  assert.equal(r.statusCode, 200, r.body);
  return r.json().entries as Record<string, unknown>[];
}

describe('roles on the admin API', () => {
  let merchantId: string;
  let appId: string;
  let n = 0;

  before(async () => {
    merchantId = (await t.admin('POST', '/merchants', { name: 'Role Shop', entityType: 'CORPORATE' })).json().merchantId;
    appId = (await t.admin('POST', `/merchants/${merchantId}/apps`, {})).json().appId;
  });

  // Each action, the roles that may take it; an allowed call may still be refused for what it names (404), never 401 or 403.
  const actions: { name: string; roles: string[]; call: () => [string, string, unknown?] }[] = [
    { name: 'list merchants', roles: ['admin', 'operations', 'finance', 'support'], call: () => ['GET', '/merchants'] },
    { name: 'read the dashboard', roles: ['admin', 'operations', 'finance', 'support'], call: () => ['GET', '/dashboard'] },
    { name: 'search orders', roles: ['admin', 'operations', 'finance', 'support'], call: () => ['GET', '/orders?status=PAYING'] },
    {
      name: 'create a merchant',
      roles: ['admin', 'operations'],
      call: () => ['POST', '/merchants', { name: 'M', entityType: 'CORPORATE' }],
    },
    { name: 'change an app', roles: ['admin', 'operations'], call: () => ['PATCH', `/apps/${appId}`, { rateLimitPerSecond: 7 }] },
    {
      name: 'upload a key',
      roles: ['admin', 'operations'],
      call: () => ['POST', `/apps/${appId}/keys`, { keyId: `k-${++n}`, publicKeyPem: merchantKeyPair().publicKeyPem }],
    },
    {
      name: 'add a settlement account',
      roles: ['admin', 'finance'],
      call: () => [
        'POST',
        `/merchants/${merchantId}/settlement-accounts`,
        { entityType: 'CORPORATE', entityName: 'E', merchantNo: `M${++n}`, cardNumber: '6222020200112345' },
      ],
    },
    {
      name: 'set the fee rule',
      roles: ['admin', 'finance'],
      call: () => [
        'PUT',
        `/merchants/${merchantId}/fee-rule`,
        { ruleVersion: ++n, standardRateBps: 60, largeRateBps: 30, thresholdFen: 1_000_000, merchantRateBps: 38 },
      ],
    },
    { name: 'change the IP policy', roles: ['admin', 'operations'], call: () => ['PUT', '/platform/ip-policy', { allowIpv4: true }] },
    { name: 'rotate the platform key', roles: ['admin'], call: () => ['POST', '/platform-keys/rotate', { activateAfterSeconds: 86_400 }] },
    { name: 'close an order', roles: ['admin', 'operations'], call: () => ['POST', '/orders/ord_nope/close'] },
    { name: 'redeliver an event', roles: ['admin', 'operations', 'support'], call: () => ['POST', '/events/evt_nope/redeliver'] },
    {
      name: 'redeliver events',
      roles: ['admin', 'operations', 'support'],
      call: () => ['POST', '/events/redeliver', { eventIds: ['evt_nope'] }],
    },
    { name: 'resolve a discrepancy', roles: ['admin', 'finance'], call: () => ['POST', '/provider-discrepancies/999/resolve'] },
    { name: 'read the audit log', roles: ['admin', 'operations', 'finance'], call: () => ['GET', '/audit'] },
    { name: 'export the audit log', roles: ['admin', 'operations', 'finance'], call: () => ['GET', '/audit/export.csv'] },
    { name: 'list operators', roles: ['admin'], call: () => ['GET', '/operators'] },
    {
      name: 'create an operator',
      roles: ['admin'],
      call: () => ['POST', '/operators', { name: `made-${++n}`, role: 'support', password: PASSWORD }],
    },
  ];

  for (const a of actions) {
    test(`${a.name}: ${a.roles.join(', ')} may; the others are refused 403`, async () => {
      for (const role of ['admin', 'operations', 'finance', 'support']) {
        const [method, url, body] = a.call();
        const last = method === 'GET' ? 0 : Number((await auditEntries({ limit: '1' }))[0]?.id ?? 0);
        const r = await asOperator(t, ops[role]!, method, url, body);
        if (a.roles.includes(role)) {
          assert.ok(![401, 403].includes(r.statusCode), `${role} may ${a.name}: ${r.statusCode} ${r.body}`);
          assert.ok(r.statusCode < 500, `${role} may ${a.name}: ${r.statusCode} ${r.body}`);
          if (method !== 'GET' && r.statusCode < 300) {
            // A change made is a change audited: one entry each, naming who made it. (A batch
            // redelivery answers 200 with a result per event: only the events it redelivered changed.)
            const made =
              url === '/events/redeliver' ? r.json().results.filter((x: { status?: string }) => x.status === 'PENDING').length : 1;
            const added = (await auditEntries()).filter((e) => Number(e.id) > last);
            assert.equal(added.length, made, `${role} ${a.name}: ${r.body} ${JSON.stringify(added)}`);
            for (const e of added) assert.equal(e.operatorName, ops[role]!.name, `${role} ${a.name}`);
          }
        } else {
          forbidden(r, `${role} may not ${a.name}`);
        }
      }
    });
  }

  test('a refused change changes nothing and leaves no audit entry', async () => {
    const before = (await t.admin('GET', `/merchants/${merchantId}`)).body;
    const entries = (await auditEntries()).length;
    forbidden(
      await asOperator(t, ops.support!, 'PUT', `/merchants/${merchantId}/fee-rule`, {
        ruleVersion: 999,
        standardRateBps: 1,
        largeRateBps: 1,
        thresholdFen: 1,
        merchantRateBps: 1,
      }),
      'support sets a fee rule',
    );
    assert.equal((await t.admin('GET', `/merchants/${merchantId}`)).body, before);
    assert.equal((await auditEntries()).length, entries);
  });

  test('GET /me names the caller, its role and permissions', async () => {
    const me = (await asOperator(t, ops.finance!, 'GET', '/me')).json();
    assert.equal(me.name, 'finance-1');
    assert.equal(me.role, 'finance');
    assert.equal(me.kind, 'TOKEN');
    assert.ok(me.permissions.includes('feeRules.write') && !me.permissions.includes('merchants.write'));
    assert.equal((await t.admin('GET', '/me')).json().kind, 'ADMIN_TOKEN');
  });
});

describe('API tokens', () => {
  test('shown once, stored as a hash, revocable; an operator manages only its own', async () => {
    const o = await createOperator(t, 'token-owner', 'support');
    const rows = await t.svc.db.query('SELECT token_sha256, prefix FROM operator_tokens WHERE operator_id = $1', [o.operatorId]);
    assert.equal(rows.rowCount, 1);
    assert.ok(!JSON.stringify(rows.rows).includes(o.token), 'the token is not stored');
    const list = (await asOperator(t, o, 'GET', `/operators/${o.operatorId}/tokens`)).json().tokens;
    assert.equal(list.length, 1);
    assert.ok(!JSON.stringify(list).includes(o.token), 'the list never shows it again');
    forbidden(await asOperator(t, o, 'GET', `/operators/${ops.admin!.operatorId}/tokens`), "another operator's tokens");
    const mine = await asOperator(t, o, 'POST', `/operators/${o.operatorId}/tokens`, { label: 'second' });
    assert.equal(mine.statusCode, 201, mine.body);
    const revoked = await asOperator(t, o, 'DELETE', `/operators/${o.operatorId}/tokens/${list[0].tokenId}`);
    assert.equal(revoked.statusCode, 200, revoked.body);
    const r = await asOperator(t, o, 'GET', '/merchants');
    assert.equal(r.statusCode, 401);
    assert.equal(r.json().code, 'ADMIN_UNAUTHORIZED');
    assert.equal((await asOperator(t, { token: mine.json().token }, 'GET', '/merchants')).statusCode, 200);
  });

  test("a disabled operator's tokens and sessions stop working; the last active admin cannot be demoted", async () => {
    const o = await createOperator(t, 'leaver', 'operations');
    const s = await signIn(t, 'leaver');
    assert.equal((await t.admin('PATCH', `/operators/${o.operatorId}`, { status: 'DISABLED' })).statusCode, 200);
    assert.equal((await asOperator(t, o, 'GET', '/merchants')).statusCode, 401);
    assert.equal((await asSession(t, s, 'GET', '/merchants')).statusCode, 401);
    // Enabled again: its old token stays revoked (a new one is made when needed).
    assert.equal((await t.admin('PATCH', `/operators/${o.operatorId}`, { status: 'ACTIVE' })).statusCode, 200);
    assert.equal((await asOperator(t, o, 'GET', '/merchants')).statusCode, 401);
    const admins = (await t.admin('GET', '/operators')).json().operators.filter((x: { role: string }) => x.role === 'admin');
    assert.equal(admins.length, 1);
    const last = await t.admin('PATCH', `/operators/${admins[0].operatorId}`, { role: 'support' });
    assert.equal(last.statusCode, 409, last.body);
    assert.equal(last.json().code, 'ADMIN_STATE_INVALID');
  });
});

describe('console sessions', () => {
  const cookieName = '__Host-mps_console';

  test('sign-in sets an HttpOnly, SameSite=Strict, Secure cookie (PUBLIC_BASE_URL is https) and answers the CSRF token', async () => {
    const s = await signIn(t, 'operations-1');
    assert.match(s.setCookie, new RegExp(`^${cookieName}=[A-Za-z0-9_-]{43}; Max-Age=43200; Path=/; HttpOnly; SameSite=Strict; Secure$`));
    const me = await asSession(t, s, 'GET', '/console/api/session');
    assert.equal(me.statusCode, 200, me.body);
    assert.equal(me.json().operator.name, 'operations-1');
    assert.equal(me.json().csrfToken, s.csrfToken);
    assert.ok(!('cookie' in me.json()));
    const stored = await t.svc.db.query('SELECT id_sha256 FROM operator_sessions');
    assert.ok(!JSON.stringify(stored.rows).includes(s.cookie.split('=')[1]!), 'only the hash of the session id is stored');
  });

  test('a change with the session cookie needs the CSRF token and no foreign Origin', async () => {
    const s = await signIn(t, 'operations-1');
    const body = { name: 'CSRF Shop', entityType: 'CORPORATE' };
    forbidden(await asSession(t, s, 'POST', '/merchants', body, { csrf: false }), 'no CSRF token');
    forbidden(await asSession(t, s, 'POST', '/merchants', body, { csrf: 'A'.repeat(43) }), 'a wrong CSRF token');
    const foreign = await asSession(t, s, 'POST', '/merchants', body, { headers: { origin: 'https://evil.example' } });
    forbidden(foreign, 'the right token from another site');
    assert.equal(foreign.json().message, 'a request from another site is refused', 'the answer says why');
    assert.equal((await asSession(t, s, 'GET', '/merchants')).statusCode, 200, 'a read needs no token');
    const ok = await asSession(t, s, 'POST', '/merchants', body, { headers: { origin: 'https://pay.example.test' } });
    assert.equal(ok.statusCode, 201, ok.body);
    // The console's own session endpoints as well.
    forbidden(await asSession(t, s, 'DELETE', '/console/api/session', undefined, { csrf: false }), 'sign-out without the token');
  });

  test('sign-in from another site, or not as JSON, is refused', async () => {
    const r = await t.server.inject({
      method: 'POST',
      url: '/console/api/session',
      headers: { 'content-type': 'application/json', origin: 'https://evil.example' },
      payload: JSON.stringify({ name: 'operations-1', password: PASSWORD }),
    });
    forbidden(r, 'cross-site sign-in');
    const form = await t.server.inject({
      method: 'POST',
      url: '/console/api/session',
      headers: { 'content-type': 'text/plain' },
      payload: JSON.stringify({ name: 'operations-1', password: PASSWORD }),
    });
    assert.equal(form.statusCode, 400, form.body);
    assert.equal(form.headers['set-cookie'], undefined);
  });

  test('session fixation: a session id the browser offers is never adopted; signing in ends the session held before', async () => {
    const planted = `${cookieName}=${'x'.repeat(43)}`;
    assert.equal((await t.server.inject({ method: 'GET', url: '/console/api/session', headers: { cookie: planted } })).statusCode, 401);
    const s = await signIn(t, 'support-1', PASSWORD, { cookie: planted });
    assert.notEqual(s.cookie, planted);
    assert.equal((await t.server.inject({ method: 'GET', url: '/api/admin/v1/merchants', headers: { cookie: planted } })).statusCode, 401);
    const again = await signIn(t, 'support-1', PASSWORD, { cookie: s.cookie });
    assert.notEqual(again.cookie, s.cookie, 'a new id at every sign-in');
    assert.equal((await asSession(t, s, 'GET', '/merchants')).statusCode, 401, 'signing in again ended the session the browser held');
    assert.equal((await asSession(t, again, 'GET', '/merchants')).statusCode, 200);
  });

  test('sign-out ends the session and clears the cookie', async () => {
    const s = await signIn(t, 'finance-1');
    const out = await asSession(t, s, 'DELETE', '/console/api/session');
    assert.equal(out.statusCode, 204, out.body);
    assert.match(String(out.headers['set-cookie']), /Max-Age=0/);
    assert.equal((await asSession(t, s, 'GET', '/console/api/session')).statusCode, 401);
  });

  test('idle timeout (30 min) and absolute timeout (12 h)', async () => {
    const idle = await signIn(t, 'finance-1');
    clock.advance(29 * 60_000);
    assert.equal((await asSession(t, idle, 'GET', '/merchants')).statusCode, 200, 'used within 30 min');
    clock.advance(29 * 60_000);
    assert.equal((await asSession(t, idle, 'GET', '/merchants')).statusCode, 200, 'each use restarts the idle time');
    clock.advance(31 * 60_000);
    assert.equal((await asSession(t, idle, 'GET', '/merchants')).statusCode, 401, 'idle for 31 min');
    const busy = await signIn(t, 'finance-1');
    for (let h = 0; h < 12 * 3; h++) {
      clock.advance(20 * 60_000);
      const r = await asSession(t, busy, 'GET', '/me');
      if (h < 12 * 3 - 1) assert.equal(r.statusCode, 200, `after ${(h + 1) * 20} min`);
      else assert.equal(r.statusCode, 401, 'over 12 h after sign-in, however active');
    }
  });

  test('a password change ends the other sessions; an admin reset ends them all', async () => {
    const o = await createOperator(t, 'changer', 'support');
    const a = await signIn(t, 'changer');
    const b = await signIn(t, 'changer');
    const wrong = await asSession(t, a, 'POST', '/console/api/password', {
      currentPassword: 'not it at all',
      newPassword: 'a new long password',
    });
    assert.equal(wrong.statusCode, 400, wrong.body);
    const ok = await asSession(t, a, 'POST', '/console/api/password', { currentPassword: PASSWORD, newPassword: 'a new long password' });
    assert.equal(ok.statusCode, 204, ok.body);
    assert.equal((await asSession(t, a, 'GET', '/me')).statusCode, 200);
    assert.equal((await asSession(t, b, 'GET', '/me')).statusCode, 401);
    assert.equal((await t.admin('PATCH', `/operators/${o.operatorId}`, { password: 'reset by the admin' })).statusCode, 200);
    assert.equal((await asSession(t, a, 'GET', '/me')).statusCode, 401);
    await signIn(t, 'changer', 'reset by the admin');
  });
});

describe('the sign-in throttle', () => {
  const attempt = (name: string, password: string, remoteAddress = '127.0.0.1') =>
    t.server.inject({
      method: 'POST',
      url: '/console/api/session',
      remoteAddress,
      headers: { 'content-type': 'application/json' },
      payload: JSON.stringify({ name, password }),
    });

  test('five failures of a name refuse it, even with the right password, until the window frees a place', async () => {
    await createOperator(t, 'target', 'support');
    for (let i = 0; i < 5; i++) {
      const r = await attempt('target', 'wrong password!');
      assert.equal(r.statusCode, 401, r.body);
      assert.equal(r.json().message, 'the name or the password is not right');
    }
    const locked = await attempt('target', PASSWORD, '192.0.2.77');
    assert.equal(locked.statusCode, 429, locked.body);
    assert.equal(locked.json().code, 'ADMIN_RATE_LIMITED');
    assert.ok(Number(locked.headers['retry-after']) > 0);
    clock.advance(15 * 60_000 + 1000);
    assert.equal((await attempt('target', PASSWORD)).statusCode, 200);
  });

  test('an unknown name is answered as a wrong password; twenty failures from an address refuse it for every name', async () => {
    const unknown = await attempt('nobody-here', 'whatever it is', '198.51.100.9');
    assert.equal(unknown.statusCode, 401);
    assert.equal(unknown.json().message, 'the name or the password is not right');
    for (let i = 0; i < 19; i++) assert.equal((await attempt(`guess-${i}`, 'wrong password!', '198.51.100.9')).statusCode, 401);
    assert.equal((await attempt('support-1', PASSWORD, '198.51.100.9')).statusCode, 429);
    assert.equal((await attempt('support-1', PASSWORD, '198.51.100.10')).statusCode, 200, 'another address is not refused');
  });
});

describe('the audit log', () => {
  test('every change names who, when, from where, the request id and the changed fields; secrets never', async () => {
    const s = await signIn(t, 'operations-1');
    const m = await asSession(
      t,
      s,
      'POST',
      '/merchants',
      { name: 'Audited', entityType: 'INDIVIDUAL' },
      { headers: { 'x-request-id': 'trace-123' } },
    );
    assert.equal(m.statusCode, 201);
    assert.equal(m.headers['x-request-id'], 'trace-123');
    const merchantId = m.json().merchantId as string;
    const [created] = await auditEntries({ entityId: merchantId });
    assert.equal(created!.action, 'merchant.create');
    assert.equal(created!.operatorName, 'operations-1');
    assert.equal(created!.actor, 'operations-1');
    assert.equal(created!.channel, 'console');
    assert.equal(created!.requestId, 'trace-123');
    assert.equal(created!.sourceIp, '127.0.0.1');
    assert.equal(created!.before, null);
    assert.equal((created!.after as Record<string, unknown>).name, 'Audited');

    const fin = ops.finance!;
    const acc = await asOperator(t, fin, 'POST', `/merchants/${merchantId}/settlement-accounts`, {
      entityType: 'INDIVIDUAL',
      entityName: 'Li',
      merchantNo: 'M9',
      cardNumber: '6222020200119876543',
    });
    assert.equal(acc.statusCode, 201);
    const rule = { ruleVersion: 1, standardRateBps: 60, largeRateBps: 30, thresholdFen: 1000, merchantRateBps: 38 };
    await asOperator(t, fin, 'PUT', `/merchants/${merchantId}/fee-rule`, rule);
    await asOperator(t, fin, 'PUT', `/merchants/${merchantId}/fee-rule`, { ...rule, ruleVersion: 2, standardRateBps: 55 });
    const [second, first] = await auditEntries({ entityId: merchantId, action: 'feeRule.set' });
    assert.deepEqual(second!.before, { ruleVersion: 1, standardRateBps: 60 }, 'only the changed fields');
    assert.deepEqual(second!.after, { ruleVersion: 2, standardRateBps: 55 });
    assert.equal(first!.before, null);
    assert.equal(second!.actor, `finance-1 (token ${second!.tokenId})`);
    assert.equal(second!.channel, 'api');

    // The CLI is told by its user agent; the ADMIN_TOKEN is named as such.
    const cli = await t.server.inject({
      method: 'PATCH',
      url: `/api/admin/v1/apps/${(await t.admin('POST', `/merchants/${merchantId}/apps`, {})).json().appId}`,
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'user-agent': 'mps-ops/0.1.0', 'content-type': 'application/json' },
      payload: JSON.stringify({ rateLimitPerSecond: 9 }),
    });
    assert.equal(cli.statusCode, 200, cli.body);
    const [patched] = await auditEntries({ action: 'app.update' });
    assert.equal(patched!.actor, 'ADMIN_TOKEN');
    assert.equal(patched!.channel, 'cli');
    assert.deepEqual(patched!.after, { rateLimitPerSecond: 9 });

    const all = JSON.stringify(await auditEntries());
    assert.ok(!all.includes('6222020200119876543'), 'no card number');
    assert.ok(!all.includes(PASSWORD), 'no password');
    for (const o of Object.values(ops)) assert.ok(!all.includes(o.token), 'no token');
    assert.ok(!all.includes(s.csrfToken) && !all.includes(s.cookie.split('=')[1]!), 'no session secret');
  });

  test('append-only: no route changes it, and the database refuses an UPDATE, DELETE or TRUNCATE', async () => {
    for (const method of ['PUT', 'PATCH', 'DELETE', 'POST']) {
      const r = await t.admin(method, '/audit', method === 'DELETE' ? undefined : {});
      assert.equal(r.statusCode, 404, `${method} /audit`);
    }
    for (const sql of ['UPDATE audit_log SET action = $1', 'DELETE FROM audit_log WHERE action <> $1', 'TRUNCATE audit_log']) {
      await assert.rejects(t.svc.db.query(sql, sql.includes('$1') ? ['x'] : []), /append-only/);
    }
  });

  test('filters, pages and the CSV export (formula cells neutralised)', async () => {
    // A request id is the caller's text: one written as a spreadsheet formula.
    const formula = await t.server.inject({
      method: 'POST',
      url: '/api/admin/v1/merchants',
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json', 'x-request-id': '=HYPERLINK("x")' },
      payload: JSON.stringify({ name: 'Formula', entityType: 'CORPORATE' }),
    });
    assert.equal(formula.statusCode, 201);
    const ids = (await auditEntries()).map((e) => Number(e.id));
    assert.ok(ids.length > 20);
    assert.deepEqual(
      ids,
      [...ids].sort((a, b) => b - a),
      'newest first, by number',
    );
    const page = await t.admin('GET', '/audit?limit=2');
    assert.equal(page.json().entries.length, 2);
    const next = await t.admin('GET', `/audit?limit=2&before=${page.json().nextBefore}`);
    assert.ok(Number(next.json().entries[0].id) < Number(page.json().entries[1].id));
    const byOperator = await auditEntries({ operator: 'finance-1' });
    assert.ok(byOperator.length > 0 && byOperator.every((e) => e.operatorName === 'finance-1'));
    assert.equal((await t.admin('GET', '/audit?nope=1')).statusCode, 400);
    assert.equal((await t.admin('GET', '/audit?from=yesterday')).statusCode, 400);
    for (const q of ['from=2026-11-22T24:00:00Z', 'to=2026-02-30', 'from=2026-11-22T23:60%2B08:00']) {
      assert.equal((await t.admin('GET', `/audit?${q}`)).statusCode, 400, q);
    }
    assert.equal((await t.admin('GET', '/audit?from=2026-11-22T23:59%2B08:00&to=2026-11-23')).statusCode, 200);

    const csv = await t.admin('GET', '/audit/export.csv?action=merchant.create');
    assert.equal(csv.statusCode, 200);
    assert.match(String(csv.headers['content-type']), /^text\/csv/);
    assert.match(String(csv.headers['content-disposition']), /attachment; filename="audit-\d{4}-\d{2}-\d{2}\.csv"/);
    const lines = csv.body.trim().split('\r\n');
    assert.equal(lines[0], 'id,at,actor,actorKind,operatorName,tokenId,channel,sourceIp,requestId,action,entityType,entityId,before,after');
    assert.ok(lines.length > 2);
    assert.ok(lines.slice(1).every((l) => l.includes(',merchant.create,')));
    const evil = lines.find((l) => l.includes('HYPERLINK'))!;
    assert.ok(evil.includes(`,"'=HYPERLINK(""x"")",`), `the formula is neutralised and quoted (${evil})`);
  });
});

describe('the operator CLI', () => {
  const root = path.resolve(import.meta.dirname, '../..');
  let url: string;
  before(async () => {
    await t.server.listen({ port: 0, host: '127.0.0.1' });
    url = `http://127.0.0.1:${(t.server.server.address() as AddressInfo).port}`;
  });

  function ops(args: string[], stdin = ''): Promise<{ code: number | null; stdout: string; stderr: string }> {
    return new Promise((resolve) => {
      const child = spawn(process.execPath, ['src/cli/ops.ts', ...args], {
        cwd: root,
        env: { ...process.env, ADMIN_TOKEN, MPS_ADMIN_URL: url },
      });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
      child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
      child.on('close', (code) => resolve({ code, stdout, stderr }));
      child.stdin.end(stdin);
    });
  }

  test('creates the first admin with one command (a password generated and printed once), and resets a password', async () => {
    const made = await ops(['operator', 'create', '--name', 'first-admin', '--role', 'admin']);
    assert.equal(made.code, 0, made.stderr);
    const o = JSON.parse(made.stdout);
    assert.equal(o.role, 'admin');
    assert.match(o.password, /^[A-Za-z0-9_-]{24}$/);
    await signIn(t, 'first-admin', o.password);

    const reset = await ops(['operator', 'reset-password', '--name', 'first-admin', '--password-stdin'], 'chosen on the terminal\n');
    assert.equal(reset.code, 0, reset.stderr);
    assert.equal(JSON.parse(reset.stdout).password, undefined, 'a password given is not printed');
    await signIn(t, 'first-admin', 'chosen on the terminal');

    const [entry] = await auditEntries({ action: 'operator.update' });
    assert.equal(entry!.channel, 'cli');
    assert.equal(entry!.actor, 'ADMIN_TOKEN');
    assert.ok(!JSON.stringify(entry).includes('chosen on the terminal'));
    const unknown = await ops(['operator', 'reset-password', '--name', 'nobody']);
    assert.equal(unknown.code, 1);
    assert.match(unknown.stderr, /no operator named nobody/);
  });
});
