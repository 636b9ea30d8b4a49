/**
 * Connections held by slow clients are closed by the server within the configured bounds, while
 * valid traffic is served: 200 connections sending their headers one byte at a time (slowloris),
 * 50 sending 9 bytes of a 50-byte body then nothing, and idle kept-alive connections.
 */
import assert from 'node:assert/strict';
import net from 'node:net';
import { after, before, test } from 'node:test';
import { type Merchant, type TestApp, call, provision, startTestApp } from '../helpers/app.ts';

let t: TestApp;
let m: Merchant;
let port: number;

before(async () => {
  t = await startTestApp({ HTTP_HEADERS_TIMEOUT_MS: '1000', HTTP_REQUEST_TIMEOUT_MS: '2000', HTTP_KEEP_ALIVE_TIMEOUT_MS: '1000' });
  m = await provision(t);
  await t.server.listen({ port: 0, host: '127.0.0.1' });
  port = (t.server.server.address() as net.AddressInfo).port;
});
after(() => t.stop());

/** How long a held connection waits for the server to close it before giving up (far past every bound). */
const GIVE_UP_MS = 15_000;

/**
 * A connection that sends `first`, then `drip` one byte every `everyMs` (if any); resolves with
 * what it was answered and who closed it: the server, or this client giving up after GIVE_UP_MS.
 */
function hold(first: string, drip: string | null, everyMs = 200): Promise<{ closedBy: 'server' | 'client'; answer: string }> {
  return new Promise((resolve) => {
    let closedBy: 'server' | 'client' = 'server';
    const s = net.connect(port, '127.0.0.1');
    let answer = '';
    let timer: NodeJS.Timeout | undefined;
    s.setEncoding('latin1');
    s.on('data', (d: string) => (answer += d));
    s.on('error', () => {});
    s.on('close', () => {
      clearInterval(timer);
      resolve({ closedBy, answer });
    });
    s.setTimeout(GIVE_UP_MS, () => {
      closedBy = 'client';
      s.destroy();
    });
    s.write(first);
    if (drip !== null) {
      let i = 0;
      timer = setInterval(() => {
        if (!s.destroyed) s.write(drip[i++ % drip.length]!);
      }, everyMs);
    }
  });
}

test('slow headers, a stalled body and idle kept-alive connections are closed within their bounds; valid requests are served meanwhile', async () => {
  const slowloris = Array.from({ length: 200 }, () => hold('GET /api/open/v1/settlement/accounts HTTP/1.1\r\nHost: x\r\nX-Slow: ', 'a'));
  const stalled = Array.from({ length: 50 }, () =>
    hold('POST /api/open/v1/payments HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 50\r\n\r\n{"outTrade', null),
  );
  const idle = Array.from({ length: 20 }, () => hold('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n', null));
  // Valid traffic while they hold their connections.
  for (let i = 0; i < 10; i++) {
    const r = await call(t, m, 'GET', '/api/open/v1/settlement/accounts');
    assert.equal(r.statusCode, 200);
    const h = await fetch(`http://127.0.0.1:${port}/healthz`);
    assert.equal(h.status, 200);
  }
  const sl = await Promise.all(slowloris);
  const st = await Promise.all(stalled);
  const id = await Promise.all(idle);
  // The server closed every one (its bounds are 1-2 s, checked every second), not the client giving up.
  for (const [what, list] of [
    ['slow headers', sl],
    ['a stalled body', st],
    ['an idle kept-alive connection', id],
  ] as const) {
    assert.deepEqual(new Set(list.map((r) => r.closedBy)), new Set(['server']), `${what}: closed by the server`);
  }
  assert.match(sl[0]!.answer, /^HTTP\/1\.1 408 /, 'the slow sender is told');
  assert.match(st[0]!.answer, /^HTTP\/1\.1 408 /);
  assert.match(id[0]!.answer, /^HTTP\/1\.1 200 /, 'the idle connection had its answer before it was closed');
});

test('HTTP_HEADERS_TIMEOUT_MS above HTTP_REQUEST_TIMEOUT_MS is a configuration error naming both', async () => {
  const { loadConfig, ConfigError } = await import('../../src/config/config.ts');
  assert.throws(
    () => loadConfig({ HTTP_HEADERS_TIMEOUT_MS: '5000', HTTP_REQUEST_TIMEOUT_MS: '1000' }),
    (e: unknown) => e instanceof ConfigError && /HTTP_HEADERS_TIMEOUT_MS.*HTTP_REQUEST_TIMEOUT_MS/.test(e.message),
  );
});
