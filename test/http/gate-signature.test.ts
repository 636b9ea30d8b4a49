/**
 * Step 4 of the gate and the response signature (decisions.md sections 1 and 3): the nine-line
 * signing string built literally here (not with the SDK), Content-Type normalization, the target
 * exactly as sent, tampering, keys of other apps, disabled apps and keys, indistinguishable
 * failures; the platform signature over five lines; the signing-key-unavailable 503; any
 * unexpected fault is a 503, never a 500.
 */
import assert from 'node:assert/strict';
import { createHash, createPublicKey, generateKeyPairSync, sign, verify } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import type { LightMyRequestResponse } from 'fastify';
import {
  type Merchant,
  type TestApp,
  merchantKeyPair,
  orderBody,
  provision,
  requestId as newRequestId,
  startTestApp,
  nonce as newNonce,
} from '../helpers/app.ts';
import {
  OPEN,
  type Resp,
  SIGNATURE_HEADERS,
  assertUnsigned,
  expectRejection,
  expectSuccess,
  listen,
  platformKeys,
  rawHead,
  rawRequest,
  send,
} from './gate-kit.test.ts';

let t: TestApp;
let m: Merchant;

const SETTLEMENT = `${OPEN}/settlement/accounts`;
const PAYMENTS = `${OPEN}/payments`;

before(async () => {
  t = await startTestApp({ AUTH_FAILURE_LIMIT: '100000' });
  m = await provision(t);
});
after(() => t.stop());

interface Manual {
  method: string;
  target: string;
  appId?: string;
  keyId?: string;
  timestamp?: string;
  nonce?: string;
  requestId?: string;
  /** The CONTENT_TYPE line as the test signs it (already "normalized" by the test). */
  signedContentType: string;
  body?: Buffer;
  privateKeyPem?: string;
}

/** decisions.md section 1, written out independently of the SDK. */
function manualSign(x: Manual): Record<string, string> {
  const h = {
    'X-SVC-App-Id': x.appId ?? m.appId,
    'X-SVC-Key-Id': x.keyId ?? m.keyId,
    'X-SVC-Timestamp': x.timestamp ?? String(Math.floor(Date.now() / 1000)),
    'X-SVC-Nonce': x.nonce ?? newNonce(),
    'X-SVC-Request-Id': x.requestId ?? newRequestId(),
  };
  const lines = [
    x.method,
    x.target,
    h['X-SVC-App-Id'],
    h['X-SVC-Key-Id'],
    h['X-SVC-Timestamp'],
    h['X-SVC-Nonce'],
    h['X-SVC-Request-Id'],
    x.signedContentType,
    createHash('sha256')
      .update(x.body ?? Buffer.alloc(0))
      .digest('hex'),
  ];
  const text = lines.map((l) => `${l}\n`).join('');
  return { ...h, 'X-SVC-Sign': sign('sha256', Buffer.from(text, 'utf8'), x.privateKeyPem ?? m.privateKeyPem).toString('base64') };
}

function inject(method: string, url: string, headers: Record<string, string>, body?: Buffer | string, remoteAddress = '127.0.0.1') {
  return t.server.inject({ method: method as 'GET', url, headers, payload: body, remoteAddress });
}

async function expectAuthFailed(r: LightMyRequestResponse, headers: Record<string, string>): Promise<void> {
  await expectRejection(t, r, { status: 401, code: 'OPEN_API_AUTH_FAILED', step: 4, sentRequestId: headers['X-SVC-Request-Id'] });
}

describe('the signing string (decisions.md section 1)', () => {
  test('a POST signed by hand over the nine lines passes', async () => {
    const body = Buffer.from(JSON.stringify(orderBody()));
    const h = manualSign({ method: 'POST', target: PAYMENTS, signedContentType: 'application/json', body });
    const r = await inject('POST', PAYMENTS, { ...h, 'Content-Type': 'application/json' }, body);
    await expectSuccess(t, r, h['X-SVC-Request-Id']!, 201);
  });

  test('Content-Type is normalized: parameters and blanks removed, lower-cased', async () => {
    for (const sent of [
      'application/json; charset=utf-8',
      'APPLICATION/JSON',
      'Application/Json ; Charset=UTF-8',
      '  application/json  ',
      'application/json;v=1;q=2',
    ]) {
      const body = Buffer.from(JSON.stringify(orderBody()));
      const h = manualSign({ method: 'POST', target: PAYMENTS, signedContentType: 'application/json', body });
      const r = await inject('POST', PAYMENTS, { ...h, 'Content-Type': sent }, body);
      await expectSuccess(t, r, h['X-SVC-Request-Id']!, 201);
    }
  });

  test('signing the raw, un-normalized Content-Type fails', async () => {
    const body = Buffer.from(JSON.stringify(orderBody()));
    const h = manualSign({ method: 'POST', target: PAYMENTS, signedContentType: 'application/json; charset=utf-8', body });
    await expectAuthFailed(await inject('POST', PAYMENTS, { ...h, 'Content-Type': 'application/json; charset=utf-8' }, body), h);
    const h2 = manualSign({ method: 'POST', target: PAYMENTS, signedContentType: 'APPLICATION/JSON', body });
    await expectAuthFailed(await inject('POST', PAYMENTS, { ...h2, 'Content-Type': 'APPLICATION/JSON' }, body), h2);
  });

  test('a GET without Content-Type signs an empty line; signing application/json instead fails', async () => {
    const h = manualSign({ method: 'GET', target: SETTLEMENT, signedContentType: '' });
    await expectSuccess(t, await inject('GET', SETTLEMENT, h), h['X-SVC-Request-Id']!, 200);
    const bad = manualSign({ method: 'GET', target: SETTLEMENT, signedContentType: 'application/json' });
    await expectAuthFailed(await inject('GET', SETTLEMENT, bad), bad);
  });

  test('a GET that sends a Content-Type signs it (normalized)', async () => {
    const h = manualSign({ method: 'GET', target: SETTLEMENT, signedContentType: 'text/plain' });
    await expectSuccess(
      t,
      await inject('GET', SETTLEMENT, { ...h, 'Content-Type': 'Text/Plain; charset=ascii' }),
      h['X-SVC-Request-Id']!,
      200,
    );
    const empty = manualSign({ method: 'GET', target: SETTLEMENT, signedContentType: '' });
    await expectAuthFailed(await inject('GET', SETTLEMENT, { ...empty, 'Content-Type': 'application/json' }), empty);
  });

  test('the body line is the SHA-256 of the raw bytes (zero bytes when none)', async () => {
    const body = Buffer.from(`  ${JSON.stringify(orderBody())}\n`);
    const h = manualSign({ method: 'POST', target: PAYMENTS, signedContentType: 'application/json', body });
    await expectSuccess(t, await inject('POST', PAYMENTS, { ...h, 'Content-Type': 'application/json' }, body), h['X-SVC-Request-Id']!, 201);
    // A bodyless POST: the hash of zero bytes.
    const o = orderBody();
    assert.equal((await send(t, m, 'POST', PAYMENTS, o)).r.statusCode, 201);
    const target = `${PAYMENTS}/${o.outTradeNo}/close`;
    const c = manualSign({ method: 'POST', target, signedContentType: 'application/json' });
    await expectSuccess(t, await inject('POST', target, { ...c, 'Content-Type': 'application/json' }), c['X-SVC-Request-Id']!, 200);
  });

  test('the request target is the path plus query exactly as sent', async () => {
    for (const target of [`${SETTLEMENT}?b=2&a=1`, `${SETTLEMENT}?x=%41%2f&y=`, `${OPEN}/payments/T%5F1234567`]) {
      const h = manualSign({ method: 'GET', target, signedContentType: '' });
      const r = await inject('GET', target, h);
      assert.notEqual(r.statusCode, 401, `${target}: ${r.body}`);
      assert.ok(r.statusCode === 200 || r.statusCode === 404, `${target}: ${r.statusCode}`);
    }
    const variants: [string, string][] = [
      [`${SETTLEMENT}?b=2&a=1`, `${SETTLEMENT}?a=1&b=2`],
      [`${SETTLEMENT}?b=2&a=1`, SETTLEMENT],
      [`${SETTLEMENT}?x=%41`, `${SETTLEMENT}?x=A`],
      [`${SETTLEMENT}?x=%4a`, `${SETTLEMENT}?x=%4A`],
      [`${OPEN}/payments/T%5F1234567`, `${OPEN}/payments/T_1234567`],
      [SETTLEMENT, SETTLEMENT.toUpperCase()],
      [SETTLEMENT, `http://127.0.0.1${SETTLEMENT}`],
    ];
    for (const [sent, signed] of variants) {
      const h = manualSign({ method: 'GET', target: signed, signedContentType: '' });
      await expectAuthFailed(await inject('GET', sent, h), h);
    }
  });

  test('on a real socket the target is the request line exactly (empty query, encodings, odd characters)', async () => {
    const port = await listen(t);
    for (const target of [`${SETTLEMENT}?`, `${SETTLEMENT}?a=%41&a=%61&=`, `${SETTLEMENT}?q=a+b%20c;d`, `${OPEN}/payments/T%5f1234567?x`]) {
      const h = manualSign({ method: 'GET', target, signedContentType: '' });
      const r = await rawRequest(port, rawHead('GET', target, Object.entries(h)));
      assert.ok(r.statusCode === 200 || r.statusCode === 404, `${target}: ${r.statusCode} ${r.body}`);
      assert.equal(r.headers['x-svc-request-id'], h['X-SVC-Request-Id']);
      const decoded = manualSign({ method: 'GET', target: target.replace(/\?$/, ''), signedContentType: '' });
      if (decoded['X-SVC-Sign'] && target.endsWith('?')) {
        const r2 = await rawRequest(port, rawHead('GET', target, Object.entries(decoded)));
        assert.equal(r2.statusCode, 401, `signed without the trailing "?": ${r2.body}`);
      }
    }
  });

  test('a request line in absolute form (through a forward proxy) is signed over its path and query, never the scheme and host', async () => {
    const port = await listen(t);
    for (const target of [SETTLEMENT, `${SETTLEMENT}?a=%41`]) {
      const absolute = `http://127.0.0.1:${port}${target}`;
      const h = manualSign({ method: 'GET', target, signedContentType: '' });
      const r = await rawRequest(port, rawHead('GET', absolute, Object.entries(h)));
      await expectSuccess(t, r, h['X-SVC-Request-Id']!, 200);
      const withHost = manualSign({ method: 'GET', target: absolute, signedContentType: '' });
      const r2 = await rawRequest(port, rawHead('GET', absolute, Object.entries(withHost)));
      assert.equal(r2.statusCode, 401, `signed with the scheme and host: ${r2.body}`);
    }
  });

  test('the method line is upper case', async () => {
    const h = manualSign({ method: 'get', target: SETTLEMENT, signedContentType: '' });
    await expectAuthFailed(await inject('GET', SETTLEMENT, h), h);
  });
});

describe('docs/authentication.md', () => {
  test('the worked example is the SDK vectors, and it verifies', async () => {
    const fs = await import('node:fs/promises');
    const doc = await fs.readFile(new URL('../../docs/authentication.md', import.meta.url), 'utf8');
    const vectors = JSON.parse(await fs.readFile(new URL('../../packages/sdk/test/vectors.json', import.meta.url), 'utf8')) as {
      key: { publicKeyPem: string };
      requests: { input: { body: string }; signingString: string; signature: string }[];
    };
    for (const v of vectors.requests.slice(0, 2)) {
      // The signing string as the doc prints it (one line per line, the empty Content-Type line kept).
      assert.ok(doc.includes('```\n' + v.signingString + '```'), `signing string in the doc:\n${v.signingString}`);
      assert.ok(doc.includes(v.signature), 'signature in the doc');
      if (v.input.body !== '') assert.ok(doc.includes(v.input.body), 'body in the doc');
      assert.ok(
        verify('sha256', Buffer.from(v.signingString), createPublicKey(vectors.key.publicKeyPem), Buffer.from(v.signature, 'base64')),
      );
    }
  });
});

describe('tampering and keys', () => {
  test('changing the body, path, method, timestamp or any signed header after signing -> 401', async () => {
    const body = Buffer.from(JSON.stringify(orderBody()));
    const base = () => manualSign({ method: 'POST', target: PAYMENTS, signedContentType: 'application/json', body });
    const other = await provision(t); // same key pair, another app
    const second = await t.admin('POST', `/apps/${m.appId}/keys`, { keyId: 'key-2', publicKeyPem: merchantKeyPair().publicKeyPem });
    assert.equal(second.statusCode, 201, second.body);
    const ct = { 'Content-Type': 'application/json' };
    const cases: [string, (h: Record<string, string>) => Promise<LightMyRequestResponse>][] = [
      ['body', (h) => inject('POST', PAYMENTS, { ...h, ...ct }, Buffer.from(JSON.stringify(orderBody())))],
      ['body whitespace', (h) => inject('POST', PAYMENTS, { ...h, ...ct }, Buffer.concat([body, Buffer.from(' ')]))],
      ['path', (h) => inject('POST', `${PAYMENTS}/X_1234567/close`, { ...h, ...ct }, body)],
      ['query added', (h) => inject('POST', `${PAYMENTS}?a=1`, { ...h, ...ct }, body)],
      ['method', (h) => inject('GET', PAYMENTS.replace('/payments', '/settlement/accounts'), { ...h, ...ct }, body)],
      ['timestamp', (h) => inject('POST', PAYMENTS, { ...h, ...ct, 'X-SVC-Timestamp': String(Number(h['X-SVC-Timestamp']) - 1) }, body)],
      ['nonce', (h) => inject('POST', PAYMENTS, { ...h, ...ct, 'X-SVC-Nonce': newNonce() }, body)],
      ['request id', (h) => inject('POST', PAYMENTS, { ...h, ...ct, 'X-SVC-Request-Id': newRequestId() }, body)],
      ['key id (another key of the app, same public key)', (h) => inject('POST', PAYMENTS, { ...h, ...ct, 'X-SVC-Key-Id': 'key-2' }, body)],
      ['app id (another app, same public key)', (h) => inject('POST', PAYMENTS, { ...h, ...ct, 'X-SVC-App-Id': other.appId }, body)],
      ['content type', (h) => inject('POST', PAYMENTS, { ...h, 'Content-Type': 'text/plain' }, body)],
    ];
    for (const [label, run] of cases) {
      const h = base();
      const r = await run(h);
      assert.equal(r.statusCode, 401, `${label}: ${r.body}`);
      await expectAuthFailed(r, { ...h, 'X-SVC-Request-Id': r.headers['x-svc-request-id'] as string });
    }
    const h = base();
    await expectSuccess(t, await inject('POST', PAYMENTS, { ...h, ...ct }, body), h['X-SVC-Request-Id']!, 201);
  });

  test("a key registered for another app -> 401 (and that app's own requests pass)", async () => {
    const kp = generateKeyPairSync('rsa', { modulusLength: 2048 });
    const otherPem = kp.privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
    const b = await provision(t);
    const add = await t.admin('POST', `/apps/${b.appId}/keys`, {
      keyId: 'kb-only',
      publicKeyPem: kp.publicKey.export({ type: 'spki', format: 'pem' }).toString(),
    });
    assert.equal(add.statusCode, 201, add.body);
    const own = manualSign({
      method: 'GET',
      target: SETTLEMENT,
      signedContentType: '',
      appId: b.appId,
      keyId: 'kb-only',
      privateKeyPem: otherPem,
    });
    await expectSuccess(t, await inject('GET', SETTLEMENT, own), own['X-SVC-Request-Id']!, 200);
    const cross = manualSign({
      method: 'GET',
      target: SETTLEMENT,
      signedContentType: '',
      appId: m.appId,
      keyId: 'kb-only',
      privateKeyPem: otherPem,
    });
    await expectAuthFailed(await inject('GET', SETTLEMENT, cross), cross);
    // The right key id of app m, signed with the other private key.
    const wrongPriv = manualSign({ method: 'GET', target: SETTLEMENT, signedContentType: '', privateKeyPem: otherPem });
    await expectAuthFailed(await inject('GET', SETTLEMENT, wrongPriv), wrongPriv);
  });

  test('RSA-4096 keys are accepted (a 684-character signature)', async () => {
    const kp = generateKeyPairSync('rsa', { modulusLength: 4096 });
    const add = await t.admin('POST', `/apps/${m.appId}/keys`, {
      keyId: 'k4096',
      publicKeyPem: kp.publicKey.export({ type: 'spki', format: 'pem' }).toString(),
    });
    assert.equal(add.statusCode, 201, add.body);
    const h = manualSign({
      method: 'GET',
      target: SETTLEMENT,
      signedContentType: '',
      keyId: 'k4096',
      privateKeyPem: kp.privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
    });
    assert.equal(h['X-SVC-Sign']!.length, 684);
    await expectSuccess(t, await inject('GET', SETTLEMENT, h), h['X-SVC-Request-Id']!, 200);
  });

  test('a disabled key, then a disabled app -> 401; re-enabled -> 200', async () => {
    const d = await provision(t);
    const go = async () => send(t, d, 'GET', SETTLEMENT);
    const check = async (want: number) => {
      const s = await go();
      if (want === 200) await expectSuccess(t, s.r, s.requestId, 200);
      else await expectRejection(t, s.r, { status: 401, code: 'OPEN_API_AUTH_FAILED', step: 4, sentRequestId: s.requestId });
    };
    await check(200);
    assert.equal((await t.admin('PATCH', `/apps/${d.appId}/keys/${d.keyId}`, { status: 'DISABLED' })).statusCode, 200);
    await check(401);
    assert.equal((await t.admin('PATCH', `/apps/${d.appId}/keys/${d.keyId}`, { status: 'ACTIVE' })).statusCode, 200);
    await check(200);
    assert.equal((await t.admin('PATCH', `/apps/${d.appId}`, { status: 'DISABLED' })).statusCode, 200);
    await check(401);
    assert.equal((await t.admin('PATCH', `/apps/${d.appId}`, { status: 'ACTIVE' })).statusCode, 200);
    await check(200);
  });

  test('an unknown app goes through the same lookups as a known one (no early exit to time)', async () => {
    const cache = t.svc.authCache as unknown as Record<string, (...a: unknown[]) => Promise<unknown>>;
    const calls: string[] = [];
    const realApp = cache.app!.bind(cache);
    const realKey = cache.key!.bind(cache);
    cache.app = (...a) => (calls.push('app'), realApp(...a));
    cache.key = (...a) => (calls.push('key'), realKey(...a));
    try {
      const s = await send(t, m, 'GET', SETTLEMENT, undefined, { appId: 'svcop_' + 'N'.repeat(16) });
      assert.equal(s.r.statusCode, 401);
      assert.deepEqual(calls.sort(), ['app', 'key']);
    } finally {
      delete cache.app;
      delete cache.key;
    }
  });

  test('every authentication failure has the same body apart from requestId and the same header set', async () => {
    const d = await provision(t);
    const disabledKeyApp = await provision(t);
    await t.admin('PATCH', `/apps/${disabledKeyApp.appId}/keys/${disabledKeyApp.keyId}`, { status: 'DISABLED' });
    const disabledApp = await provision(t);
    await t.admin('PATCH', `/apps/${disabledApp.appId}`, { status: 'DISABLED' });
    const stale = String(Math.floor(Date.now() / 1000) - 301);
    const variants = {
      unknownApp: await send(t, d, 'GET', SETTLEMENT, undefined, { appId: 'svcop_' + 'U'.repeat(16) }),
      unknownKey: await send(t, d, 'GET', SETTLEMENT, undefined, { keyId: 'unknown-key' }),
      badSignature: await send(t, d, 'GET', SETTLEMENT, undefined, { sign: 'QUFB'.repeat(86) }),
      notBase64: await send(t, d, 'GET', SETTLEMENT, undefined, { sign: '*'.repeat(344) }),
      staleTimestamp: await send(t, d, 'GET', SETTLEMENT, undefined, { timestamp: stale }),
      disabledKey: await send(t, disabledKeyApp, 'GET', SETTLEMENT),
      disabledApp: await send(t, disabledApp, 'GET', SETTLEMENT),
    };
    const norm = (s: { r: Resp; requestId: string }) => s.r.body.split(s.requestId).join('<id>');
    const headerNames = (r: Resp) => Object.keys(r.headers).sort().join(',');
    const first = variants.unknownApp;
    for (const [label, s] of Object.entries(variants)) {
      await expectAuthFailed(s.r, { 'X-SVC-Request-Id': s.requestId });
      assert.equal(norm(s), norm(first), `${label} body`);
      assert.equal(headerNames(s.r), headerNames(first.r), `${label} headers`);
    }
  });
});

describe('the response signature (decisions.md section 3)', () => {
  test('verifies over the five lines with the published platform key, for successes and step 7-9 failures', async () => {
    const keys = await platformKeys(t);
    const cases = [
      await send(t, m, 'GET', SETTLEMENT),
      await send(t, m, 'POST', PAYMENTS, orderBody()),
      await send(t, m, 'POST', PAYMENTS, orderBody(), { contentType: 'text/plain' }),
      await send(t, m, 'GET', `${PAYMENTS}/NOPE_123456`),
    ];
    for (const { r, requestId } of cases) {
      const ts = r.headers['x-svc-response-timestamp'] as string;
      const nonce = r.headers['x-svc-response-nonce'] as string;
      const five = `${ts}\n${nonce}\n${requestId}\n${r.statusCode}\n${createHash('sha256').update(r.rawPayload).digest('hex')}\n`;
      const pem = keys.get(r.headers['x-svc-response-key-id'] as string)!;
      assert.ok(
        verify('sha256', Buffer.from(five), createPublicKey(pem), Buffer.from(r.headers['x-svc-response-sign'] as string, 'base64')),
      );
      // Any change breaks it.
      const wrong = `${ts}\n${nonce}\n${requestId}\n${r.statusCode === 200 ? 201 : 200}\n${createHash('sha256').update(r.rawPayload).digest('hex')}\n`;
      assert.ok(
        !verify('sha256', Buffer.from(wrong), createPublicKey(pem), Buffer.from(r.headers['x-svc-response-sign'] as string, 'base64')),
      );
    }
  });

  test('response nonces are fresh 32-character alphanumerics; the key id is a published one', async () => {
    const seen = new Set<string>();
    const keys = await platformKeys(t);
    for (let i = 0; i < 20; i++) {
      const { r } = await send(t, m, 'GET', SETTLEMENT);
      const n = r.headers['x-svc-response-nonce'] as string;
      assert.match(n, /^[A-Za-z0-9]{32}$/);
      assert.ok(!seen.has(n));
      seen.add(n);
      assert.ok(keys.has(r.headers['x-svc-response-key-id'] as string));
    }
  });

  test('the signing key unavailable: 503 OPEN_API_GUARD_UNAVAILABLE, requestId "" in the body, the id in the header, unsigned', async () => {
    t.svc.keys.unavailable = true;
    try {
      const unavailable = async (s: { r: LightMyRequestResponse; requestId: string }) => {
        assert.equal(s.r.statusCode, 503, s.r.body);
        const b = s.r.json();
        assert.deepEqual(Object.keys(b).sort(), ['code', 'message', 'requestId']);
        assert.equal(b.code, 'OPEN_API_GUARD_UNAVAILABLE');
        assert.equal(b.requestId, '');
        assert.equal(s.r.headers['x-svc-request-id'], s.requestId);
        assertUnsigned(s.r);
      };
      await unavailable(await send(t, m, 'GET', SETTLEMENT));
      await unavailable(await send(t, m, 'POST', PAYMENTS, orderBody(), { contentType: 'text/plain' }));
      await unavailable(await send(t, m, 'GET', `${PAYMENTS}/NOPE_123456`));
      // Rejections that are never signed are unchanged.
      const s401 = await send(t, m, 'GET', SETTLEMENT, undefined, { sign: 'A'.repeat(344) });
      await expectRejection(t, s401.r, { status: 401, code: 'OPEN_API_AUTH_FAILED', step: 4, sentRequestId: s401.requestId });
      const s400 = await send(t, m, 'GET', SETTLEMENT, undefined, { omit: ['X-SVC-Sign'] });
      await expectRejection(t, s400.r, { status: 400, code: 'OPEN_API_HEADER_INVALID', step: 3, sentRequestId: s400.requestId });
    } finally {
      t.svc.keys.unavailable = false;
    }
  });

  test('the key coming back between the gate and the answer: still the unsigned 503 with requestId ""', async () => {
    const keys = t.svc.keys;
    const real = Object.getOwnPropertyDescriptor(Object.getPrototypeOf(keys), 'current')!;
    // Only the gate's own read sees no key: background readers (the key-file watch, event
    // deliveries signing) may read it at any time and must not take the null meant for the gate.
    let reads = 0;
    Object.defineProperty(keys, 'current', {
      configurable: true,
      get() {
        if ((new Error().stack ?? '').split('\n')[2]?.includes('/gate/gate.ts')) {
          reads++;
          return null;
        }
        return real.get!.call(keys);
      },
    });
    try {
      const s = await send(t, m, 'GET', SETTLEMENT);
      assert.equal(s.r.statusCode, 503, s.r.body);
      assert.deepEqual(s.r.json(), { code: 'OPEN_API_GUARD_UNAVAILABLE', message: s.r.json().message, requestId: '' });
      assert.equal(s.r.headers['x-svc-request-id'], s.requestId);
      assertUnsigned(s.r);
      assert.equal(reads, 1);
    } finally {
      delete (keys as unknown as Record<string, unknown>).current;
    }
    assert.equal((await send(t, m, 'GET', SETTLEMENT)).r.statusCode, 200);
  });

  test('a create answered 503 for the signing key did not run, and is safe to retry with the same request id', async () => {
    const body = orderBody();
    const requestId = newRequestId();
    t.svc.keys.unavailable = true;
    let first: LightMyRequestResponse;
    try {
      first = (await send(t, m, 'POST', PAYMENTS, body, { requestId })).r;
    } finally {
      t.svc.keys.unavailable = false;
    }
    assert.equal(first.statusCode, 503);
    // Refused before it ran: the order does not exist, and the id was not taken.
    const missing = await send(t, m, 'GET', `${PAYMENTS}/${body.outTradeNo}`);
    assert.equal(missing.r.statusCode, 404, missing.r.body);
    const retry = await send(t, m, 'POST', PAYMENTS, body, { requestId });
    const b = await expectSuccess(t, retry.r, requestId);
    const q = await send(t, m, 'GET', `${PAYMENTS}/${body.outTradeNo}`);
    assert.equal((await expectSuccess(t, q.r, q.requestId, 200)).openOrderId, b.openOrderId);
  });
});

describe('an unexpected fault is a 503, never a 500', () => {
  type Stub = { obj: Record<string, unknown>; name: string };
  async function withFault<T>(stubs: Stub[], run: () => Promise<T>): Promise<T> {
    const saved = stubs.map((s) => [s, Object.getOwnPropertyDescriptor(s.obj, s.name)] as const);
    for (const s of stubs) {
      s.obj[s.name] = () => Promise.reject(new Error('injected fault'));
    }
    try {
      return await run();
    } finally {
      for (const [s, d] of saved) {
        if (d) Object.defineProperty(s.obj, s.name, d);
        else delete s.obj[s.name];
      }
    }
  }
  const svc = () => t.svc as unknown as Record<string, Record<string, unknown>>;

  async function fault503(r: Resp, step: number, requestId: string) {
    assert.equal(r.statusCode, 503, r.body);
    await expectRejection(t, r, { status: 503, code: 'OPEN_API_GUARD_UNAVAILABLE', step, sentRequestId: requestId });
  }

  test('platform IP policy store fails (step 2) -> 503 with a gw_ requestId', async () => {
    const s = await withFault([{ obj: svc().ipPolicy!, name: 'current' }], () => send(t, m, 'GET', SETTLEMENT));
    await fault503(s.r, 2, s.requestId);
  });

  test('app lookup fails (step 4) -> 503, unsigned, X-SVC-Request-Id echoed', async () => {
    const s = await withFault([{ obj: svc().authCache!, name: 'app' }], () => send(t, m, 'GET', SETTLEMENT));
    await fault503(s.r, 4, s.requestId);
  });

  test('nonce store fails (step 5) -> 503', async () => {
    const s = await withFault([{ obj: svc().nonces!, name: 'claim' }], () => send(t, m, 'GET', SETTLEMENT));
    await fault503(s.r, 5, s.requestId);
  });

  test('rate limiter fails (step 8) -> 503, signed', async () => {
    const s = await withFault([{ obj: svc().rateLimiter!, name: 'consume' }], () => send(t, m, 'POST', PAYMENTS, orderBody()));
    await fault503(s.r, 8, s.requestId);
  });

  test('request-id store fails (step 9) -> 503, signed', async () => {
    const s = await withDbFault({ match: /\brequest_replays\b/i }, () => send(t, m, 'POST', `${PAYMENTS}/T_no_such_order/close`));
    await fault503(s.r, 9, s.requestId);
  });

  /** Makes the pool fail the statements matching `match` (and promise-form connect() when `tx`) while armed. */
  async function withDbFault<T>(o: { match?: RegExp; tx?: boolean }, run: () => Promise<T>): Promise<T> {
    const pool = t.svc.db as unknown as Record<string, (...a: unknown[]) => unknown>;
    const realQuery = pool.query!.bind(pool);
    const realConnect = pool.connect!.bind(pool);
    pool.query = (...a: unknown[]) => {
      if (o.match && o.match.test(String(typeof a[0] === 'object' && a[0] !== null ? (a[0] as { text?: string }).text : a[0]))) {
        return Promise.reject(new Error('injected fault'));
      }
      return realQuery(...a);
    };
    pool.connect = (...a: unknown[]) => {
      // pg-pool's own query() uses the callback form: leave it working.
      if (o.tx && typeof a[0] !== 'function') return Promise.reject(new Error('injected fault'));
      return realConnect(...a);
    };
    try {
      return await run();
    } finally {
      delete pool.query;
      delete pool.connect;
    }
  }

  test('the database fails during the operation (step 9) -> 503; a retry with the same request id executes afresh', async () => {
    const body = orderBody();
    const requestId = newRequestId();
    const s = await withDbFault({ match: /\binsert\s+into\s+orders\b/i }, () => send(t, m, 'POST', PAYMENTS, body, { requestId }));
    await fault503(s.r, 9, requestId);
    const retry = await send(t, m, 'POST', PAYMENTS, body, { requestId });
    await expectSuccess(t, retry.r, requestId, 201);
  });

  test('the request-id claim inside create fails (step 9) -> 503; nothing is created, a retry creates', async () => {
    const body = orderBody();
    const requestId = newRequestId();
    const s = await withDbFault({ match: /request_replays/ }, () => send(t, m, 'POST', PAYMENTS, body, { requestId }));
    await fault503(s.r, 9, requestId);
    const q = await send(t, m, 'GET', `${PAYMENTS}/${body.outTradeNo}`);
    assert.equal(q.r.statusCode, 404, 'no order was written');
    const retry = await send(t, m, 'POST', PAYMENTS, body, { requestId });
    await expectSuccess(t, retry.r, requestId, 201);
  });

  test('the database fails for a read (step 9) -> 503', async () => {
    const o = orderBody();
    assert.equal((await send(t, m, 'POST', PAYMENTS, o)).r.statusCode, 201);
    const s = await withDbFault({ match: /\bfrom\s+orders\b/i }, () => send(t, m, 'GET', `${PAYMENTS}/${o.outTradeNo}`));
    await fault503(s.r, 9, s.requestId);
  });

  test('the database fails for a close (step 9) -> 503, and the order is unchanged', async () => {
    const o = orderBody();
    assert.equal((await send(t, m, 'POST', PAYMENTS, o)).r.statusCode, 201);
    const s = await withDbFault({ match: /\bfrom\s+orders\b/i, tx: true }, () => send(t, m, 'POST', `${PAYMENTS}/${o.outTradeNo}/close`));
    await fault503(s.r, 9, s.requestId);
    const q = await send(t, m, 'GET', `${PAYMENTS}/${o.outTradeNo}`);
    assert.equal((await expectSuccess(t, q.r, q.requestId, 200)).status, 'PAYING');
  });

  test('a synchronous throw inside the gate -> 503', async () => {
    const tracker = svc().authFailures!;
    const saved = Object.getOwnPropertyDescriptor(tracker, 'isBlocked');
    tracker.isBlocked = () => {
      throw new Error('injected');
    };
    try {
      const s = await send(t, m, 'GET', SETTLEMENT);
      await fault503(s.r, 2, s.requestId);
    } finally {
      if (saved) Object.defineProperty(tracker, 'isBlocked', saved);
      else delete tracker.isBlocked;
    }
  });

  test('no header of the four response-signature headers leaks into an unsigned 503', async () => {
    const s = await withFault([{ obj: svc().authCache!, name: 'key' }], () => send(t, m, 'GET', SETTLEMENT));
    for (const h of SIGNATURE_HEADERS) assert.equal(s.r.headers[h], undefined);
  });
});
