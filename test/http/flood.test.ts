/**
 * A flood of expensive inputs on real sockets (validly signed bodies nested 32,000 deep, 200 KB
 * headers, 100 KB paths, garbage bytes) while valid signed requests are sent: every valid one is
 * answered correctly, and every flood input gets its clear refusal (nothing hangs, nothing is a
 * 500). How long the valid ones take under the flood is measured by the benchmark's flood scenario
 * (docs/performance.md); the event loop's longest stall here is reported as a diagnostic.
 */
import assert from 'node:assert/strict';
import net from 'node:net';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { after, before, test } from 'node:test';
import { type Merchant, type TestApp, provision, signedHeaders, startTestApp } from '../helpers/app.ts';

let t: TestApp;
let m: Merchant;
let base: string;

before(async () => {
  t = await startTestApp();
  m = await provision(t, { app: { rateLimitPerSecond: 100_000 } });
  await t.server.listen({ port: 0, host: '127.0.0.1' });
  base = `http://127.0.0.1:${(t.server.server.address() as net.AddressInfo).port}`;
});
after(() => t.stop());

/** Writes `raw` on a fresh connection; resolves with the status line's code ('' when closed without one). */
function rawStatus(raw: string | Buffer): Promise<string> {
  return new Promise((resolve) => {
    const s = net.connect(Number(new URL(base).port), '127.0.0.1');
    let answer = '';
    s.setEncoding('latin1');
    s.on('data', (d: string) => {
      answer += d;
      if (answer.includes('\r\n')) s.destroy();
    });
    s.on('error', () => {});
    s.on('close', () => resolve(/^HTTP\/1\.1 (\d{3})/.exec(answer)?.[1] ?? ''));
    s.setTimeout(20_000, () => s.destroy());
    s.end(raw);
  });
}

async function signedFetch(method: string, path: string, body: string): Promise<{ status: number; json: Record<string, unknown> }> {
  const r = await fetch(`${base}${path}`, {
    method,
    headers: signedHeaders(m, method, path, body),
    ...(body === '' ? {} : { body }),
  });
  return { status: r.status, json: (await r.json()) as Record<string, unknown> };
}

test('valid requests are answered while expensive inputs flood the service; each flood input gets its refusal', async (ctx) => {
  const loop = monitorEventLoopDelay({ resolution: 10 });
  loop.enable();
  const deep = (n: number) => `${'['.repeat(n)}1${']'.repeat(n)}`;
  const flood: Promise<unknown>[] = [];
  for (let i = 0; i < 40; i++) {
    flood.push(
      signedFetch('POST', '/api/open/v1/payments', deep(20_000 + i * 300)).then((r) => {
        assert.equal(r.status, 400);
        assert.equal(r.json.code, 'OPEN_API_BODY_INVALID');
      }),
    );
  }
  for (let i = 0; i < 20; i++) {
    flood.push(
      rawStatus(`GET /api/open/v1/settlement/accounts HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(200_000)}\r\n\r\n`).then((s) =>
        assert.equal(s, '431'),
      ),
    );
    flood.push(
      rawStatus(`GET /api/open/v1/payments/${'A'.repeat(100_000)} HTTP/1.1\r\nHost: x\r\n\r\n`).then((s) => assert.equal(s, '431')),
    );
    flood.push(rawStatus(Buffer.from(Array.from({ length: 4096 }, (_, k) => (k * 7919) % 256))).then((s) => assert.equal(s, '400')));
  }
  const valid: Promise<unknown>[] = [];
  for (let i = 0; i < 60; i++) {
    valid.push(
      signedFetch('GET', '/api/open/v1/settlement/accounts', '').then((r) => {
        assert.equal(r.status, 200, JSON.stringify(r.json));
      }),
    );
  }
  await Promise.all([...flood, ...valid]);
  loop.disable();
  ctx.diagnostic(`longest event-loop stall during the flood: ${(loop.max / 1e6).toFixed(1)} ms`);
  // And the service still answers as before.
  assert.equal((await signedFetch('GET', '/api/open/v1/settlement/accounts', '')).status, 200);
});
