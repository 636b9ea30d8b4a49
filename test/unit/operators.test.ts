/** The role -> permissions table, the audit entry's before/after, and password hashing (src/domain/operators.ts, src/lib/password-hash.ts). */
import assert from 'node:assert/strict';
import { pbkdf2 } from 'node:crypto';
import { describe, test } from 'node:test';
import { PERMISSIONS, ROLES, ROLE_PERMISSIONS, auditDiff, can, mayManageTokensOf, passwordProblem } from '../../src/domain/operators.ts';
import type { Actor, Permission, Role } from '../../src/domain/operators.ts';
import { hashPassword, verifyPassword } from '../../src/lib/password-hash.ts';

describe('the role table', () => {
  // The words, one row per role: what each may do beyond reading.
  const expected: Record<Role, Permission[]> = {
    admin: [...PERMISSIONS],
    operations: ['read', 'audit.read', 'merchants.write', 'orders.close', 'events.redeliver', 'ipPolicy.write'],
    finance: ['read', 'audit.read', 'settlement.write', 'feeRules.write', 'reconciliation.write'],
    support: ['read', 'events.redeliver'],
  };

  test('each role holds exactly its permissions', () => {
    for (const role of ROLES) {
      assert.deepEqual(
        PERMISSIONS.filter((p) => can(role, p)),
        PERMISSIONS.filter((p) => expected[role].includes(p)),
        role,
      );
    }
  });

  test('only admin manages operators and rotates platform keys; every role reads', () => {
    for (const role of ROLES) {
      assert.equal(can(role, 'operators.manage'), role === 'admin', role);
      assert.equal(can(role, 'platformKeys.rotate'), role === 'admin', role);
      assert.ok(can(role, 'read'), role);
    }
    assert.ok(!can('support', 'audit.read'), 'support does not read the audit log');
  });

  test('every permission named in the table exists, and the table covers every role', () => {
    assert.deepEqual(Object.keys(ROLE_PERMISSIONS).sort(), [...ROLES].sort());
    for (const ps of Object.values(ROLE_PERMISSIONS)) for (const p of ps) assert.ok(PERMISSIONS.includes(p), p);
  });

  test('an operator manages its own tokens; only operators.manage manages another one', () => {
    const actor = (role: Role, operatorId: string | null): Actor => ({
      kind: operatorId === null ? 'ADMIN_TOKEN' : 'SESSION',
      role,
      operatorId,
      operatorName: operatorId,
      tokenId: null,
      channel: 'console',
      sourceIp: null,
      requestId: 'r',
    });
    assert.ok(mayManageTokensOf(actor('support', 'op_1'), 'op_1'));
    assert.ok(!mayManageTokensOf(actor('support', 'op_1'), 'op_2'));
    assert.ok(!mayManageTokensOf(actor('finance', 'op_1'), 'op_2'));
    assert.ok(mayManageTokensOf(actor('admin', 'op_1'), 'op_2'));
    assert.ok(mayManageTokensOf(actor('admin', null), 'op_2'), 'the ADMIN_TOKEN');
  });
});

describe('audit entries', () => {
  test('a creation keeps every field; a change only the changed ones; dates as ISO text', () => {
    const at = new Date('2025-01-02T03:04:05.000Z');
    assert.deepEqual(auditDiff(null, { a: 1, at }), { before: null, after: { a: 1, at: at.toISOString() } });
    assert.deepEqual(auditDiff({ a: 1, b: [1, 2], c: 'x' }, { a: 1, b: [1, 3], c: 'y' }), {
      before: { b: [1, 2], c: 'x' },
      after: { b: [1, 3], c: 'y' },
    });
    assert.deepEqual(auditDiff({ a: 1 }, { a: 1, n: null }), { before: {}, after: {} }, 'absent and null are both null');
  });

  test('secret fields never enter an entry, at any depth', () => {
    const d = auditDiff(null, { password: 'hunter2hunter2', nested: { cardNumber: '6222020200112345', token: 'mpsop_x' } });
    assert.ok(!JSON.stringify(d).includes('hunter2'));
    assert.ok(!JSON.stringify(d).includes('6222020200112345'));
    assert.ok(!JSON.stringify(d).includes('mpsop_x'));
  });
});

describe('passwords', () => {
  test('length rules in plain words', () => {
    assert.match(passwordProblem('short')!, /at least 12/);
    assert.equal(passwordProblem('correct horse battery'), null);
    assert.match(passwordProblem(' leading space here')!, /space/);
    assert.match(passwordProblem('x'.repeat(257))!, /at most 256/);
  });

  test('scrypt hashes: salted, verified, parameters inside, a wrong password or a foreign hash refused', async () => {
    const h1 = await hashPassword('correct horse battery');
    const h2 = await hashPassword('correct horse battery');
    assert.notEqual(h1, h2, 'salted');
    assert.match(h1, /^scrypt\$32768\$8\$3\$[A-Za-z0-9_-]+\$[A-Za-z0-9_-]+$/);
    assert.ok(await verifyPassword('correct horse battery', h1));
    assert.ok(!(await verifyPassword('correct horse batterY', h1)));
    assert.ok(!(await verifyPassword('correct horse battery', 'plain')));
    assert.ok(!(await verifyPassword('x', h1.replace('$32768$', '$1073741824$'))), 'an absurd cost is refused, not computed');
  });

  test("hashes run on threads of their own: libuv's pool (the open API's signatures) stays free while they wait", async () => {
    const done: string[] = [];
    // More hashes than libuv's pool has threads (4): on the pool they would hold all of it.
    const hashes = Array.from({ length: 6 }, (_, i) => hashPassword(`password number ${i}`).then(() => done.push(`hash ${i}`)));
    // A job of libuv's pool (what a signature is) sent after them is served before the first hash is done.
    await new Promise((resolve, reject) =>
      pbkdf2('x', 'salt', 1, 32, 'sha256', (err) => (err ? reject(err) : resolve(done.push('pool job')))),
    );
    await Promise.all(hashes);
    assert.equal(done[0], 'pool job', done.join(', '));
  });
});
