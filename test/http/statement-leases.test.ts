/**
 * Statement downloads of an app counted across two instances on one database (docs/configuration.md,
 * "Statement downloads"): downloads raced on both instances admit exactly the app's limit, every
 * other one answered 429 with Retry-After; an operator's limit set through one instance's admin API
 * applies at once on the other; null gives the default back; leases left by an instance that is gone
 * (a crash: its heartbeat stopped) hold no slot. Through listening servers and raw sockets whose
 * clients never read, so that every admitted download holds its slot.
 */
import assert from 'node:assert/strict';
import net from 'node:net';
import { after, before, test } from 'node:test';
import pg from 'pg';
import { type BuiltApp, buildApp } from '../../src/app.ts';
import { type Merchant, type TestApp, provision, signedHeaders, startTestApp } from '../helpers/app.ts';
import { insertPaidDay } from '../helpers/rows.ts';

/** Rows of the day: ~17 MB of CSV, more than the socket buffers of a client that reads nothing take on loopback. */
const ROWS = 100_000;
const DAY = new Date(Date.now() + 8 * 3600_000 - 3 * 86_400_000).toISOString().slice(0, 10);
const FILE = `/api/open/v1/statements/${DAY}/file`;

let a: TestApp;
let b: BuiltApp;
const bases: string[] = [];
let m: Merchant;
let db: pg.Client;
const sockets: net.Socket[] = [];

before(async () => {
  const env = { STATEMENT_DOWNLOADS_PER_APP: '2', STATEMENT_DOWNLOADS_TOTAL: '8', STATEMENT_STALL_TIMEOUT_MS: '600000' };
  a = await startTestApp(env);
  b = await buildApp(a.config);
  for (const s of [a.server, b.server]) bases.push(await s.listen({ port: 0, host: '127.0.0.1' }));
  m = await provision(a, { name: 'Leases Shop' });
  db = new pg.Client({ connectionString: a.config.databaseUrl! });
  await db.connect();
  await seed(m, ROWS);
  // The summary first (made and kept), so that only downloads hold slots below.
  const s = await fetch(`${bases[0]}/api/open/v1/statements/${DAY}`, {
    headers: signedHeaders(m, 'GET', `/api/open/v1/statements/${DAY}`, ''),
  });
  assert.equal(s.status, 200, await s.text());
});
after(async () => {
  for (const s of sockets) s.destroy();
  await db.end();
  await b.close();
  await a.stop();
});

/** `n` paid orders of the app spread over DAY, each with its PAYMENT_SUCCEEDED event, as the service writes them. */
async function seed(mch: Merchant, n: number): Promise<void> {
  await insertPaidDay(db, { key: 'ls', appId: mch.appId, merchantId: mch.merchantId, day: DAY, n });
}

/**
 * A download on instance `n` whose client reads nothing after the answer's head: its status, and
 * (when admitted) its socket kept open, so that the download holds its slot.
 */
async function download(n: number): Promise<{ status: number; head: string }> {
  const h = signedHeaders(m, 'GET', FILE, '');
  const { hostname, port } = new URL(bases[n % 2]!);
  const socket = net.connect(Number(port), hostname);
  socket.on('error', () => {});
  sockets.push(socket);
  await new Promise<void>((res) => socket.once('connect', () => res()));
  const head = await new Promise<string>((res) => {
    socket.once('data', (chunk: Buffer) => {
      socket.pause();
      res(chunk.toString('latin1'));
    });
    socket.write(
      `GET ${FILE} HTTP/1.1\r\nHost: ${hostname}\r\n${Object.entries(h)
        .map(([k, v]) => `${k}: ${v}\r\n`)
        .join('')}\r\n`,
    );
  });
  const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1]);
  if (status !== 200) socket.destroy();
  return { status, head };
}

function closeAll(): Promise<void> {
  const closing = sockets
    .splice(0)
    .map((s) => new Promise<void>((res) => (s.destroyed ? res() : (s.once('close', () => res()), s.destroy()))));
  return Promise.all(closing).then(() => undefined);
}

/** Waits until the app holds no lease (the downloads cut by their clients have given their slots back). */
async function noLeases(): Promise<void> {
  for (let i = 0; i < 500; i++) {
    const r = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM statement_download_leases WHERE app_id = $1', [m.appId]);
    if (r.rows[0]!.n === 0) return;
    await new Promise((res) => setTimeout(res, 20));
  }
  assert.fail('leases still held');
}

test("downloads raced on both instances admit exactly the app's limit; the others are 429 with Retry-After", async () => {
  const rs = await Promise.all(Array.from({ length: 6 }, (_, i) => download(i)));
  const statuses = rs.map((r) => r.status);
  assert.equal(statuses.filter((s) => s === 200).length, 2, statuses.join(','));
  for (const r of rs.filter((x) => x.status !== 200)) {
    assert.equal(r.status, 429, r.head);
    assert.match(r.head, /retry-after: \d+/i);
  }
  await closeAll();
  await noLeases();
});

test("an operator's limit set on one instance applies at once on the other; null gives the default back", async () => {
  const patched = await a.admin('PATCH', `/apps/${m.appId}`, { statementDownloadsAtOnce: 3 });
  assert.equal(patched.statusCode, 200, patched.body);
  assert.equal(patched.json().statementDownloadsAtOnce, 3);
  const rs = [];
  for (let i = 0; i < 4; i++) rs.push(await download(1));
  assert.deepEqual(
    rs.map((r) => r.status),
    [200, 200, 200, 429],
  );
  assert.match(rs[3]!.head, /At most 3 statement files/);
  await closeAll();
  await noLeases();

  const back = await a.admin('PATCH', `/apps/${m.appId}`, { statementDownloadsAtOnce: null });
  assert.equal(back.json().statementDownloadsAtOnce, null);
  const again = [await download(1), await download(0), await download(1)];
  assert.deepEqual(
    again.map((r) => r.status),
    [200, 200, 429],
  );
  await closeAll();
  await noLeases();
});

test('leases of an instance that is gone (its heartbeat stopped) hold no slot', async () => {
  // What a kill -9 leaves: the app's two leases, held by an instance that beat long ago.
  await db.query(
    `INSERT INTO service_instances(id, started_at, heartbeat_at) VALUES ('ins_crashed', now() - interval '1 hour', now() - interval '1 hour')`,
  );
  await db.query(
    `INSERT INTO statement_download_leases(lease_id, app_id, instance_id, taken_at) VALUES ('l1', $1, 'ins_crashed', now()), ('l2', $1, 'ins_crashed', now())`,
    [m.appId],
  );
  const r = await download(0);
  assert.equal(r.status, 200, r.head);
  const left = await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM statement_download_leases WHERE instance_id = 'ins_crashed'`);
  assert.equal(left.rows[0]!.n, 0, "the gone instance's leases are dropped");
  await closeAll();
  await noLeases();
});

test('the admin API refuses a limit out of range with its clear error, changing nothing', async () => {
  for (const v of [0, 1001, 2.5, '3', true]) {
    const r = await a.admin('PATCH', `/apps/${m.appId}`, { statementDownloadsAtOnce: v });
    assert.equal(r.statusCode, 400, r.body);
    assert.equal(r.json().code, 'ADMIN_VALIDATION_FAILED');
    assert.match(r.json().message, /statementDownloadsAtOnce/);
  }
  assert.equal((await a.admin('GET', `/apps/${m.appId}`)).json().statementDownloadsAtOnce, null);
  const created = await a.admin('POST', `/merchants/${m.merchantId}/apps`, { statementDownloadsAtOnce: 5 });
  assert.equal(created.statusCode, 201, created.body);
  assert.equal(created.json().statementDownloadsAtOnce, 5);
});
