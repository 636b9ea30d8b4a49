/**
 * Property/fuzz suite of the open-API gate against the real app (Fastify inject): thousands of
 * random header sets and bodies. Whatever arrives: never a 500 (no 5xx at all without injected
 * faults; only the contract's 503 OPEN_API_GUARD_UNAVAILABLE with them), never a crash, never a 2xx
 * for a request that is not correctly signed, and every answer obeys the envelope and presence
 * rules of decisions.md sections 2-4. AUTH_FAILURE_LIMIT is raised so blocking does not dominate.
 *
 * FUZZ_SCALE (default 1) multiplies the number of runs; FUZZ_SEED replays a failure.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import fc from 'fast-check';
import type { LightMyRequestResponse } from 'fastify';
import { OPEN_API_ERRORS } from '../../src/gate/open-errors.ts';
import { type Merchant, type TestApp, call, nonce as newNonce, orderBody, provision, signedHeaders, startTestApp } from '../helpers/app.ts';
import { OPEN, SIGNATURE_HEADERS, assertNoAddressLeak, platformKeys, verifyResponseSignature } from '../http/gate-kit.test.ts';

const SCALE = Number(process.env.FUZZ_SCALE ?? '1');
const SEED = process.env.FUZZ_SEED === undefined ? undefined : Number(process.env.FUZZ_SEED);
const runs = (n: number): fc.Parameters<unknown> => ({
  numRuns: Math.max(1, Math.round(n * SCALE)),
  ...(SEED !== undefined ? { seed: SEED } : {}),
});

let t: TestApp;
let m: Merchant;
let keys: Map<string, string>;
const tradeNos: string[] = [];

before(async () => {
  t = await startTestApp({ AUTH_FAILURE_LIMIT: '1000000', WORKERS_ENABLED: 'false' });
  m = await provision(t);
  await t.admin('PATCH', `/apps/${m.appId}`, { rateLimitPerSecond: 100_000 });
  keys = await platformKeys(t);
  for (let i = 0; i < 3; i++) {
    const b = orderBody();
    const r = await call(t, m, 'POST', `${OPEN}/payments`, b);
    assert.equal(r.statusCode, 201, r.body);
    tradeNos.push(b.outTradeNo as string);
  }
});
after(() => t.stop());

const CODES = OPEN_API_ERRORS as Record<string, { status: number }>;

/**
 * The invariants every open-API answer obeys, whatever the request. `signedOk`: the request was
 * correctly signed (only then may it be 2xx). `faults`: faults were injected (a 503 is allowed).
 */
function checkAnswer(r: LightMyRequestResponse, o: { signedOk: boolean; faults?: boolean; head?: boolean; label: () => string }): void {
  const where = () => `${o.label()}\n-> ${r.statusCode} ${JSON.stringify(r.headers)} ${r.body.slice(0, 300)}`;
  assert.notEqual(r.statusCode, 500, where());
  if (r.statusCode >= 500) {
    assert.ok(o.faults === true && r.statusCode === 503, `a 5xx without an injected fault: ${where()}`);
  }
  if (!o.signedOk) assert.ok(r.statusCode < 200 || r.statusCode >= 300, `2xx for a request that is not correctly signed: ${where()}`);
  if (o.head) {
    assert.equal(r.body, '', where());
    return; // HEAD: no body to judge
  }
  let b: Record<string, unknown>;
  try {
    b = JSON.parse(r.body) as Record<string, unknown>;
  } catch {
    assert.fail(`not JSON: ${where()}`);
  }
  const reqIdHeader = r.headers['x-svc-request-id'] as string | undefined;
  const sigCount = SIGNATURE_HEADERS.filter((h) => r.headers[h] !== undefined).length;
  assert.ok(sigCount === 0 || sigCount === 4, `all four signature headers or none: ${where()}`);
  if ('status' in b && 'error' in b) {
    // Platform envelope: unmounted path or method, malformed target.
    assert.deepEqual(Object.keys(b).sort(), ['error', 'message', 'status'], where());
    assert.equal(b.status, r.statusCode, where());
    assert.ok(!String(b.error).startsWith('OPEN_API_'), where());
    assert.equal(reqIdHeader, undefined, where());
    assert.equal(sigCount, 0, where());
    return;
  }
  if (r.statusCode >= 200 && r.statusCode < 300) {
    assert.equal(b.requestId, reqIdHeader, where());
    assert.equal(sigCount, 4, where());
    verifyResponseSignature(keys, r);
    return;
  }
  // The failure envelope.
  const keysOf = Object.keys(b).sort();
  assert.ok(
    JSON.stringify(keysOf) === JSON.stringify(['code', 'message', 'requestId']) ||
      JSON.stringify(keysOf) === JSON.stringify(['code', 'details', 'message', 'requestId']),
    `envelope fields: ${where()}`,
  );
  const code = String(b.code);
  assert.ok(code in CODES, `code from the closed table: ${where()}`);
  assert.equal(CODES[code]!.status, r.statusCode, `status of ${code}: ${where()}`);
  assert.equal(typeof b.message, 'string');
  assert.equal(typeof b.requestId, 'string');
  const rid = b.requestId as string;
  if (rid.startsWith('gw_')) {
    // Before step 3 passed: no echo, no signature.
    assert.equal(reqIdHeader, undefined, where());
    assert.equal(sigCount, 0, where());
    assert.ok(
      [
        'OPEN_API_BODY_INVALID',
        'OPEN_API_BODY_TOO_LARGE',
        'OPEN_API_SOURCE_IP_REJECTED',
        'OPEN_API_HEADER_INVALID',
        'OPEN_API_GUARD_UNAVAILABLE',
      ].includes(code),
      where(),
    );
  } else if (rid === '') {
    // The signing-key 503.
    assert.equal(code, 'OPEN_API_GUARD_UNAVAILABLE', where());
    assert.ok(reqIdHeader !== undefined, where());
    assert.equal(sigCount, 0, where());
  } else {
    assert.equal(reqIdHeader, rid, `X-SVC-Request-Id echoes the body's requestId: ${where()}`);
    if (['OPEN_API_AUTH_FAILED', 'OPEN_API_NONCE_REPLAYED'].includes(code)) assert.equal(sigCount, 0, where());
    if (code === 'OPEN_API_SOURCE_IP_REJECTED') assert.equal(b.details, undefined, `the app-allowlist 403 has three fields: ${where()}`);
    if (['OPEN_API_CONTENT_TYPE_INVALID', 'OPEN_API_RATE_LIMITED'].includes(code) || (sigCount === 4 && !o.faults)) {
      assert.equal(sigCount, 4, where());
      verifyResponseSignature(keys, r);
    }
  }
  if (code === 'OPEN_API_RATE_LIMITED') assert.match(String(r.headers['retry-after']), /^[1-9][0-9]*$/);
}

// ---- arbitraries ----

const SIX = ['X-SVC-App-Id', 'X-SVC-Timestamp', 'X-SVC-Nonce', 'X-SVC-Key-Id', 'X-SVC-Request-Id', 'X-SVC-Sign'] as const;

const visible = (min: number, max: number) =>
  fc.string({ unit: fc.integer({ min: 0x21, max: 0x7e }).map((c) => String.fromCharCode(c)), minLength: min, maxLength: max });
const ridChars = fc.constantFrom(...'ABCXYZabcxyz0189._:-'.split(''));
const anyText = fc.oneof(
  fc.string({ maxLength: 40 }),
  fc.string({ unit: 'binary', maxLength: 40 }),
  fc.string({ unit: 'grapheme', maxLength: 20 }),
  fc.constantFrom('', ' ', '\t', 'null', '0', '-1', '\u00e9', '\u0000', '\u007f', 'svcop_', '=', '%00'),
);
const boundary = (lens: number[], unit: fc.Arbitrary<string> = fc.constant('a')) =>
  fc.tuple(fc.constantFrom(...lens), unit).map(([n, c]) => c.repeat(n));

function headerValueArb(name: (typeof SIX)[number], valid: () => string): fc.Arbitrary<string> {
  const now = () => Math.floor(Date.now() / 1000);
  const specific: Record<(typeof SIX)[number], fc.Arbitrary<string>> = {
    'X-SVC-App-Id': fc.oneof(
      fc.string({ unit: fc.constantFrom(...'aZ09'.split('')), minLength: 15, maxLength: 17 }).map((s) => `svcop_${s}`),
      fc.constantFrom('SVCOP_AAAAAAAAAAAAAAAA', 'svcop_AAAAAAAAAAAAAAA_', `${'svcop_'}${'a'.repeat(16)}`),
    ),
    'X-SVC-Timestamp': fc.oneof(
      fc.integer({ min: -400, max: 400 }).map((d) => String(now() + d)),
      fc.constantFrom('', '0', '9999999999', '99999999999', `0${Date.now()}`.slice(0, 11), '-1', '1e9', ' 1'),
      fc.bigInt({ min: 0n, max: 10n ** 12n }).map(String),
    ),
    'X-SVC-Nonce': fc.oneof(visible(14, 18), visible(62, 66), boundary([15, 16, 64, 65])),
    'X-SVC-Key-Id': fc.oneof(visible(0, 3), boundary([127, 128, 129], fc.constant('k')), fc.constant('key-1')),
    'X-SVC-Request-Id': fc.oneof(fc.string({ unit: ridChars, minLength: 6, maxLength: 10 }), boundary([7, 8, 128, 129], fc.constant('r'))),
    'X-SVC-Sign': fc.oneof(
      visible(62, 66),
      boundary([63, 64, 344, 1024, 1025], fc.constantFrom('A', '+', '=', '!')),
      fc.base64String({ minLength: 344, maxLength: 344 }),
    ),
  };
  return fc.oneof(
    { weight: 2, arbitrary: fc.constant(null).map(() => valid()) },
    { weight: 3, arbitrary: specific[name] },
    { weight: 1, arbitrary: anyText },
  );
}

const pathArb = fc.oneof(
  fc.constantFrom(
    `${OPEN}/payments`,
    `${OPEN}/refunds`,
    `${OPEN}/settlement/accounts`,
    `${OPEN}/payments/T_1234567`,
    `${OPEN}/payments/T_1234567/close`,
    `${OPEN}/payments/T_1234567/attempts`,
    `${OPEN}/refunds/RF_1234567`,
    `${OPEN}/nope`,
    `${OPEN}/payments/%ZZ`,
    `${OPEN}/settlement/accounts?x=%ZZ`,
    `${OPEN}/payments/`,
    // Outside the open API (the front page at / is not an API path).
    '/nope',
  ),
  fc.string({ unit: fc.constantFrom(...'abc/%._-~?=&Z9'.split('')), maxLength: 30 }).map((s) => `${OPEN}/payments/${s}`),
);

const methodArb = fc.constantFrom('GET', 'POST', 'POST', 'POST', 'GET', 'PUT', 'DELETE', 'PATCH', 'OPTIONS', 'HEAD');

function jsonWithDuplicate(): fc.Arbitrary<string> {
  return fc.tuple(fc.jsonValue({ maxDepth: 3 }), fc.string({ maxLength: 5 })).map(([v, k]) => {
    const key = JSON.stringify(k);
    return `{"x":{${key}:1,"n":${JSON.stringify(v)},${key}:2}}`;
  });
}

const bodyArb: fc.Arbitrary<Buffer | undefined> = fc.oneof(
  { weight: 3, arbitrary: fc.constant(undefined) },
  { weight: 3, arbitrary: fc.jsonValue({ maxDepth: 4 }).map((v) => Buffer.from(JSON.stringify(v) ?? 'null')) },
  { weight: 2, arbitrary: fc.constant(null).map(() => Buffer.from(JSON.stringify(orderBody()))) },
  {
    weight: 2,
    arbitrary: fc
      .record({ k: fc.string({ maxLength: 10 }), v: fc.jsonValue({ maxDepth: 2 }) })
      .map((o) => Buffer.from(JSON.stringify({ ...orderBody(), [o.k]: o.v }))),
  },
  { weight: 1, arbitrary: jsonWithDuplicate().map((s) => Buffer.from(s)) },
  { weight: 2, arbitrary: fc.uint8Array({ maxLength: 300 }).map((a) => Buffer.from(a)) },
  { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 200 }).map((s) => Buffer.from(s)) },
  { weight: 1, arbitrary: fc.integer({ min: 1, max: 400 }).map((n) => Buffer.from('['.repeat(n) + ']'.repeat(n))) },
  { weight: 1, arbitrary: fc.integer({ min: 1, max: 200 }).map((n) => Buffer.from('{"a":'.repeat(n) + '1' + '}'.repeat(n))) },
  { weight: 1, arbitrary: fc.integer({ min: 65_530, max: 65_542 }).map((n) => Buffer.from(`{"p":"${'x'.repeat(n - 8)}"}`)) },
  {
    weight: 1,
    arbitrary: fc
      .constantFrom('{"__proto__":{}}', '{"constructor":{"prototype":1}}', '\ufeff{}', '{"a":1}x', ' ', '{"a":"\\ud800"}')
      .map((s) => Buffer.from(s)),
  },
);

const contentTypeArb = fc.oneof(
  fc.constantFrom<string | null>(
    null,
    'application/json',
    'application/json; charset=utf-8',
    'APPLICATION/JSON',
    'text/plain',
    '',
    'application/jsonx',
    'multipart/form-data; boundary=a',
  ),
  anyText,
);

// ---- properties ----

describe('gate fuzz', () => {
  test('random header sets, methods, paths and bodies: no 5xx, no 2xx, envelope and presence rules hold', async () => {
    await fc.assert(
      fc.asyncProperty(
        methodArb,
        pathArb,
        bodyArb,
        contentTypeArb,
        fc.subarray([...SIX]),
        fc.array(fc.constantFrom(...SIX), { maxLength: 2 }),
        fc
          .array(fc.tuple(fc.constantFrom(...SIX), fc.constant(0)), { maxLength: 6 })
          .chain((xs) => fc.tuple(...xs.map(([n]) => headerValueArb(n, () => '').map((v) => [n, v] as const)))),
        fc.constantFrom('127.0.0.1', '::1', '2001:db8::9', '::ffff:10.1.2.3', 'bogus'),
        async (method, url, body, contentType, present, repeated, overrides, remoteAddress) => {
          const valid = signedHeaders(m, method, url, body ?? '', { contentType });
          const headers: Record<string, string | string[]> = {};
          for (const h of present) headers[h] = valid[h]!;
          for (const [h, v] of overrides) headers[h] = v;
          for (const h of repeated) {
            const v = headers[h] ?? valid[h]!;
            headers[h] = [...(Array.isArray(v) ? v : [v]), valid[h]!];
          }
          if (contentType !== null) headers['content-type'] = contentType;
          // A request with all six valid headers untouched is correctly signed: excluded here.
          // (judged on the final headers: an override may happen to produce the valid value).
          const intact = SIX.every((h) => headers[h] === valid[h]);
          const r = await t.server.inject({
            method: method as 'GET',
            url,
            headers: headers as Record<string, string>,
            payload: body,
            remoteAddress,
          });
          assertNoAddressLeak(r, '2001:db8::9', '10.1.2.3');
          checkAnswer(r, {
            signedOk: intact,
            head: method === 'HEAD',
            label: () => `${method} ${url} ${JSON.stringify(headers).slice(0, 400)} body=${body?.length ?? 0}B`,
          });
        },
      ),
      runs(1500),
    );
  });

  test('correctly signed requests with random bodies, paths and content types: no 5xx, 2xx only signed and verifying', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom('GET', 'POST'),
        fc.oneof(
          pathArb,
          fc.constantFrom(...[0, 1, 2].flatMap((i) => ['', '/close', '/attempts'].map((s) => `/${i}${s}`))).map((s) => {
            const [i, rest] = [Number(s[1]), s.slice(2)];
            return `${OPEN}/payments/${tradeNos[i]}${rest}`;
          }),
        ),
        bodyArb,
        contentTypeArb,
        async (method, url, body, contentType) => {
          const headers = signedHeaders(m, method, url, body ?? '', { contentType });
          const r = await t.server.inject({ method: method as 'GET', url, headers, payload: body, remoteAddress: '127.0.0.1' });
          checkAnswer(r, {
            signedOk: true,
            label: () => `${method} ${url} ct=${JSON.stringify(contentType)} body=${body?.toString('latin1').slice(0, 120)}`,
          });
        },
      ),
      runs(1200),
    );
  });

  test('a correctly signed request with one part changed after signing is never 2xx', async () => {
    type Mutation =
      { part: 'header'; name: (typeof SIX)[number]; value: string } | { part: 'body' | 'path' | 'method' | 'contentType'; value: string };
    const mutationArb: fc.Arbitrary<Mutation> = fc.oneof(
      fc.constantFrom(...SIX).chain((name) => headerValueArb(name, () => 'x').map((value) => ({ part: 'header' as const, name, value }))),
      fc.string({ maxLength: 20 }).map((value) => ({ part: 'body' as const, value })),
      fc.constantFrom('?a=1', '/x', '?', '%41').map((value) => ({ part: 'path' as const, value })),
      fc.constantFrom('GET', 'POST').map((value) => ({ part: 'method' as const, value })),
      fc.constantFrom('text/plain', 'application/xml', '').map((value) => ({ part: 'contentType' as const, value })),
    );
    await fc.assert(
      fc.asyncProperty(fc.constantFrom('GET', 'POST'), mutationArb, async (method, mu) => {
        const url = method === 'GET' ? `${OPEN}/settlement/accounts` : `${OPEN}/payments`;
        const body = method === 'POST' ? JSON.stringify(orderBody()) : '';
        const headers: Record<string, string> = signedHeaders(m, method, url, body, { contentType: 'application/json' });
        let sendMethod: string = method;
        let sendUrl = url;
        let sendBody = body;
        let changed = true;
        if (mu.part === 'header') {
          changed = headers[mu.name] !== mu.value;
          headers[mu.name] = mu.value;
        } else if (mu.part === 'body') {
          sendBody = body + mu.value;
          changed = mu.value !== '';
        } else if (mu.part === 'path') {
          sendUrl = url + mu.value;
          changed = mu.value !== '?'; // inject drops an empty query
        } else if (mu.part === 'method') {
          sendMethod = mu.value;
          changed = mu.value !== method;
        } else {
          headers['Content-Type'] = mu.value;
        }
        const r = await t.server.inject({
          method: sendMethod as 'GET',
          url: sendUrl,
          headers,
          payload: sendBody === '' ? undefined : sendBody,
          remoteAddress: '127.0.0.1',
        });
        checkAnswer(r, { signedOk: !changed, label: () => `${method} ${JSON.stringify(mu)}` });
      }),
      runs(800),
    );
  });

  test('with an injected fault anywhere, the answer is never a 500 and any 5xx is the contract 503', async () => {
    type Target = { obj: () => Record<string, unknown>; name: string };
    const svc = () => t.svc as unknown as Record<string, Record<string, unknown>>;
    const targets: Target[] = [
      { obj: () => svc().ipPolicy!, name: 'current' },
      { obj: () => svc().authCache!, name: 'app' },
      { obj: () => svc().authCache!, name: 'key' },
      { obj: () => svc().nonces!, name: 'claim' },
      { obj: () => svc().rateLimiter!, name: 'consume' },
      { obj: () => svc().keys as unknown as Record<string, unknown>, name: 'sign' },
      { obj: () => t.svc.db as unknown as Record<string, unknown>, name: 'query' },
    ];
    const ops: [string, () => string, () => unknown][] = [
      ['GET', () => `${OPEN}/settlement/accounts`, () => undefined],
      ['GET', () => `${OPEN}/payments/${tradeNos[0]}`, () => undefined],
      ['POST', () => `${OPEN}/payments`, () => orderBody()],
      ['POST', () => `${OPEN}/payments/${tradeNos[1]}/attempts`, () => undefined],
      ['GET', () => `${OPEN}/refunds/RF_NONE_1234`, () => undefined],
    ];
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...targets),
        fc.constantFrom(...ops),
        fc.boolean(),
        fc.nat({ max: 3 }),
        async (target, [method, url, body], sync, after) => {
          const obj = target.obj();
          const saved = Object.getOwnPropertyDescriptor(obj, target.name);
          const real = obj[target.name] as (...a: unknown[]) => unknown;
          let calls = 0;
          obj[target.name] = function (this: unknown, ...a: unknown[]) {
            // Fail from the after-th call on (earlier calls behave).
            if (calls++ < after) return real.apply(obj, a);
            if (sync) throw new Error('injected fault');
            return Promise.reject(new Error('injected fault'));
          };
          let r: LightMyRequestResponse;
          try {
            r = await call(t, m, method, url(), body(), { nonce: newNonce() });
          } finally {
            if (saved) Object.defineProperty(obj, target.name, saved);
            else delete obj[target.name];
          }
          checkAnswer(r, { signedOk: true, faults: true, label: () => `${target.name} ${method} ${url()} sync=${sync} after=${after}` });
        },
      ),
      runs(400),
    );
  });

  test('the service still answers normally after the fuzzing', async () => {
    const r = await call(t, m, 'GET', `${OPEN}/settlement/accounts`);
    assert.equal(r.statusCode, 200, r.body);
  });
});
