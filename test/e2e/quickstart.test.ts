/**
 * The README's first payment and docs/quickstart.md, step by step, as a newcomer runs them: `npm
 * start` on the embedded database and the line it prints, the operator CLI, the merchant CLI's
 * receiver (`mps-merchant listen`), the merchant CLI (SDK), the sandbox pay helper.
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
  'export PORT=8080 HOOK_PORT=9000',
  'npm start',
  'npm run ops -- provision --name "My Shop" --notify-url http://127.0.0.1:$HOOK_PORT/hook --out-dir ./my-shop',
  'npx mps-merchant listen',
  'npx mps-merchant create-order --json \'{"outTradeNo":"ORDER_000001","channel":"ALIPAY_H5","amountFen":1234,"currency":"CNY","subject":"Coffee","payerClientIp":"8.8.8.8"}\'',
  'npx mps-merchant sandbox pay ORDER_000001',
  'npx mps-merchant query-order ORDER_000001',
  'npx mps-merchant create-refund --json \'{"outTradeNo":"ORDER_000001","outRefundNo":"REFUND_000001","refundAmountFen":234}\'',
];

/** The line `npm start` prints for the tools: `export MPS_ADMIN_URL=... ADMIN_TOKEN=...`. */
const PRINTED_LINE = /^ {4}(export MPS_ADMIN_URL=(\S+) ADMIN_TOKEN=(\S+))$/m;

/**
 * One `npm start` for both paths, as a newcomer runs it: the embedded PostgreSQL in a fresh
 * DATA_DIR, a free port, no ADMIN_TOKEN (so it prints a generated one, in the line to export).
 */
let service: { base: string; line: string; token: string; out: () => string } | null = null;
async function startService(): Promise<NonNullable<typeof service>> {
  if (service) return service;
  work = await fs.mkdtemp(path.join(os.tmpdir(), 'mps-quickstart-'));
  const port = await freePort();
  const started = await background(
    'npm',
    ['start'],
    { PORT: String(port), DATA_DIR: path.join(work, 'data'), DATABASE_URL: '', ADMIN_TOKEN: '' },
    /Server listening/,
  );
  const printed = PRINTED_LINE.exec(started.out());
  assert.ok(printed, `npm start prints the line to export:\n${started.out()}`);
  assert.equal(printed[2], `http://127.0.0.1:${port}`, 'on the port it was given');
  assert.equal(started.out().split(printed[3]!).length - 1, 1, 'the generated token is printed once');
  service = { base: printed[2]!, line: printed[1]!, token: printed[3]!, out: started.out };
  return service;
}

/** The environment of a fresh shell: no merchant or admin settings of the test's own. */
function shellEnv(extra: Record<string, string>): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined && !/^(MPS_|ADMIN_TOKEN$)/.test(k)) env[k] = v;
  return { ...env, ...extra };
}

test('the guide holds the commands this test runs, and builds every address from its variables', async () => {
  const guide = await fs.readFile(path.join(root, 'docs/quickstart.md'), 'utf8');
  for (const command of GUIDE_COMMANDS) assert.ok(guide.includes(command), `docs/quickstart.md runs: ${command}`);
  assert.doesNotMatch(guide, /(127\.0\.0\.1|localhost):[0-9]/, 'no address with a written-out port: $PORT and $HOOK_PORT');
});

test(
  "the README's first payment, as written (on free ports): npm start's line, a notify URL, a verified notification",
  { timeout: 180_000 },
  async () => {
    const readme = await fs.readFile(path.join(root, 'README.md'), 'utf8');
    const block = [...readme.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1]!).find((b) => b.includes('mps-merchant listen'));
    assert.ok(block, 'the README has the first payment as one block');
    assert.match(block, /^export MPS_ADMIN_URL=http:\/\/127\.0\.0\.1:8080 ADMIN_TOKEN=\.\.\. .*# the line npm start printed$/m);
    assert.match(block, /--notify-url http:\/\/127\.0\.0\.1:9000\/hook/);
    const s = await startService();
    const hookPort = await freePort();
    const outDir = path.join(work, 'my-first-shop');
    // As a reader runs it: the line npm start printed pasted, the ports and folder those of this test.
    const script = block
      .replace(/^export MPS_ADMIN_URL=.*$/m, s.line)
      .replaceAll('http://127.0.0.1:9000/hook', `http://127.0.0.1:${hookPort}/hook`)
      .replaceAll('./my-first-shop', outDir);
    const child = spawn('bash', ['-e', '-c', script], { cwd: root, env: shellEnv({}), stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    children.push(child);
    let out = '';
    child.stdout!.on('data', (d) => (out += d));
    child.stderr!.on('data', (d) => (out += d));
    const code = await new Promise<number | null>((r) => child.once('close', r));
    assert.equal(code, 0, out);
    assert.match(out, /"status": "SUCCEEDED"/, 'query-order: paid');
    const ev = /^verified PAYMENT_SUCCEEDED ORDER_000001 stateVersion=\d+ (\{.*\})$/m.exec(out);
    assert.ok(ev, `the receiver verified the notification:\n${out}`);
    assert.equal(JSON.parse(ev[1]!).eventAmountFen, 1234);
    // Nothing is left pending: the app's event was delivered.
    const app = (await fs.readFile(path.join(outDir, 'merchant.env'), 'utf8')).match(/^MPS_APP_ID=(\S+)$/m)![1]!;
    const events = await fetch(`${s.base}/api/admin/v1/events?appId=${app}`, { headers: { authorization: `Bearer ${s.token}` } });
    const list = (await events.json()) as { events: { status: string }[] };
    assert.deepEqual(
      list.events.map((e) => e.status),
      ['DELIVERED'],
    );
  },
);

test('quickstart: empty folder to a paid sandbox order and a verified event', { timeout: 180_000 }, async () => {
  const s = await startService();
  const hookPort = await freePort();
  // What every terminal of the guide holds: the ports (a free one for the receiver) and the line npm start printed.
  const shell = shellEnv({ PORT: new URL(s.base).port, HOOK_PORT: String(hookPort), MPS_ADMIN_URL: s.base, ADMIN_TOKEN: s.token });

  // 2. provision
  const outDir = path.join(work, 'my-shop');
  const prov = await run(
    'npm',
    ['run', 'ops', '--', 'provision', '--name', 'My Shop', '--notify-url', `http://127.0.0.1:${hookPort}/hook`, '--out-dir', outDir],
    shell,
  );
  assert.equal(prov.code, 0, prov.stderr + prov.stdout);
  // Provisioning again into the same folder would replace this app's private key: refused.
  const again = await run('npm', ['run', 'ops', '--', 'provision', '--name', 'My Shop', '--out-dir', outDir], shell);
  assert.notEqual(again.code, 0);
  assert.match(again.stderr + again.stdout, /already holds merchant-private\.pem.*--force/);
  const merchantEnv: Record<string, string> = { ...shell, ...envFile(await fs.readFile(path.join(outDir, 'merchant.env'), 'utf8')) };
  assert.equal(merchantEnv.MPS_BASE_URL, s.base);
  assert.equal(merchantEnv.MPS_NOTIFY_URL, `http://127.0.0.1:${hookPort}/hook`);

  // 3. receiver
  const receiver = await background('npx', ['mps-merchant', 'listen'], merchantEnv, /listening for notifications on/);

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
  assert.match(o.payUrl, new RegExp(`^${s.base}/cashier/`));

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
  const rev = await waitFor('receiver', receiver.out, /verified REFUND_SUCCEEDED ORDER_000001 REFUND_000001 stateVersion=(\d+)/);
  assert.ok(Number(rev[1]) > Number(ev[1]), 'refund events carry a higher stateVersion');

  // The platform rotates its key at once: the receiver, started before, learns the new key (from
  // the platform's signed key list, with merchant.env's settings) and verifies the next event.
  const rotated = await run('npm', ['run', 'ops', '--', 'platform-keys', 'rotate', '--json', '{"activateAfterSeconds": 0}'], shell);
  assert.equal(rotated.code, 0, rotated.stderr + rotated.stdout);
  const second = await run('npx', ['mps-merchant', 'create-order', '--json', order.replace('ORDER_000001', 'ORDER_000002')], merchantEnv);
  assert.equal(second.code, 0, second.stderr + second.stdout);
  assert.equal((await run('npx', ['mps-merchant', 'sandbox', 'pay', 'ORDER_000002'], merchantEnv)).code, 0);
  await waitFor('receiver', receiver.out, /verified PAYMENT_SUCCEEDED ORDER_000002 /);
});
