/**
 * Requests Node's HTTP parser refuses before any route is known: answered in the platform
 * envelope (like an unknown path), connection closed, never a 500, and the server keeps serving.
 */
import assert from 'node:assert/strict';
import net from 'node:net';
import { after, before, test } from 'node:test';
import { type TestApp, startTestApp } from '../helpers/app.ts';

let t: TestApp;
let port: number;
before(async () => {
  t = await startTestApp();
  await t.server.listen({ port: 0, host: '127.0.0.1' });
  port = (t.server.server.address() as net.AddressInfo).port;
});
after(() => t.stop());

/** Writes raw bytes, reads until the server closes the connection. */
function raw(bytes: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = net.connect(port, '127.0.0.1');
    let out = '';
    s.setEncoding('latin1');
    s.on('data', (d: string) => (out += d));
    s.on('error', reject);
    s.on('close', () => resolve(out));
    s.setTimeout(5000, () => s.destroy(new Error('no answer in 5 s')));
    s.end(bytes);
  });
}

function envelope(answer: string, status: number, error: string): void {
  const [head, body] = answer.split('\r\n\r\n');
  assert.match(head!, new RegExp(`^HTTP/1\\.1 ${status} `), answer);
  assert.match(head!, /\r\ncontent-type: application\/json; charset=utf-8\r\n/i);
  assert.match(head!, /\r\nconnection: close(\r\n|$)/i);
  const b = JSON.parse(body!) as Record<string, unknown>;
  assert.deepEqual(Object.keys(b).sort(), ['error', 'message', 'status']);
  assert.equal(b.status, status);
  assert.equal(b.error, error);
}

test('malformed HTTP/1.1 is a 400 BAD_REQUEST in the platform envelope', async () => {
  const cases = [
    'POST /api/open/v1/payments HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n',
    'POST /api/open/v1/payments HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}',
    'POST /api/open/v1/payments HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n',
    'POST /api/open/v1/payments HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n',
    'FOOBAR /api/open/v1/payments HTTP/1.1\r\nHost: x\r\n\r\n',
    'GET /api/open/v1/pay ments HTTP/1.1\r\nHost: x\r\n\r\n',
  ];
  for (const c of cases) envelope(await raw(c), 400, 'BAD_REQUEST');
});

test('headers over 16 KB are a 431 in the platform envelope', async () => {
  const answer = await raw(`GET /api/open/v1/payments/${'A'.repeat(20_000)} HTTP/1.1\r\nHost: x\r\n\r\n`);
  envelope(answer, 431, 'REQUEST_HEADER_FIELDS_TOO_LARGE');
});

test('the server keeps serving after them', async () => {
  const answer = await raw('GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
  assert.match(answer, /^HTTP\/1\.1 200 /);
});
