/** The sign-in flood of the noisy scenario (bench/lib/sign-in-flood.ts) against a plain node:http server. */
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { test } from 'node:test';
import { floodAddress, signInFloodLoop } from '../lib/sign-in-flood.ts';

test('floodAddress: distinct loopback addresses, never .0 or .255 in the last byte', () => {
  const seen = new Set<string>();
  for (let n = 0; n < 200_000; n++) {
    const a = floodAddress(n);
    assert.match(a, /^127\.(\d+)\.(\d+)\.(\d+)$/);
    const last = Number(a.split('.')[3]);
    assert.ok(last >= 1 && last <= 254, a);
    seen.add(a);
  }
  assert.equal(seen.size, 200_000);
});

test('signInFloodLoop: wrong sign-ins of new names, each from an address of its own, answers counted by status', async () => {
  const from = new Set<string>();
  const names = new Set<string>();
  const server = http.createServer((req, res) => {
    from.add(req.socket.remoteAddress!);
    let body = '';
    req.on('data', (c: Buffer) => (body += c));
    req.on('end', () => {
      assert.equal(req.url, '/console/api/session');
      names.add((JSON.parse(body) as { name: string }).name);
      res.writeHead(503, { 'retry-after': '1' }).end('{}');
    });
  });
  server.listen(0, '127.0.0.1');
  await new Promise((r) => server.once('listening', r));
  try {
    const flood = signInFloodLoop('127.0.0.1', (server.address() as AddressInfo).port, 200, 64);
    await new Promise((r) => setTimeout(r, 300));
    flood.stop();
    const r = await flood.done;
    assert.ok(r.sent > 0);
    assert.deepEqual(r.statuses, { 503: r.sent }, JSON.stringify(r));
    assert.equal(from.size, r.sent, 'an address per sign-in');
    assert.equal(names.size, r.sent, 'a name per sign-in');
  } finally {
    server.close();
    server.closeAllConnections();
  }
});
