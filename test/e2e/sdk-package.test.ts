/**
 * The packed SDK as a merchant gets it: `npm pack` of packages/sdk (compiled JavaScript, ESM and
 * CommonJS, declarations), installed from the tarball into an empty project with no registry, and
 * used from plain JavaScript on the machine's system Node (Debian's, older than the project's)
 * against a listening service: a signed create order and query, the CLI's `sandbox pay`, and a
 * notification the service delivered, verified with the SDK.
 *
 * The pack runs on a copy of packages/sdk: its prepack stages the publish manifest over the copy's
 * package.json for a moment, and other suites of this checkout resolve @mps/sdk meanwhile.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { ADMIN_TOKEN, type Merchant, type TestApp, provision, startTestApp } from '../helpers/app.ts';
import { Receiver, waitFor } from '../helpers/events.ts';
import { runProcess } from '../helpers/processes.ts';
import { SYSTEM_NODE as SYSTEM_NODE_PREREQUISITE, SYSTEM_NODE_PATH, skipUnless } from '../helpers/prerequisites.ts';

const root = path.resolve(import.meta.dirname, '../..');
const SYSTEM_NODE = SYSTEM_NODE_PATH;

/** A plain ESM program: signed create order and query through the packed client. */
const ORDER_PROGRAM = `
import { readFileSync } from 'node:fs';
import { PaymentClient, parsePlatformKeysJson } from '@mps/sdk';
import { requestSigningString, sha256Hex } from '@mps/sdk/signing';

const env = process.env;
const client = new PaymentClient({
  baseUrl: env.MPS_BASE_URL,
  appId: env.MPS_APP_ID,
  keyId: env.MPS_KEY_ID,
  privateKeyPem: readFileSync(env.MPS_PRIVATE_KEY_FILE, 'utf8'),
  platformPublicKeys: parsePlatformKeysJson(readFileSync(env.MPS_PLATFORM_KEYS_FILE, 'utf8')),
  requireSignedSuccess: true,
});
const outTradeNo = process.argv[2];
const created = await client.createOrder({
  outTradeNo, channel: 'ALIPAY_H5', amountFen: 1234, currency: 'CNY', subject: 'Packed SDK', payerClientIp: '8.8.8.8',
});
const queried = await client.queryOrder(outTradeNo);
const signingString = requestSigningString({
  method: 'get', target: '/', appId: 'a', keyId: 'k', timestamp: '1', nonce: 'n', requestId: 'r', contentType: undefined, body: '',
});
console.log(JSON.stringify({
  node: process.version,
  created: { status: created.status, signatureVerified: created.signatureVerified, body: created.body },
  queried: { status: queried.status, signatureVerified: queried.signatureVerified, body: queried.body },
  emptyBodyHash: sha256Hex(''),
  signingStringLines: signingString.split('\\n').length - 1,
}));
`;

/** A plain CommonJS program: verifies a notification (headers JSON file, raw body file). */
const VERIFY_PROGRAM = `
const { readFileSync } = require('node:fs');
const { NotificationVerificationError, parsePlatformKeysJson, verifyNotification } = require('@mps/sdk');

const [headersFile, bodyFile] = process.argv.slice(2);
try {
  const event = verifyNotification({
    headers: JSON.parse(readFileSync(headersFile, 'utf8')),
    rawBody: readFileSync(bodyFile),
    platformPublicKeys: parsePlatformKeysJson(readFileSync(process.env.MPS_PLATFORM_KEYS_FILE, 'utf8')),
  });
  console.log(JSON.stringify({ node: process.version, verified: true, eventType: event.eventType, outTradeNo: event.outTradeNo }));
} catch (err) {
  if (!(err instanceof NotificationVerificationError)) throw err;
  console.log(JSON.stringify({ node: process.version, verified: false, reason: err.reason }));
}
`;

/** A TypeScript consumer of the declarations, both entry points. */
const CONSUMER_ESM = `
import { PaymentClient, type CreateOrderRequest, type QueryOrderResponse } from '@mps/sdk';
import { requestSigningString } from '@mps/sdk/signing';
const order: CreateOrderRequest = { outTradeNo: 'T_1', channel: 'ALIPAY_H5', amountFen: 1, currency: 'CNY', subject: 's', payerClientIp: '8.8.8.8' };
export async function status(c: PaymentClient): Promise<QueryOrderResponse['status']> {
  await c.createOrder(order);
  return (await c.queryOrder(order.outTradeNo)).body.status;
}
export const line: string = requestSigningString({ method: 'GET', target: '/', appId: 'a', keyId: 'k', timestamp: '1', nonce: 'n', requestId: 'r', contentType: undefined, body: '' });
`;
const CONSUMER_CJS = `
import sdk = require('@mps/sdk');
export const verify: typeof sdk.verifyNotification = sdk.verifyNotification;
export const bits: number = sdk.DEFAULT_RSA_BITS;
`;

describe(
  'the packed @mps/sdk, installed from its tarball, on the system Node',
  { skip: skipUnless(SYSTEM_NODE_PREREQUISITE), timeout: 180_000 },
  () => {
    let tmp: string;
    let project: string;
    let tarball: string;
    let t: TestApp;
    let rx: Receiver;
    let m: Merchant;
    let env: NodeJS.ProcessEnv;
    const systemPath = `${path.dirname(SYSTEM_NODE)}:/usr/bin:/bin`;
    let systemVersion: string;

    before(async () => {
      tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'mps-sdk-package-'));
      systemVersion = (await runProcess(SYSTEM_NODE, ['--version'])).stdout.trim();

      // npm pack on a copy of the package; node_modules beside it gives its prepack tsc and @types/node.
      const copy = path.join(tmp, 'pack', 'sdk');
      fs.cpSync(path.join(root, 'packages/sdk'), copy, {
        recursive: true,
        filter: (src) => !/[/\\](dist|\.package\.workspace\.json|[^/\\]+\.tgz)$/.test(src),
      });
      fs.symlinkSync(path.join(root, 'node_modules'), path.join(tmp, 'pack', 'node_modules'), 'dir');
      const manifestBefore = fs.readFileSync(path.join(copy, 'package.json'), 'utf8');
      // The project's Node first: npm, and the prepack script it runs, on Node 24.
      const npmEnv = { ...process.env, PATH: `${path.dirname(process.execPath)}:${process.env.PATH ?? ''}` };
      const packed = await runProcess('npm', ['pack', '--json', '--pack-destination', tmp], { cwd: copy, env: npmEnv });
      assert.equal(packed.code, 0, packed.stderr + packed.stdout);
      tarball = path.join(tmp, (JSON.parse(packed.stdout) as { filename: string }[])[0]!.filename);
      assert.equal(fs.readFileSync(path.join(copy, 'package.json'), 'utf8'), manifestBefore, 'postpack puts the workspace manifest back');

      project = path.join(tmp, 'project');
      fs.mkdirSync(project);
      fs.writeFileSync(path.join(project, 'package.json'), '{ "name": "merchant-app", "private": true }\n');
      const installed = await runProcess('npm', ['install', '--offline', '--no-audit', '--no-fund', tarball], {
        cwd: project,
        env: npmEnv,
      });
      assert.equal(installed.code, 0, installed.stderr + installed.stdout);
      fs.writeFileSync(path.join(project, 'order.mjs'), ORDER_PROGRAM);
      fs.writeFileSync(path.join(project, 'verify.cjs'), VERIFY_PROGRAM);

      rx = await Receiver.start();
      t = await startTestApp();
      m = await provision(t, { app: { notifyUrl: rx.url('/hook') } });
      await t.server.listen({ port: 0, host: '127.0.0.1' });
      fs.writeFileSync(path.join(tmp, 'merchant-private.pem'), m.privateKeyPem);
      fs.writeFileSync(path.join(tmp, 'platform-keys.json'), (await t.admin('GET', '/platform-keys')).body);
      // Only what a merchant's shell would hold: the system Node on PATH, the SDK's settings.
      env = {
        PATH: systemPath,
        HOME: tmp,
        MPS_BASE_URL: `http://127.0.0.1:${(t.server.server.address() as AddressInfo).port}`,
        MPS_APP_ID: m.appId,
        MPS_KEY_ID: m.keyId,
        MPS_PRIVATE_KEY_FILE: path.join(tmp, 'merchant-private.pem'),
        MPS_PLATFORM_KEYS_FILE: path.join(tmp, 'platform-keys.json'),
      };
    });
    after(async () => {
      await t?.stop();
      await rx?.close();
      if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
    });

    test('the package holds compiled JavaScript and declarations only, and depends on nothing', () => {
      const pkgDir = path.join(project, 'node_modules/@mps/sdk');
      const manifest = JSON.parse(fs.readFileSync(path.join(pkgDir, 'package.json'), 'utf8')) as Record<string, unknown>;
      for (const field of ['dependencies', 'peerDependencies', 'optionalDependencies', 'scripts'])
        assert.equal(manifest[field], undefined, field);
      assert.deepEqual(manifest.engines, { node: '>=18' });
      const files = fs.readdirSync(pkgDir, { recursive: true }).map(String);
      assert.deepEqual(
        files.filter((f) => f.endsWith('.ts') && !f.endsWith('.d.ts')),
        [],
        'no TypeScript source',
      );
      for (const f of ['dist/index.js', 'dist/index.d.ts', 'dist/signing.js', 'dist/cli.js', 'dist/cjs/index.js', 'dist/cjs/index.d.ts']) {
        assert.ok(files.includes(f), f);
      }
      // Every target the manifest names exists, and none is TypeScript source.
      const targets: string[] = [];
      const collect = (v: unknown): void => {
        if (typeof v === 'string') targets.push(v);
        else if (v !== null && typeof v === 'object') Object.values(v).forEach(collect);
      };
      collect([manifest.exports, manifest.bin, manifest.main, manifest.types]);
      assert.ok(targets.length >= 10);
      for (const target of targets) assert.ok(fs.existsSync(path.join(pkgDir, target)), target);
      assert.deepEqual(
        targets.filter((target) => target.endsWith('.ts') && !target.endsWith('.d.ts')),
        [],
      );
      assert.doesNotMatch(fs.readFileSync(path.join(pkgDir, 'dist/index.d.ts'), 'utf8'), /from '\.\/[^']+\.ts'/);
    });

    test("the package's README is the SDK's own, and its links work from the package registry", () => {
      const shipped = fs.readFileSync(path.join(project, 'node_modules/@mps/sdk/README.md'), 'utf8');
      assert.equal(shipped, fs.readFileSync(path.join(root, 'packages/sdk/README.md'), 'utf8'));
      assert.match(shipped, /^# @mps\/sdk/);
      for (const section of ['Install', 'Signing a request yourself', 'Response signatures', 'Verifying a notification', 'Types'])
        assert.match(shipped, new RegExp(`^## ${section}$`, 'm'), section);
      // GitHub's anchors of its own headings: a link into the README itself must name one of them.
      const anchors = new Set(
        [...shipped.matchAll(/^#+ (.*)$/gm)].map((m) =>
          m[1]!
            .toLowerCase()
            .replace(/[^\p{L}\p{N} _-]/gu, '')
            .replace(/ /g, '-'),
        ),
      );
      const links = [...shipped.matchAll(/\]\(([^)\s]+)\)/g)].map((m) => m[1]!);
      assert.ok(links.length > 5);
      for (const href of links) {
        if (href.startsWith('#')) assert.ok(anchors.has(href.slice(1)), `${href} names a heading`);
        else assert.match(href, /^https:\/\//, `${href}: an absolute URL or none (a relative one breaks on the registry)`);
      }
      // Nothing that only exists in the repository the package comes from.
      assert.doesNotMatch(shipped, /npm run|\.\.\/|packages\/sdk|docs\/[a-z-]+\.md|decisions\.md/);
    });

    test('its declarations need @types/node, as its README says', async () => {
      fs.writeFileSync(path.join(project, 'bare.mts'), CONSUMER_ESM);
      const tsc = path.join(root, 'node_modules/typescript/bin/tsc');
      const r = await runProcess(
        process.execPath,
        [tsc, '--noEmit', '--strict', '--module', 'nodenext', '--moduleResolution', 'nodenext', '--target', 'es2022', 'bare.mts'],
        { cwd: project },
      );
      assert.notEqual(r.code, 0, 'without @types/node the declarations do not type-check');
      assert.match(r.stdout + r.stderr, /Cannot find (module|name) '(node:crypto|Buffer)'|@types\/node/);
      assert.match(fs.readFileSync(path.join(root, 'packages/sdk/README.md'), 'utf8'), /needs `@types\/node`/);
    });

    test('its declarations type-check a consumer, through import and require', async () => {
      fs.writeFileSync(path.join(project, 'consumer.mts'), CONSUMER_ESM);
      fs.writeFileSync(path.join(project, 'consumer.cts'), CONSUMER_CJS);
      const tsc = path.join(root, 'node_modules/typescript/bin/tsc');
      const r = await runProcess(
        process.execPath,
        [
          tsc,
          '--noEmit',
          '--strict',
          '--module',
          'nodenext',
          '--moduleResolution',
          'nodenext',
          '--target',
          'es2022',
          '--typeRoots',
          path.join(root, 'node_modules/@types'),
          '--types',
          'node',
          'consumer.mts',
          'consumer.cts',
        ],
        { cwd: project },
      );
      assert.equal(r.code, 0, r.stdout + r.stderr);
    });

    test('plain JavaScript (ESM) on the system Node: a signed create order and query, answers verified', async () => {
      const r = await runProcess(SYSTEM_NODE, ['order.mjs', 'PKG_ORDER_000001'], { cwd: project, env });
      assert.equal(r.code, 0, r.stderr + r.stdout);
      const out = JSON.parse(r.stdout);
      assert.equal(out.node, systemVersion);
      assert.equal(out.created.status, 201);
      assert.equal(out.created.signatureVerified, true);
      assert.equal(out.created.body.status, 'PAYING');
      assert.equal(out.queried.signatureVerified, true);
      assert.equal(out.queried.body.openOrderId, out.created.body.openOrderId);
      assert.equal(out.emptyBodyHash, 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855');
      assert.equal(out.signingStringLines, 9);
    });

    test('the packed CLI on the system Node pays the order by its outTradeNo; a delivered notification verifies (CommonJS)', async () => {
      const cli = path.join(project, 'node_modules/.bin/mps-merchant');
      const help = await runProcess(cli, ['--help'], { cwd: project, env });
      assert.equal(help.code, 0, help.stderr);
      assert.match(help.stdout, /sandbox pay/);
      const pay = await runProcess(cli, ['sandbox', 'pay', 'PKG_ORDER_000001'], {
        cwd: project,
        env: { ...env, ADMIN_TOKEN },
      });
      assert.equal(pay.code, 0, pay.stderr + pay.stdout);
      assert.equal(JSON.parse(pay.stdout).status, 'SUCCEEDED');
      const query = await runProcess(cli, ['query-order', 'PKG_ORDER_000001'], { cwd: project, env });
      assert.equal(query.code, 0, query.stderr);
      assert.equal(JSON.parse(query.stdout).status, 'SUCCEEDED');

      const delivered = await waitFor('the PAYMENT_SUCCEEDED notification', async () => {
        await t.workers.tick(); // the test app's workers run when told
        return rx.at('/hook').find((r) => (JSON.parse(r.body) as { eventType: string }).eventType === 'PAYMENT_SUCCEEDED');
      });
      const headersFile = path.join(tmp, 'headers.json');
      const bodyFile = path.join(tmp, 'body.json');
      fs.writeFileSync(headersFile, JSON.stringify(delivered.headers));
      fs.writeFileSync(bodyFile, delivered.body);
      const ok = await runProcess(SYSTEM_NODE, ['verify.cjs', headersFile, bodyFile], { cwd: project, env });
      assert.equal(ok.code, 0, ok.stderr);
      assert.deepEqual(JSON.parse(ok.stdout), {
        node: systemVersion,
        verified: true,
        eventType: 'PAYMENT_SUCCEEDED',
        outTradeNo: 'PKG_ORDER_000001',
      });
      assert.ok(delivered.body.includes('1234'));
      fs.writeFileSync(bodyFile, delivered.body.replace('1234', '4321'));
      const tampered = await runProcess(SYSTEM_NODE, ['verify.cjs', headersFile, bodyFile], { cwd: project, env });
      assert.equal(tampered.code, 0, tampered.stderr);
      assert.deepEqual(JSON.parse(tampered.stdout), { node: systemVersion, verified: false, reason: 'BAD_SIGNATURE' });
    });
  },
);
