/**
 * PaymentClient, webhooks and CLI against a fake platform built with node:http. The fake
 * verifies every request signature with its own code written from decisions.md section 1 (not
 * with signing.ts) and signs its answers per section 3.
 */
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { createHash, createPrivateKey, createPublicKey, type KeyObject, sign, verify } from 'node:crypto';
import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { createServer, type IncomingHttpHeaders, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { after, before, beforeEach, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import {
  AuthenticationError,
  ConflictError,
  createFetchTransport,
  generateRsaKeyPair,
  generateTestNotificationHeaders,
  InvalidRequestError,
  NetworkError,
  loadPublicKey,
  NotificationVerificationError,
  PaymentApiError,
  PaymentClient,
  type PaymentClientOptions,
  type TestNotification,
  RateLimitedError,
  ResponseSignatureError,
  type RsaKeyPairPem,
  ServiceUnavailableError,
  signRequestHeaders,
  type TransportRequest,
  UnexpectedResponseError,
  verifyNotification,
  type WebhookEventPayload,
} from '../src/index.ts';

const APP_ID = 'svcop_Test0123456789ab';
const KEY_ID = 'mk-1';
const PLATFORM_KEY_ID = 'pk-1';
const CLI = fileURLToPath(new URL('../src/cli.ts', import.meta.url));
const SIX = ['x-svc-app-id', 'x-svc-key-id', 'x-svc-timestamp', 'x-svc-nonce', 'x-svc-request-id', 'x-svc-sign'];

const sha256 = (data: string | Buffer): string => createHash('sha256').update(data).digest('hex');

interface Seen {
  method: string;
  /** The raw request target, exactly as received. */
  url: string;
  headers: IncomingHttpHeaders;
  body: Buffer;
  requestId: string;
  nonce: string;
  signature: string;
  problems: string[];
}

type Tamper = 'body' | 'status' | 'echo' | 'partial' | 'unknownKey' | 'signature';
type Reply = { status: number; body?: unknown; headers?: Record<string, string>; unsigned?: boolean; tamper?: Tamper } | 'reset' | 'hang';

/** The fake platform. Replies are taken from the queue, then from `fallback`. */
class FakePlatform {
  server: Server | undefined;
  baseUrl = '';
  seen: Seen[] = [];
  replies: ((seen: Seen) => Reply)[] = [];
  fallback: (seen: Seen) => Reply = (s) => ({ status: 200, body: { requestId: s.requestId } });
  merchantKey: KeyObject;
  readonly platformKey: KeyObject;
  readonly nonces = new Set<string>();

  constructor(merchantPublicKeyPem: string, platformPrivateKeyPem: string) {
    this.merchantKey = createPublicKey(merchantPublicKeyPem);
    this.platformKey = createPrivateKey(platformPrivateKeyPem);
  }

  async start(): Promise<void> {
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => this.#handle(req.method ?? '', req.url ?? '', req.headers, req.rawHeaders, Buffer.concat(chunks), res));
    });
    await new Promise<void>((resolve) => this.server?.listen(0, '127.0.0.1', resolve));
    this.baseUrl = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  async stop(): Promise<void> {
    this.server?.closeAllConnections();
    await new Promise((resolve) => this.server?.close(resolve));
  }

  reset(): void {
    this.seen = [];
    this.replies = [];
    this.fallback = (s) => ({ status: 200, body: { requestId: s.requestId } });
  }

  /** decisions.md section 1, written out independently of signing.ts. */
  #check(method: string, url: string, headers: IncomingHttpHeaders, rawHeaders: string[], body: Buffer): Seen {
    const problems: string[] = [];
    const one = (name: string): string => {
      const count = rawHeaders.filter((v, i) => i % 2 === 0 && v.toLowerCase() === name).length;
      if (count !== 1) problems.push(`${name} sent ${count} times`);
      return String(headers[name] ?? '');
    };
    const [appId, keyId, timestamp, nonce, requestId, signature] = SIX.map(one) as [string, string, string, string, string, string];
    if (appId !== APP_ID) problems.push('app id');
    if (keyId !== KEY_ID) problems.push('key id');
    if (!/^[0-9]{1,10}$/.test(timestamp) || Math.abs(Date.now() / 1000 - Number(timestamp)) > 300) problems.push('timestamp');
    if (!/^[A-Za-z0-9]{32}$/.test(nonce)) problems.push('nonce form');
    if (this.nonces.has(nonce)) problems.push('nonce replayed');
    this.nonces.add(nonce);
    if (!/^[A-Za-z0-9._:-]{8,128}$/.test(requestId)) problems.push('request id form');
    const rawType = headers['content-type'];
    const contentType = rawType === undefined ? '' : (rawType.split(';')[0] ?? '').trim().toLowerCase();
    if (method === 'POST' && contentType !== 'application/json') problems.push('POST without application/json');
    if (method === 'GET' && (rawType !== undefined || body.length > 0)) problems.push('GET with Content-Type or body');
    const signingString = `${method}\n${url}\n${appId}\n${keyId}\n${timestamp}\n${nonce}\n${requestId}\n${contentType}\n${sha256(body)}\n`;
    if (!verify('sha256', Buffer.from(signingString), this.merchantKey, Buffer.from(signature, 'base64'))) problems.push('bad signature');
    return { method, url, headers, body, requestId, nonce, signature, problems };
  }

  #handle(method: string, url: string, headers: IncomingHttpHeaders, rawHeaders: string[], body: Buffer, res: ServerResponse): void {
    const seen = this.#check(method, url, headers, rawHeaders, body);
    this.seen.push(seen);
    if (seen.problems.length > 0) {
      res.writeHead(401, { 'content-type': 'application/json', 'x-svc-request-id': seen.requestId });
      res.end(JSON.stringify({ code: 'OPEN_API_AUTH_FAILED', message: seen.problems.join('; '), requestId: seen.requestId }));
      return;
    }
    const reply = (this.replies.shift() ?? this.fallback)(seen);
    if (reply === 'reset') {
      res.socket?.destroy();
      return;
    }
    if (reply === 'hang') return;
    const text = typeof reply.body === 'string' ? reply.body : reply.body === undefined ? '' : JSON.stringify(reply.body);
    const out: Record<string, string> = {
      'content-type': 'application/json; charset=utf-8',
      'x-svc-request-id': seen.requestId,
      ...reply.headers,
    };
    let status = reply.status;
    let sent = text;
    if (!reply.unsigned) {
      const ts = String(Math.floor(Date.now() / 1000));
      const nonce = 'N'.repeat(16) + Math.random().toString(36).slice(2, 10).padEnd(16, '0');
      const s = `${ts}\n${nonce}\n${seen.requestId}\n${status}\n${sha256(Buffer.from(text))}\n`;
      out['x-svc-response-sign'] = sign('sha256', Buffer.from(s), this.platformKey).toString('base64');
      out['x-svc-response-key-id'] = PLATFORM_KEY_ID;
      out['x-svc-response-timestamp'] = ts;
      out['x-svc-response-nonce'] = nonce;
      if (reply.tamper === 'body') sent = text.replace('"amountFen":12345', '"amountFen":99999');
      if (reply.tamper === 'status') status = status === 200 ? 201 : 200;
      if (reply.tamper === 'echo') out['x-svc-request-id'] = 'req_someone_else_0001';
      if (reply.tamper === 'partial') delete out['x-svc-response-nonce'];
      if (reply.tamper === 'unknownKey') out['x-svc-response-key-id'] = 'pk-unknown';
      if (reply.tamper === 'signature') out['x-svc-response-sign'] = 'AAAA'.repeat(86) + 'AA==';
    }
    res.writeHead(status, out);
    res.end(sent);
  }
}

const snapshot = (s: Seen, extra: Record<string, unknown> = {}): Record<string, unknown> => ({
  requestId: s.requestId,
  openOrderId: 'ord_1',
  outTradeNo: 'T_123456',
  status: 'PAYING',
  closedReason: null,
  channel: 'ALIPAY_H5',
  tradeScope: null,
  links: ['ALIPAY_AGGREGATION_NATIVE'],
  amountFen: 12345,
  currency: 'CNY',
  attach: null,
  expireAt: '2026-11-22T08:30:00.000Z',
  payUrl: 'https://pay.example/c/x',
  qrCode: 'https://qr.alipay.com/x',
  payUrlExpireHint: 1795336200,
  feeProjection: null,
  replayed: false,
  ...extra,
});

const envelope = (s: Seen, code: string, details?: Record<string, unknown>): Record<string, unknown> => ({
  code,
  message: code,
  requestId: s.requestId,
  ...(details ? { details } : {}),
});

let merchant: RsaKeyPairPem;
let platform: RsaKeyPairPem;
let fake: FakePlatform;

function client(options: Partial<PaymentClientOptions> = {}): PaymentClient {
  return new PaymentClient({
    baseUrl: fake.baseUrl,
    appId: APP_ID,
    keyId: KEY_ID,
    privateKeyPem: merchant.privateKeyPem,
    platformPublicKeys: { [PLATFORM_KEY_ID]: platform.publicKeyPem },
    initialRetryDelayMs: 1,
    maxRetryDelayMs: 5,
    ...options,
  });
}

function assertAllSignedCorrectly(): void {
  for (const s of fake.seen) assert.deepEqual(s.problems, [], `${s.method} ${s.url}`);
}

before(async () => {
  [merchant, platform] = await Promise.all([generateRsaKeyPair(), generateRsaKeyPair()]);
  fake = new FakePlatform(merchant.publicKeyPem, platform.privateKeyPem);
  await fake.start();
});
after(async () => {
  await fake.stop();
});
beforeEach(() => fake.reset());

describe('operations', () => {
  const order = {
    outTradeNo: 'T_123456',
    channel: 'ALIPAY_H5',
    amountFen: 12345,
    currency: 'CNY',
    subject: '咖啡 ☕',
    payerClientIp: '8.8.8.8',
  } as const;

  it('createOrder: POST /api/open/v1/payments, JSON body, signed, response verified', async () => {
    fake.replies.push((s) => ({ status: 201, body: snapshot(s) }));
    const result = await client().createOrder(order, { requestId: 'req_create_0001' });
    assertAllSignedCorrectly();
    const [s] = fake.seen;
    assert.equal(s?.method, 'POST');
    assert.equal(s?.url, '/api/open/v1/payments');
    assert.equal(s?.headers['content-type'], 'application/json');
    assert.equal(s?.headers['accept-encoding'], 'identity');
    assert.deepEqual(JSON.parse(s?.body.toString('utf8') ?? ''), order);
    assert.equal(s?.requestId, 'req_create_0001');
    assert.equal(result.status, 201);
    assert.equal(result.requestId, 'req_create_0001');
    assert.equal(result.body.outTradeNo, 'T_123456');
    assert.equal(result.body.payUrl, 'https://pay.example/c/x');
    assert.equal(result.signatureVerified, true);
    assert.equal(result.attempts, 1);
  });

  it('recreateAttempt and closeOrder: POST without body but with Content-Type: application/json', async () => {
    fake.replies.push((s) => ({ status: 201, body: snapshot(s) }));
    fake.replies.push((s) => ({ status: 200, body: snapshot(s, { closeState: 'CLOSE_REQUESTED', payUrl: null, latestAttempt: null }) }));
    const c = client();
    const attempt = await c.recreateAttempt('T_123456');
    const closed = await c.closeOrder('T_123456');
    assertAllSignedCorrectly();
    assert.deepEqual(
      fake.seen.map((s) => [s.method, s.url, s.headers['content-type'], s.body.length]),
      [
        ['POST', '/api/open/v1/payments/T_123456/attempts', 'application/json', 0],
        ['POST', '/api/open/v1/payments/T_123456/close', 'application/json', 0],
      ],
    );
    assert.equal(attempt.status, 201);
    assert.equal(closed.body.closeState, 'CLOSE_REQUESTED');
  });

  it('GET operations send neither Content-Type nor body', async () => {
    fake.fallback = (s) => ({ status: 200, body: { requestId: s.requestId, ok: true } });
    const c = client();
    await c.queryOrder('T_123456');
    await c.queryRefund('RF_123456');
    await c.getSettlementAccounts();
    assertAllSignedCorrectly();
    assert.deepEqual(
      fake.seen.map((s) => [s.method, s.url, s.headers['content-type'], s.body.length]),
      [
        ['GET', '/api/open/v1/payments/T_123456', undefined, 0],
        ['GET', '/api/open/v1/refunds/RF_123456', undefined, 0],
        ['GET', '/api/open/v1/settlement/accounts', undefined, 0],
      ],
    );
  });

  it('createRefund: POST /api/open/v1/refunds', async () => {
    fake.replies.push((s) => ({
      status: 201,
      body: {
        requestId: s.requestId,
        refundAttemptId: 'rf_1',
        outRefundNo: 'RF_123456',
        outTradeNo: 'T_123456',
        state: 'PENDING',
        replayed: false,
      },
    }));
    const refund = { outTradeNo: 'T_123456', outRefundNo: 'RF_123456', refundAmountFen: 100, reason: '退货' };
    const result = await client().createRefund(refund);
    assertAllSignedCorrectly();
    assert.equal(fake.seen[0]?.url, '/api/open/v1/refunds');
    assert.deepEqual(JSON.parse(fake.seen[0]?.body.toString('utf8') ?? ''), refund);
    assert.equal(result.body.state, 'PENDING');
  });

  it('percent-encodes path segments and signs the target exactly as sent', async () => {
    await client().queryOrder('a b/ü?#%');
    assertAllSignedCorrectly();
    assert.equal(fake.seen[0]?.url, '/api/open/v1/payments/a%20b%2F%C3%BC%3F%23%25');
    await assert.rejects(client().queryOrder('..'), TypeError);
  });

  it('keeps a path prefix of baseUrl in the signed target', async () => {
    await client({ baseUrl: `${fake.baseUrl}/gateway/` }).getSettlementAccounts();
    assertAllSignedCorrectly();
    assert.equal(fake.seen[0]?.url, '/gateway/api/open/v1/settlement/accounts');
  });

  it('generates req_ request ids and fresh 32-character nonces', async () => {
    const c = client();
    await c.queryOrder('T_123456');
    await c.queryOrder('T_123456');
    assertAllSignedCorrectly();
    const [a, b] = fake.seen;
    assert.match(a?.requestId ?? '', /^req_[A-Za-z0-9]{24}$/);
    assert.notEqual(a?.requestId, b?.requestId);
    assert.notEqual(a?.nonce, b?.nonce);
  });

  it('rejects bad options and request ids before sending', async () => {
    assert.throws(() => client({ appId: 'app_1' }), TypeError);
    assert.throws(() => client({ maxRetries: 11 }), RangeError);
    assert.throws(() => client({ baseUrl: 'ftp://x' }), TypeError);
    await assert.rejects(client().queryOrder('T_123456', { requestId: 'short' }), TypeError);
    assert.equal(fake.seen.length, 0);
  });
});

describe('errors and response signatures', () => {
  it('a signed failure envelope becomes the matching PaymentApiError subclass', async () => {
    fake.replies.push((s) => ({ status: 409, body: envelope(s, 'OPEN_API_IDEMPOTENCY_CONFLICT') }));
    const err = await client()
      .createOrder(
        { outTradeNo: 'T_1234567', channel: 'WECHAT_H5', amountFen: 1, currency: 'CNY', subject: 's', payerClientIp: '8.8.8.8' },
        { requestId: 'req_conflict_1' },
      )
      .catch((e: unknown) => e);
    assert.ok(err instanceof ConflictError && err instanceof PaymentApiError);
    assert.equal(err.code, 'OPEN_API_IDEMPOTENCY_CONFLICT');
    assert.equal(err.status, 409);
    assert.equal(err.requestId, 'req_conflict_1');
    assert.equal(err.clientRequestId, 'req_conflict_1');
    assert.equal(err.headers['x-svc-request-id'], 'req_conflict_1');
  });

  it('an unsigned early rejection is accepted unverified (absence is not tampering)', async () => {
    fake.replies.push(() => ({
      status: 400,
      unsigned: true,
      headers: { 'x-svc-request-id': '' },
      body: { code: 'OPEN_API_HEADER_INVALID', message: 'bad', requestId: 'gw_abc' },
    }));
    const err = await client()
      .queryOrder('T_123456')
      .catch((e: unknown) => e);
    assert.ok(err instanceof InvalidRequestError);
    assert.equal(err.requestId, 'gw_abc');
    assert.equal(fake.seen.length, 1);
  });

  it('a 503 with an empty body requestId reports the header value', async () => {
    fake.fallback = () => ({ status: 503, unsigned: true, body: { code: 'OPEN_API_GUARD_UNAVAILABLE', message: 'x', requestId: '' } });
    const err = await client({ maxRetries: 0 })
      .queryOrder('T_123456', { requestId: 'req_503_empty' })
      .catch((e: unknown) => e);
    assert.ok(err instanceof ServiceUnavailableError);
    assert.equal(err.requestId, 'req_503_empty');
  });

  for (const [tamper, reason] of [
    ['body', 'BAD_SIGNATURE'],
    ['status', 'BAD_SIGNATURE'],
    ['signature', 'BAD_SIGNATURE'],
    ['echo', 'REQUEST_ID_MISMATCH'],
    ['partial', 'PARTIAL_HEADERS'],
    ['unknownKey', 'UNKNOWN_KEY_ID'],
  ] as const) {
    it(`a response with tampered ${tamper} throws ResponseSignatureError ${reason}, without retry`, async () => {
      fake.fallback = (s) => ({ status: 200, body: snapshot(s), tamper });
      const err = await client()
        .queryOrder('T_123456')
        .catch((e: unknown) => e);
      assert.ok(err instanceof ResponseSignatureError, String(err));
      assert.equal(err.reason, reason);
      // An unknown key id makes the client read the platform's keys once (which teaches it nothing here).
      assert.equal(fake.seen.length, reason === 'UNKNOWN_KEY_ID' ? 2 : 1);
      if (reason === 'UNKNOWN_KEY_ID') {
        assert.match(fake.seen[1]!.url, /\/api\/open\/v1\/platform-keys$/);
        assert.match(err.message, /refresh your copy of the keys.*same X-SVC-Request-Id/);
      }
    });
  }

  it('a tampered failure envelope is caught too', async () => {
    fake.fallback = (s) => ({ status: 409, body: envelope(s, 'OPEN_API_STATE_INVALID'), tamper: 'status' });
    await assert.rejects(client().closeOrder('T_123456'), ResponseSignatureError);
  });

  it('without platformPublicKeys nothing is verified', async () => {
    fake.fallback = (s) => ({ status: 200, body: snapshot(s), tamper: 'body' });
    const result = await client({ platformPublicKeys: undefined }).queryOrder('T_123456');
    assert.equal(result.signatureVerified, false);
    assert.equal(result.body.amountFen, 99999);
  });

  it('requireSignedSuccess rejects an unsigned 2xx but still accepts an unsigned early rejection', async () => {
    fake.replies.push((s) => ({ status: 200, unsigned: true, body: snapshot(s) }));
    const err = await client({ requireSignedSuccess: true })
      .queryOrder('T_123456')
      .catch((e: unknown) => e);
    assert.ok(err instanceof ResponseSignatureError);
    assert.equal(err.reason, 'MISSING_SIGNATURE');
    fake.replies.push((s) => ({ status: 401, unsigned: true, body: envelope(s, 'OPEN_API_AUTH_FAILED') }));
    await assert.rejects(client({ requireSignedSuccess: true }).queryOrder('T_123456'), AuthenticationError);
    fake.replies.push((s) => ({ status: 200, unsigned: true, body: snapshot(s) }));
    assert.equal((await client().queryOrder('T_123456')).signatureVerified, false);
  });

  it('a non-2xx without a failure envelope is an UnexpectedResponseError', async () => {
    fake.fallback = () => ({ status: 404, unsigned: true, body: { status: 404, error: 'ROUTE_NOT_FOUND', message: 'no route' } });
    const err = await client()
      .queryOrder('T_123456')
      .catch((e: unknown) => e);
    assert.ok(err instanceof UnexpectedResponseError);
    assert.equal(err.status, 404);
  });

  it('a 2xx whose body is not a JSON object is an UnexpectedResponseError', async () => {
    fake.fallback = () => ({ status: 200, body: 'not json' });
    await assert.rejects(client().queryOrder('T_123456'), UnexpectedResponseError);
  });
});

describe('retries', () => {
  it('503 then 429 then 201: same request id and body, fresh nonce, timestamp and signature', async () => {
    fake.replies.push((s) => ({ status: 503, body: envelope(s, 'OPEN_API_GUARD_UNAVAILABLE') }));
    fake.replies.push((s) => ({ status: 429, headers: { 'retry-after': '0' }, body: envelope(s, 'OPEN_API_RATE_LIMITED') }));
    fake.replies.push((s) => ({ status: 201, body: snapshot(s) }));
    const result = await client().createOrder(
      { outTradeNo: 'T_123456', channel: 'ALIPAY_H5', amountFen: 12345, currency: 'CNY', subject: 's', payerClientIp: '8.8.8.8' },
      { requestId: 'req_retry_0001' },
    );
    assertAllSignedCorrectly();
    assert.equal(result.status, 201);
    assert.equal(result.attempts, 3);
    assert.equal(fake.seen.length, 3);
    assert.deepEqual(new Set(fake.seen.map((s) => s.requestId)), new Set(['req_retry_0001']));
    assert.equal(new Set(fake.seen.map((s) => s.body.toString('hex'))).size, 1);
    assert.equal(new Set(fake.seen.map((s) => s.nonce)).size, 3);
    assert.equal(new Set(fake.seen.map((s) => s.signature)).size, 3);
  });

  it('a connection reset is retried with the same request id', async () => {
    fake.replies.push(() => 'reset');
    const result = await client().closeOrder('T_123456', { requestId: 'req_reset_0001' });
    assertAllSignedCorrectly();
    assert.equal(result.attempts, 2);
    assert.deepEqual(
      fake.seen.map((s) => s.requestId),
      ['req_reset_0001', 'req_reset_0001'],
    );
    assert.notEqual(fake.seen[0]?.nonce, fake.seen[1]?.nonce);
  });

  it('GETs are retried too, and a timeout counts as a network error', async () => {
    fake.replies.push(() => 'hang');
    fake.replies.push((s) => ({ status: 503, body: envelope(s, 'OPEN_API_GUARD_UNAVAILABLE') }));
    const result = await client({ timeoutMs: 200 }).queryOrder('T_123456');
    assert.equal(result.attempts, 3);
    assert.equal(fake.seen.length, 3);
  });

  it('gives up after maxRetries: ServiceUnavailableError, NetworkError (timedOut)', async () => {
    fake.fallback = (s) => ({ status: 503, body: envelope(s, 'OPEN_API_GUARD_UNAVAILABLE') });
    await assert.rejects(client({ maxRetries: 2 }).queryOrder('T_123456'), ServiceUnavailableError);
    assert.equal(fake.seen.length, 3);

    fake.reset();
    fake.fallback = () => 'reset';
    const err = await client({ maxRetries: 1 })
      .queryOrder('T_123456', { requestId: 'req_net_00001' })
      .catch((e: unknown) => e);
    assert.ok(err instanceof NetworkError);
    assert.equal(err.attempts, 2);
    assert.equal(err.timedOut, false);
    assert.equal(err.requestId, 'req_net_00001');

    fake.reset();
    fake.fallback = () => 'hang';
    const timeout = await client({ maxRetries: 0, timeoutMs: 100 })
      .queryOrder('T_123456')
      .catch((e: unknown) => e);
    assert.ok(timeout instanceof NetworkError);
    assert.equal(timeout.timedOut, true);
  });

  it('honours Retry-After', async () => {
    fake.replies.push((s) => ({ status: 429, headers: { 'retry-after': '1' }, body: envelope(s, 'OPEN_API_RATE_LIMITED') }));
    const started = Date.now();
    await client().getSettlementAccounts();
    assert.ok(Date.now() - started >= 950, 'waited about one second');
    assert.equal(fake.seen.length, 2);
  });

  it('does not wait for a Retry-After over the cap', async () => {
    fake.fallback = (s) => ({ status: 429, headers: { 'retry-after': '120' }, body: envelope(s, 'OPEN_API_RATE_LIMITED') });
    const err = await client({ maxRetryAfterSeconds: 60 })
      .getSettlementAccounts()
      .catch((e: unknown) => e);
    assert.ok(err instanceof RateLimitedError);
    assert.equal(err.retryAfterSeconds, 120);
    assert.equal(fake.seen.length, 1);
  });

  for (const [status, code] of [
    [400, 'OPEN_API_BODY_INVALID'],
    [401, 'OPEN_API_AUTH_FAILED'],
    [409, 'OPEN_API_NONCE_REPLAYED'],
    [409, 'OPEN_API_REQUEST_ID_CONFLICT'],
    [422, 'OPEN_API_LIMIT_EXCEEDED'],
    [502, 'OPEN_API_PROVIDER_REJECTED'],
  ] as const) {
    it(`never retries ${status} ${code}`, async () => {
      fake.fallback = (s) => ({ status, body: envelope(s, code) });
      const err = await client({ maxRetries: 5 })
        .closeOrder('T_123456')
        .catch((e: unknown) => e);
      assert.ok(err instanceof PaymentApiError);
      assert.equal(err.code, code);
      assert.equal(fake.seen.length, 1);
    });
  }

  it('401 is an AuthenticationError', async () => {
    fake.fallback = (s) => ({ status: 401, unsigned: true, body: envelope(s, 'OPEN_API_AUTH_FAILED') });
    await assert.rejects(client().queryOrder('T_123456'), AuthenticationError);
  });

  it('a caller abort stops the waits between retries', async () => {
    fake.fallback = (s) => ({ status: 503, body: envelope(s, 'OPEN_API_GUARD_UNAVAILABLE') });
    const controller = new AbortController();
    const pending = client({ maxRetries: 5, initialRetryDelayMs: 10_000, maxRetryDelayMs: 10_000 }).queryOrder('T_123456', {
      signal: controller.signal,
    });
    const reason = new Error('the caller gave up');
    setTimeout(() => controller.abort(reason), 50);
    await assert.rejects(pending, (err) => err === reason, 'rejects with the abort reason itself');
    assert.equal(fake.seen.length, 1);
  });

  it('a 503 after the retries carries its Retry-After', async () => {
    fake.fallback = (s) => ({ status: 503, headers: { 'retry-after': '120' }, body: envelope(s, 'OPEN_API_GUARD_UNAVAILABLE') });
    const err = await client({ maxRetryAfterSeconds: 60 })
      .getSettlementAccounts()
      .catch((e: unknown) => e);
    assert.ok(err instanceof ServiceUnavailableError);
    assert.equal(err.retryAfterSeconds, 120);
  });

  it('a public key given as the private key is a TypeError', () => {
    assert.throws(() => client({ privateKeyPem: merchant.publicKeyPem }), TypeError);
  });

  it('uses a swapped transport', async () => {
    const calls: TransportRequest[] = [];
    const c = client({
      transport: async (req) => {
        calls.push(req);
        return { status: 200, headers: {}, body: Buffer.from('{"requestId":"x"}') };
      },
    });
    const result = await c.queryOrder('T_123456');
    assert.equal(result.signatureVerified, false);
    assert.equal(calls[0]?.url, `${fake.baseUrl}/api/open/v1/payments/T_123456`);
    assert.equal(calls[0]?.body, undefined);
    assert.equal(calls[0]?.headers['Content-Type'], undefined);
    assert.match(calls[0]?.headers['X-SVC-Sign'] ?? '', /^[A-Za-z0-9+/]+={0,2}$/);
  });
});

describe('signRequestHeaders for a merchant-owned HTTP client', () => {
  it('produces headers the platform accepts', async () => {
    const body = JSON.stringify({ outTradeNo: 'T_123456' });
    const headers = await signRequestHeaders({
      method: 'POST',
      target: '/api/open/v1/payments',
      appId: APP_ID,
      keyId: KEY_ID,
      privateKey: merchant.privateKeyPem,
      body,
      contentType: 'application/json; charset=UTF-8',
    });
    const res = await fetch(`${fake.baseUrl}/api/open/v1/payments`, { method: 'POST', headers, body });
    assert.equal(res.status, 200);
    await res.arrayBuffer();
    assertAllSignedCorrectly();
  });
});

describe('webhooks', () => {
  const payload: WebhookEventPayload = {
    eventId: 'evt_0001',
    eventType: 'PAYMENT_SUCCEEDED',
    appId: APP_ID,
    outTradeNo: 'T_123456',
    outRefundNo: null,
    status: 'SUCCEEDED',
    reason: null,
    eventAmountFen: 12345,
    grossAmountFen: 12345,
    attach: '备注',
    occurredAt: '2026-11-22T08:31:00.000Z',
    stateVersion: 3,
    feeProjection: null,
  };
  const keys = (): Record<string, string> => ({ [PLATFORM_KEY_ID]: platform.publicKeyPem });
  const generate = (extra: Partial<Parameters<typeof generateTestNotificationHeaders>[0]> = {}) =>
    generateTestNotificationHeaders({ payload, keyId: PLATFORM_KEY_ID, privateKeyPem: platform.privateKeyPem, ...extra });
  const rejects = (run: () => unknown, reason: string): void => {
    assert.throws(run, (err: unknown) => err instanceof NotificationVerificationError && err.reason === reason);
  };

  it('round trip through a real HTTP receiver (lower-cased Node headers)', async () => {
    const { headers, rawBody } = generate();
    let verified: WebhookEventPayload | undefined;
    const receiver = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        try {
          verified = verifyNotification({ headers: req.headers, rawBody: Buffer.concat(chunks), platformPublicKeys: keys() });
          res.writeHead(204).end();
        } catch {
          res.writeHead(400).end();
        }
      });
    });
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    const res = await fetch(`http://127.0.0.1:${(receiver.address() as AddressInfo).port}/notify`, {
      method: 'POST',
      headers,
      body: rawBody,
    });
    receiver.closeAllConnections();
    receiver.close();
    assert.equal(res.status, 204);
    assert.deepEqual(verified, payload);
  });

  it('accepts fetch Headers and a string body', () => {
    const { headers, rawBody } = generate();
    assert.deepEqual(verifyNotification({ headers: new Headers(headers), rawBody: String(rawBody), platformPublicKeys: keys() }), payload);
  });

  it('rejects a missing header, each in turn', () => {
    const { headers, rawBody } = generate();
    for (const name of ['X-SVC-Event-Id', 'X-SVC-Notify-Timestamp', 'X-SVC-Notify-Nonce', 'X-SVC-Notify-Key-Id', 'X-SVC-Notify-Sign']) {
      const partial = { ...headers };
      delete partial[name];
      rejects(() => verifyNotification({ headers: partial, rawBody, platformPublicKeys: keys() }), 'MISSING_HEADER');
    }
  });

  it('rejects a repeated header', () => {
    const { headers, rawBody } = generate();
    const value = headers['X-SVC-Notify-Sign'] ?? '';
    rejects(
      () => verifyNotification({ headers: { ...headers, 'X-SVC-Notify-Sign': [value, value] }, rawBody, platformPublicKeys: keys() }),
      'DUPLICATE_HEADER',
    );
  });

  it('rejects an unknown key id', () => {
    const { headers, rawBody } = generate({ keyId: 'pk-other' });
    rejects(() => verifyNotification({ headers, rawBody, platformPublicKeys: keys() }), 'UNKNOWN_KEY_ID');
  });

  it('rejects a timestamp outside the tolerance, on both sides', () => {
    const now = Date.now();
    const old = generate({ timestamp: Math.floor(now / 1000) - 301 });
    rejects(() => verifyNotification({ ...old, platformPublicKeys: keys(), now: () => now }), 'TIMESTAMP_OUT_OF_TOLERANCE');
    const future = generate({ timestamp: Math.floor(now / 1000) + 301 });
    rejects(() => verifyNotification({ ...future, platformPublicKeys: keys(), now: () => now }), 'TIMESTAMP_OUT_OF_TOLERANCE');
    const edge = generate({ timestamp: Math.floor(now / 1000) - 300 });
    assert.equal(verifyNotification({ ...edge, platformPublicKeys: keys(), now: () => now }).eventId, 'evt_0001');
    assert.equal(verifyNotification({ ...old, platformPublicKeys: keys(), now: () => now, toleranceSeconds: 600 }).eventId, 'evt_0001');
  });

  it('rejects a bad signature: body, event id or nonce changed, or another key', async () => {
    const { headers, rawBody } = generate();
    rejects(
      () => verifyNotification({ headers, rawBody: String(rawBody).replace('12345', '12346'), platformPublicKeys: keys() }),
      'BAD_SIGNATURE',
    );
    rejects(
      () => verifyNotification({ headers: { ...headers, 'X-SVC-Notify-Nonce': 'x'.repeat(32) }, rawBody, platformPublicKeys: keys() }),
      'BAD_SIGNATURE',
    );
    rejects(
      () => verifyNotification({ headers: { ...headers, 'X-SVC-Event-Id': 'evt_0002' }, rawBody, platformPublicKeys: keys() }),
      'BAD_SIGNATURE',
    );
    const other = await generateRsaKeyPair();
    rejects(() => verifyNotification({ headers, rawBody, platformPublicKeys: { [PLATFORM_KEY_ID]: other.publicKeyPem } }), 'BAD_SIGNATURE');
  });

  it('rejects a validly signed body that is not JSON, or whose eventId differs from the header', () => {
    const notJson = generate({ payload: undefined, rawBody: 'not json', eventId: 'evt_0001' });
    rejects(() => verifyNotification({ ...notJson, platformPublicKeys: keys() }), 'BODY_NOT_JSON');
    const array = generate({ payload: undefined, rawBody: '[1]', eventId: 'evt_0001' });
    rejects(() => verifyNotification({ ...array, platformPublicKeys: keys() }), 'BODY_NOT_JSON');
    const mismatch = generate({ eventId: 'evt_9999' });
    rejects(() => verifyNotification({ ...mismatch, platformPublicKeys: keys() }), 'EVENT_ID_MISMATCH');
  });
});

describe('statements and the event log', () => {
  const CSV = 'type,occurredAt,eventId\r\nPAYMENT,2026-05-01T01:00:00.000Z,evt_abcdefghijkl\r\n';
  const summaryOf = (s: Seen, file: string, extra: Record<string, unknown> = {}) => ({
    requestId: s.requestId,
    appId: APP_ID,
    settlementDate: '2026-05-01',
    timeZone: 'Asia/Shanghai',
    periodStart: '2026-04-30T16:00:00.000Z',
    periodEnd: '2026-05-01T16:00:00.000Z',
    format: 'CSV',
    formatVersion: 1,
    compression: 'NONE',
    contentType: 'text/csv; charset=utf-8',
    fileName: `statement-${APP_ID}-2026-05-01.csv`,
    rowCount: 1,
    sizeBytes: Buffer.byteLength(file),
    sha256: sha256(file),
    totals: {},
    filePath: '/api/open/v1/statements/2026-05-01/file',
    ...extra,
  });
  /** A writable that keeps what it is given. */
  const sink = () => {
    const chunks: Buffer[] = [];
    const w = new Writable({
      write(chunk: Buffer, _e, cb) {
        chunks.push(chunk);
        cb();
      },
    });
    return { w, text: () => Buffer.concat(chunks).toString('utf8') };
  };

  it('getStatement: a signed GET of the day, the compression as a query', async () => {
    fake.replies.push((s) => ({ status: 200, body: summaryOf(s, CSV) }));
    const r = await client().getStatement('2026-05-01', { compression: 'gzip' });
    assertAllSignedCorrectly();
    assert.equal(fake.seen[0]?.url, '/api/open/v1/statements/2026-05-01?compression=gzip');
    assert.equal(r.body.sha256, sha256(CSV));
    assert.equal(r.signatureVerified, true);
  });

  it('downloadStatement: the summary, then the file written and checked against it and the signature', async () => {
    fake.replies.push((s) => ({ status: 200, body: summaryOf(s, CSV) }));
    fake.replies.push(() => ({ status: 200, body: CSV, headers: { 'content-type': 'text/csv; charset=utf-8' } }));
    const out = sink();
    const d = await client().downloadStatement('2026-05-01', out.w, { requestId: 'req_file_000001' });
    assertAllSignedCorrectly();
    assert.deepEqual(
      fake.seen.map((x) => [x.method, x.url]),
      [
        ['GET', '/api/open/v1/statements/2026-05-01'],
        ['GET', '/api/open/v1/statements/2026-05-01/file'],
      ],
    );
    assert.equal(fake.seen[1]?.requestId, 'req_file_000001');
    assert.equal(out.text(), CSV);
    assert.equal(d.sha256, sha256(CSV));
    assert.equal(d.sizeBytes, Buffer.byteLength(CSV));
    assert.equal(d.signatureVerified, true);
  });

  it('downloadStatement: a file other than the summary says, or a bad signature, is refused', async () => {
    fake.replies.push((s) => ({ status: 200, body: summaryOf(s, CSV) }));
    fake.replies.push(() => ({ status: 200, body: CSV.replace('PAYMENT', 'REFUND_'), headers: { 'content-type': 'text/csv' } }));
    await assert.rejects(client().downloadStatement('2026-05-01', sink().w), (e: unknown) => e instanceof UnexpectedResponseError);
    fake.replies.push((s) => ({ status: 200, body: summaryOf(s, CSV) }));
    fake.replies.push(() => ({ status: 200, body: CSV, headers: { 'content-type': 'text/csv' }, tamper: 'signature' }));
    await assert.rejects(client().downloadStatement('2026-05-01', sink().w), (e: unknown) => e instanceof ResponseSignatureError);
    fake.replies.push((s) => ({ status: 409, body: envelope(s, 'OPEN_API_STATE_INVALID') }));
    await assert.rejects(client().downloadStatement('2026-05-01', sink().w), (e: unknown) => e instanceof ConflictError);
  });

  it('downloadStatement: a connection reset before the file answers is tried again, with the same request id', async () => {
    fake.replies.push((s) => ({ status: 200, body: summaryOf(s, CSV) }));
    fake.replies.push(() => 'reset');
    fake.replies.push(() => ({ status: 200, body: CSV, headers: { 'content-type': 'text/csv; charset=utf-8' } }));
    const out = sink();
    const d = await client().downloadStatement('2026-05-01', out.w, { requestId: 'req_file_000002' });
    assert.equal(out.text(), CSV);
    assert.equal(d.attempts, 2);
    assert.deepEqual(
      fake.seen.slice(1).map((x) => [x.url, x.requestId]),
      [
        ['/api/open/v1/statements/2026-05-01/file', 'req_file_000002'],
        ['/api/open/v1/statements/2026-05-01/file', 'req_file_000002'],
      ],
    );
  });

  it('createFetchTransport refuses a response cap below 1 byte', () => {
    for (const bad of [-1, 0, 1.5]) assert.throws(() => createFetchTransport({ maxResponseBytes: bad }), RangeError);
  });

  it('redeliverEvent past its limit: RateLimitedError at once, its Retry-After not waited out', async () => {
    fake.fallback = (s) => ({ status: 429, headers: { 'retry-after': '60' }, body: envelope(s, 'OPEN_API_RATE_LIMITED') });
    const started = Date.now();
    const err = await client()
      .redeliverEvent('evt_b')
      .catch((e: unknown) => e);
    assert.ok(err instanceof RateLimitedError);
    assert.equal(err.retryAfterSeconds, 60);
    assert.equal(fake.seen.length, 1);
    assert.ok(Date.now() - started < 5_000);
  });

  it('listEvents without URLSearchParams.size (Node before 18.16): the filters are sent', async () => {
    const size = Object.getOwnPropertyDescriptor(URLSearchParams.prototype, 'size');
    Object.defineProperty(URLSearchParams.prototype, 'size', { configurable: true, get: () => undefined });
    try {
      fake.replies.push((s) => ({ status: 200, body: { requestId: s.requestId, events: [], nextCursor: null } }));
      await client().listEvents({ type: 'REFUND_SUCCEEDED', limit: 1 });
      assert.equal(fake.seen[0]?.url, '/api/open/v1/events?type=REFUND_SUCCEEDED&limit=1');
    } finally {
      if (size) Object.defineProperty(URLSearchParams.prototype, 'size', size);
    }
  });

  it('listEvents, iterateEvents over the pages, getEvent, redeliverEvent (a POST with no body)', async () => {
    const entry = (id: string) => ({ eventId: id, eventType: 'PAYMENT_SUCCEEDED', status: 'DELIVERED' });
    fake.replies.push((s) => ({ status: 200, body: { requestId: s.requestId, events: [entry('evt_a')], nextCursor: 'c1' } }));
    fake.replies.push((s) => ({ status: 200, body: { requestId: s.requestId, events: [entry('evt_b')], nextCursor: null } }));
    fake.replies.push((s) => ({ status: 200, body: { requestId: s.requestId, ...entry('evt_b'), deliveries: [] } }));
    fake.replies.push((s) => ({ status: 202, body: { requestId: s.requestId, eventId: 'evt_b', status: 'PENDING', nextAttemptAt: 'x' } }));
    const c = client();
    const all = [];
    for await (const e of c.iterateEvents({ type: 'PAYMENT_SUCCEEDED', limit: 1 })) all.push(e.eventId);
    assert.deepEqual(all, ['evt_a', 'evt_b']);
    assert.equal((await c.getEvent('evt_b')).body.eventId, 'evt_b');
    const r = await c.redeliverEvent('evt_b');
    assert.equal(r.status, 202);
    assertAllSignedCorrectly();
    assert.deepEqual(
      fake.seen.map((x) => [x.method, x.url]),
      [
        ['GET', '/api/open/v1/events?type=PAYMENT_SUCCEEDED&limit=1'],
        ['GET', '/api/open/v1/events?type=PAYMENT_SUCCEEDED&limit=1&cursor=c1'],
        ['GET', '/api/open/v1/events/evt_b'],
        ['POST', '/api/open/v1/events/evt_b/redeliveries'],
      ],
    );
    assert.equal(fake.seen[3]?.headers['content-type'], 'application/json');
    assert.equal(fake.seen[3]?.body.length, 0);
  });
});

describe('CLI', () => {
  const run = (args: string[], env: Record<string, string> = {}): Promise<{ code: number; stdout: string; stderr: string }> =>
    new Promise((resolve) => {
      execFile(process.execPath, [CLI, ...args], { env: { PATH: process.env.PATH ?? '', ...env } }, (err, stdout, stderr) => {
        resolve({ code: err ? Number((err as { code?: unknown }).code ?? 1) : 0, stdout, stderr });
      });
    });
  let dir: string;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'mps-sdk-cli-'));
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('--help prints usage', async () => {
    const { code, stdout } = await run(['--help']);
    assert.equal(code, 0);
    assert.match(stdout, /mps-merchant <command>/);
  });

  it('keygen writes a 0600 PKCS#8 private key and an SPKI public key, and refuses to overwrite', async () => {
    const { code } = await run(['keygen', '--out-dir', dir]);
    assert.equal(code, 0);
    const privatePem = await readFile(join(dir, 'merchant-private.pem'), 'utf8');
    assert.match(privatePem, /^-----BEGIN PRIVATE KEY-----/);
    assert.match(await readFile(join(dir, 'merchant-public.pem'), 'utf8'), /^-----BEGIN PUBLIC KEY-----/);
    assert.equal((await stat(join(dir, 'merchant-private.pem'))).mode & 0o777, 0o600);
    assert.equal(createPrivateKey(privatePem).asymmetricKeyDetails?.modulusLength, 2048);
    assert.equal((await run(['keygen', '--out-dir', dir])).code, 2);
  });

  it('a value the SDK refuses (key size, timeout, request id, app id) is a wrong command line: exit 2 with the usage hint', async () => {
    const base = ['--base-url', 'http://127.0.0.1:1', '--app-id', 'svcop_aaaaaaaaaaaaaaaa', '--key-id', 'k'];
    const key = ['--private-key', join(dir, 'merchant-private.pem')];
    for (const args of [
      ['keygen', '--out-dir', join(dir, 'small'), '--bits', '1000'],
      ['query-order', 'ORDER_1', ...base, ...key, '--timeout-ms', '0'],
      ['query-order', 'ORDER_1', ...base, ...key, '--request-id', 'bad id'],
      ['query-order', 'ORDER_1', ...base, ...key, '--app-id', 'svcop_x'],
      // A key file that is missing, or not a private key: the command line names the wrong file.
      ['query-order', 'ORDER_1', ...base, '--private-key', join(dir, 'no-such-key.pem')],
      ['query-order', 'ORDER_1', ...base, '--private-key', join(dir, 'merchant-public.pem')],
      ['query-order', 'ORDER_1', ...base, ...key, '--platform-keys', join(dir, 'no-such-keys.json')],
      // A platform keys file that is not the admin API's document (e.g. npm's banner captured with it).
      ['query-order', 'ORDER_1', ...base, ...key, '--platform-keys', join(dir, 'merchant-public.pem')],
      // sandbox pay: its one argument, and the admin token (no ADMIN_TOKEN in this environment).
      ['sandbox', 'pay', ...base, ...key, '--admin-token', 't'],
      ['sandbox', 'fly', 'ORDER_1', ...base, ...key, '--admin-token', 't'],
      ['sandbox', 'pay', 'ORDER_1', ...base, ...key],
      [
        'verify-notification',
        '--headers',
        join(dir, 'no-such-headers.json'),
        '--body',
        join(dir, 'merchant-public.pem'),
        '--platform-key-id',
        'k',
        '--platform-key',
        join(dir, 'merchant-public.pem'),
      ],
    ]) {
      const r = await run(args);
      assert.equal(r.code, 2, `${args.join(' ')}: ${r.stderr}`);
      assert.match(r.stderr, /Run mps-merchant --help for usage/);
    }
  });

  /** The CLI's environment with the key pair keygen made (the fake service verifies with it) and a platform keys file. */
  async function generatedKeyEnv(): Promise<Record<string, string>> {
    fake.merchantKey = createPublicKey(await readFile(join(dir, 'merchant-public.pem'), 'utf8'));
    const keysFile = join(dir, 'platform-keys.json');
    await writeFile(keysFile, JSON.stringify({ keys: [{ keyId: PLATFORM_KEY_ID, publicKeyPem: platform.publicKeyPem }] }));
    return {
      MPS_BASE_URL: fake.baseUrl,
      MPS_APP_ID: APP_ID,
      MPS_KEY_ID: KEY_ID,
      MPS_PRIVATE_KEY_FILE: join(dir, 'merchant-private.pem'),
      MPS_PLATFORM_KEYS_FILE: keysFile,
    };
  }

  it('query-order with the generated key, verified with the platform keys file; exit 1 on an API error', async () => {
    try {
      const env = await generatedKeyEnv();
      fake.replies.push((s) => ({ status: 200, body: snapshot(s, { payUrl: null }) }));
      const ok = await run(['query-order', 'T_123456', '--request-id', 'req_cli_000001'], env);
      assert.equal(ok.code, 0, ok.stderr);
      assert.equal(JSON.parse(ok.stdout).outTradeNo, 'T_123456');
      assert.equal(fake.seen[0]?.requestId, 'req_cli_000001');
      assertAllSignedCorrectly();

      fake.replies.push((s) => ({ status: 404, body: envelope(s, 'OPEN_API_NOT_FOUND') }));
      const notFound = await run(['query-order', 'T_missing'], env);
      assert.equal(notFound.code, 1);
      assert.equal(JSON.parse(notFound.stderr).code, 'OPEN_API_NOT_FOUND');

      // --platform-key KEYID=FILE with a wrong key: the signed answer no longer verifies.
      const wrongKey = join(dir, 'wrong.pem');
      await writeFile(wrongKey, (await generateRsaKeyPair()).publicKeyPem);
      fake.replies.push((s) => ({ status: 200, body: snapshot(s) }));
      const tampered = await run(['query-order', 'T_123456', '--platform-key', `${PLATFORM_KEY_ID}=${wrongKey}`], env);
      assert.equal(tampered.code, 1);
      assert.equal(JSON.parse(tampered.stderr).error, 'ResponseSignatureError');
    } finally {
      fake.merchantKey = createPublicKey(merchant.publicKeyPem);
    }
  });

  it('create-order / create-refund send the --json text or --file bytes as given, not re-serialized', async () => {
    fake.merchantKey = createPublicKey(await readFile(join(dir, 'merchant-public.pem'), 'utf8'));
    try {
      const env = {
        MPS_BASE_URL: fake.baseUrl,
        MPS_APP_ID: APP_ID,
        MPS_KEY_ID: KEY_ID,
        MPS_PRIVATE_KEY_FILE: join(dir, 'merchant-private.pem'),
      };
      const typed = '{"outTradeNo":"T_123456", "outRefundNo":"RF_123456","refundAmountFen":1.0}';
      fake.replies.push((s) => ({ status: 400, body: envelope(s, 'OPEN_API_BODY_INVALID') }));
      const refund = await run(['create-refund', '--json', typed], env);
      assert.equal(refund.code, 1, refund.stderr);
      assert.equal(fake.seen.at(-1)?.body.toString('utf8'), typed, 'the bytes typed, 1.0 and spacing included');
      const file = join(dir, 'order.json');
      const order = '{"outTradeNo":"T_123456","amountFen":1e2,"amountFen":100}\n';
      await writeFile(file, order);
      fake.replies.push((s) => ({ status: 400, body: envelope(s, 'OPEN_API_BODY_INVALID') }));
      const created = await run(['create-order', '--file', file], env);
      assert.equal(created.code, 1, created.stderr);
      assert.equal(fake.seen.at(-1)?.body.toString('utf8'), order);
      assertAllSignedCorrectly();
    } finally {
      fake.merchantKey = createPublicKey(merchant.publicKeyPem);
    }
  });

  it('listen: verifies each notification at its URL, prints each event once, refuses a forged one, stops after --count', async () => {
    const keysFile = join(dir, 'listen-platform-keys.json');
    await writeFile(keysFile, JSON.stringify({ keys: [{ keyId: PLATFORM_KEY_ID, publicKeyPem: platform.publicKeyPem }] }));
    const probe = createServer();
    await new Promise<void>((r) => probe.listen(0, '127.0.0.1', r));
    const port = (probe.address() as AddressInfo).port;
    await new Promise((r) => probe.close(r));
    const url = `http://127.0.0.1:${port}/hook`;
    // As provisioning leaves it: MPS_NOTIFY_URL and MPS_PLATFORM_KEYS_FILE in the environment.
    const child = spawn(process.execPath, [CLI, 'listen', '--count', '2'], {
      env: { PATH: process.env.PATH ?? '', MPS_NOTIFY_URL: url, MPS_PLATFORM_KEYS_FILE: keysFile },
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (err += d));
    const exited = new Promise<number | null>((r) => child.once('exit', r));
    while (!err.includes('listening for notifications on')) {
      assert.equal(child.exitCode, null, err);
      await new Promise((r) => setTimeout(r, 20));
    }
    const event = (eventId: string, eventType: string) =>
      generateTestNotificationHeaders({
        payload: { eventId, eventType, outTradeNo: 'T_LISTEN_1', outRefundNo: null, stateVersion: 2 },
        keyId: PLATFORM_KEY_ID,
        privateKeyPem: platform.privateKeyPem,
      });
    const post = (n: TestNotification, path = '/hook') =>
      fetch(`http://127.0.0.1:${port}${path}`, { method: 'POST', headers: n.headers, body: new Uint8Array(Buffer.from(n.rawBody)) });
    const paid = event('evt_listen_1', 'PAYMENT_SUCCEEDED');
    assert.equal((await post({ ...paid, rawBody: String(paid.rawBody).replace('T_LISTEN_1', 'T_LISTEN_2') })).status, 400, 'forged');
    assert.equal((await post(paid, '/elsewhere')).status, 404);
    assert.equal((await post(paid)).status, 204);
    assert.equal((await post(paid)).status, 204, 'a redelivery is acknowledged');
    assert.equal((await post(event('evt_listen_2', 'PAYMENT_CLOSED'))).status, 204);
    assert.equal(await exited, 0, err);
    const lines = out.trim().split('\n');
    assert.equal(lines.length, 2, out);
    assert.match(lines[0]!, /^verified PAYMENT_SUCCEEDED T_LISTEN_1 stateVersion=2 \{.*"eventId":"evt_listen_1"/);
    assert.match(lines[1]!, /^verified PAYMENT_CLOSED T_LISTEN_1 stateVersion=2 /);
    assert.match(err, /rejected a notification \(BAD_SIGNATURE\)/);
    // Without platform keys it cannot verify anything: a wrong command line.
    const none = await run(['listen', '--url', url]);
    assert.equal(none.code, 2);
    assert.match(none.stderr, /listen needs the platform keys/);
  });

  it('verify-notification: exit 0 with the payload, exit 1 when tampered', async () => {
    const { headers, rawBody } = generateTestNotificationHeaders({
      payload: { eventId: 'evt_cli_1', eventType: 'REFUND_SUCCEEDED' },
      keyId: PLATFORM_KEY_ID,
      privateKeyPem: platform.privateKeyPem,
    });
    const files = { headers: join(dir, 'h.json'), body: join(dir, 'b.json'), key: join(dir, 'platform.pem') };
    await writeFile(files.headers, JSON.stringify(headers));
    await writeFile(files.body, rawBody);
    await writeFile(files.key, platform.publicKeyPem);
    const ok = await run([
      'verify-notification',
      '--headers',
      files.headers,
      '--body',
      files.body,
      '--platform-key',
      files.key,
      '--platform-key-id',
      PLATFORM_KEY_ID,
    ]);
    assert.equal(ok.code, 0, ok.stderr);
    assert.equal(JSON.parse(ok.stdout).eventId, 'evt_cli_1');
    await writeFile(files.body, String(rawBody).replace('REFUND', 'PAYMENT'));
    const bad = await run([
      'verify-notification',
      '--headers',
      files.headers,
      '--body',
      files.body,
      '--platform-key',
      `${PLATFORM_KEY_ID}=${files.key}`,
    ]);
    assert.equal(bad.code, 1);
    assert.equal(JSON.parse(bad.stderr).reason, 'BAD_SIGNATURE');
    // A platform key file that holds no public key (not PEM, or a private key): a wrong command line.
    await writeFile(files.body, rawBody);
    const privateKeyFile = join(dir, 'platform-private.pem');
    await writeFile(privateKeyFile, platform.privateKeyPem);
    for (const keyFile of [files.body, privateKeyFile]) {
      const wrong = await run([
        'verify-notification',
        '--headers',
        files.headers,
        '--body',
        files.body,
        '--platform-key',
        `${PLATFORM_KEY_ID}=${keyFile}`,
      ]);
      assert.equal(wrong.code, 2, wrong.stderr);
      assert.match(wrong.stderr, /Run mps-merchant --help for usage/);
    }
  });

  it('statement DAY --out FILE writes the checked file; events lists, gets and redelivers', async () => {
    try {
      const env = await generatedKeyEnv();
      const csv = 'type\r\nPAYMENT\r\n';
      const summary = (s: Seen) => ({
        requestId: s.requestId,
        sizeBytes: Buffer.byteLength(csv),
        sha256: sha256(csv),
        compression: 'GZIP',
        filePath: '/api/open/v1/statements/2026-05-01/file?compression=gzip',
      });
      fake.replies.push((s) => ({ status: 200, body: summary(s) }));
      fake.replies.push(() => ({ status: 200, body: csv, headers: { 'content-type': 'application/gzip' } }));
      const file = join(dir, 'statement.csv.gz');
      const ok = await run(['statement', '2026-05-01', '--gzip', '--out', file], env);
      assert.equal(ok.code, 0, ok.stderr);
      assert.equal(await readFile(file, 'utf8'), csv);
      assert.equal(JSON.parse(ok.stdout).sha256Checked, true);
      assert.equal(JSON.parse(ok.stdout).signatureVerified, true);
      assert.equal(fake.seen.at(-2)?.url, '/api/open/v1/statements/2026-05-01?compression=gzip');
      // A file that does not match its summary leaves nothing behind.
      fake.replies.push((s) => ({ status: 200, body: summary(s) }));
      fake.replies.push(() => ({ status: 200, body: 'other\r\n', headers: { 'content-type': 'application/gzip' } }));
      const bad = await run(['statement', '2026-05-01', '--gzip', '--out', join(dir, 'bad.csv.gz')], env);
      assert.equal(bad.code, 1, bad.stderr);
      await assert.rejects(stat(join(dir, 'bad.csv.gz')));
      await assert.rejects(stat(join(dir, 'bad.csv.gz.partial')));

      fake.replies.push((s) => ({ status: 200, body: { requestId: s.requestId, events: [{ eventId: 'evt_1' }], nextCursor: 'n1' } }));
      fake.replies.push((s) => ({ status: 200, body: { requestId: s.requestId, events: [{ eventId: 'evt_2' }], nextCursor: null } }));
      const all = await run(['events', '--all', '--status', 'DEAD'], env);
      assert.equal(all.code, 0, all.stderr);
      assert.deepEqual(
        JSON.parse(all.stdout).events.map((e: { eventId: string }) => e.eventId),
        ['evt_1', 'evt_2'],
      );
      fake.replies.push((s) => ({ status: 202, body: { requestId: s.requestId, eventId: 'evt_2', status: 'PENDING' } }));
      assert.equal((await run(['events', 'redeliver', 'evt_2'], env)).code, 0);
      assert.equal(fake.seen.at(-1)?.url, '/api/open/v1/events/evt_2/redeliveries');
      assert.equal((await run(['events', 'redeliver'], env)).code, 2);
      assertAllSignedCorrectly();
    } finally {
      fake.merchantKey = createPublicKey(merchant.publicKeyPem);
    }
  });

  it('a private key is never taken for a platform public key', () => {
    assert.throws(() => loadPublicKey(platform.privateKeyPem), /public key, not a private key/);
  });
});
