/**
 * docs/quickstart.md, step by step, as a newcomer runs it: `npm start` on the embedded database,
 * the operator CLI, the example receiver, the merchant CLI (SDK), the sandbox pay helper.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import fs from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import { type Finished, runProcess } from '../helpers/processes.ts';

const root = path.resolve(import.meta.dirname, '../..');
const ADMIN_TOKEN = 'quickstart-admin-token-123';
const children: ChildProcess[] = [];
let work: string;

after(async () => {
  for (const c of children) {
    try {
      process.kill(-c.pid!, 'SIGTERM');
    } catch {
      /* already gone */
    }
  }
  await Promise.all(children.map((c) => (c.exitCode === null && c.signalCode === null ? new Promise((r) => c.once('exit', r)) : null)));
  if (work) {
    // A clone in a 0700 temp dir run as root keeps its cluster elsewhere (DATA_DIR/pg-location).
    const moved = await fs.readFile(path.join(work, 'data', 'pg-location'), 'utf8').catch(() => null);
    // The service's PostgreSQL may still be writing its shutdown checkpoint when the service's
    // process has exited: wait (bounded) for its postmaster.pid to go, and retry a busy removal.
    for (const dir of [moved?.trim(), path.join(work, 'data')]) {
      if (!dir) continue;
      for (let i = 0; i < 100; i++) {
        const running = await fs.stat(path.join(dir, 'pg', 'postmaster.pid')).then(
          () => true,
          () => false,
        );
        if (!running) break;
        await new Promise((r) => setTimeout(r, 100));
      }
    }
    const rm = { recursive: true, force: true, maxRetries: 10, retryDelay: 200 };
    if (moved) await fs.rm(moved.trim(), rm);
    await fs.rm(work, rm);
  }
});

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}

function background(cmd: string, args: string[], env: Record<string, string>, ready: RegExp): Promise<{ out: () => string }> {
  const child = spawn(cmd, args, { cwd: root, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  children.push(child);
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${args.join(' ')} not ready:\n${out}`)), 90_000);
    const poll = setInterval(() => {
      if (ready.test(out)) {
        clearInterval(poll);
        clearTimeout(timer);
        resolve({ out: () => out });
      }
    }, 50);
    child.once('exit', (code) => {
      clearInterval(poll);
      clearTimeout(timer);
      reject(new Error(`${args.join(' ')} exited ${code}:\n${out}`));
    });
  });
}

function run(cmd: string, args: string[], env: Record<string, string>): Promise<Finished> {
  return runProcess(cmd, args, { cwd: root, env: { ...process.env, ...env } });
}

async function waitFor(what: string, get: () => string, re: RegExp, ms = 30_000): Promise<RegExpExecArray> {
  const until = Date.now() + ms;
  for (;;) {
    const m = re.exec(get());
    if (m) return m;
    if (Date.now() > until) throw new Error(`${what}: no ${re} in:\n${get()}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

function envFile(text: string): Record<string, string> {
  return Object.fromEntries(
    text
      .trim()
      .split('\n')
      .map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]),
  );
}

/** The commands of docs/quickstart.md this test runs: kept word for word in the guide. */
const GUIDE_COMMANDS = [
  'export PORT=8080 HOOK_PORT=9000 ADMIN_TOKEN=quickstart-admin-token-123',
  'export BASE=http://127.0.0.1:$PORT',
  'npm start',
  'MPS_ADMIN_URL=$BASE npm run ops -- provision --name "My Shop" --notify-url http://127.0.0.1:$HOOK_PORT/hook --out-dir ./my-shop',
  'npx node packages/sdk/examples/webhook-receiver.ts $HOOK_PORT',
  'npx mps-merchant create-order --json \'{"outTradeNo":"ORDER_000001","channel":"ALIPAY_H5","amountFen":1234,"currency":"CNY","subject":"Coffee","payerClientIp":"8.8.8.8"}\'',
  'npx mps-merchant sandbox pay ORDER_000001',
  'npx mps-merchant query-order ORDER_000001',
  'npx mps-merchant create-refund --json \'{"outTradeNo":"ORDER_000001","outRefundNo":"REFUND_000001","refundAmountFen":234}\'',
];

test('the guide holds the commands this test runs, and builds every address from its variables', async () => {
  const guide = await fs.readFile(path.join(root, 'docs/quickstart.md'), 'utf8');
  for (const command of GUIDE_COMMANDS) assert.ok(guide.includes(command), `docs/quickstart.md runs: ${command}`);
  assert.doesNotMatch(guide, /(127\.0\.0\.1|localhost):[0-9]/, 'no address with a written-out port: $BASE and $HOOK_PORT');
});

test('quickstart: empty folder to a paid sandbox order and a verified event', { timeout: 180_000 }, async () => {
  work = await fs.mkdtemp(path.join(os.tmpdir(), 'mps-quickstart-'));
  const port = await freePort();
  const hookPort = await freePort();
  const base = `http://127.0.0.1:${port}`;
  // The variables every terminal of the guide sets (free ports instead of 8080 and 9000).
  const shell = { PORT: String(port), HOOK_PORT: String(hookPort), ADMIN_TOKEN, BASE: base };

  // 1. npm start (embedded PostgreSQL in a fresh DATA_DIR)
  await background('npm', ['start'], { ...shell, DATA_DIR: path.join(work, 'data'), DATABASE_URL: '' }, /Server listening/);

  // 2. provision
  const outDir = path.join(work, 'my-shop');
  const prov = await run(
    'npm',
    ['run', 'ops', '--', 'provision', '--name', 'My Shop', '--notify-url', `http://127.0.0.1:${hookPort}/hook`, '--out-dir', outDir],
    { ...shell, MPS_ADMIN_URL: base },
  );
  assert.equal(prov.code, 0, prov.stderr + prov.stdout);
  // Provisioning again into the same folder would replace this app's private key: refused.
  const again = await run('npm', ['run', 'ops', '--', 'provision', '--name', 'My Shop', '--out-dir', outDir], {
    ...shell,
    MPS_ADMIN_URL: base,
  });
  assert.notEqual(again.code, 0);
  assert.match(again.stderr + again.stdout, /already holds merchant-private\.pem.*--force/);
  const merchantEnv: Record<string, string> = { ...shell, ...envFile(await fs.readFile(path.join(outDir, 'merchant.env'), 'utf8')) };
  assert.equal(merchantEnv.MPS_BASE_URL, base);

  // 3. receiver
  const receiver = await background(
    'npx',
    ['node', 'packages/sdk/examples/webhook-receiver.ts', String(hookPort)],
    merchantEnv,
    /receiver listening/,
  );

  // 4. create order with the merchant CLI
  const order = JSON.stringify({
    outTradeNo: 'ORDER_000001',
    channel: 'ALIPAY_H5',
    amountFen: 1234,
    currency: 'CNY',
    subject: 'Coffee',
    payerClientIp: '8.8.8.8',
  });
  const created = await run('npx', ['mps-merchant', 'create-order', '--json', order], merchantEnv);
  assert.equal(created.code, 0, created.stderr + created.stdout);
  const o = JSON.parse(created.stdout);
  assert.equal(o.status, 'PAYING');
  assert.match(o.payUrl, new RegExp(`^${base}/cashier/`));

  // 5. pay in the sandbox, by the merchant's outTradeNo
  const pay = await run('npx', ['mps-merchant', 'sandbox', 'pay', 'ORDER_000001'], merchantEnv);
  assert.equal(pay.code, 0, pay.stderr + pay.stdout);
  const paid = JSON.parse(pay.stdout);
  assert.equal(paid.openOrderId, o.openOrderId);
  assert.equal(paid.status, 'SUCCEEDED');
  // Paid already: the helper refuses, and the CLI says so with the back office's envelope.
  const twice = await run('npx', ['mps-merchant', 'sandbox', 'pay', 'ORDER_000001'], merchantEnv);
  assert.equal(twice.code, 1, twice.stderr + twice.stdout);
  assert.equal(JSON.parse(twice.stderr.slice(twice.stderr.indexOf('{'))).code, 'ADMIN_STATE_INVALID');

  // 6. query: SUCCEEDED, and the receiver verified the event
  const q = await run('npx', ['mps-merchant', 'query-order', 'ORDER_000001'], merchantEnv);
  assert.equal(q.code, 0, q.stderr);
  assert.equal(JSON.parse(q.stdout).status, 'SUCCEEDED');
  const ev = await waitFor('receiver', receiver.out, /verified PAYMENT_SUCCEEDED ORDER_000001 stateVersion=(\d+) (\{.*\})/);
  const payload = JSON.parse(ev[2]!);
  assert.equal(payload.eventAmountFen, 1234);
  assert.equal(payload.grossAmountFen, 1234);
  assert.equal(payload.status, 'SUCCEEDED');
  assert.equal(payload.outRefundNo, null);
  assert.ok(payload.feeProjection);

  // Next: a partial refund and its REFUND_SUCCEEDED about a second later.
  const rf = await run(
    'npx',
    [
      'mps-merchant',
      'create-refund',
      '--json',
      JSON.stringify({ outTradeNo: 'ORDER_000001', outRefundNo: 'REFUND_000001', refundAmountFen: 234 }),
    ],
    merchantEnv,
  );
  assert.equal(rf.code, 0, rf.stderr);
  const rev = await waitFor('receiver', receiver.out, /verified REFUND_SUCCEEDED ORDER_000001 stateVersion=(\d+)/);
  assert.ok(Number(rev[1]) > Number(ev[1]), 'refund events carry a higher stateVersion');
});
