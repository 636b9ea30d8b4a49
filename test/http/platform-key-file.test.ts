/**
 * PLATFORM_KEY_FILE is the platform's signing key, read at start and again when it changes
 * (src/platform/keys.ts). While the file is missing or holds no usable key, the key is unavailable:
 * answers that need a signature are 503 OPEN_API_GUARD_UNAVAILABLE, unsigned, requestId "" in the
 * body and the id in X-SVC-Request-Id (decisions.md section 3); a good key in the file signs again.
 */
import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { type Merchant, type TestApp, provision, startTestApp } from '../helpers/app.ts';
import { KEY_FILE_CHECK_MS } from '../../src/platform/keys.ts';
import { assertUnsigned, send } from './gate-kit.test.ts';

const SETTLEMENT = '/api/open/v1/settlement/accounts';
let dir: string;
let file: string;
let t: TestApp;
let m: Merchant;

const pem = () => generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
/** The key file looked at again, as its watch does every KEY_FILE_CHECK_MS. */
const settle = () => t.svc.keys.recheck();

before(async () => {
  dir = await fs.mkdtemp(path.join(os.tmpdir(), 'mps-keyfile-'));
  file = path.join(dir, 'platform.pem');
  await fs.writeFile(file, pem(), { mode: 0o600 });
  t = await startTestApp({ PLATFORM_KEY_FILE: file });
  m = await provision(t);
});
after(async () => {
  await t.stop();
  await fs.rm(dir, { recursive: true, force: true });
});

async function expectUnavailable(): Promise<void> {
  const s = await send(t, m, 'GET', SETTLEMENT);
  assert.equal(s.r.statusCode, 503, s.r.body);
  assert.deepEqual(s.r.json(), { code: 'OPEN_API_GUARD_UNAVAILABLE', message: s.r.json().message, requestId: '' });
  assert.equal(s.r.headers['x-svc-request-id'], s.requestId);
  assertUnsigned(s.r);
}

async function expectSignedBy(keyId: string): Promise<void> {
  const s = await send(t, m, 'GET', SETTLEMENT);
  assert.equal(s.r.statusCode, 200, s.r.body);
  assert.equal(s.r.headers['x-svc-response-key-id'], keyId);
}

test('the key file is the signing key; broken or missing, signed answers are 503; a new good key signs', async () => {
  const first = (await t.admin('GET', '/platform-keys')).json().keys as { keyId: string }[];
  assert.equal(first.length, 1);
  await expectSignedBy(first[0]!.keyId);

  await fs.writeFile(file, 'not a key');
  await settle();
  await expectUnavailable();

  await fs.rm(file);
  await settle();
  await expectUnavailable();

  await fs.writeFile(file, pem(), { mode: 0o600 });
  await settle();
  const now = (await t.admin('GET', '/platform-keys')).json().keys as { keyId: string }[];
  assert.equal(now.length, 2, 'the earlier key stays published for verification');
  assert.equal(now[0]!.keyId, first[0]!.keyId);
  await expectSignedBy(now[1]!.keyId);
});

test('a service started while its key file is missing runs, answers 503 where it would sign, and recovers', async () => {
  const missing = path.join(dir, 'later.pem');
  const t2 = await startTestApp({ PLATFORM_KEY_FILE: missing });
  try {
    const m2 = await provision(t2);
    const s = await send(t2, m2, 'GET', SETTLEMENT);
    assert.equal(s.r.statusCode, 503);
    assert.equal(s.r.json().requestId, '');
    assertUnsigned(s.r);
    assert.deepEqual((await t2.admin('GET', '/platform-keys')).json().keys, []);
    await fs.writeFile(missing, pem(), { mode: 0o600 });
    // Left to the watch itself (a real interval: the file system is not on the service's clock).
    let unavailable = true;
    for (let i = 0; i < 60 && unavailable; i++) {
      unavailable = (await t2.admin('GET', '/platform-keys')).json().keys.length === 0;
      if (unavailable) await new Promise((r) => setTimeout(r, KEY_FILE_CHECK_MS / 20));
    }
    const ok = await send(t2, m2, 'GET', SETTLEMENT);
    assert.equal(ok.r.statusCode, 200, ok.r.body);
    assert.ok(ok.r.headers['x-svc-response-sign']);
  } finally {
    await t2.stop();
  }
});
