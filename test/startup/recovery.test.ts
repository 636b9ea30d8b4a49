/**
 * Recovery after a crash, with a real `kill -9` of the service process (`node src/main.ts` on the
 * embedded PostgreSQL):
 *  - a supervisor restarting at once is not refused by the killed process, still a zombie;
 *  - a merchant's retry with the same X-SVC-Request-Id as a create cut off by the crash is
 *    answered within 5 s of the restart (not a 503, not a wait for a lease);
 *  - the attempt the create was making, a refund that was being requested and a close that was
 *    asking the provider are settled after the restart, by asking the provider (the close without
 *    waiting for its hold of the order to lapse: npm run bench -- --scenarios crash measures how soon).
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import pg from 'pg';
import { type Merchant, merchantKeyPair, orderBody, requestId, signedHeaders } from '../helpers/app.ts';
import { waitFor } from '../helpers/events.ts';

const root = path.resolve(import.meta.dirname, '../..');
const TOKEN = 'recovery-admin-token-0123456789';
let dataDir: string;

before(async () => {
  dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'mps-recovery-'));
});
after(async () => {
  await fs.rm(dataDir, { recursive: true, force: true });
});

interface Running {
  /** The service's own pid (the process killed). */
  pid: number;
  /** The process spawned: the service itself, or the parent that never reaps it. */
  child: ChildProcess;
  base: string;
  readyAt: number;
  output: () => string;
}

/**
 * Starts the service. `zombieWhenKilled`: under a parent (`sh` turned into `sleep`) that never
 * reaps it, so that once killed it stays a zombie, as under a supervisor that has not reaped it yet.
 */
function start(o: { zombieWhenKilled?: boolean } = {}): Promise<Running> {
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? '',
    HOME: process.env.HOME ?? '/tmp',
    DATA_DIR: dataDir,
    PORT: '0',
    LOG_LEVEL: 'info',
    ADMIN_TOKEN: TOKEN,
  };
  const child = o.zombieWhenKilled
    ? spawn('sh', ['-c', `"${process.execPath}" src/main.ts & echo "pid=$!"; exec sleep 600`], {
        cwd: root,
        env,
        stdio: ['ignore', 'pipe', 'pipe'],
      })
    : spawn(process.execPath, ['src/main.ts'], { cwd: root, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no start within 60 s:\n${out}`)), 60_000);
    const poll = setInterval(() => {
      const m = /Server listening at (http:\/\/127\.0\.0\.1:\d+)/.exec(out);
      if (m) {
        clearInterval(poll);
        clearTimeout(timer);
        const pid = o.zombieWhenKilled ? Number(/^pid=(\d+)$/m.exec(out)![1]) : child.pid!;
        resolve({ pid, child, base: m[1]!, readyAt: Date.now(), output: () => out });
      }
    }, 20);
    child.on('exit', (code) => {
      clearInterval(poll);
      clearTimeout(timer);
      reject(Object.assign(new Error(`exited with ${code}:\n${out}`), { code, out }));
    });
  });
}

function exited(child: ChildProcess): Promise<number | null> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) resolve(child.exitCode);
    else child.once('exit', (c) => resolve(c));
  });
}

async function stop(r: Running): Promise<void> {
  if (r.pid !== r.child.pid) {
    process.kill(r.pid, 'SIGTERM');
    r.child.kill('SIGTERM');
  } else r.child.kill('SIGTERM');
  await exited(r.child);
}

async function admin(r: Running, method: string, p: string, body?: unknown): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${r.base}${p}`, {
    method,
    headers: { authorization: `Bearer ${TOKEN}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
    body: body !== undefined ? JSON.stringify(body) : undefined,
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

async function open(r: Running, m: Merchant, method: string, url: string, body?: unknown, rid?: string) {
  const raw = body === undefined ? '' : JSON.stringify(body);
  const res = await fetch(`${r.base}${url}`, {
    method,
    headers: signedHeaders(m, method, url, raw, rid === undefined ? {} : { requestId: rid }),
    body: raw === '' ? undefined : raw,
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

async function provision(r: Running): Promise<Merchant> {
  const mch = await admin(r, 'POST', '/api/admin/v1/merchants', { name: 'Recovery Shop', entityType: 'CORPORATE' });
  const app = await admin(r, 'POST', `/api/admin/v1/merchants/${String(mch.body.merchantId)}/apps`, {});
  const appId = String(app.body.appId);
  await admin(r, 'POST', `/api/admin/v1/apps/${appId}/keys`, { keyId: 'key-1', publicKeyPem: merchantKeyPair().publicKeyPem });
  return { merchantId: String(mch.body.merchantId), appId, keyId: 'key-1', privateKeyPem: merchantKeyPair().privateKeyPem };
}

test('kill -9 during a create, a refund and a close, restart at once: the lock of the zombie does not refuse it, the retry is answered within 5 s, the unfinished work is settled within seconds', async () => {
  const first = await start({ zombieWhenKilled: true });
  const m = await provision(first);

  // A paid order to refund, and the provider's answers held back (the calls are in flight when the process dies).
  const paidBody = orderBody();
  const paid = await open(first, m, 'POST', '/api/open/v1/payments', paidBody);
  assert.equal(paid.status, 201);
  assert.equal((await admin(first, 'POST', `/api/sandbox/v1/payments/${String(paid.body.openOrderId)}/pay`, {})).status, 200);
  // An order to close, payable (its attempt made) before the faults below.
  const closingBody = orderBody();
  assert.equal((await open(first, m, 'POST', '/api/open/v1/payments', closingBody)).status, 201);
  // A close whose provider call is in flight when the process dies: recorded before the kill, and
  // before the create's fault is programmed.
  assert.equal(
    (await admin(first, 'POST', '/api/sandbox/v1/faults', { operation: 'CLOSE', outcome: 'DELAY_MS', delayMs: 60_000, times: 1 })).status,
    201,
  );
  const closingNo = String(closingBody.outTradeNo);
  void open(first, m, 'POST', `/api/open/v1/payments/${closingNo}/close`).catch(() => {});
  // Waited for in the embedded database itself: a probe through the API (a re-create) would change the order.
  const sql = new pg.Client({
    connectionString: `postgresql://postgres@/postgres?host=${encodeURIComponent(path.join(dataDir, 'run'))}&port=5432`,
  });
  await sql.connect();
  try {
    await waitFor(
      'the close recorded',
      async () =>
        (await sql.query('SELECT 1 FROM orders WHERE out_trade_no = $1 AND close_pending IS NOT NULL', [closingNo])).rowCount === 1,
      20_000,
    );
  } catch (err) {
    first.child.kill('SIGKILL');
    throw err;
  } finally {
    await sql.end();
  }

  for (const operation of ['CREATE_ATTEMPT', 'REFUND']) {
    assert.equal(
      (await admin(first, 'POST', '/api/sandbox/v1/faults', { operation, outcome: 'DELAY_MS', delayMs: 60_000, times: 1 })).status,
      201,
    );
  }
  const body = orderBody();
  const rid = requestId();
  void open(first, m, 'POST', '/api/open/v1/payments', body, rid).catch(() => {});
  const refundNo = `RF_${String(paidBody.outTradeNo)}`;
  void open(first, m, 'POST', '/api/open/v1/refunds', {
    outTradeNo: paidBody.outTradeNo,
    outRefundNo: refundNo,
    refundAmountFen: 100,
  }).catch(() => {});
  // Both are recorded (the order with its attempt being made, the refund REQUESTED) before the provider answers.
  await waitFor(
    'the create and the refund recorded',
    async () => {
      const q = await open(first, m, 'GET', `/api/open/v1/payments/${String(body.outTradeNo)}`);
      const r = await open(first, m, 'GET', `/api/open/v1/refunds/${refundNo}`);
      return q.status === 200 && r.status === 200;
    },
    10_000,
  );
  process.kill(first.pid, 'SIGKILL');
  // The killed service is a zombie under its parent (which never reaps it): restarted at once.
  const second = await start().catch(async (err: unknown) => {
    first.child.kill('SIGKILL');
    throw err;
  });
  try {
    assert.doesNotMatch(second.output(), /another instance/);

    // The merchant retries with the same request id (a new nonce and signature): answered within 5 s.
    const retried = await open(second, m, 'POST', '/api/open/v1/payments', body, rid);
    const answeredIn = Date.now() - second.readyAt;
    assert.ok(retried.status === 200 || retried.status === 201, `${retried.status} ${JSON.stringify(retried.body)}`);
    assert.ok(answeredIn < 5000, `answered ${answeredIn} ms after the restart`);
    assert.equal(retried.body.openOrderId !== undefined, true);

    // The attempt the dead create was making is settled at the provider (it never opened the
    // payment: the order is payable again, asking for a new attempt), within seconds.
    const q = await waitFor(
      'the attempt settled',
      async () => {
        const r = await open(second, m, 'GET', `/api/open/v1/payments/${String(body.outTradeNo)}`);
        return (r.body.latestAttempt as { state: string } | null)?.state !== 'PENDING' ? r.body : null;
      },
      5000,
    );
    assert.equal((q.latestAttempt as { state: string }).state, 'FAILED');
    assert.equal(q.status, 'CREATED');
    assert.equal(q.nextAction, 'CREATE_ATTEMPT');

    // The refund the provider never saw is decided by asking it, not after 5 minutes: FAILED, its amount released.
    const rf = await waitFor(
      'the refund decided',
      async () => {
        const r = await open(second, m, 'GET', `/api/open/v1/refunds/${refundNo}`);
        return r.body.state === 'FAILED' ? r.body : null;
      },
      5000,
    );
    assert.equal(rf.state, 'FAILED');
    const again = await open(second, m, 'POST', '/api/open/v1/refunds', {
      outTradeNo: paidBody.outTradeNo,
      outRefundNo: `${refundNo}_2`,
      refundAmountFen: Number(paidBody.amountFen),
    });
    assert.equal(again.status, 201, 'the whole amount is refundable again');

    // The close the dead request was making is finished by asking the provider, without waiting
    // for its 30 s hold of the order to lapse (a generous deadline: the figure is the bench's).
    const closed = await waitFor(
      'the close finished',
      async () => {
        const r = await open(second, m, 'GET', `/api/open/v1/payments/${closingNo}`);
        return r.body.status === 'CLOSED' ? r.body : null;
      },
      20_000,
    );
    assert.equal(closed.closedReason, 'CLOSE_REQUESTED');
  } finally {
    await stop(second);
    first.child.kill('SIGKILL');
    await exited(first.child);
  }
});
