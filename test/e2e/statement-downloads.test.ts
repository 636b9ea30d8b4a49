/**
 * Statement downloads within their budget (docs/configuration.md, "Statement downloads"), through a
 * listening service and real sockets: with one download per app and two in all, a second download
 * of an app, or a third in all, is refused with 429 OPEN_API_RATE_LIMITED and Retry-After while the
 * others go on; concurrent first summaries of a day share one computation (none is refused); a
 * client that opens a download and never reads is cut after the stall timeout, which frees its slot;
 * the file a reading client gets is the whole day, in order, the bytes the summary describes.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import net from 'node:net';
import { after, before, test } from 'node:test';
import pg from 'pg';
import { type Merchant, type TestApp, provision, signedHeaders, startTestApp } from '../helpers/app.ts';
import { waitFor } from '../helpers/events.ts';
import { insertPaidDay } from '../helpers/rows.ts';

/** Rows of the days: ~17 MB of CSV, more than the socket buffers of a client that reads nothing take on loopback. */
const ROWS = 100_000;
const DAY = new Date(Date.now() + 8 * 3600_000 - 3 * 86_400_000).toISOString().slice(0, 10);
const url = (day: string, file = false) => `/api/open/v1/statements/${day}${file ? '/file' : ''}`;

let t: TestApp;
let base: string;
let big: Merchant;
let small: Merchant;
let third: Merchant;
let db: pg.Client;

before(async () => {
  t = await startTestApp({ STATEMENT_DOWNLOADS_PER_APP: '1', STATEMENT_DOWNLOADS_TOTAL: '2', STATEMENT_STALL_TIMEOUT_MS: '400' });
  const port = 55200 + Math.floor(Math.random() * 100);
  base = await t.server.listen({ port, host: '127.0.0.1' }).catch(() => t.server.listen({ port: 0, host: '127.0.0.1' }));
  big = await provision(t, { name: 'Big Day Shop' });
  small = await provision(t, { name: 'Small Shop' });
  third = await provision(t, { name: 'Third Shop' });
  db = new pg.Client({ connectionString: t.config.databaseUrl! });
  await db.connect();
  await seed(big, 'big', ROWS);
  await seed(small, 'small', ROWS);
});
after(async () => {
  await db.end();
  await t.stop();
});

/** `n` paid orders of the app spread over DAY, each with its PAYMENT_SUCCEEDED event, as the service writes them. */
async function seed(m: Merchant, key: string, n: number): Promise<void> {
  await insertPaidDay(db, { key, appId: m.appId, merchantId: m.merchantId, day: DAY, n });
}

async function get(m: Merchant, path: string): Promise<{ status: number; headers: Headers; body: Buffer }> {
  const res = await fetch(`${base}${path}`, { headers: signedHeaders(m, 'GET', path, '') });
  return { status: res.status, headers: res.headers, body: Buffer.from(await res.arrayBuffer()) };
}

/** A download whose client sends the request and then reads nothing: its socket, paused once the answer starts. */
async function stalledDownload(m: Merchant): Promise<{ socket: net.Socket; head: string; rest: () => Promise<number> }> {
  const path = url(DAY, true);
  const h = signedHeaders(m, 'GET', path, '');
  const { hostname, port } = new URL(base);
  const socket = net.connect(Number(port), hostname);
  socket.on('error', () => {});
  let received = 0;
  const closed = new Promise<void>((res) => socket.once('close', () => res()));
  await new Promise<void>((res) => socket.once('connect', () => res()));
  const head = await new Promise<string>((res) => {
    socket.once('data', (chunk: Buffer) => {
      socket.pause();
      received += chunk.length;
      res(chunk.toString('latin1').split('\r\n\r\n')[0]!);
    });
    socket.write(
      `GET ${path} HTTP/1.1\r\nHost: ${hostname}\r\n${Object.entries(h)
        .map(([k, v]) => `${k}: ${v}\r\n`)
        .join('')}\r\n`,
    );
  });
  // Reads what is left, to the connection's end (or until nothing came for 3 s: a connection kept
  // alive after a whole answer): answers the bytes received in all (head included).
  const rest = async () => {
    let last = Date.now();
    socket.on('data', (c: Buffer) => {
      received += c.length;
      last = Date.now();
    });
    socket.resume();
    await Promise.race([
      closed,
      new Promise<void>((res) => {
        const timer = setInterval(() => {
          if (Date.now() - last < 3000) return;
          clearInterval(timer);
          res();
        }, 200);
      }),
    ]);
    return received;
  };
  return { socket, head, rest };
}

test('concurrent first summaries of a day share one computation: none is refused, all give the same digest', async () => {
  const all = await Promise.all([1, 2, 3, 4].map(() => get(big, url(DAY))));
  for (const r of all) assert.equal(r.status, 200, r.body.toString());
  const digests = new Set(all.map((r) => (JSON.parse(r.body.toString()) as { sha256: string }).sha256));
  assert.equal(digests.size, 1);
  assert.equal((JSON.parse(all[0]!.body.toString()) as { rowCount: number }).rowCount, ROWS);
});

test('a reading client gets the whole day, in order, the bytes the summary describes', async () => {
  const summary = JSON.parse((await get(big, url(DAY))).body.toString()) as { sha256: string; sizeBytes: number };
  const file = await get(big, url(DAY, true));
  assert.equal(file.status, 200);
  assert.equal(file.body.length, summary.sizeBytes);
  assert.equal(createHash('sha256').update(file.body).digest('hex'), summary.sha256);
  const lines = file.body.toString().split('\r\n');
  assert.equal(lines.pop(), '');
  assert.equal(lines.length, ROWS + 1);
  const ids = lines.slice(1).map((l) => l.split(',')[2]!);
  assert.deepEqual(ids, [...ids].sort());
  assert.equal(new Set(ids).size, ROWS);
});

test('beyond the budget: 429 with Retry-After, the others unaffected; a client that never reads is cut and frees its slot', async () => {
  // Summaries first (made and kept), so that only downloads hold slots below.
  for (const m of [small, third]) assert.equal((await get(m, url(DAY))).status, 200);
  const held = await stalledDownload(big);
  assert.match(held.head, /^HTTP\/1\.1 200/);

  // The app's one slot is taken: its second download is refused, changing nothing.
  const second = await get(big, url(DAY, true));
  assert.equal(second.status, 429, second.body.toString());
  assert.equal((JSON.parse(second.body.toString()) as { code: string }).code, 'OPEN_API_RATE_LIMITED');
  assert.ok(Number(second.headers.get('retry-after')) >= 1);

  // Another app still downloads (its own slot, the second of the instance's two).
  const heldSmall = await stalledDownload(small);
  assert.match(heldSmall.head, /^HTTP\/1\.1 200/);
  // The instance's two slots are taken: a third app is refused too.
  const refused = await get(third, url(DAY, true));
  assert.equal(refused.status, 429, refused.body.toString());
  assert.ok(Number(refused.headers.get('retry-after')) >= 1);

  // The big day's client reads nothing: it is cut, and its slot is free again (the app downloads its file whole) ...
  const again = await waitFor(
    'a download admitted again',
    async () => {
      const r = await get(big, url(DAY, true));
      return r.status === 200 ? r : null;
    },
    30_000,
  );
  const summary = JSON.parse((await get(big, url(DAY))).body.toString()) as { sha256: string; sizeBytes: number };
  assert.equal(createHash('sha256').update(again.body).digest('hex'), summary.sha256);
  // ... and the stalled client, reading at last, finds its answer cut short of the file.
  assert.ok((await held.rest()) < summary.sizeBytes, 'the stalled download was cut');
  heldSmall.socket.destroy();
});
