/**
 * The signing recipes of recipes/ (Java with the JDK only, Python with `cryptography`), so that
 * they cannot rot: each must reproduce every fixed vector of packages/sdk/test/vectors.json, and
 * against a listening service make a signed create order and query through its own HTTP call,
 * verifying the signed answers, and verify a notification the service delivered to a receiver.
 * A recipe whose toolchain is missing reports itself skipped with the line that installs it (in CI,
 * where MPS_TEST_REQUIRE_ALL=1, it fails instead: test/helpers/prerequisites.ts).
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import type { IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { type Merchant, type TestApp, provision, startTestApp } from '../helpers/app.ts';
import { Receiver, waitFor } from '../helpers/events.ts';
import { type Finished, runProcess } from '../helpers/processes.ts';
import { JDK, PYTHON_CRYPTOGRAPHY, pythonWithCryptography, skipUnless } from '../helpers/prerequisites.ts';

const root = path.resolve(import.meta.dirname, '../..');

interface Vectors {
  key: { privateKeyPem: string; publicKeyPem: string; platformKeyId: string };
  requests: {
    name: string;
    input: Record<'method' | 'target' | 'appId' | 'keyId' | 'timestamp' | 'nonce' | 'requestId' | 'body', string> & {
      contentType: string | null;
    };
    signature: string;
  }[];
  responses: {
    name: string;
    input: { timestamp: string; nonce: string; requestId: string; status: number; body: string };
    signature: string;
  }[];
  notifications: { name: string; input: { timestamp: string; nonce: string; eventId: string; body: string }; signature: string }[];
}
const vectors = JSON.parse(fs.readFileSync(path.join(root, 'packages/sdk/test/vectors.json'), 'utf8')) as Vectors;

interface Recipe {
  name: string;
  skip: string | false;
  /** Compiles when needed; returns the command line that runs the recipe. */
  prepare(dir: string): Promise<string[]>;
}

const RECIPES: Recipe[] = [
  {
    name: 'Java (recipes/java/MpsSigning.java)',
    skip: skipUnless(JDK),
    async prepare(dir) {
      const classes = path.join(dir, 'classes');
      const r = await runProcess('javac', ['-d', classes, path.join(root, 'recipes/java/MpsSigning.java')]);
      assert.equal(r.code, 0, r.stderr);
      return ['java', '-cp', classes, 'MpsSigning'];
    },
  },
  {
    name: 'Python (recipes/python/mps_signing.py)',
    skip: skipUnless(PYTHON_CRYPTOGRAPHY),
    async prepare() {
      return [pythonWithCryptography()!, path.join(root, 'recipes/python/mps_signing.py')];
    },
  },
];

let tmp: string;
let t: TestApp | undefined;
let rx: Receiver | undefined;
let m: Merchant;
let merchantEnv: Record<string, string>;
let vectorKeys: string;

const write = (name: string, content: string | Buffer): string => {
  const file = path.join(tmp, name);
  fs.writeFileSync(file, content);
  return file;
};
const headerLines = (headers: Record<string, string | string[] | undefined>): string =>
  Object.entries(headers)
    .map(([name, value]) => `${name}: ${String(value)}\n`)
    .join('');

before(async () => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'mps-recipes-'));
  vectorKeys = write(
    'vector-platform-keys.json',
    JSON.stringify({ keys: [{ keyId: vectors.key.platformKeyId, publicKeyPem: vectors.key.publicKeyPem }] }),
  );
  write('vector-private.pem', vectors.key.privateKeyPem);
  if (RECIPES.every((r) => r.skip)) return;
  rx = await Receiver.start();
  t = await startTestApp();
  m = await provision(t, { app: { notifyUrl: rx.url('/hook') } });
  await t.server.listen({ port: 0, host: '127.0.0.1' });
  merchantEnv = {
    MPS_BASE_URL: `http://127.0.0.1:${(t.server.server.address() as AddressInfo).port}`,
    MPS_APP_ID: m.appId,
    MPS_KEY_ID: m.keyId,
    MPS_PRIVATE_KEY_FILE: write('merchant-private.pem', m.privateKeyPem),
    MPS_PLATFORM_KEYS_FILE: write('platform-keys.json', (await t.admin('GET', '/platform-keys')).body),
  };
});
after(async () => {
  await t?.stop();
  await rx?.close();
  if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
});

for (const recipe of RECIPES) {
  describe(recipe.name, { skip: recipe.skip }, () => {
    let command: string[];
    let openOrderId: string; // of the order the create test makes, paid by the notification test
    const run = (args: string[], env: Record<string, string> = {}): Promise<Finished> =>
      runProcess(command[0] as string, [...command.slice(1), ...args], { cwd: tmp, env: { ...process.env, ...env } });
    const tag = recipe.name.split(' ')[0]!.toUpperCase();

    before(async () => {
      const dir = path.join(tmp, tag);
      fs.mkdirSync(dir);
      command = await recipe.prepare(dir);
    });

    test('reproduces the X-SVC-Sign of every request vector', async () => {
      for (const v of vectors.requests) {
        const i = v.input;
        const body = i.body === '' ? '' : write(`${tag}-request-body`, i.body);
        const r = await run([
          'sign-request',
          path.join(tmp, 'vector-private.pem'),
          i.method,
          i.target,
          i.appId,
          i.keyId,
          i.timestamp,
          i.nonce,
          i.requestId,
          i.contentType ?? '',
          body,
        ]);
        assert.equal(r.code, 0, `${v.name}: ${r.stderr}`);
        const headers = Object.fromEntries(
          r.stdout
            .split('\n')
            .filter((l) => l.includes(': '))
            .map((l) => [l.slice(0, l.indexOf(':')), l.slice(l.indexOf(':') + 2)]),
        );
        assert.equal(headers['X-SVC-Sign'], v.signature, v.name);
        assert.equal(headers['X-SVC-Request-Id'], i.requestId, v.name);
        assert.equal(headers['Content-Type'], i.contentType ?? undefined, v.name);
      }
    });

    test('verifies every response vector, and refuses a changed status or body', async () => {
      for (const v of vectors.responses) {
        const i = v.input;
        const headers = write(
          `${tag}-response-headers`,
          headerLines({
            'X-SVC-Response-Sign': v.signature,
            'X-SVC-Response-Key-Id': vectors.key.platformKeyId,
            'X-SVC-Response-Timestamp': i.timestamp,
            'X-SVC-Response-Nonce': i.nonce,
            'X-SVC-Request-Id': i.requestId,
          }),
        );
        const body = write(`${tag}-response-body`, i.body);
        const ok = await run(['verify-response', vectorKeys, headers, String(i.status), body, i.requestId]);
        assert.equal(ok.code, 0, `${v.name}: ${ok.stderr}`);
        assert.equal(ok.stdout.trim(), 'verified');
        const status = await run(['verify-response', vectorKeys, headers, String(i.status === 200 ? 201 : 200), body, i.requestId]);
        assert.equal(status.code, 1, `${v.name}, another status`);
        const other = await run(['verify-response', vectorKeys, headers, String(i.status), body, 'req_someone_else']);
        assert.equal(other.code, 1, `${v.name}, an answer to another request`);
        write(`${tag}-response-body`, `${i.body} `);
        const changed = await run(['verify-response', vectorKeys, headers, String(i.status), body, i.requestId]);
        assert.equal(changed.code, 1, `${v.name}, another body`);
      }
    });

    test('verifies every notification vector, and refuses a changed body or a stale timestamp', async () => {
      for (const v of vectors.notifications) {
        const i = v.input;
        const headers = write(
          `${tag}-notify-headers`,
          headerLines({
            'X-SVC-Event-Id': i.eventId,
            'X-SVC-Notify-Timestamp': i.timestamp,
            'X-SVC-Notify-Nonce': i.nonce,
            'X-SVC-Notify-Key-Id': vectors.key.platformKeyId,
            'X-SVC-Notify-Sign': v.signature,
          }),
        );
        const body = write(`${tag}-notify-body`, i.body);
        const ok = await run(['verify-notification', vectorKeys, headers, body, i.timestamp]);
        assert.equal(ok.code, 0, `${v.name}: ${ok.stderr}`);
        assert.match(ok.stdout, new RegExp(i.eventId));
        const stale = await run(['verify-notification', vectorKeys, headers, body, String(Number(i.timestamp) + 301)]);
        assert.equal(stale.code, 1, `${v.name}, 301 s later`);
        write(`${tag}-notify-body`, i.body.replace('SUCCEEDED', 'FAILED'));
        const changed = await run(['verify-notification', vectorKeys, headers, body, i.timestamp]);
        assert.equal(changed.code, 1, `${v.name}, another body`);
      }
    });

    test('against the service: a signed create order and query through its own HTTP call, answers verified', async () => {
      const outTradeNo = `RCP_${tag}_000001`;
      const order = write(
        `${tag}-order.json`,
        JSON.stringify({ outTradeNo, channel: 'ALIPAY_H5', amountFen: 1234, currency: 'CNY', subject: 'Recipe', payerClientIp: '8.8.8.8' }),
      );
      const created = await run(['call', 'POST', '/api/open/v1/payments', order], merchantEnv);
      assert.equal(created.code, 0, created.stderr + created.stdout);
      assert.match(created.stderr, /HTTP 201, response signature verified/);
      assert.equal(JSON.parse(created.stdout).status, 'PAYING');
      openOrderId = JSON.parse(created.stdout).openOrderId;
      const queried = await run(['call', 'GET', `/api/open/v1/payments/${outTradeNo}`], merchantEnv);
      assert.equal(queried.code, 0, queried.stderr + queried.stdout);
      assert.match(queried.stderr, /HTTP 200, response signature verified/);
      assert.equal(JSON.parse(queried.stdout).outTradeNo, outTradeNo);
      // A contract failure after authentication is signed too: verified, exit 1.
      const missing = await run(['call', 'GET', '/api/open/v1/payments/NO_SUCH_ORDER'], merchantEnv);
      assert.equal(missing.code, 1, missing.stderr);
      assert.match(missing.stderr, /HTTP 404, response signature verified/);
      assert.equal(JSON.parse(missing.stdout).code, 'OPEN_API_NOT_FOUND');
    });

    test('against the service: verifies the notification it delivered, and refuses a changed body', async () => {
      const outTradeNo = `RCP_${tag}_000001`;
      assert.ok(openOrderId, 'the create test made the order');
      const pay = await t!.sandbox('POST', `/payments/${openOrderId}/pay`);
      assert.equal(pay.statusCode, 200, pay.body);
      const delivered = await waitFor('the PAYMENT_SUCCEEDED notification', async () => {
        await t!.workers.tick(); // the test app's workers run when told
        return rx!.at('/hook').find((r) => {
          const event = JSON.parse(r.body) as { eventType: string; outTradeNo: string };
          return event.eventType === 'PAYMENT_SUCCEEDED' && event.outTradeNo === outTradeNo;
        });
      });
      const headers = write(`${tag}-delivered-headers`, headerLines(delivered.headers as IncomingHttpHeaders));
      const body = write(`${tag}-delivered-body`, delivered.body);
      const ok = await run(['verify-notification', merchantEnv.MPS_PLATFORM_KEYS_FILE!, headers, body]);
      assert.equal(ok.code, 0, ok.stderr);
      assert.match(ok.stdout, new RegExp(String(delivered.headers['x-svc-event-id'])));
      write(`${tag}-delivered-body`, delivered.body.replace('1234', '4321'));
      const changed = await run(['verify-notification', merchantEnv.MPS_PLATFORM_KEYS_FILE!, headers, body]);
      assert.equal(changed.code, 1, changed.stdout);
    });
  });
}
