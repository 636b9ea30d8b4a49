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

test('a control character in a header of an open route is 400 OPEN_API_HEADER_INVALID in the open envelope (seed: a malformed header)', async () => {
  const headers = (nonce: string) =>
    `Host: x\r\nX-SVC-App-Id: svcop_AAAAAAAAAAAAAAAA\r\nX-SVC-Timestamp: 1700000000\r\nX-SVC-Nonce: ${nonce}\r\n` +
    `X-SVC-Key-Id: k1\r\nX-SVC-Request-Id: req-00000001\r\nX-SVC-Sign: ${'A'.repeat(344)}\r\n`;
  const routes = [
    'GET /api/open/v1/payments/T_abcdef',
    'GET /api/open/v1/payments/T_abcdef?x=1',
    'POST /api/open/v1/payments',
    'POST /api/open/v1/payments/T_abcdef/attempts',
    'POST /api/open/v1/payments/T_abcdef/close',
    'POST /api/open/v1/refunds',
    'GET /api/open/v1/refunds/R_abcdef',
    'GET /api/open/v1/settlement/accounts',
    'GET /api/open/v1/statements/2026-01-01',
    'GET /api/open/v1/statements/2026-01-01/file?compression=gzip',
    'GET /api/open/v1/events',
    'GET /api/open/v1/events?limit=5',
    'GET /api/open/v1/events/evt_abcdefghijklmnop',
    'POST /api/open/v1/events/evt_abcdefghijklmnop/redeliveries',
  ];
  for (const route of routes) {
    for (const bad of ['\x01', '\x00', '\x7f']) {
      const answer = await raw(`${route} HTTP/1.1\r\n${headers(`abcdefghij${bad}klmnopqrst`)}Content-Length: 0\r\n\r\n`);
      const [head, body] = answer.split('\r\n\r\n');
      assert.match(head!, /^HTTP\/1\.1 400 /, `${route}: ${answer}`);
      assert.match(head!, /\r\ncontent-type: application\/json; charset=utf-8\r\n/i);
      assert.doesNotMatch(head!, /x-svc-/i, 'no X-SVC-Request-Id, no response signature');
      const b = JSON.parse(body!) as Record<string, unknown>;
      assert.deepEqual(Object.keys(b).sort(), ['code', 'message', 'requestId']);
      assert.equal(b.code, 'OPEN_API_HEADER_INVALID');
      assert.match(b.requestId as string, /^gw_/);
    }
  }
  // A lone CR or a bare LF inside a header value.
  for (const bad of ['\r', '\n']) {
    const answer = await raw(`GET /api/open/v1/payments/T_abcdef HTTP/1.1\r\n${headers(`abcdefghij${bad}klmnopqrst`)}\r\n`);
    assert.equal((JSON.parse(answer.split('\r\n\r\n')[1]!) as { code: string }).code, 'OPEN_API_HEADER_INVALID', JSON.stringify(bad));
  }
  // A bad byte in a header name too.
  const name = await raw(`GET /api/open/v1/payments/T_abcdef HTTP/1.1\r\n${headers('abcdefghijklmnopqrst')}X-\x01Odd: 1\r\n\r\n`);
  assert.equal((JSON.parse(name.split('\r\n\r\n')[1]!) as { code: string }).code, 'OPEN_API_HEADER_INVALID');
  // Elsewhere (an unmounted path, another method, the admin API) it stays the platform envelope.
  for (const route of [
    'GET /api/open/v1/nothing',
    'DELETE /api/open/v1/payments/T_abcdef',
    'GET /api/admin/v1/merchants',
    'GET /api/open/v1/payments',
    'GET /api/open/v1/statements',
    'POST /api/open/v1/events',
  ]) {
    envelope(await raw(`${route} HTTP/1.1\r\n${headers('abcdefghij\x01klmnopqrst')}\r\n`), 400, 'BAD_REQUEST');
  }
});

test('an Expect other than 100-continue is a 417 in the platform envelope', async () => {
  envelope(
    await raw('GET /api/open/v1/payments/T_abcdef HTTP/1.1\r\nHost: x\r\nExpect: something-else\r\n\r\n'),
    417,
    'EXPECTATION_FAILED',
  );
});

test('headers over 16 KB are a 431 in the platform envelope', async () => {
  const answer = await raw(`GET /api/open/v1/payments/${'A'.repeat(20_000)} HTTP/1.1\r\nHost: x\r\n\r\n`);
  envelope(answer, 431, 'REQUEST_HEADER_FIELDS_TOO_LARGE');
});

test('a request whose body stops arriving is cut with a 408 in the platform envelope, not held open', async () => {
  const slow = await startTestApp({}, { connectionIdleTimeoutMs: 500 });
  try {
    await slow.server.listen({ port: 0, host: '127.0.0.1' });
    const p = (slow.server.server.address() as net.AddressInfo).port;
    const send = (bytes: string) =>
      new Promise<{ answer: string }>((resolve, reject) => {
        const s = net.connect(p, '127.0.0.1');
        let out = '';
        s.setEncoding('latin1');
        s.on('data', (d: string) => (out += d));
        s.on('error', reject);
        s.on('close', () => resolve({ answer: out }));
        s.setTimeout(10_000, () => s.destroy(new Error('not cut within 10 s')));
        s.write(bytes);
      });
    // Headers and half the announced body, then nothing.
    const stalled = await send(
      'POST /api/open/v1/payments HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"outTradeNo":',
    );
    // Cut by the server (the 408), not by this client giving up after 10 s (a rejection).
    envelope(stalled.answer, 408, 'REQUEST_TIMEOUT');
  } finally {
    await slow.stop();
  }
});

test('the server keeps serving after them', async () => {
  const answer = await raw('GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
  assert.match(answer, /^HTTP\/1\.1 200 /);
});
