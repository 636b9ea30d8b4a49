/**
 * Staged rotation of the generated platform key (POST /api/admin/v1/platform-keys/rotate): the new
 * key is published at once and signs only from its activation time (24 h later by default), so
 * merchants fetch it before it is used; `activateAfterSeconds: 0` switches at once. The activation
 * survives a restart (it is in the key file's name).
 */
import assert from 'node:assert/strict';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { type Merchant, type TestApp, call, provision, startTestApp } from '../helpers/app.ts';
import { PlatformKeyRing } from '../../src/platform/keys.ts';
import { FakeClock } from '../helpers/events.ts';

const SETTLEMENT = '/api/open/v1/settlement/accounts';
let t: TestApp;
let m: Merchant;

before(async () => {
  t = await startTestApp();
  m = await provision(t);
});
after(() => t.stop());

const signer = async () => {
  const r = await call(t, m, 'GET', SETTLEMENT);
  assert.equal(r.statusCode, 200, r.body);
  return r.headers['x-svc-response-key-id'];
};

test('a rotation publishes the new key at once and signs with it only from its activation time', async () => {
  const k0 = (await t.admin('GET', '/platform-keys')).json();
  assert.equal(k0.keys.length, 1);
  assert.equal(k0.nextKey, null);
  const old = k0.currentKeyId as string;
  assert.equal(await signer(), old);

  const t0 = Date.now();
  const rot = await t.admin('POST', '/platform-keys/rotate');
  assert.equal(rot.statusCode, 201, rot.body);
  const staged = rot.json();
  assert.match(staged.keyId, /^pk_[0-9a-f]{16}$/);
  assert.match(staged.publicKeyPem, /^-----BEGIN PUBLIC KEY-----/);
  const at = Date.parse(staged.activatesAt);
  assert.ok(at >= t0 + 86_400_000 - 1000 && at <= Date.now() + 86_400_000 + 1000, 'signs 24 h later by default');

  const k1 = (await t.admin('GET', '/platform-keys')).json();
  assert.deepEqual(
    k1.keys.map((k: { keyId: string }) => k.keyId),
    [old, staged.keyId],
    'published at once, for merchants to fetch',
  );
  assert.equal(k1.currentKeyId, old);
  assert.deepEqual(k1.nextKey, { keyId: staged.keyId, activatesAt: staged.activatesAt });
  assert.equal(await signer(), old, 'answers are still signed with the key merchants already have');

  const now = await t.admin('POST', '/platform-keys/rotate', { activateAfterSeconds: 0 });
  assert.equal(now.statusCode, 201, now.body);
  assert.equal(await signer(), now.json().keyId, 'activateAfterSeconds 0: signs at once (a compromised key)');
  const k2 = (await t.admin('GET', '/platform-keys')).json();
  assert.deepEqual(
    k2.keys.map((k: { keyId: string }) => k.keyId),
    [old, now.json().keyId],
    'an immediate rotation withdraws the staged key (it may have leaked too)',
  );
  assert.equal(k2.currentKeyId, now.json().keyId);
  assert.equal(k2.nextKey, null);
});

test("a staged key signs once its activation time comes on the service's clock", async () => {
  const clock = new FakeClock();
  const c = await startTestApp({}, { clock });
  try {
    const cm = await provision(c);
    const signedBy = async () => {
      const r = await call(c, cm, 'GET', SETTLEMENT, undefined, { timestamp: String(Math.floor(clock.now() / 1000)) });
      assert.equal(r.statusCode, 200, r.body);
      return r.headers['x-svc-response-key-id'];
    };
    const old = await signedBy();
    const staged = (await c.admin('POST', '/platform-keys/rotate', { activateAfterSeconds: 3600 })).json();
    clock.advance(3_599_000);
    assert.equal(await signedBy(), old, 'not before its time');
    clock.advance(2_000);
    assert.equal(await signedBy(), staged.keyId, 'from its time on');
    const keys = (await c.admin('GET', '/platform-keys')).json();
    assert.equal(keys.currentKeyId, staged.keyId);
    assert.equal(keys.nextKey, null);
  } finally {
    await c.stop();
  }
});

test('rotation bodies are validated strictly and change nothing when refused', async () => {
  const before = (await t.admin('GET', '/platform-keys')).json();
  for (const body of [{ activateAfterSeconds: -1 }, { activateAfterSeconds: 1.5 }, { activateAfterSeconds: '60' }, { other: 1 }]) {
    const r = await t.admin('POST', '/platform-keys/rotate', body);
    assert.equal(r.statusCode, 400, JSON.stringify(body));
    assert.equal(r.json().code, 'ADMIN_VALIDATION_FAILED');
  }
  assert.deepEqual((await t.admin('GET', '/platform-keys')).json(), before);
});

test('the activation time survives a restart', async () => {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'mps-rotation-'));
  try {
    const log = () => {};
    const ring = await PlatformKeyRing.load({ keyFile: null, dataDir: dir, log });
    const first = ring.current!.keyId;
    const later = await ring.rotate(60_000);
    const again = await PlatformKeyRing.load({ keyFile: null, dataDir: dir, log });
    assert.equal(again.current!.keyId, first);
    assert.equal(again.next!.keyId, later.keyId);
    assert.equal(again.next!.activatesAt.getTime(), later.activatesAt.getTime());
    assert.deepEqual(
      again.list().map((k) => k.keyId),
      [first, later.keyId],
    );
  } finally {
    await fs.rm(dir, { recursive: true, force: true });
  }
});

test('instances sharing DATA_DIR: a rotation through one is published, signs and is withdrawn on the others within a second', async () => {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'mps-rotation-shared-'));
  const log = () => {};
  const rings: PlatformKeyRing[] = [];
  const until = async (what: string, ok: () => boolean) => {
    for (let i = 0; i < 40 && !ok(); i++) await new Promise((r) => setTimeout(r, 100));
    assert.ok(ok(), what);
  };
  try {
    // Two instances starting at once on an empty directory each generate a key; they converge on
    // one signing key, and each publishes both.
    const [a, b] = await Promise.all([
      PlatformKeyRing.load({ keyFile: null, dataDir: dir, log }),
      PlatformKeyRing.load({ keyFile: null, dataDir: dir, log }),
    ]);
    rings.push(a!, b!);
    await until('both publish both keys', () => a!.list().length === 2 && b!.list().length === 2);
    await until('one signing key', () => a!.current!.keyId === b!.current!.keyId);

    const staged = await a!.rotate(60_000);
    await until('the staged key published on the other instance', () => b!.list().some((k) => k.keyId === staged.keyId));
    assert.equal(b!.next!.keyId, staged.keyId);
    assert.notEqual(b!.current!.keyId, staged.keyId, 'staged: it does not sign yet');

    const urgent = await b!.rotate(0);
    assert.equal(b!.current!.keyId, urgent.keyId);
    await until('the immediate rotation signs on the other instance', () => a!.current!.keyId === urgent.keyId);
    await until('the staged key withdrawn on both', () => !a!.list().some((k) => k.keyId === staged.keyId));
    assert.equal(
      b!.list().some((k) => k.keyId === staged.keyId),
      false,
    );
    assert.deepEqual(
      a!.list().map((k) => k.keyId),
      b!.list().map((k) => k.keyId),
    );
  } finally {
    for (const r of rings) r.close();
    await fs.rm(dir, { recursive: true, force: true });
  }
});
