/** The flood of the flood scenario (bench/lib/flood.ts) against a plain node:http server. */
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { test } from 'node:test';
import { floodLoop } from '../lib/flood.ts';

test('floodLoop: every kind sends, answers are counted by status, slow senders stay open until the stop', async () => {
  const server = http.createServer({ headersTimeout: 60_000, requestTimeout: 60_000 }, (req, res) => {
    req.resume();
    req.on('end', () => res.writeHead(400).end('no'));
  });
  server.listen(0, '127.0.0.1');
  await new Promise((r) => server.once('listening', r));
  try {
    const flood = floodLoop('127.0.0.1', (server.address() as AddressInfo).port);
    await new Promise((r) => setTimeout(r, 700));
    flood.stop();
    const r = await flood.done;
    assert.deepEqual(Object.keys(r).sort(), ['big-headers', 'deep-json', 'garbage', 'long-path', 'slow-body', 'slow-headers']);
    assert.ok((r['deep-json']!.statuses['400'] ?? 0) > 0, JSON.stringify(r['deep-json']));
    assert.ok((r['big-headers']!.statuses['431'] ?? 0) > 0, JSON.stringify(r['big-headers']));
    assert.ok((r['garbage']!.statuses['400'] ?? 0) > 0, JSON.stringify(r['garbage']));
    assert.equal(r['slow-body']!.openAtStop, 20);
    assert.ok(r['slow-headers']!.oldestAtStopMs > 0, 'the age of the oldest slow connection is reported');
  } finally {
    server.close();
    server.closeAllConnections();
  }
});
