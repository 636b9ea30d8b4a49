/**
 * The count of open-API requests in progress that statement and reconciliation slices give way to
 * (src/lib/in-flight.ts, kept by src/http/open.ts): one while a request is in progress, from its
 * start until its answer ends, whether the answer is sent, refused or cut by its client; statement
 * operations are not counted (they are the work that gives way); nothing is left counted after.
 */
import assert from 'node:assert/strict';
import net from 'node:net';
import { after, before, test } from 'node:test';
import { type Merchant, type TestApp, orderBody, provision, signedHeaders, startTestApp } from '../helpers/app.ts';

let t: TestApp;
let base: string;
let m: Merchant;

before(async () => {
  t = await startTestApp();
  base = await t.server.listen({ port: 0, host: '127.0.0.1' });
  m = await provision(t);
});
after(() => t.stop());

async function until(what: string, cond: () => boolean): Promise<void> {
  for (let i = 0; i < 500 && !cond(); i++) await new Promise((r) => setTimeout(r, 10));
  assert.ok(cond(), what);
}

test('answers sent, refused or not found, a statement among them, leave nothing counted', async () => {
  const body = JSON.stringify(orderBody());
  const path = '/api/open/v1/payments';
  const day = new Date(Date.now() + 8 * 3600_000 - 2 * 86_400_000).toISOString().slice(0, 10);
  const rs = await Promise.all([
    fetch(`${base}${path}`, { method: 'POST', headers: signedHeaders(m, 'POST', path, body), body }),
    fetch(`${base}${path}/NOPE_1`, { headers: signedHeaders(m, 'GET', `${path}/NOPE_1`, '') }),
    fetch(`${base}${path}/NOPE_2`), // unsigned: refused by the gate
    fetch(`${base}/api/open/v1/statements/${day}`, { headers: signedHeaders(m, 'GET', `/api/open/v1/statements/${day}`, '') }),
  ]);
  assert.deepEqual(
    rs.map((r) => r.status),
    [201, 404, 400, 200],
  );
  await until('nothing counted once every answer is sent', () => t.svc.openRequests.count === 0);
});

test('a request whose client goes away before its answer is counted while in progress, then no more', async () => {
  const path = '/api/open/v1/payments';
  const { hostname, port } = new URL(base);
  const socket = net.connect(Number(port), hostname);
  socket.on('error', () => {});
  await new Promise<void>((res) => socket.once('connect', () => res()));
  // The head of a POST whose body never comes: the request has started, and waits for its body.
  const h = signedHeaders(m, 'POST', path, '{}');
  socket.write(
    `POST ${path} HTTP/1.1\r\nHost: ${hostname}\r\ncontent-length: 100\r\n${Object.entries(h)
      .map(([k, v]) => `${k}: ${v}\r\n`)
      .join('')}\r\n{`,
  );
  await until('counted while in progress', () => t.svc.openRequests.count === 1);
  socket.destroy();
  await until('no more once its client has gone', () => t.svc.openRequests.count === 0);
});
