/**
 * Shared assertions of the gate suites (test/http/gate-*.test.ts): the presence rules of
 * decisions.md section 2 (X-SVC-Request-Id, response signature, requestId in the body), the exact
 * failure envelope, response-signature verification with the published platform key (section 3),
 * and raw-socket requests where inject cannot show the behaviour.
 *
 * Imported by the other gate suites; run directly (node --test), it checks its own assertions.
 */
import assert from 'node:assert/strict';
import { createPublicKey, generateKeyPairSync, verify } from 'node:crypto';
import net from 'node:net';
import { test } from 'node:test';
import type { LightMyRequestResponse } from 'fastify';
import { responseSigningString } from '@mps/sdk/signing';
import { type Merchant, type SignOptions, type TestApp, call, requestId as newRequestId } from '../helpers/app.ts';

export const OPEN = '/api/open/v1';
export const SIGNATURE_HEADERS = [
  'x-svc-response-sign',
  'x-svc-response-key-id',
  'x-svc-response-timestamp',
  'x-svc-response-nonce',
] as const;

/** A response as the suites see it: from inject or from a raw socket. */
export interface Resp {
  statusCode: number;
  headers: Record<string, string | string[] | number | undefined>;
  body: string;
}

export interface Sent {
  r: LightMyRequestResponse;
  requestId: string;
}

/** call() with an explicit X-SVC-Request-Id, so the suites can compare it with the answer. */
export async function send(t: TestApp, m: Merchant, method: string, url: string, body?: unknown, o: SignOptions = {}): Promise<Sent> {
  const requestId = o.requestId ?? newRequestId();
  const r = await call(t, m, method, url, body, { ...o, requestId });
  return { r, requestId };
}

const platformKeyCache = new WeakMap<TestApp, Map<string, string>>();

/** The platform's public keys by key id, read from the back office (decisions.md section 3). */
export async function platformKeys(t: TestApp): Promise<Map<string, string>> {
  let m = platformKeyCache.get(t);
  if (!m) {
    const r = await t.admin('GET', '/platform-keys');
    assert.equal(r.statusCode, 200, r.body);
    m = new Map((r.json().keys as { keyId: string; publicKeyPem: string }[]).map((k) => [k.keyId, k.publicKeyPem]));
    platformKeyCache.set(t, m);
  }
  return m;
}

function header(r: Resp, name: string): string | undefined {
  const v = r.headers[name.toLowerCase()];
  if (v === undefined) return undefined;
  return Array.isArray(v) ? v.join(', ') : String(v);
}

/** Verifies the four response-signature headers over the five-line string of decisions.md section 3. */
export function verifyResponseSignature(keys: Map<string, string>, r: Resp): void {
  for (const h of SIGNATURE_HEADERS) assert.ok(header(r, h) !== undefined, `${h} present on ${r.statusCode}`);
  const keyId = header(r, 'x-svc-response-key-id')!;
  const pem = keys.get(keyId);
  assert.ok(pem, `platform key ${keyId} is published`);
  const ts = header(r, 'x-svc-response-timestamp')!;
  const nonce = header(r, 'x-svc-response-nonce')!;
  assert.match(ts, /^[0-9]{1,10}$/, 'response timestamp in seconds');
  assert.ok(Math.abs(Number(ts) - Date.now() / 1000) < 600, 'response timestamp is current');
  assert.match(nonce, /^[A-Za-z0-9]{32}$/, 'response nonce: 32 characters from A-Za-z0-9');
  const requestId = header(r, 'x-svc-request-id');
  assert.ok(requestId !== undefined, 'a signed response echoes X-SVC-Request-Id');
  const s = responseSigningString({ timestamp: ts, nonce, requestId, status: r.statusCode, body: Buffer.from(r.body, 'utf8') });
  const sig = header(r, 'x-svc-response-sign')!;
  assert.match(sig, /^[A-Za-z0-9+/]+={0,2}$/, 'standard Base64');
  assert.ok(verify('sha256', Buffer.from(s, 'utf8'), createPublicKey(pem), Buffer.from(sig, 'base64')), 'response signature verifies');
}

export function assertUnsigned(r: Resp): void {
  for (const h of SIGNATURE_HEADERS) assert.equal(header(r, h), undefined, `${h} absent on ${r.statusCode} ${r.body}`);
}

/**
 * The failure envelope and the presence rules of the gate step that produced it (decisions.md
 * section 2). `step` is the gate step (1-9); `sentRequestId` the X-SVC-Request-Id sent, if any.
 */
export async function expectRejection(
  t: TestApp,
  r: Resp,
  want: {
    status: number;
    code: string;
    step: number;
    sentRequestId?: string | undefined;
    /** Exact details; 'any' allows an object or none (e.g. details.field of a schema failure). */
    details?: Record<string, unknown> | 'any';
  },
): Promise<Record<string, unknown>> {
  assert.equal(r.statusCode, want.status, `status of ${r.body}`);
  assert.match(String(header(r, 'content-type')), /^application\/json/);
  const b = JSON.parse(r.body) as Record<string, unknown>;
  const withDetails = want.details !== undefined && (want.details !== 'any' || 'details' in b);
  const expectedKeys = withDetails ? ['code', 'message', 'requestId', 'details'] : ['code', 'message', 'requestId'];
  assert.deepEqual(Object.keys(b).sort(), expectedKeys.sort(), `envelope fields of ${r.body}`);
  if (withDetails) assert.ok(typeof b.details === 'object' && b.details !== null && !Array.isArray(b.details), 'details is an object');
  assert.equal(b.code, want.code);
  assert.equal(typeof b.message, 'string');
  assert.ok((b.message as string).length > 0);
  if (want.details !== undefined && want.details !== 'any') assert.deepEqual(b.details, want.details);
  if (want.step <= 3) {
    assert.equal(header(r, 'x-svc-request-id'), undefined, `no X-SVC-Request-Id before step 3 passed (${r.body})`);
    assert.match(String(b.requestId), /^gw_[0-9a-z]+$/, 'a platform-generated requestId before step 3 passed');
    if (want.sentRequestId !== undefined) assert.notEqual(b.requestId, want.sentRequestId);
  } else {
    assert.ok(want.sentRequestId !== undefined, 'test bug: steps 4+ need the sent request id');
    assert.equal(header(r, 'x-svc-request-id'), want.sentRequestId, 'X-SVC-Request-Id echoed from step 4 on');
    assert.equal(b.requestId, want.sentRequestId, "the merchant's X-SVC-Request-Id in the body from step 4 on");
  }
  if (want.step <= 6) assertUnsigned(r);
  else verifyResponseSignature(await platformKeys(t), r);
  return b;
}

/** A success: 2xx, requestId echoed in header and body, signed. */
export async function expectSuccess(t: TestApp, r: Resp, sentRequestId: string, status?: number): Promise<Record<string, unknown>> {
  if (status !== undefined) assert.equal(r.statusCode, status, r.body);
  else assert.ok(r.statusCode >= 200 && r.statusCode < 300, `${r.statusCode} ${r.body}`);
  const b = JSON.parse(r.body) as Record<string, unknown>;
  assert.equal(b.requestId, sentRequestId);
  assert.equal(header(r, 'x-svc-request-id'), sentRequestId);
  verifyResponseSignature(await platformKeys(t), r);
  return b;
}

/** The observed address appears in no header value and nowhere in the body. */
export function assertNoAddressLeak(r: Resp, ...addresses: string[]): void {
  const headerText = Object.entries(r.headers)
    .map(([k, v]) => `${k}: ${Array.isArray(v) ? v.join(', ') : String(v)}`)
    .join('\n');
  for (const a of addresses) {
    assert.ok(!headerText.includes(a), `address ${a} leaked in a header`);
    assert.ok(!r.body.includes(a), `address ${a} leaked in the body`);
  }
}

/** A second RSA key pair (another merchant's key). */
let otherKey: { privateKeyPem: string; publicKeyPem: string } | null = null;
export function otherKeyPair(): { privateKeyPem: string; publicKeyPem: string } {
  if (!otherKey) {
    const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
    otherKey = {
      privateKeyPem: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
      publicKeyPem: publicKey.export({ type: 'spki', format: 'pem' }).toString(),
    };
  }
  return otherKey;
}

/** Starts listening on an ephemeral loopback port (once per app) and returns the port. */
export async function listen(t: TestApp): Promise<number> {
  const addr = t.server.server.address();
  if (addr && typeof addr === 'object') return addr.port;
  await t.server.listen({ port: 0, host: '127.0.0.1' });
  return (t.server.server.address() as net.AddressInfo).port;
}

/** Parses the HTTP/1.1 responses (Content-Length framed) at the start of raw bytes; `rest` is what follows. */
export function parseRawResponses(text: string, headRequest = false): { responses: Resp[]; rest: string } {
  const responses: Resp[] = [];
  let rest = text;
  for (;;) {
    const end = rest.indexOf('\r\n\r\n');
    if (end < 0) break;
    const lines = rest.slice(0, end).split('\r\n');
    const m = /^HTTP\/1\.1 (\d{3})/.exec(lines[0] ?? '');
    if (!m) break;
    const headers: Record<string, string> = {};
    for (const l of lines.slice(1)) {
      const c = l.indexOf(':');
      const k = l.slice(0, c).trim().toLowerCase();
      const v = l.slice(c + 1).trim();
      headers[k] = headers[k] === undefined ? v : `${headers[k]}, ${v}`;
    }
    const status = Number(m[1]);
    if (status === 100) {
      rest = rest.slice(end + 4);
      continue;
    }
    const len = headRequest ? 0 : Number(headers['content-length'] ?? 0);
    const bodyBytes = Buffer.from(rest.slice(end + 4), 'latin1');
    if (bodyBytes.length < len) break;
    responses.push({ statusCode: status, headers, body: bodyBytes.subarray(0, len).toString('utf8') });
    rest = bodyBytes.subarray(len).toString('latin1');
  }
  return { responses, rest };
}

/** The first complete response in raw bytes, or null. */
export function parseRawResponse(text: string): Resp | null {
  return parseRawResponses(text).responses[0] ?? null;
}

/**
 * Writes `writes` (chunks, with back-pressure) on a fresh socket and collects answers until
 * `expect` responses are complete, the server closes, or `timeoutMs` passes.
 */
export function rawExchange(
  port: number,
  writes: Iterable<Buffer | string>,
  expect = 1,
  timeoutMs = 10_000,
  headRequest = false,
): Promise<{ responses: Resp[]; raw: string; error: string | null; closedByServer: boolean }> {
  return new Promise((resolve) => {
    const s = net.connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    let error: string | null = null;
    let done = false;
    let closedByServer = false;
    const finish = () => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      s.destroy();
      const raw = Buffer.concat(chunks).toString('latin1');
      resolve({ responses: parseRawResponses(raw, headRequest).responses, raw, error, closedByServer });
    };
    const timer = setTimeout(() => {
      error = error ?? 'TIMEOUT';
      finish();
    }, timeoutMs);
    s.on('data', (d: Buffer) => {
      chunks.push(d);
      if (parseRawResponses(Buffer.concat(chunks).toString('latin1'), headRequest).responses.length >= expect) finish();
    });
    s.on('end', () => {
      closedByServer = true;
    });
    s.on('error', (e: NodeJS.ErrnoException) => {
      error = e.code ?? e.message;
    });
    s.on('close', finish);
    s.on('connect', () => {
      const it = writes[Symbol.iterator]();
      const pump = (): void => {
        for (;;) {
          if (s.destroyed || done) return;
          const n = it.next();
          if (n.done) return;
          if (!s.write(n.value)) {
            s.once('drain', pump);
            return;
          }
        }
      };
      pump();
    });
  });
}

export interface RawResult extends Resp {
  /** Everything received, as latin1 text. */
  raw: string;
  /** A socket error seen after the response was complete (or instead of it). */
  error: string | null;
}

/** One request on a fresh socket: `head` (request line, headers, empty line) then `body`. */
export async function rawRequest(
  port: number,
  head: string,
  body: Buffer | Iterable<Buffer> = Buffer.alloc(0),
  timeoutMs = 10_000,
): Promise<RawResult> {
  const parts = Buffer.isBuffer(body) ? [body] : body;
  function* all(): Generator<Buffer | string> {
    yield head;
    yield* parts;
  }
  const x = await rawExchange(port, all(), 1, timeoutMs, head.startsWith('HEAD '));
  const r = x.responses[0] ?? { statusCode: 0, headers: {}, body: '' };
  return { ...r, raw: x.raw, error: x.error };
}

/** Request head text for rawRequest. */
export function rawHead(method: string, target: string, headers: [string, string][]): string {
  return `${method} ${target} HTTP/1.1\r\nHost: 127.0.0.1\r\n${headers.map(([k, v]) => `${k}: ${v}\r\n`).join('')}\r\n`;
}

// Self-checks, only when this file is the test being run (not when imported).
if (import.meta.main) {
  test('parseRawResponse reads a Content-Length framed answer', () => {
    const p = parseRawResponse('HTTP/1.1 413 Payload Too Large\r\nContent-Length: 2\r\nX-A: 1\r\nX-A: 2\r\n\r\n{}');
    assert.deepEqual(p, { statusCode: 413, headers: { 'content-length': '2', 'x-a': '1, 2' }, body: '{}' });
    assert.equal(parseRawResponse('HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n{}'), null);
    const two = parseRawResponses(
      'HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 413 X\r\nContent-Length: 1\r\n\r\naHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\nHTTP',
    );
    assert.deepEqual(
      two.responses.map((r) => r.statusCode),
      [413, 200],
    );
    assert.equal(two.rest, 'HTTP');
  });

  test('assertNoAddressLeak sees an address in a header or in the body', () => {
    const r: Resp = { statusCode: 403, headers: { a: 'x' }, body: '{"a":"203.0.113.9"}' };
    assert.throws(() => assertNoAddressLeak(r, '203.0.113.9'));
    assert.throws(() => assertNoAddressLeak({ ...r, body: '{}', headers: { b: ['1', '203.0.113.9'] } }, '203.0.113.9'));
    assertNoAddressLeak({ ...r, body: '{}' }, '203.0.113.9');
  });

  test('verifyResponseSignature rejects a tampered body or status', async () => {
    const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
    const { sign } = await import('node:crypto');
    const keys = new Map([['pk_test', publicKey.export({ type: 'spki', format: 'pem' }).toString()]]);
    const ts = String(Math.floor(Date.now() / 1000));
    const nonce = 'A'.repeat(32);
    const body = '{"requestId":"req_12345678"}';
    const s = responseSigningString({ timestamp: ts, nonce, requestId: 'req_12345678', status: 200, body });
    const headers = {
      'x-svc-request-id': 'req_12345678',
      'x-svc-response-sign': sign('sha256', Buffer.from(s), privateKey).toString('base64'),
      'x-svc-response-key-id': 'pk_test',
      'x-svc-response-timestamp': ts,
      'x-svc-response-nonce': nonce,
    };
    verifyResponseSignature(keys, { statusCode: 200, headers, body });
    assert.throws(() => verifyResponseSignature(keys, { statusCode: 201, headers, body }));
    assert.throws(() => verifyResponseSignature(keys, { statusCode: 200, headers, body: body + ' ' }));
    assert.throws(() => assertUnsigned({ statusCode: 200, headers, body }));
  });
}
