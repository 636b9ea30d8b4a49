/** The operator CLI's error answers: one plain line (no stack trace), exit 2 for a command line it does not understand, 1 otherwise. */
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import type { AddressInfo } from 'node:net';
import http from 'node:http';
import path from 'node:path';
import { test } from 'node:test';

const root = path.resolve(import.meta.dirname, '../..');

function ops(...args: string[]): { status: number | null; stderr: string; stdout: string } {
  // An address nothing listens on: none of these cases may get as far as the network.
  const r = spawnSync(process.execPath, ['src/cli/ops.ts', ...args, '--token', 'x'.repeat(20), '--url', 'http://127.0.0.1:1'], {
    cwd: root,
    encoding: 'utf8',
  });
  return { status: r.status, stderr: r.stderr, stdout: r.stdout };
}

test('a command line the CLI does not understand: exit 2, one error line and the hint, no stack trace', () => {
  for (const [args, re] of [
    [['merchant', 'create', '--nme', 'X'], /Unknown option '--nme'/],
    [['bogus', 'cmd'], /unknown command 'bogus cmd'/],
    // An option another command takes is refused, not ignored.
    [['merchant', 'list', '--merchant', 'mch_1'], /'merchant list' takes no --merchant/],
    [['events', '--day', '2026-11-01'], /'events' takes no --day/],
    [['operator', 'disable', '--name', 'ann', '--password-stdin'], /'operator disable' takes no --password-stdin/],
    [['merchant', 'get'], /^error: MERCHANT_ID is required/],
    [['event', 'redeliver'], /^error: EVENT_ID is required/],
    [
      [
        'account',
        'add',
        '--merchant',
        'm',
        '--entity-type',
        'INDIVIDUAL',
        '--entity-name',
        'N',
        '--merchant-no',
        'M1',
        '--card-number',
        '6222000011112222',
        '--agreed-ceiling-fen',
        'abc',
      ],
      /--agreed-ceiling-fen must be an integer/,
    ],
    [['app', 'update', 'app_1', '--json', '{not json'], /--json must be a JSON object/],
  ] as const) {
    const r = ops(...args);
    assert.equal(r.status, 2, `${args.join(' ')}: ${r.stderr}`);
    assert.match(r.stderr, /^error: /);
    assert.match(r.stderr, re);
    assert.match(r.stderr, /try: npm run ops -- help/);
    assert.doesNotMatch(r.stderr, /\n\s+at /, 'no stack trace');
  }
});

test('a file that cannot be read, or a service that cannot be reached: exit 1, one plain line', () => {
  const missing = ops('key', 'add', '--app', 'app_1', '--key-id', 'k1', '--public-key', '/nonexistent/key.pem');
  assert.equal(missing.status, 1, missing.stderr);
  assert.match(missing.stderr, /^error: ENOENT: no such file or directory/);
  assert.doesNotMatch(missing.stderr, /\n\s+at /);
  const down = ops('merchant', 'list');
  assert.equal(down.status, 1, down.stderr);
  assert.match(down.stderr, /^error: cannot reach http:\/\/127\.0\.0\.1:1/);
});

test('help exits 0 and states the exit codes', () => {
  const r = ops('help');
  assert.equal(r.status, 0);
  assert.match(r.stdout, /Exit status: 0 done; 1 .*; 2 a command line/s);
});

test('events passes --status, --app and --limit to GET /events as status, appId and limit', async () => {
  const seen: string[] = [];
  const server = http.createServer((req, res) => {
    seen.push(req.url ?? '');
    res.writeHead(200, { 'content-type': 'application/json' }).end('{"events":[]}');
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const run = (...args: string[]) =>
    new Promise<number | null>((resolve) => {
      const c = spawn(process.execPath, ['src/cli/ops.ts', ...args, '--token', 'x'.repeat(20), '--url', url], {
        cwd: root,
        stdio: 'ignore',
      });
      c.on('exit', resolve);
    });
  try {
    assert.equal(await run('events'), 0);
    assert.equal(await run('events', '--status', 'DEAD', '--app', 'svcop_AAAAAAAAAAAAAAAA', '--limit', '5'), 0);
    // request: a path after /api/admin/v1, or a full path as the docs quote it (admin or sandbox).
    assert.equal(await run('request', 'GET', '/merchants'), 0);
    assert.equal(await run('request', 'GET', '/api/admin/v1/merchants'), 0);
    assert.equal(await run('request', 'GET', '/api/sandbox/v1/faults'), 0);
    assert.equal(await run('platform-keys', 'rotate', '--json', '{"activateAfterSeconds": 60}'), 0);
  } finally {
    server.close();
  }
  assert.deepEqual(seen, [
    '/api/admin/v1/events',
    '/api/admin/v1/events?status=DEAD&appId=svcop_AAAAAAAAAAAAAAAA&limit=5',
    '/api/admin/v1/merchants',
    '/api/admin/v1/merchants',
    '/api/sandbox/v1/faults',
    '/api/admin/v1/platform-keys/rotate',
  ]);
});

test('reconcile --wait asks for the runs and follows them to the end; the reconciliation and discrepancy commands', async () => {
  const seen: string[] = [];
  let polls = 0;
  const server = http.createServer((req, res) => {
    seen.push(`${req.method} ${req.url}`);
    const send = (body: unknown) => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(body));
    if (req.method === 'POST' && req.url === '/api/admin/v1/reconciliation/runs') return send({ runs: [{ runId: '7', status: 'QUEUED' }] });
    if (req.url === '/api/admin/v1/reconciliation/runs/7')
      return send({ runId: '7', status: ++polls < 2 ? 'RUNNING' : 'COMPLETED', discrepancies: 2 });
    return send({});
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const run = (...args: string[]) =>
    new Promise<{ code: number | null; out: string }>((resolve) => {
      const c = spawn(process.execPath, ['src/cli/ops.ts', ...args, '--token', 'x'.repeat(20), '--url', url], { cwd: root });
      let out = '';
      c.stdout.on('data', (d: Buffer) => (out += d.toString()));
      c.on('exit', (code) => resolve({ code, out }));
    });
  try {
    const r = await run('reconcile', '--day', '2026-05-01', '--provider', 'sandbox', '--wait');
    assert.equal(r.code, 0);
    assert.deepEqual(JSON.parse(r.out), { runs: [{ runId: '7', status: 'COMPLETED', discrepancies: 2 }] });
    assert.equal((await run('reconciliation', 'runs', '--day', '2026-05-01')).code, 0);
    assert.equal((await run('reconciliation', 'lines', '7', '--outcome', 'AMOUNT_MISMATCH')).code, 0);
    assert.equal((await run('discrepancies', '--status', 'OPEN', '--source', 'STATEMENT')).code, 0);
    assert.equal((await run('discrepancy', 'resolve', '12')).code, 0);
  } finally {
    server.close();
  }
  assert.deepEqual(seen, [
    'POST /api/admin/v1/reconciliation/runs',
    'GET /api/admin/v1/reconciliation/runs/7',
    'GET /api/admin/v1/reconciliation/runs/7',
    'GET /api/admin/v1/reconciliation/runs?day=2026-05-01',
    'GET /api/admin/v1/reconciliation/runs/7/lines?outcome=AMOUNT_MISMATCH',
    'GET /api/admin/v1/provider-discrepancies?status=OPEN&source=STATEMENT',
    'POST /api/admin/v1/provider-discrepancies/12/resolve',
  ]);
  for (const [args, re] of [
    [['reconcile'], /--day is required/],
    [['reconcile', '--day', '2026-5-1'], /--day must be YYYY-MM-DD/],
    [['reconciliation', 'run'], /RUN_ID is required/],
  ] as const) {
    const e = ops(...args);
    assert.equal(e.status, 2, e.stderr);
    assert.match(e.stderr, re);
  }
});
