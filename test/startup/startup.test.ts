/**
 * The service as a newcomer runs it: `node src/main.ts` on the embedded PostgreSQL (no
 * DATABASE_URL). Start, provision, restart keeps data, kill -9 recovers, a second instance on the
 * same DATA_DIR is refused, a wrong setting stops with one line naming the variable.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { REDIS, TEST_REDIS_URL, skipUnless } from '../helpers/prerequisites.ts';

const root = path.resolve(import.meta.dirname, '../..');
let dataDir: string;

before(async () => {
  dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'mps-startup-'));
});
after(async () => {
  await fs.rm(dataDir, { recursive: true, force: true });
});

interface Running {
  child: ChildProcess;
  base: string;
  adminToken: string | null;
  output: () => string;
}

function start(env: Record<string, string>, dir = dataDir, viaNpm = false): Promise<Running> {
  const childEnv: Record<string, string> = {
    PATH: process.env.PATH ?? '',
    HOME: process.env.HOME ?? '/tmp',
    DATA_DIR: dir,
    PORT: '0',
    LOG_LEVEL: 'info',
    ...env,
  };
  const child = viaNpm
    ? spawn('npm', ['start', '--silent'], { cwd: root, env: childEnv, stdio: ['ignore', 'pipe', 'pipe'] })
    : spawn(process.execPath, ['src/main.ts'], { cwd: root, env: childEnv, stdio: ['ignore', 'pipe', 'pipe'] });
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
        resolve({
          child,
          base: m[1]!,
          adminToken: /^ {4}export MPS_ADMIN_URL=\S+ ADMIN_TOKEN=(\S+)$/m.exec(out)?.[1] ?? null,
          output: () => out,
        });
      }
    }, 50);
    child.on('exit', (code) => {
      clearInterval(poll);
      clearTimeout(timer);
      reject(Object.assign(new Error(`exited with ${code}:\n${out}`), { code, out }));
    });
  });
}

function exited(child: ChildProcess): Promise<number | null> {
  return new Promise((resolve) => {
    if (child.exitCode !== null) resolve(child.exitCode);
    else child.once('exit', (c) => resolve(c));
  });
}

async function admin(r: Running, token: string, method: string, p: string, body?: unknown) {
  const res = await fetch(`${r.base}/api/admin/v1${p}`, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body ? { 'content-type': 'application/json' } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

const TOKEN = 'startup-admin-token-0123456789';

test('npm start on the embedded database: generated admin token, provisioning, graceful stop, restart keeps data', async () => {
  const first = await start({});
  assert.match(first.adminToken ?? '', /^[A-Za-z0-9_-]{20,}$/, 'prints the line to export, with the generated ADMIN_TOKEN');
  assert.equal(first.output().split(first.adminToken!).length - 1, 1, 'the token is printed once');
  assert.match(first.output(), new RegExp(`^ {4}export MPS_ADMIN_URL=${first.base} ADMIN_TOKEN=`, 'm'), 'the address the CLIs need');
  const m = await admin(first, first.adminToken!, 'POST', '/merchants', { name: 'Startup Shop', entityType: 'INDIVIDUAL' });
  assert.equal(m.status, 201);
  const keyFile = (await fs.readdir(path.join(dataDir, 'platform-keys'))).find((f) => f.endsWith('.pem'))!;
  const st = await fs.stat(path.join(dataDir, 'platform-keys', keyFile));
  assert.equal(st.mode & 0o777, 0o600, 'platform key file is 0600');
  const keysBefore = await admin(first, first.adminToken!, 'GET', '/platform-keys');
  first.child.kill('SIGTERM');
  assert.equal(await exited(first.child), 0, 'graceful stop exits 0');

  const second = await start({ ADMIN_TOKEN: TOKEN });
  assert.equal(second.adminToken, null, 'no token printed when ADMIN_TOKEN is set');
  assert.ok(!second.output().includes(TOKEN));
  assert.match(second.output(), new RegExp(`^ {4}export MPS_ADMIN_URL=${second.base}$`, 'm'));
  const got = await admin(second, TOKEN, 'GET', `/merchants/${m.body.merchantId}`);
  assert.equal(got.status, 200);
  assert.equal(got.body.name, 'Startup Shop');
  const keysAfter = await admin(second, TOKEN, 'GET', '/platform-keys');
  assert.deepEqual(keysAfter.body.keys, keysBefore.body.keys, 'the platform key is reused after a restart');

  // A second instance on the same DATA_DIR is refused with a clear message.
  await assert.rejects(start({ ADMIN_TOKEN: TOKEN }), (err: Error & { code?: number; out?: string }) => {
    assert.equal(err.code, 3);
    assert.match(err.out ?? '', /another instance \(pid \d+\) is already using DATA_DIR/);
    return true;
  });

  // kill -9: the embedded server is orphaned and the lock is stale; the next start recovers both.
  second.child.kill('SIGKILL');
  await exited(second.child);
  const third = await start({ ADMIN_TOKEN: TOKEN });
  const again = await admin(third, TOKEN, 'GET', `/merchants/${m.body.merchantId}`);
  assert.equal(again.status, 200);
  third.child.kill('SIGINT');
  assert.equal(await exited(third.child), 0);
});

test('SIGTERM to `npm start` (as a supervisor or `kill %1` sends it) stops the service itself, gracefully', async () => {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'mps-npm-start-'));
  let r: Running | undefined;
  try {
    r = await start({ ADMIN_TOKEN: TOKEN }, dir, true);
    assert.equal((await fetch(`${r.base}/healthz`)).status, 200);
    r.child.kill('SIGTERM');
    await exited(r.child);
    // The node process behind npm stopped too: the port no longer answers and DATA_DIR is free.
    let answering = true;
    for (let i = 0; i < 100 && answering; i++) {
      answering = await fetch(`${r.base}/healthz`).then(
        () => true,
        () => false,
      );
      if (answering) await new Promise((res) => setTimeout(res, 100));
    }
    assert.equal(answering, false, `the service still answers after npm got SIGTERM:\n${r.output()}`);
    assert.match(r.output(), /SIGTERM received: stopping/);
    const again = await start({ ADMIN_TOKEN: TOKEN }, dir);
    again.child.kill('SIGTERM');
    assert.equal(await exited(again.child), 0);
  } finally {
    // Should the service have outlived npm (the defect this tests), stop it (its pid is in its log
    // lines) and let go of the pipes it inherited, so that this file still ends.
    // Only while that pid is still the service: once it has exited, the pid may already name
    // another process (pids wrap at 32768 here; a suite spawns thousands), such as a PostgreSQL
    // backend of a suite running alongside, whose connection this SIGTERM would cut.
    const pid = /"pid":(\d+)/.exec(r?.output() ?? '')?.[1];
    const cmdline = pid === undefined ? '' : await fs.readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '');
    if (pid !== undefined && cmdline.includes('src/main.ts')) {
      try {
        process.kill(Number(pid), 'SIGTERM');
      } catch {
        // already gone
      }
    }
    r?.child.stdout?.destroy();
    r?.child.stderr?.destroy();
    await fs.rm(dir, { recursive: true, force: true });
  }
});

test('a short ADMIN_TOKEN is accepted, with a warning at start', async () => {
  const r = await start({ ADMIN_TOKEN: 'admin' });
  try {
    assert.match(r.output(), /warning: ADMIN_TOKEN is shorter than 16 characters/);
    assert.equal((await admin(r, 'admin', 'GET', '/platform-keys')).status, 200);
    assert.equal((await admin(r, 'admim', 'GET', '/platform-keys')).status, 401);
  } finally {
    r.child.kill('SIGTERM');
    await exited(r.child);
  }
});

test('a wrong setting stops the process with one plain line naming the variable', async () => {
  for (const [name, value] of [
    ['PORT', 'eighty'],
    ['DATABASE_URL', 'mysql://x'],
    ['PROVIDER', 'paypal'],
    ['PUBLIC_BASE_URL', 'ftp://x'],
    ['ADMIN_TOKEN', 'two words'],
  ] as const) {
    await assert.rejects(start({ [name]: value }), (err: Error & { code?: number; out?: string }) => {
      assert.equal(err.code, 2, `${name} exit code`);
      const lines = (err.out ?? '').trim().split('\n');
      assert.equal(lines.length, 1, `one line for ${name}: ${err.out}`);
      assert.match(lines[0]!, new RegExp(`^configuration error: ${name} `));
      return true;
    });
  }
});

test('PORT=0 takes a free port that payUrl and the OpenAPI servers name; a port already taken stops the start and leaves nothing running', async () => {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'mps-startup-port-'));
  try {
    const r = await start({ ADMIN_TOKEN: TOKEN }, dir);
    const port = new URL(r.base).port;
    const doc = (await (await fetch(`${r.base}/docs/openapi.json`)).json()) as { servers: { url: string }[] };
    assert.equal(doc.servers[0]!.url, `http://127.0.0.1:${port}/api/open/v1`, 'the base URL names the port listened on');

    // Another start on the same port (its own DATA_DIR): refused, and its embedded PostgreSQL and lock are gone.
    const dir2 = await fs.mkdtemp(path.join(os.tmpdir(), 'mps-startup-port2-'));
    try {
      await assert.rejects(start({ ADMIN_TOKEN: TOKEN, PORT: port }, dir2), (err: Error & { code?: number; out?: string }) => {
        assert.equal(err.code, 1);
        assert.match(err.out ?? '', new RegExp(`fatal: cannot listen on 127\\.0\\.0\\.1:${port} \\(HOST, PORT\\): .*EADDRINUSE`));
        return true;
      });
      const left = await fs.readdir(dir2);
      assert.ok(!left.includes('service.lock'), `the instance lock is released (${left.join(', ')})`);
      const cluster = (await fs.readFile(path.join(dir2, 'pg-location'), 'utf8').catch(() => dir2)).trim();
      await fs.access(path.join(cluster, 'pg', 'PG_VERSION')); // the cluster was made, so it was started
      await assert.rejects(fs.access(path.join(cluster, 'pg', 'postmaster.pid')), 'the embedded PostgreSQL is stopped');
    } finally {
      await fs.rm(dir2, { recursive: true, force: true });
    }
    r.child.kill('SIGTERM');
    assert.equal(await exited(r.child), 0);
  } finally {
    await fs.rm(dir, { recursive: true, force: true });
  }
});

test('an unreachable DATABASE_URL or REDIS_URL stops the start with a line naming the variable', async () => {
  for (const [env, re] of [
    [{ DATABASE_URL: 'postgres://nobody@127.0.0.1:1/none' }, /^fatal: cannot use the PostgreSQL at DATABASE_URL: /m],
    [{ REDIS_URL: 'redis://127.0.0.1:1' }, /^fatal: cannot connect to the Redis at REDIS_URL: /m],
  ] as const) {
    await assert.rejects(start({ ADMIN_TOKEN: TOKEN, ...env }), (err: Error & { code?: number; out?: string }) => {
      assert.equal(err.code, 1);
      assert.match(err.out ?? '', re);
      return true;
    });
  }
});

test('an exception no handler caught stops the process with exit 1, and leaves nothing running (embedded PostgreSQL, lock)', async () => {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'mps-startup-boom-'));
  // Preloaded into the service: a request to /__boom throws outside every handler.
  const boom = path.join(dir, 'boom.mjs');
  await fs.writeFile(
    boom,
    `import http from 'node:http';
const emit = http.Server.prototype.emit;
http.Server.prototype.emit = function (event, req, ...rest) {
  if (event === 'request' && req.url === '/__boom') setImmediate(() => { throw new Error('boom from the test'); });
  return emit.call(this, event, req, ...rest);
};
`,
  );
  try {
    const r = await start({ ADMIN_TOKEN: TOKEN, NODE_OPTIONS: `--import=${boom}` }, dir);
    await fetch(`${r.base}/__boom`).catch(() => {});
    assert.equal(await exited(r.child), 1);
    assert.match(r.output(), /^fatal: Error: boom from the test/m);
    const left = await fs.readdir(dir);
    assert.ok(!left.includes('service.lock'), `the instance lock is released (${left.join(', ')})`);
    const cluster = (await fs.readFile(path.join(dir, 'pg-location'), 'utf8').catch(() => dir)).trim();
    await fs.access(path.join(cluster, 'pg', 'PG_VERSION'));
    await assert.rejects(fs.access(path.join(cluster, 'pg', 'postmaster.pid')), 'the embedded PostgreSQL is stopped');
  } finally {
    await fs.rm(dir, { recursive: true, force: true });
  }
});

test('REDIS_URL: a database that is not a number is a wrong setting (exit 2)', async () => {
  await assert.rejects(
    start({ ADMIN_TOKEN: TOKEN, REDIS_URL: 'redis://127.0.0.1:6379/abc' }),
    (err: Error & { code?: number; out?: string }) => {
      assert.equal(err.code, 2);
      assert.match(err.out ?? '', /^configuration error: REDIS_URL must have a database number as its path/m);
      return true;
    },
  );
});

test('REDIS_URL: a database the server does not have stops the start (exit 1)', { skip: skipUnless(REDIS) }, async () => {
  const url = new URL(TEST_REDIS_URL!);
  url.pathname = '/100000';
  await assert.rejects(start({ ADMIN_TOKEN: TOKEN, REDIS_URL: url.toString() }), (err: Error & { code?: number; out?: string }) => {
    assert.equal(err.code, 1);
    assert.match(err.out ?? '', /^fatal: cannot connect to the Redis at REDIS_URL: ERR DB index is out of range/m);
    return true;
  });
});

test('a DATA_DIR that cannot be made or is a file stops the start with exit 1 and a line naming DATA_DIR (no endless retry)', async () => {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'mps-startup-dd-'));
  try {
    const file = path.join(dir, 'a-file');
    await fs.writeFile(file, 'x');
    const cases: [string, RegExp][] = [
      [file, /^fatal: cannot use DATA_DIR .*a-file: .*a-file is not a directory$/m],
      [path.join(file, 'sub'), /^fatal: cannot use DATA_DIR .*sub: .*a-file is not a directory$/m],
    ];
    // /proc takes no new directory; Node's recursive mkdir used to spin there forever.
    if (process.platform === 'linux') cases.push(['/proc/mps-startup-test', /^fatal: cannot use DATA_DIR \/proc\/mps-startup-test: /m]);
    for (const [d, re] of cases) {
      await assert.rejects(start({ ADMIN_TOKEN: TOKEN }, d), (err: Error & { code?: number; out?: string }) => {
        assert.equal(err.code, 1, err.out);
        assert.match(err.out ?? '', re);
        return true;
      });
    }
  } finally {
    await fs.rm(dir, { recursive: true, force: true });
  }
});

test('SIGTERM while starting (the embedded PostgreSQL coming up): exit 0, and nothing left running', async () => {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'mps-startup-term-'));
  try {
    const child = spawn(process.execPath, ['src/main.ts'], {
      cwd: root,
      env: {
        PATH: process.env.PATH ?? '',
        HOME: process.env.HOME ?? '/tmp',
        DATA_DIR: dir,
        PORT: '0',
        LOG_LEVEL: 'info',
        ADMIN_TOKEN: TOKEN,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout!.on('data', (d) => (out += d));
    child.stderr!.on('data', (d) => (out += d));
    for (let i = 0; i < 600 && !out.includes('starting embedded PostgreSQL'); i++) await new Promise((r) => setTimeout(r, 50));
    assert.match(out, /starting embedded PostgreSQL/);
    child.kill('SIGTERM');
    assert.equal(await exited(child), 0, out);
    assert.match(out, /SIGTERM received while starting: stopped/);
    assert.doesNotMatch(out, /Server listening/);
    const left = await fs.readdir(dir);
    assert.ok(!left.includes('service.lock'), `the instance lock is released (${left.join(', ')})`);
    const cluster = (await fs.readFile(path.join(dir, 'pg-location'), 'utf8').catch(() => dir)).trim();
    await assert.rejects(fs.access(path.join(cluster, 'pg', 'postmaster.pid')), 'the embedded PostgreSQL is stopped');
    // And the next start is clean.
    const r = await start({ ADMIN_TOKEN: TOKEN }, dir);
    r.child.kill('SIGTERM');
    assert.equal(await exited(r.child), 0);
  } finally {
    await fs.rm(dir, { recursive: true, force: true });
  }
});

test('the embedded PostgreSQL killed under a running service: the service stops (exit 1, a line saying why, lock released); a restart recovers', async () => {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'mps-startup-pgdie-'));
  try {
    const r = await start({ ADMIN_TOKEN: TOKEN }, dir);
    const cluster = (await fs.readFile(path.join(dir, 'pg-location'), 'utf8').catch(() => dir)).trim();
    const pid = Number((await fs.readFile(path.join(cluster, 'pg', 'postmaster.pid'), 'utf8')).split('\n')[0]);
    assert.ok(pid > 0);
    process.kill(pid, 'SIGKILL');
    assert.equal(await exited(r.child), 1, r.output());
    assert.match(r.output(), /^fatal: the embedded PostgreSQL has stopped/m);
    assert.ok(!(await fs.readdir(dir)).includes('service.lock'), 'the instance lock is released');
    const again = await start({ ADMIN_TOKEN: TOKEN }, dir);
    assert.equal((await fetch(`${again.base}/api/admin/v1/merchants`, { headers: { authorization: `Bearer ${TOKEN}` } })).status, 200);
    again.child.kill('SIGTERM');
    assert.equal(await exited(again.child), 0);
  } finally {
    await fs.rm(dir, { recursive: true, force: true });
  }
});

/** Scheduling policy of each libuv worker thread of a process (Linux: 0 SCHED_OTHER, 3 SCHED_BATCH). */
async function poolPolicies(pid: number): Promise<number[]> {
  const out: number[] = [];
  for (const tid of await fs.readdir(`/proc/${pid}/task`)) {
    const comm = (await fs.readFile(`/proc/${pid}/task/${tid}/comm`, 'utf8')).trim();
    if (comm === 'libuv-worker') out.push(await policyOf(`/proc/${pid}/task/${tid}`));
  }
  return out;
}

/**
 * The fields of /proc/<id>/stat after the command (which may hold spaces and parentheses):
 * [0] state, [1] ppid, ... [38] policy (Linux: 0 SCHED_OTHER, 3 SCHED_BATCH). Empty once gone.
 */
async function statFields(dir: string): Promise<string[]> {
  const stat = await fs.readFile(`${dir}/stat`, 'utf8').catch(() => '');
  return stat === '' ? [] : stat.slice(stat.lastIndexOf(')') + 2).split(' ');
}

/** Scheduling policy of a process or thread (Linux: 0 SCHED_OTHER, 3 SCHED_BATCH). */
async function policyOf(dir: string): Promise<number> {
  return Number((await statFields(dir))[38]);
}

/** The embedded PostgreSQL server's pid and its children's (the backends the service holds open). */
async function embeddedServerPids(output: string): Promise<number[]> {
  const pid = Number(/PostgreSQL ready on socket \S+ \(pid (\d+)/.exec(output)?.[1]);
  assert.ok(pid > 0, 'the start-up log names the PostgreSQL server pid');
  const out = [pid];
  for (const name of await fs.readdir('/proc')) {
    if (/^\d+$/.test(name) && Number((await statFields(`/proc/${name}`))[1]) === pid) out.push(Number(name));
  }
  return out;
}

/** Scheduling policies of the embedded PostgreSQL's processes. */
async function embeddedPolicies(output: string): Promise<number[]> {
  return Promise.all((await embeddedServerPids(output)).map((pid) => policyOf(`/proc/${pid}`)));
}

test(
  'where chrt fails, the threads and PostgreSQL are left as they are, a start-up line says why, and the service runs',
  { skip: process.platform !== 'linux' },
  async () => {
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'mps-startup-nochrt-'));
    try {
      // A chrt that refuses, as under a seccomp policy that denies sched_setscheduler.
      const bin = path.join(dir, 'bin');
      await fs.mkdir(bin);
      await fs.writeFile(
        path.join(bin, 'chrt'),
        '#!/bin/sh\necho "chrt: failed to set pid $4\'s policy: Operation not permitted" >&2\nexit 1\n',
        {
          mode: 0o755,
        },
      );
      const r = await start({ ADMIN_TOKEN: TOKEN, PATH: `${bin}:${process.env.PATH ?? ''}` }, path.join(dir, 'data'));
      assert.match(r.output(), /thread pool left as is: chrt failed \(chrt: failed to set pid \d+'s policy: Operation not permitted\)/);
      assert.match(r.output(), /PostgreSQL processes left as is: chrt: failed to set pid \d+'s policy: Operation not permitted/);
      assert.deepEqual(new Set(await poolPolicies(r.child.pid!)), new Set([0]));
      assert.deepEqual(new Set(await embeddedPolicies(r.output())), new Set([0]));
      assert.equal((await fetch(`${r.base}/api/admin/v1/merchants`, { headers: { authorization: `Bearer ${TOKEN}` } })).status, 200);
      r.child.kill('SIGTERM');
      assert.equal(await exited(r.child), 0);
    } finally {
      await fs.rm(dir, { recursive: true, force: true });
    }
  },
);

test(
  'libuv worker threads and the embedded PostgreSQL run as SCHED_BATCH (Linux), unless THREADPOOL_SCHED_BATCH / EMBEDDED_PG_SCHED_BATCH=false',
  { skip: process.platform !== 'linux' },
  async () => {
    for (const [env, pool, pg] of [
      [{}, 3, 3],
      [{ THREADPOOL_SCHED_BATCH: 'false' }, 0, 3],
      [{ EMBEDDED_PG_SCHED_BATCH: 'false' }, 3, 0],
    ] as const) {
      const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'mps-startup-sched-'));
      try {
        const r = await start({ ADMIN_TOKEN: TOKEN, ...env }, dir);
        const policies = await poolPolicies(r.child.pid!);
        assert.ok(policies.length >= 1, 'the pool has started its threads');
        assert.deepEqual(new Set(policies), new Set([pool]), `${JSON.stringify(env)}: ${policies.join(',')}`);
        if (pool === 3) assert.match(r.output(), /libuv threads set to SCHED_BATCH/);
        // The server, its auxiliary processes and the backends opened since (the pool's connections).
        const pgPolicies = await embeddedPolicies(r.output());
        assert.ok(pgPolicies.length >= 3, `the server and its processes: ${pgPolicies.length}`);
        assert.deepEqual(new Set(pgPolicies), new Set([pg]), `${JSON.stringify(env)}: ${pgPolicies.join(',')}`);
        if (pg === 3) assert.match(r.output(), /PostgreSQL processes set to SCHED_BATCH/);
        else assert.doesNotMatch(r.output(), /PostgreSQL processes/);
        r.child.kill('SIGTERM');
        assert.equal(await exited(r.child), 0);
      } finally {
        await fs.rm(dir, { recursive: true, force: true });
      }
    }
  },
);
