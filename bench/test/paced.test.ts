// The benchmark's open-loop sender: its answer parser, and one paced run against a local server.
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { test } from 'node:test';
import type { Item } from '../lib/corpus.ts';
import { parseAnswer, runPaced } from '../lib/paced.ts';

/** `n` GET requests expecting 200: `/0`, `/1`, ... */
function queries(n: number): Item[] {
  return Array.from({ length: n }, (_, i): Item => ({
    kind: 'query',
    expect: 200,
    method: 'GET',
    path: `/${i}`,
    body: '',
    requestId: `r${i}`,
    headers: {},
  }));
}

test('parseAnswer: Content-Length, the signature header, partial input and two answers in one buffer', () => {
  const one = 'HTTP/1.1 201 Created\r\nContent-Length: 5\r\nX-SVC-Response-Sign: abc\r\n\r\nhello';
  const buf = Buffer.from(one + 'HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nConnection: close\r\n\r\n');
  const a = parseAnswer(buf)!;
  assert.equal(a.status, 201);
  assert.equal(a.signed, true);
  assert.equal(a.body.toString(), 'hello');
  assert.equal(a.close, false);
  const b = parseAnswer(buf.subarray(a.used))!;
  assert.deepEqual([b.status, b.signed, b.body.length, b.close, b.used], [404, false, 0, true, buf.length - a.used]);
  assert.equal(parseAnswer(Buffer.from(one.slice(0, -1))), null);
  assert.equal(parseAnswer(Buffer.from('HTTP/1.1 200 OK\r\nContent-Le')), null);
});

test('parseAnswer: chunked bodies, complete and partial; garbage throws', () => {
  const chunked = 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n';
  const p = parseAnswer(Buffer.from(chunked))!;
  assert.equal(p.body.toString(), 'abcde');
  assert.equal(p.used, Buffer.byteLength(chunked));
  assert.equal(parseAnswer(Buffer.from(chunked.slice(0, -2))), null);
  assert.throws(() => parseAnswer(Buffer.from('SMTP ready\r\n\r\n')), /bad status line/);
});

test('runPaced sends every item once at the rate and counts answers by status, unexpected and unsigned', async () => {
  const seen: string[] = [];
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      seen.push(`${req.method} ${req.url} ${body}`);
      const signed = req.url !== '/unsigned';
      res.writeHead(req.url === '/missing' ? 404 : 200, signed ? { 'X-SVC-Response-Sign': 'x' } : {});
      res.end(req.url === '/chunked' ? undefined : 'ok');
    });
  });
  server.listen(0, '127.0.0.1');
  await new Promise((r) => server.once('listening', r));
  const port = (server.address() as AddressInfo).port;
  const item = (path: string, method: 'GET' | 'POST' = 'GET', body = ''): Item => ({
    kind: 'query',
    expect: 200,
    method,
    path,
    body,
    requestId: path,
    headers: method === 'POST' ? { 'Content-Type': 'application/json' } : {},
  });
  const items = [item('/a'), item('/b', 'POST', '{"x":1}'), item('/missing'), item('/unsigned'), item('/c')];
  const answers: string[] = [];
  try {
    const r = await runPaced({
      url: `http://127.0.0.1:${port}`,
      items,
      rate: 200,
      maxSockets: 2,
      deadlineMs: Date.now() + 10_000,
      onAnswer: (it, status, body, signed) => answers.push(`${it.path} ${status} ${body} ${signed}`),
    });
    assert.equal(r.sent, 5);
    assert.equal(r.completed, 5);
    assert.deepEqual(r.statuses, { 200: 4, 404: 1 });
    assert.deepEqual(r.unexpected, { 'query 404': 1 });
    assert.equal(r.unsigned2xx, 1);
    assert.deepEqual(r.socketErrors, {});
    assert.ok(r.seconds >= 0.015, `five requests at 200/s take at least 20 ms (${r.seconds} s)`);
    assert.deepEqual(seen.sort(), ['GET /a ', 'GET /c ', 'GET /missing ', 'GET /unsigned ', 'POST /b {"x":1}']);
    assert.ok(answers.includes('/b 200 ok true'));
    // Five requests due within the first second: one entry, the slowest of them.
    assert.equal(r.worstBySecondMs?.length, 1);
    assert.ok(r.worstBySecondMs![0]! >= r.latencyMs.p50 && r.worstBySecondMs![0]! <= r.latencyMs.max + 0.1);
  } finally {
    server.close();
  }
});

test('runPaced against a closed port ends: every request fails with the connect error', async () => {
  // A port that was free a moment ago (nothing listens on it now).
  const probe = http.createServer().listen(0, '127.0.0.1');
  await new Promise((r) => probe.once('listening', r));
  const port = (probe.address() as AddressInfo).port;
  await new Promise((r) => probe.close(r));
  const items = queries(5);
  const r = await runPaced({ url: `http://127.0.0.1:${port}`, items, rate: 1000, maxSockets: 2, deadlineMs: Date.now() + 10_000 });
  assert.equal(r.completed, 0);
  assert.ok((r.socketErrors.ECONNREFUSED ?? 0) >= 5, JSON.stringify(r.socketErrors));
});

test('runPaced with no items resolves at once', async () => {
  const r = await runPaced({ url: 'http://127.0.0.1:9', items: [], rate: 10, maxSockets: 1, deadlineMs: Date.now() + 1000 });
  assert.equal(r.sent, 0);
  assert.equal(r.completed, 0);
});

test('runPaced stops releasing requests at the deadline and reports the run truncated', async () => {
  const server = http.createServer((_req, res) => res.end('ok'));
  server.listen(0, '127.0.0.1');
  await new Promise((r) => server.once('listening', r));
  const port = (server.address() as AddressInfo).port;
  const items = queries(100);
  try {
    // 100 requests at 20/s would take 5 s; the deadline comes after 2 s (the sender's worker thread
    // may take seconds to start on a busy machine, so it may send none: only "not all" is asserted).
    const r = await runPaced({ url: `http://127.0.0.1:${port}`, items, rate: 20, maxSockets: 2, deadlineMs: Date.now() + 2000 });
    assert.equal(r.truncated, true);
    assert.ok(r.sent < items.length, `sent ${r.sent}`);
    assert.equal(r.completed, r.sent);
  } finally {
    server.close();
  }
});
