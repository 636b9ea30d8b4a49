/**
 * Step 1 of the gate: the body guard (seed "Common rules", "Limits"; decisions.md section 2).
 * 65,536 bytes counted while streaming (with or without Content-Length), JSON syntax, duplicate keys
 * at any depth, on every method, before any header is looked at; bodies of the bodyless operations
 * ignored when valid; a 413 on a real socket reaches the client.
 */
import assert from 'node:assert/strict';
import { Readable } from 'node:stream';
import { after, before, describe, test } from 'node:test';
import { DISCARD_LIMIT_BYTES } from '../../src/gate/gate.ts';
import { type Merchant, type TestApp, orderBody, provision, signedHeaders, startTestApp } from '../helpers/app.ts';
import { OPEN, expectRejection, expectSuccess, listen, rawExchange, rawHead, rawRequest, send } from './gate-kit.test.ts';

let t: TestApp;
let m: Merchant;

const SETTLEMENT = `${OPEN}/settlement/accounts`;
const PAYMENTS = `${OPEN}/payments`;
const LIMIT = 65_536;

before(async () => {
  t = await startTestApp({ AUTH_FAILURE_LIMIT: '100000' });
  m = await provision(t);
});
after(() => t.stop());

/** A valid JSON object of exactly `bytes` bytes: {"pad":"xxx..."} (optionally with a multi-byte filler). */
function jsonOfSize(bytes: number, filler = 'x'): string {
  const overhead = Buffer.byteLength('{"pad":""}');
  const unit = Buffer.byteLength(filler);
  const n = Math.floor((bytes - overhead) / unit);
  const s = `{"pad":"${filler.repeat(n)}${'y'.repeat(bytes - overhead - n * unit)}"}`;
  assert.equal(Buffer.byteLength(s), bytes);
  return s;
}

/** A signed inject whose body is streamed in chunks (no Content-Length). */
function streamed(method: string, url: string, raw: string, chunk = 4096) {
  const headers = signedHeaders(m, method, url, raw, method === 'GET' ? { contentType: 'application/json' } : {});
  const buf = Buffer.from(raw);
  const parts: Buffer[] = [];
  for (let i = 0; i < buf.length; i += chunk) parts.push(buf.subarray(i, i + chunk));
  return {
    headers,
    res: t.server.inject({ method: method as 'GET', url, headers, payload: Readable.from(parts), remoteAddress: '127.0.0.1' }),
  };
}

describe('size: 65,536 bytes counted while streaming', () => {
  test('exactly 65,536 bytes pass the guard (a GET ignores the valid body: 200)', async () => {
    const s = await send(t, m, 'GET', SETTLEMENT, jsonOfSize(LIMIT), { contentType: 'application/json' });
    await expectSuccess(t, s.r, s.requestId, 200);
  });

  test('65,536 bytes of multi-byte text pass; one more byte is 413 (bytes, not characters)', async () => {
    const s = await send(t, m, 'GET', SETTLEMENT, jsonOfSize(LIMIT, '\u00e9'), { contentType: 'application/json' });
    await expectSuccess(t, s.r, s.requestId, 200);
    const big = await send(t, m, 'GET', SETTLEMENT, jsonOfSize(LIMIT + 1, '\u00e9'), { contentType: 'application/json' });
    await expectRejection(t, big.r, { status: 413, code: 'OPEN_API_BODY_TOO_LARGE', step: 1, sentRequestId: big.requestId });
  });

  test('65,536 bytes on a POST reach step 9 (the schema judges it, signed)', async () => {
    const s = await send(t, m, 'POST', PAYMENTS, jsonOfSize(LIMIT));
    await expectRejection(t, s.r, { status: 400, code: 'OPEN_API_BODY_INVALID', step: 9, sentRequestId: s.requestId, details: 'any' });
  });

  test('65,537 bytes with Content-Length -> 413 on POST and GET', async () => {
    for (const method of ['POST', 'GET']) {
      const s = await send(t, m, method, method === 'GET' ? SETTLEMENT : PAYMENTS, jsonOfSize(LIMIT + 1), {
        contentType: 'application/json',
      });
      await expectRejection(t, s.r, { status: 413, code: 'OPEN_API_BODY_TOO_LARGE', step: 1, sentRequestId: s.requestId });
    }
  });

  test('65,537 invalid-JSON bytes are 413, 65,536 invalid-JSON bytes are 400', async () => {
    const over = await send(t, m, 'POST', PAYMENTS, '['.repeat(LIMIT + 1));
    await expectRejection(t, over.r, { status: 413, code: 'OPEN_API_BODY_TOO_LARGE', step: 1, sentRequestId: over.requestId });
    const at = await send(t, m, 'POST', PAYMENTS, '['.repeat(LIMIT));
    await expectRejection(t, at.r, { status: 400, code: 'OPEN_API_BODY_INVALID', step: 1, sentRequestId: at.requestId });
  });

  test('streamed without Content-Length: 65,536 pass, 65,537 -> 413', async () => {
    const okReq = streamed('GET', SETTLEMENT, jsonOfSize(LIMIT));
    const okRes = await okReq.res;
    assert.equal(okRes.statusCode, 200, okRes.body);
    assert.equal(okReq.headers['Content-Length'], undefined);
    const bigReq = streamed('POST', PAYMENTS, jsonOfSize(LIMIT + 1), 1000);
    await expectRejection(t, await bigReq.res, {
      status: 413,
      code: 'OPEN_API_BODY_TOO_LARGE',
      step: 1,
      sentRequestId: bigReq.headers['X-SVC-Request-Id'],
    });
  });

  test('an oversized body is rejected with no headers at all', async () => {
    const r = await t.server.inject({ method: 'POST', url: PAYMENTS, payload: 'x'.repeat(LIMIT + 1) });
    await expectRejection(t, r, { status: 413, code: 'OPEN_API_BODY_TOO_LARGE', step: 1 });
    const g = await t.server.inject({ method: 'GET', url: `${PAYMENTS}/T_1234567`, payload: 'x'.repeat(200_000) });
    await expectRejection(t, g, { status: 413, code: 'OPEN_API_BODY_TOO_LARGE', step: 1 });
  });
});

describe('JSON syntax and duplicate keys', () => {
  const invalid = [
    '{',
    '{"a":1,}',
    "{'a':1}",
    '{"a":NaN}',
    '{"a":1} // c',
    '{"a":1}{"b":2}',
    '\ufeff{"a":1}',
    '{"a":"\u0001"}',
    '{"a":01}',
    '{"a":.5}',
    '{"a":"\\x41"}',
    'undefined',
    ' ',
    '{"a":tru}',
    '[1,2',
  ];
  test('invalid JSON -> 400 OPEN_API_BODY_INVALID before any header (POST and GET)', async () => {
    for (const raw of invalid) {
      const p = await send(t, m, 'POST', PAYMENTS, raw);
      await expectRejection(t, p.r, { status: 400, code: 'OPEN_API_BODY_INVALID', step: 1, sentRequestId: p.requestId });
      const g = await send(t, m, 'GET', `${PAYMENTS}/T_1234567`, raw, { contentType: 'application/json' });
      await expectRejection(t, g.r, { status: 400, code: 'OPEN_API_BODY_INVALID', step: 1, sentRequestId: g.requestId });
    }
  });

  test('invalid UTF-8 -> 400', async () => {
    for (const bytes of [
      [0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xff, 0x22, 0x7d],
      [0x7b, 0x22, 0xc0, 0xaf, 0x22, 0x3a, 0x31, 0x7d],
    ]) {
      const raw = Buffer.from(bytes);
      const headers = signedHeaders(m, 'POST', PAYMENTS, raw);
      const r = await t.server.inject({ method: 'POST', url: PAYMENTS, headers, payload: raw, remoteAddress: '127.0.0.1' });
      await expectRejection(t, r, { status: 400, code: 'OPEN_API_BODY_INVALID', step: 1, sentRequestId: headers['X-SVC-Request-Id'] });
    }
  });

  test('duplicate keys at any depth, also through escapes -> 400', async () => {
    const dups = [
      '{"a":1,"a":1}',
      '{"outTradeNo":"T_1234567","outTradeNo":"T_1234567"}',
      '{"a":{"b":{"c":1,"d":2,"c":3}}}',
      '{"a":[{"x":1},{"y":1,"y":2}]}',
      '[[[[{"k":1,"k":2}]]]]',
      '{"a":1,"\\u0061":2}',
      `{${Array.from({ length: 40 }, (_, i) => `"k${i}":${i}`).join(',')},"k39":0}`,
      // keys the schema refuses later are keys like any other here, and do not hide a duplicate
      '{"__proto__":1,"__proto__":2}',
      '{"x":{"__proto__":{},"__proto__":{}}}',
      '{"__proto__":1,"\\u005f_proto__":2}',
      '{"constructor":{"prototype":1,"prototype":2}}',
      '{"__proto__":1,"a":1,"a":2}',
      `[${'['.repeat(70)}1${']'.repeat(70)},{"a":1,"a":2}]`,
    ];
    for (const raw of dups) {
      const p = await send(t, m, 'POST', PAYMENTS, raw);
      await expectRejection(t, p.r, { status: 400, code: 'OPEN_API_BODY_INVALID', step: 1, sentRequestId: p.requestId });
      const g = await send(t, m, 'GET', SETTLEMENT, raw, { contentType: 'application/json' });
      await expectRejection(t, g.r, { status: 400, code: 'OPEN_API_BODY_INVALID', step: 1, sentRequestId: g.requestId });
    }
  });

  test('same key in sibling objects is not a duplicate', async () => {
    const s = await send(t, m, 'GET', SETTLEMENT, '{"a":{"k":1},"b":{"k":1},"c":[{"k":1},{"k":2}]}', { contentType: 'application/json' });
    await expectSuccess(t, s.r, s.requestId, 200);
  });

  test('__proto__ (and constructor.prototype) keys and nesting past 64 levels are valid JSON: step 9 refuses them as outside the schema, signed and kept for replay', async () => {
    const deep = `${'['.repeat(70)}1${']'.repeat(70)}`;
    for (const raw of [
      '{"__proto__":{}}',
      '{"a":{"__proto__":{"x":1}}}',
      '{"\\u005f_proto__":1}',
      '{"constructor":{"prototype":{}}}',
      `{"a":${deep}}`,
    ]) {
      for (const path of [PAYMENTS, '/api/open/v1/refunds']) {
        const p = await send(t, m, 'POST', path, raw);
        await expectRejection(t, p.r, { status: 400, code: 'OPEN_API_BODY_INVALID', step: 9, sentRequestId: p.requestId, details: 'any' });
        const again = await send(t, m, 'POST', path, raw, { requestId: p.requestId });
        assert.equal(again.r.statusCode, 400);
        assert.equal(again.r.body, p.r.body, 'the same answer, byte for byte');
      }
    }
  });

  test('... so the earlier steps come first (a missing header is 400 OPEN_API_HEADER_INVALID)', async () => {
    const raw = JSON.stringify(orderBody()).replace(/}$/, ',"__proto__":{"admin":true}}');
    const p = await send(t, m, 'POST', PAYMENTS, raw, { omit: ['X-SVC-Nonce'] });
    await expectRejection(t, p.r, { status: 400, code: 'OPEN_API_HEADER_INVALID', step: 3, sentRequestId: p.requestId });
    const bad = await send(t, m, 'POST', PAYMENTS, raw, { sign: Buffer.alloc(256, 7).toString('base64') });
    await expectRejection(t, bad.r, { status: 401, code: 'OPEN_API_AUTH_FAILED', step: 4, sentRequestId: bad.requestId, details: 'any' });
  });

  test('... and are valid JSON, so ignored like any other body where the body is not read', async () => {
    const deep = `${'['.repeat(70)}1${']'.repeat(70)}`;
    for (const raw of ['{"__proto__":{}}', '{"constructor":{"prototype":{}}}', deep]) {
      const g = await send(t, m, 'GET', SETTLEMENT, raw, { contentType: 'application/json' });
      await expectSuccess(t, g.r, g.requestId, 200);
    }
  });
});

describe('bodyless operations ignore a valid JSON body', () => {
  test('re-create and close with a JSON body behave as without one', async () => {
    const body = orderBody();
    const c = await send(t, m, 'POST', PAYMENTS, body);
    await expectSuccess(t, c.r, c.requestId, 201);
    const re = await send(t, m, 'POST', `${PAYMENTS}/${body.outTradeNo}/attempts`, { outTradeNo: 'OTHER_123', anything: [1, 2] });
    await expectSuccess(t, re.r, re.requestId, 201);
    const cl = await send(t, m, 'POST', `${PAYMENTS}/${body.outTradeNo}/close`, { closeState: 'ALREADY_CLOSED' });
    const b = await expectSuccess(t, cl.r, cl.requestId, 200);
    assert.equal(b.closeState, 'CLOSE_REQUESTED');
    const again = await send(t, m, 'POST', `${PAYMENTS}/${body.outTradeNo}/close`);
    assert.equal((await expectSuccess(t, again.r, again.requestId, 200)).closeState, 'ALREADY_CLOSED');
  });

  test('reads ignore valid bodies of any JSON type', async () => {
    for (const raw of ['{}', '[]', 'null', '0', '"s"', '{"x":{"y":[1,2,3]}}']) {
      const s = await send(t, m, 'GET', SETTLEMENT, raw, { contentType: 'application/json' });
      await expectSuccess(t, s.r, s.requestId, 200);
    }
  });

  test('bodyless POSTs still reject invalid JSON, duplicate keys and oversize', async () => {
    const body = orderBody();
    assert.equal((await send(t, m, 'POST', PAYMENTS, body)).r.statusCode, 201);
    for (const [raw, status] of [
      ['{"a":', 400],
      ['{"a":1,"a":2}', 400],
      ['{"__proto__":1,"__proto__":2}', 400],
      [jsonOfSize(LIMIT + 1), 413],
    ] as const) {
      for (const op of ['attempts', 'close']) {
        const s = await send(t, m, 'POST', `${PAYMENTS}/${body.outTradeNo}/${op}`, raw);
        await expectRejection(t, s.r, {
          status,
          code: status === 413 ? 'OPEN_API_BODY_TOO_LARGE' : 'OPEN_API_BODY_INVALID',
          step: 1,
          sentRequestId: s.requestId,
        });
      }
    }
    const q = await send(t, m, 'GET', `${PAYMENTS}/${body.outTradeNo}`);
    assert.equal((await expectSuccess(t, q.r, q.requestId, 200)).status, 'PAYING', 'neither refused request changed the order');
  });
});

describe('a 413 on a real socket', () => {
  function* chunks(total: number, size: number, chunked: boolean): Generator<Buffer> {
    const block = Buffer.alloc(size, 0x20);
    let sent = 0;
    while (sent < total) {
      const n = Math.min(size, total - sent);
      sent += n;
      const b = block.subarray(0, n);
      yield chunked ? Buffer.concat([Buffer.from(`${n.toString(16)}\r\n`), b, Buffer.from('\r\n')]) : b;
    }
    if (chunked) yield Buffer.from('0\r\n\r\n');
  }

  for (const [label, total, chunked] of [
    ['Content-Length, 65,537 bytes', LIMIT + 1, false],
    ['chunked, 65,537 bytes', LIMIT + 1, true],
    ['Content-Length, 8 MB', 8 * 1024 * 1024, false],
    ['chunked, 8 MB', 8 * 1024 * 1024, true],
  ] as const) {
    test(`${label}: the client reads the 413, then the connection closes or serves the next request`, async () => {
      const port = await listen(t);
      const framing: [string, string] = chunked ? ['Transfer-Encoding', 'chunked'] : ['Content-Length', String(total)];
      const next = signedHeaders(m, 'GET', SETTLEMENT, '');
      function* writes(): Generator<Buffer | string> {
        yield rawHead('POST', PAYMENTS, [['Content-Type', 'application/json'], framing]);
        yield* chunks(total, 16_384, chunked);
        yield rawHead('GET', SETTLEMENT, Object.entries(next));
      }
      const x = await rawExchange(port, writes(), 2, 20_000);
      assert.notEqual(x.error, 'TIMEOUT', `the connection is not left hanging: ${x.raw.slice(0, 300)}`);
      const [first, second] = x.responses;
      assert.ok(first, `a response was read (error ${x.error})`);
      await expectRejection(t, first, { status: 413, code: 'OPEN_API_BODY_TOO_LARGE', step: 1 });
      if (/close/i.test(String(first.headers.connection))) {
        assert.ok(x.closedByServer || x.error !== null, 'Connection: close is honoured');
      } else {
        assert.ok(second, `keep-alive: the next request on the connection is answered (${x.error})`);
        await expectSuccess(t, second, next['X-SVC-Request-Id']!, 200);
      }
    });
  }

  test('a client that stops sending after the limit still reads the 413', async () => {
    const port = await listen(t);
    for (const framing of [
      ['Content-Length', String(50 * 1024 * 1024)],
      ['Transfer-Encoding', 'chunked'],
    ] as [string, string][]) {
      const x = await rawExchange(
        port,
        [
          rawHead('POST', PAYMENTS, [['Content-Type', 'application/json'], framing]),
          ...chunks(LIMIT + 10_000, 8192, framing[0] !== 'Content-Length'),
        ].slice(0, -1),
        1,
        10_000,
      );
      assert.equal(x.responses[0]?.statusCode, 413, `${framing[0]}: ${x.raw.slice(0, 200)} ${x.error}`);
    }
  });

  test('an endless upload is read only up to a bound after its 413, then the connection is closed', async () => {
    const port = await listen(t);
    let sent = 0;
    function* endless(): Generator<Buffer | string> {
      yield rawHead('POST', PAYMENTS, [
        ['Content-Type', 'application/json'],
        ['Transfer-Encoding', 'chunked'],
      ]);
      const block = Buffer.concat([Buffer.from(`${(65_536).toString(16)}\r\n`), Buffer.alloc(65_536, 0x20), Buffer.from('\r\n')]);
      while (sent < DISCARD_LIMIT_BYTES * 8) {
        sent += 65_536;
        yield block;
      }
    }
    // Wait for a second answer that never comes: the exchange ends when the server closes.
    const x = await rawExchange(port, endless(), 2, 20_000);
    assert.equal(x.responses[0]?.statusCode, 413, x.raw.slice(0, 200));
    assert.notEqual(x.error, 'TIMEOUT');
    assert.ok(sent < DISCARD_LIMIT_BYTES * 8, `the server cut the connection after ${sent} bytes`);
    assert.ok(sent > DISCARD_LIMIT_BYTES, 'but not before the bound');
  });

  test('Expect: 100-continue with an oversized Content-Length gets its 413 without sending the body', async () => {
    const port = await listen(t);
    const x = await rawExchange(
      port,
      [
        rawHead('POST', PAYMENTS, [
          ['Content-Type', 'application/json'],
          ['Content-Length', String(8 * 1024 * 1024)],
          ['Expect', '100-continue'],
        ]),
      ],
      1,
      10_000,
    );
    assert.equal(x.responses[0]?.statusCode, 413, x.raw.slice(0, 300));
    await expectRejection(t, x.responses[0]!, { status: 413, code: 'OPEN_API_BODY_TOO_LARGE', step: 1 });
  });

  test('65,536 bytes chunked pass the guard on a real socket', async () => {
    const port = await listen(t);
    const raw = jsonOfSize(LIMIT);
    const hs = signedHeaders(m, 'GET', SETTLEMENT, raw, { contentType: 'application/json' });
    const head = rawHead('GET', SETTLEMENT, [...Object.entries(hs), ['Transfer-Encoding', 'chunked']]);
    const body = Buffer.from(raw);
    const parts: Buffer[] = [];
    for (let i = 0; i < body.length; i += 10_000) {
      const p = body.subarray(i, i + 10_000);
      parts.push(Buffer.from(`${p.length.toString(16)}\r\n`), p, Buffer.from('\r\n'));
    }
    parts.push(Buffer.from('0\r\n\r\n'));
    const r = await rawRequest(port, head, parts);
    await expectSuccess(t, r, hs['X-SVC-Request-Id']!, 200);
  });

  test('the service keeps answering after oversized uploads', async () => {
    const s = await send(t, m, 'GET', SETTLEMENT);
    await expectSuccess(t, s.r, s.requestId, 200);
  });
});
