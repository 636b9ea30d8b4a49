/**
 * PaymentClient: typed calls of the open-API operations (the seed's seven, the statement and the
 * event log), each request signed
 * (decisions.md section 1), each signed answer verified (section 3), with bounded retries.
 *
 * Retries (after stripe-node's RequestSender `_shouldRetry`): only when the request may not have
 * been executed or the platform asks to come back — network errors and timeouts, 429 and 503.
 * Every retry reuses the same X-SVC-Request-Id and the same body bytes, so the platform's
 * request-id replay (section 5) makes a POST that did execute answer with its first response;
 * nonce, timestamp and signature are fresh each time (a nonce is never reused).
 */
import { createHash, type KeyObject } from 'node:crypto';
import { once } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';

/** The wait between tries; a caller's abort meanwhile rejects with its own reason, as it does elsewhere. */
async function pause(ms: number, signal: AbortSignal | undefined): Promise<void> {
  try {
    await sleep(ms, undefined, signal ? { signal } : {});
  } catch (err) {
    if (signal?.aborted) throw signal.reason;
    throw err;
  }
}
import {
  assertAppId,
  assertKeyId,
  assertRequestId,
  generateNonce,
  generateRequestId,
  HEADERS,
  signRequestHeaders,
  verifyResponseSignature,
} from './auth.ts';
import {
  apiErrorFor,
  MpsError,
  NetworkError,
  NotificationVerificationError,
  type PaymentApiError,
  ResponseSignatureError,
  UnexpectedResponseError,
} from './errors.ts';
import { extendTrust, isPlatformKeysResponse, keysAsPem } from './platform-keys.ts';
import { type VerifyNotificationInput, verifyNotification } from './webhooks.ts';
import { lookupHeader } from './internal.ts';
import { loadPrivateKey, loadPublicKeys } from './keys.ts';
import type {
  CloseOrderResponse,
  EventFilter,
  EventListResponse,
  EventLogEntry,
  EventResponse,
  RedeliveryResponse,
  StatementResponse,
  CreateOrderRequest,
  CreateOrderResponse,
  CreateRefundRequest,
  CreateRefundResponse,
  QueryOrderResponse,
  QueryRefundResponse,
  RecreateAttemptResponse,
  SettlementResponse,
  WebhookEventPayload,
} from './types.ts';

export interface TransportRequest {
  method: string;
  /** Absolute URL; its path plus query is exactly the signed target. */
  url: string;
  headers: Record<string, string>;
  /** undefined: send no body. */
  body: Buffer | undefined;
  /** Aborted when the client's timeout fires or the caller's signal aborts. */
  signal: AbortSignal;
  timeoutMs: number;
}

export interface TransportResponse {
  status: number;
  /** Header names in any case (they are looked up case-insensitively). */
  headers: Record<string, string>;
  /** The raw body bytes, as received (the response signature covers them). */
  body: Buffer;
}

/**
 * Sends one HTTP request. Reject (with anything but an MpsError) when no HTTP answer was obtained:
 * the client treats that as a network error and may retry. Never follow redirects: the signature
 * covers the target. An MpsError thrown by a transport is passed to the caller without retry.
 */
export type Transport = (request: TransportRequest) => Promise<TransportResponse>;

export const DEFAULT_MAX_RESPONSE_BYTES = 1024 * 1024;

/** The default transport: global fetch, no redirects, response bodies capped (1 MiB by default). */
export function createFetchTransport(options: { maxResponseBytes?: number } = {}): Transport {
  const maxBytes = checkNumber('maxResponseBytes', options.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES, 1, Number.MAX_SAFE_INTEGER);
  return async (req) => {
    const res = await fetch(req.url, {
      method: req.method,
      // identity: the response signature covers the body bytes as sent, so ask for no content coding.
      headers: { accept: 'application/json', 'accept-encoding': 'identity', ...req.headers },
      // A plain Uint8Array copy (a request body is small): a Buffer is not a BodyInit under
      // TypeScript's DOM lib, which a merchant's project may well include.
      body: req.body === undefined ? null : new Uint8Array(req.body),
      redirect: 'manual',
      signal: req.signal,
    });
    const headers: Record<string, string> = {};
    res.headers.forEach((value, name) => {
      headers[name] = value;
    });
    const chunks: Uint8Array[] = [];
    let size = 0;
    if (res.body !== null) {
      const reader = res.body.getReader();
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        size += value.byteLength;
        if (size > maxBytes) {
          await reader.cancel();
          throw new UnexpectedResponseError(`response body over ${maxBytes} bytes`, {
            status: res.status,
            requestId: req.headers[HEADERS.requestId] ?? '',
            headers,
            bodyText: '',
          });
        }
        chunks.push(value);
      }
    }
    return { status: res.status, headers, body: Buffer.concat(chunks) };
  };
}

export interface PaymentClientOptions {
  /** e.g. https://pay.example.com (a path prefix is kept and is part of the signed target). */
  baseUrl: string;
  /** `svcop_` + 16 letters or digits. */
  appId: string;
  /** Id of the merchant key registered for this app (1-128 visible ASCII). */
  keyId: string;
  /** The merchant's RSA private key (2048-4096 bits): PEM (PKCS#8 or PKCS#1) or a KeyObject. */
  privateKeyPem: string | KeyObject;
  /**
   * The platform's public keys by key id (GET /api/admin/v1/platform-keys). When given, every
   * answer carrying the four X-SVC-Response-* headers is verified; answers without any of them
   * (early rejections) are accepted unverified, as the seed requires.
   */
  platformPublicKeys?: Readonly<Record<string, string | KeyObject>>;
  /**
   * Learn the platform's new keys by itself (default true, with platformPublicKeys): an answer or a
   * notification signed with a key id it does not know makes the client read the platform's keys
   * (GET /api/open/v1/platform-keys, signed) and trust a new key only when a key it already trusts
   * endorses it and the listing's own answer verifies (src/platform-keys.ts). At most once per
   * `minKeyRefreshIntervalMs` (default 60 s) for unknown key ids; `refreshPlatformKeys()` any time.
   */
  refreshPlatformKeys?: boolean;
  minKeyRefreshIntervalMs?: number;
  /** Called with every trusted key (PEM by id) when a refresh learnt one: keep them for the next start. */
  onPlatformKeysChange?: (keys: Record<string, string>) => void;
  /**
   * Also reject a 2xx answer that carries none of the four headers (default false). Off by
   * default because the seed enforces verification only when the headers are present; every 2xx
   * of a conforming platform is signed (decisions.md section 3), so turning it on closes the gap
   * of an attacker stripping the headers. Needs platformPublicKeys.
   */
  requireSignedSuccess?: boolean;
  /** Retries after the first try, 0-10 (default 2). */
  maxRetries?: number;
  /** Timeout of one try, in milliseconds (default 15000). */
  timeoutMs?: number;
  /** First backoff delay (default 500 ms); doubles per retry up to maxRetryDelayMs; jittered to 50-100%. */
  initialRetryDelayMs?: number;
  /** Backoff ceiling (default 5000 ms). */
  maxRetryDelayMs?: number;
  /** A Retry-After longer than this (default 60 s) is not waited for: the error is thrown at once. */
  maxRetryAfterSeconds?: number;
  /** HTTP transport (default: createFetchTransport()). */
  transport?: Transport;
  /** Clock in epoch milliseconds (default Date.now); X-SVC-Timestamp is floor(now()/1000). */
  now?: () => number;
  /** Nonce source (default: 32 random A-Za-z0-9 characters); must return 16-64 visible ASCII, never twice the same. */
  randomNonce?: () => string;
}

export interface RequestOptions {
  /** X-SVC-Request-Id (8-128 of A-Za-z0-9 . _ : -). Generated when omitted; reuse it to retry the same request later. */
  requestId?: string;
  /** Aborts the call, including waits between retries. */
  signal?: AbortSignal;
}

/** A statement file written and checked (PaymentClient.downloadStatement). */
export interface StatementDownload {
  summary: StatementResponse;
  /** The X-SVC-Request-Id of the file's request. */
  requestId: string;
  /** SHA-256 of the bytes written: the summary's. */
  sha256: string;
  sizeBytes: number;
  /** True when the answer's signature was present and verified (over sha256). */
  signatureVerified: boolean;
  attempts: number;
}

export interface ApiResult<T> {
  /** HTTP status (e.g. 201 created, 200 replay). */
  status: number;
  /** The X-SVC-Request-Id of the call. */
  requestId: string;
  body: T;
  /** Response headers, names as the transport gave them (fetch: lower case). */
  headers: Record<string, string>;
  /** True when the response signature was present and verified. */
  signatureVerified: boolean;
  /** How many times the request was sent (1 + retries). */
  attempts: number;
}

const DEFAULTS = {
  maxRetries: 2,
  timeoutMs: 15_000,
  initialRetryDelayMs: 500,
  maxRetryDelayMs: 5_000,
  maxRetryAfterSeconds: 60,
} as const;

function checkNumber(name: string, value: number, min: number, max: number): number {
  if (!Number.isInteger(value) || value < min || value > max)
    throw new RangeError(`${name} must be an integer from ${min} to ${max}, got ${value}`);
  return value;
}

/** One path segment: percent-encoded; dot segments would be resolved away by URL parsing. */
function segment(name: string, value: string): string {
  if (typeof value !== 'string' || value === '' || value === '.' || value === '..')
    throw new TypeError(`${name} must be a non-empty string other than "." and ".."`);
  return encodeURIComponent(value);
}

/** Retry-After: delay-seconds or an HTTP date; undefined when absent or unreadable. */
export function parseRetryAfter(value: string | undefined, nowMs: number): number | undefined {
  if (value === undefined) return undefined;
  const text = value.trim();
  if (/^[0-9]+$/.test(text)) return Number(text);
  const date = Date.parse(text);
  return Number.isNaN(date) ? undefined : Math.max(0, Math.ceil((date - nowMs) / 1000));
}

type Attempt = { ok: true; response: TransportResponse } | { ok: false; error: unknown; timedOut: boolean };

export class PaymentClient {
  readonly #base: string;
  readonly #appId: string;
  readonly #keyId: string;
  readonly #privateKey: KeyObject;
  #platformKeys: ReadonlyMap<string, KeyObject> | undefined;
  readonly #autoRefresh: boolean;
  readonly #minKeyRefreshIntervalMs: number;
  readonly #onPlatformKeysChange: ((keys: Record<string, string>) => void) | undefined;
  #lastRefreshAt = -Infinity;
  #refreshing: Promise<boolean> | null = null;
  readonly #requireSignedSuccess: boolean;
  readonly #maxRetries: number;
  readonly #timeoutMs: number;
  readonly #initialRetryDelayMs: number;
  readonly #maxRetryDelayMs: number;
  readonly #maxRetryAfterSeconds: number;
  readonly #transport: Transport;
  readonly #now: () => number;
  readonly #randomNonce: () => string;

  constructor(options: PaymentClientOptions) {
    const base = new URL(options.baseUrl);
    if (base.protocol !== 'https:' && base.protocol !== 'http:') throw new TypeError('baseUrl must be an http(s) URL');
    if (base.search !== '' || base.hash !== '' || base.username !== '' || base.password !== '') {
      throw new TypeError('baseUrl must not carry a query, a fragment or user info');
    }
    this.#base = base.origin + base.pathname.replace(/\/+$/, '');
    assertAppId(options.appId);
    assertKeyId(options.keyId);
    this.#appId = options.appId;
    this.#keyId = options.keyId;
    this.#privateKey = loadPrivateKey(options.privateKeyPem);
    this.#platformKeys = options.platformPublicKeys === undefined ? undefined : loadPublicKeys(options.platformPublicKeys);
    this.#autoRefresh = this.#platformKeys !== undefined && (options.refreshPlatformKeys ?? true);
    this.#minKeyRefreshIntervalMs = checkNumber('minKeyRefreshIntervalMs', options.minKeyRefreshIntervalMs ?? 60_000, 0, 86_400_000);
    this.#onPlatformKeysChange = options.onPlatformKeysChange;
    this.#requireSignedSuccess = options.requireSignedSuccess ?? false;
    if (this.#requireSignedSuccess && this.#platformKeys === undefined)
      throw new TypeError('requireSignedSuccess needs platformPublicKeys');
    this.#maxRetries = checkNumber('maxRetries', options.maxRetries ?? DEFAULTS.maxRetries, 0, 10);
    this.#timeoutMs = checkNumber('timeoutMs', options.timeoutMs ?? DEFAULTS.timeoutMs, 1, 600_000);
    this.#initialRetryDelayMs = checkNumber('initialRetryDelayMs', options.initialRetryDelayMs ?? DEFAULTS.initialRetryDelayMs, 0, 60_000);
    this.#maxRetryDelayMs = checkNumber('maxRetryDelayMs', options.maxRetryDelayMs ?? DEFAULTS.maxRetryDelayMs, 0, 600_000);
    this.#maxRetryAfterSeconds = checkNumber(
      'maxRetryAfterSeconds',
      options.maxRetryAfterSeconds ?? DEFAULTS.maxRetryAfterSeconds,
      0,
      3_600,
    );
    this.#transport = options.transport ?? createFetchTransport();
    this.#now = options.now ?? Date.now;
    this.#randomNonce = options.randomNonce ?? generateNonce;
  }

  /** POST /api/open/v1/payments: 201 created, 200 idempotent replay (`replayed: true`). */
  async createOrder(body: CreateOrderRequest, options: RequestOptions = {}): Promise<ApiResult<CreateOrderResponse>> {
    return this.request('POST', '/api/open/v1/payments', body, options);
  }

  /** POST /api/open/v1/payments/{outTradeNo}/attempts: fresh payment material; the old one is void. */
  async recreateAttempt(outTradeNo: string, options: RequestOptions = {}): Promise<ApiResult<RecreateAttemptResponse>> {
    return this.request('POST', `/api/open/v1/payments/${segment('outTradeNo', outTradeNo)}/attempts`, undefined, options);
  }

  /** GET /api/open/v1/payments/{outTradeNo}: the local ledger's projection; no material. */
  async queryOrder(outTradeNo: string, options: RequestOptions = {}): Promise<ApiResult<QueryOrderResponse>> {
    return this.request('GET', `/api/open/v1/payments/${segment('outTradeNo', outTradeNo)}`, undefined, options);
  }

  /**
   * POST /api/open/v1/payments/{outTradeNo}/close. On `closeState: PROVIDER_PAID_CONFLICT` or a
   * 409 OPEN_API_STATE_INVALID, query the order; do not retry the close.
   */
  async closeOrder(outTradeNo: string, options: RequestOptions = {}): Promise<ApiResult<CloseOrderResponse>> {
    return this.request('POST', `/api/open/v1/payments/${segment('outTradeNo', outTradeNo)}/close`, undefined, options);
  }

  /** POST /api/open/v1/refunds: 201 accepted, 200 idempotent replay. */
  async createRefund(body: CreateRefundRequest, options: RequestOptions = {}): Promise<ApiResult<CreateRefundResponse>> {
    return this.request('POST', '/api/open/v1/refunds', body, options);
  }

  /** GET /api/open/v1/refunds/{outRefundNo}. */
  async queryRefund(outRefundNo: string, options: RequestOptions = {}): Promise<ApiResult<QueryRefundResponse>> {
    return this.request('GET', `/api/open/v1/refunds/${segment('outRefundNo', outRefundNo)}`, undefined, options);
  }

  /** GET /api/open/v1/settlement/accounts. */
  async getSettlementAccounts(options: RequestOptions = {}): Promise<ApiResult<SettlementResponse>> {
    return this.request('GET', '/api/open/v1/settlement/accounts', undefined, options);
  }

  /**
   * GET /api/open/v1/statements/{settlementDate}: the statement of an Asia/Shanghai day (YYYY-MM-DD)
   * summed up: totals, and the SHA-256, size and path of its CSV file (gzip with `compression`).
   * 409 OPEN_API_STATE_INVALID while the day is not closed (ConflictError); 404 for a day too old.
   */
  async getStatement(
    settlementDate: string,
    o: { compression?: 'gzip' | 'none' } = {},
    options: RequestOptions = {},
  ): Promise<ApiResult<StatementResponse>> {
    const q = o.compression === undefined ? '' : `?compression=${encodeURIComponent(o.compression)}`;
    return this.request('GET', `/api/open/v1/statements/${segment('settlementDate', settlementDate)}${q}`, undefined, options);
  }

  /**
   * The statement's file, streamed into `destination` (which is not ended): the summary first
   * (getStatement), then the file, hashed as it is written. Resolves once every byte is written and
   * checked: its size and SHA-256 are the summary's, and the answer's signature (over that SHA-256,
   * decisions.md section 3) verifies when platform keys are configured. Anything else rejects
   * (UnexpectedResponseError, ResponseSignatureError): discard what was written. Uses the global
   * fetch (the `transport` option buffers bodies); `timeoutMs` bounds the wait for the answer's
   * headers, not the transfer.
   */
  async downloadStatement(
    settlementDate: string,
    destination: NodeJS.WritableStream,
    o: { compression?: 'gzip' | 'none' } & RequestOptions = {},
  ): Promise<StatementDownload> {
    const { signal } = o;
    const summary = (await this.getStatement(settlementDate, { compression: o.compression }, { signal })).body;
    if (!/^\/api\/open\/v1\/statements\/\d{4}-\d{2}-\d{2}\/file(\?compression=gzip)?$/.test(summary.filePath)) {
      throw new UnexpectedResponseError(`the summary names no statement file (${JSON.stringify(summary.filePath)})`, {
        status: 200,
        requestId: summary.requestId,
        headers: {},
        bodyText: '',
      });
    }
    const url = new URL(this.#base + summary.filePath);
    const requestId = o.requestId ?? generateRequestId();
    assertRequestId(requestId);
    for (let attempt = 1; ; attempt++) {
      signal?.throwIfAborted();
      const headers = await signRequestHeaders({
        method: 'GET',
        target: url.pathname + url.search,
        appId: this.#appId,
        keyId: this.#keyId,
        privateKey: this.#privateKey,
        body: undefined,
        contentType: undefined,
        requestId,
        nonce: this.#randomNonce(),
        now: this.#now,
      });
      const controller = new AbortController();
      const timer = setTimeout(
        () => controller.abort(new DOMException(`timed out after ${this.#timeoutMs} ms`, 'TimeoutError')),
        this.#timeoutMs,
      );
      const onAbort = (): void => controller.abort(signal?.reason);
      signal?.addEventListener('abort', onAbort, { once: true });
      try {
        let res: Response;
        try {
          res = await fetch(url, {
            method: 'GET',
            headers: { 'accept-encoding': 'identity', ...headers },
            redirect: 'manual',
            signal: controller.signal,
          });
        } catch (error) {
          if (signal?.aborted) throw signal.reason;
          // Nothing was written yet: tried again like any GET, with the same request id.
          if (attempt <= this.#maxRetries) {
            await pause(this.#backoffMs(attempt), signal);
            continue;
          }
          throw new NetworkError(`GET ${url.pathname} failed: ${String((error as Error)?.cause ?? error)}`, {
            requestId,
            timedOut: controller.signal.aborted,
            attempts: attempt,
            cause: error,
          });
        }
        clearTimeout(timer);
        const resHeaders: Record<string, string> = {};
        res.headers.forEach((value, name) => {
          resHeaders[name] = value;
        });
        if (res.status !== 200) {
          const body = Buffer.from(await res.arrayBuffer());
          const outcome = await this.#withKnownKey(
            () => this.#interpret<unknown>({ status: res.status, headers: resHeaders, body }, requestId, attempt),
            signal,
          );
          if (!('error' in outcome)) {
            throw new UnexpectedResponseError(`HTTP ${res.status} instead of the file`, {
              status: res.status,
              requestId,
              headers: resHeaders,
              bodyText: body.toString('utf8'),
            });
          }
          if ((res.status === 429 || res.status === 503) && attempt <= this.#maxRetries) {
            const retryAfter = parseRetryAfter(lookupHeaderValue(resHeaders, 'Retry-After'), this.#now());
            if (retryAfter === undefined || retryAfter <= this.#maxRetryAfterSeconds) {
              await pause(Math.max(this.#backoffMs(attempt), (retryAfter ?? 0) * 1000), signal);
              continue;
            }
          }
          throw outcome.error;
        }
        const hash = createHash('sha256');
        let size = 0;
        if (res.body !== null) {
          for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
            hash.update(chunk);
            size += chunk.byteLength;
            if (size > summary.sizeBytes) break;
            if (!destination.write(chunk)) await once(destination, 'drain');
          }
        }
        const sha256 = hash.digest('hex');
        if (size !== summary.sizeBytes || sha256 !== summary.sha256) {
          throw new UnexpectedResponseError(
            `the file is not the one its summary describes: ${size} bytes, SHA-256 ${sha256} (expected ${summary.sizeBytes}, ${summary.sha256})`,
            { status: res.status, requestId, headers: resHeaders, bodyText: '' },
          );
        }
        const signatureVerified = await this.#withKnownKey(
          () =>
            this.#platformKeys !== undefined &&
            verifyResponseSignature({
              status: 200,
              headers: resHeaders,
              bodySha256: sha256,
              platformPublicKeys: this.#platformKeys,
              expectedRequestId: requestId,
            }).signed,
          signal,
        );
        if (this.#requireSignedSuccess && !signatureVerified) {
          throw new ResponseSignatureError('MISSING_SIGNATURE', 'HTTP 200 without response signature headers', {
            status: 200,
            requestId,
            headers: resHeaders,
          });
        }
        return { summary, requestId, sha256, sizeBytes: size, signatureVerified, attempts: attempt };
      } finally {
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
      }
    }
  }

  /** GET /api/open/v1/events: the app's events, newest first (filters, and `cursor` from the previous page). */
  async listEvents(filter: EventFilter = {}, options: RequestOptions = {}): Promise<ApiResult<EventListResponse>> {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(filter)) if (v !== undefined) q.set(k, String(v));
    const text = q.toString(); // (not q.size: Node 18 has it from 18.16 only)
    return this.request('GET', `/api/open/v1/events${text === '' ? '' : `?${text}`}`, undefined, options);
  }

  /** Every event matching the filter, newest first, page after page. */
  async *iterateEvents(
    filter: Omit<EventFilter, 'cursor'> = {},
    options: Omit<RequestOptions, 'requestId'> = {},
  ): AsyncGenerator<EventLogEntry> {
    let cursor: string | undefined;
    do {
      const page = (await this.listEvents({ ...filter, ...(cursor !== undefined ? { cursor } : {}) }, options)).body;
      yield* page.events;
      cursor = page.nextCursor ?? undefined;
    } while (cursor !== undefined);
  }

  /** GET /api/open/v1/events/{eventId}: the event with its delivery attempts. */
  async getEvent(eventId: string, options: RequestOptions = {}): Promise<ApiResult<EventResponse>> {
    return this.request('GET', `/api/open/v1/events/${segment('eventId', eventId)}`, undefined, options);
  }

  /**
   * POST /api/open/v1/events/{eventId}/redeliveries: deliver the event again (202). Limited to once
   * a minute per event and 20 a minute per app: RateLimitedError with retryAfterSeconds beyond that.
   */
  async redeliverEvent(eventId: string, options: RequestOptions = {}): Promise<ApiResult<RedeliveryResponse>> {
    // Its limit is a minute per event: told at once (RateLimitedError), not waited out.
    return this.#call('POST', `/api/open/v1/events/${segment('eventId', eventId)}/redeliveries`, undefined, options, false);
  }

  /**
   * A signed call of any open-API path (already percent-encoded, query included). A POST always
   * carries Content-Type: application/json; `body` (when not undefined) is sent as JSON, or, given
   * as bytes (a Buffer or Uint8Array holding JSON text), sent and signed byte for byte. A GET
   * carries neither Content-Type nor body.
   */
  async request<T>(method: 'GET' | 'POST', path: string, body: unknown, options: RequestOptions = {}): Promise<ApiResult<T>> {
    return this.#call(method, path, body, options, true);
  }

  /** request(), and whether a 429 (or 503) is waited out and tried again (within the retry budget). */
  async #call<T>(
    method: 'GET' | 'POST',
    path: string,
    body: unknown,
    options: RequestOptions,
    waitOutRefusals: boolean,
  ): Promise<ApiResult<T>> {
    if (!path.startsWith('/')) throw new TypeError('path must start with "/"');
    if (method === 'GET' && body !== undefined) throw new TypeError('a GET request has no body');
    const url = new URL(this.#base + path);
    const target = url.pathname + url.search;
    const bodyBytes =
      body === undefined ? undefined : body instanceof Uint8Array ? Buffer.from(body) : Buffer.from(JSON.stringify(body), 'utf8');
    const contentType = method === 'POST' ? 'application/json' : undefined;
    const requestId = options.requestId ?? generateRequestId();
    assertRequestId(requestId);
    const { signal } = options;

    for (let attempt = 1; ; attempt++) {
      signal?.throwIfAborted();
      // Fresh timestamp, nonce and signature on every try; same request id and body bytes.
      const headers = await signRequestHeaders({
        method,
        target,
        appId: this.#appId,
        keyId: this.#keyId,
        privateKey: this.#privateKey,
        body: bodyBytes,
        contentType,
        requestId,
        nonce: this.#randomNonce(),
        now: this.#now,
      });
      const sent = await this.#send({ method, url: url.href, headers, body: bodyBytes }, signal);
      const canRetry = attempt <= this.#maxRetries;

      if (!sent.ok) {
        if (sent.error instanceof MpsError || signal?.aborted) throw sent.error;
        if (canRetry) {
          await pause(this.#backoffMs(attempt), signal);
          continue;
        }
        const reason = sent.timedOut ? `timed out after ${this.#timeoutMs} ms` : String((sent.error as Error)?.cause ?? sent.error);
        throw new NetworkError(`${method} ${target} failed after ${attempt} attempt(s): ${reason}`, {
          requestId,
          timedOut: sent.timedOut,
          attempts: attempt,
          cause: sent.error,
        });
      }

      const response = sent.response;
      const outcome = await this.#withKnownKey(() => this.#interpret<T>(response, requestId, attempt), signal);
      if (!('error' in outcome)) return outcome;
      const { status } = sent.response;
      if ((status === 429 || status === 503) && canRetry && waitOutRefusals) {
        const retryAfter = parseRetryAfter(lookupHeaderValue(sent.response.headers, 'Retry-After'), this.#now());
        if (retryAfter === undefined || retryAfter <= this.#maxRetryAfterSeconds) {
          await pause(Math.max(this.#backoffMs(attempt), (retryAfter ?? 0) * 1000), signal);
          continue;
        }
      }
      throw outcome.error;
    }
  }

  /** The platform keys this client trusts now, PEM by key id (none without platformPublicKeys). */
  get platformPublicKeys(): Record<string, string> {
    return this.#platformKeys === undefined ? {} : keysAsPem(this.#platformKeys);
  }

  /**
   * Reads the platform's keys (GET /api/open/v1/platform-keys) and trusts the new ones that a
   * trusted key endorses, once the answer's own signature verifies with a trusted key; an unsigned
   * or tampered answer changes nothing (ResponseSignatureError). Resolves true when a key was learnt.
   */
  async refreshPlatformKeys(options: { signal?: AbortSignal } = {}): Promise<boolean> {
    if (this.#platformKeys === undefined) throw new TypeError('refreshPlatformKeys needs platformPublicKeys (the pinned first key)');
    this.#refreshing ??= this.#refresh(options.signal).finally(() => {
      this.#refreshing = null;
    });
    return this.#refreshing;
  }

  async #refresh(signal: AbortSignal | undefined): Promise<boolean> {
    this.#lastRefreshAt = this.#now();
    const path = '/api/open/v1/platform-keys';
    const requestId = generateRequestId();
    const headers = await signRequestHeaders({
      method: 'GET',
      target: new URL(this.#base + path).pathname,
      appId: this.#appId,
      keyId: this.#keyId,
      privateKey: this.#privateKey,
      body: undefined,
      contentType: undefined,
      requestId,
      nonce: this.#randomNonce(),
      now: this.#now,
    });
    const sent = await this.#send({ method: 'GET', url: this.#base + path, headers, body: undefined }, signal);
    if (!sent.ok) {
      throw new NetworkError(`GET ${path} failed: ${String((sent.error as Error)?.cause ?? sent.error)}`, {
        requestId,
        timedOut: sent.timedOut,
        attempts: 1,
        cause: sent.error,
      });
    }
    const { status, headers: resHeaders, body } = sent.response;
    const unexpected = (why: string) =>
      new UnexpectedResponseError(why, { status, requestId, headers: resHeaders, bodyText: body.toString('utf8') });
    if (status !== 200) {
      const outcome = this.#interpret<unknown>(sent.response, requestId, 1);
      throw 'error' in outcome ? outcome.error : unexpected(`HTTP ${status} from ${path}`);
    }
    let listing: unknown;
    try {
      listing = JSON.parse(body.toString('utf8'));
    } catch {
      throw unexpected('the platform keys are not JSON');
    }
    if (!isPlatformKeysResponse(listing)) throw unexpected('the platform keys do not have their shape');
    const trusted = this.#platformKeys!;
    const extended = extendTrust(trusted, listing);
    // The answer itself must be signed, by a key trusted now: otherwise nothing of it is used.
    const v = verifyResponseSignature({ status, headers: resHeaders, body, platformPublicKeys: extended, expectedRequestId: requestId });
    if (!v.signed) {
      throw new ResponseSignatureError('MISSING_SIGNATURE', 'the platform keys were answered unsigned: nothing learnt', {
        status,
        requestId,
        headers: resHeaders,
      });
    }
    if (extended.size === trusted.size) return false;
    this.#platformKeys = extended;
    this.#onPlatformKeysChange?.(keysAsPem(extended));
    return true;
  }

  /**
   * Runs a verification; when it fails only because the key id is unknown, reads the platform's
   * keys (not more often than minKeyRefreshIntervalMs) and runs it once more with what was learnt.
   */
  async #withKnownKey<R>(verify: () => R, signal: AbortSignal | undefined): Promise<R> {
    try {
      return verify();
    } catch (err) {
      const unknownKey =
        (err instanceof ResponseSignatureError && err.reason === 'UNKNOWN_KEY_ID') ||
        (err instanceof NotificationVerificationError && err.reason === 'UNKNOWN_KEY_ID');
      if (!unknownKey || !this.#autoRefresh) throw err;
      if (this.#refreshing === null && this.#now() - this.#lastRefreshAt < this.#minKeyRefreshIntervalMs) throw err;
      try {
        await this.refreshPlatformKeys({ signal });
      } catch {
        throw err; // nothing learnt: the key is still unknown
      }
      return verify();
    }
  }

  /**
   * Verifies an event notification with the trusted platform keys (webhooks.ts verifyNotification),
   * learning the platform's new keys first when it is signed with a key id not known yet.
   */
  async verifyNotification(input: Omit<VerifyNotificationInput, 'platformPublicKeys'>): Promise<WebhookEventPayload> {
    if (this.#platformKeys === undefined) throw new TypeError('verifyNotification needs platformPublicKeys');
    return this.#withKnownKey(() => verifyNotification({ ...input, platformPublicKeys: this.#platformKeys! }), undefined);
  }

  /** Capped exponential backoff with jitter (50-100% of the step). */
  #backoffMs(retryNumber: number): number {
    const step = Math.min(this.#maxRetryDelayMs, this.#initialRetryDelayMs * 2 ** (retryNumber - 1));
    return Math.round(step * (0.5 + Math.random() / 2));
  }

  /** One try through the transport, bounded by timeoutMs and the caller's signal. */
  async #send(req: Omit<TransportRequest, 'signal' | 'timeoutMs'>, userSignal: AbortSignal | undefined): Promise<Attempt> {
    const controller = new AbortController();
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      controller.abort(new DOMException(`timed out after ${this.#timeoutMs} ms`, 'TimeoutError'));
    }, this.#timeoutMs);
    const onUserAbort = (): void => controller.abort(userSignal?.reason);
    userSignal?.addEventListener('abort', onUserAbort, { once: true });
    try {
      // The race makes the timeout hold even for a transport that ignores the signal.
      const response = await new Promise<TransportResponse>((resolve, reject) => {
        controller.signal.addEventListener('abort', () => reject(controller.signal.reason), { once: true });
        this.#transport({ ...req, signal: controller.signal, timeoutMs: this.#timeoutMs }).then(resolve, reject);
      });
      return { ok: true, response };
    } catch (error) {
      return { ok: false, error: userSignal?.aborted ? userSignal.reason : error, timedOut };
    } finally {
      clearTimeout(timer);
      userSignal?.removeEventListener('abort', onUserAbort);
    }
  }

  /** Verifies the answer's signature, then turns it into a result or the error to throw. */
  #interpret<T>(response: TransportResponse, requestId: string, attempts: number): ApiResult<T> | { error: MpsError } {
    const { status, headers, body } = response;
    // Throws ResponseSignatureError: a tampered answer is never parsed, and never retried.
    const signatureVerified =
      this.#platformKeys !== undefined &&
      verifyResponseSignature({ status, headers, body, platformPublicKeys: this.#platformKeys, expectedRequestId: requestId }).signed;

    const text = body.toString('utf8');
    let parsed: unknown;
    try {
      parsed = text === '' ? undefined : JSON.parse(text);
    } catch {
      parsed = undefined;
    }
    const isObject = typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed);
    if (status >= 200 && status < 300) {
      if (this.#requireSignedSuccess && !signatureVerified) {
        throw new ResponseSignatureError('MISSING_SIGNATURE', `HTTP ${status} without response signature headers`, {
          status,
          requestId,
          headers,
        });
      }
      if (!isObject) {
        return {
          error: new UnexpectedResponseError(`HTTP ${status} with a body that is not a JSON object`, {
            status,
            requestId,
            headers,
            bodyText: text,
          }),
        };
      }
      return { status, requestId, body: parsed as T, headers, signatureVerified, attempts };
    }
    const envelope = (isObject ? parsed : {}) as { code?: unknown; message?: unknown; requestId?: unknown; details?: unknown };
    if (typeof envelope.code !== 'string') {
      return {
        error: new UnexpectedResponseError(`HTTP ${status} without a failure envelope`, { status, requestId, headers, bodyText: text }),
      };
    }
    const error: PaymentApiError = apiErrorFor({
      status,
      code: envelope.code,
      message: typeof envelope.message === 'string' ? envelope.message : '',
      requestId:
        typeof envelope.requestId === 'string' && envelope.requestId !== ''
          ? envelope.requestId
          : (lookupHeaderValue(headers, HEADERS.requestId) ?? ''),
      clientRequestId: requestId,
      details:
        typeof envelope.details === 'object' && envelope.details !== null ? (envelope.details as Record<string, unknown>) : undefined,
      headers,
      body: parsed,
      retryAfterSeconds: parseRetryAfter(lookupHeaderValue(headers, 'Retry-After'), this.#now()),
    });
    return { error };
  }
}

function lookupHeaderValue(headers: Record<string, string>, name: string): string | undefined {
  const found = lookupHeader(headers, name);
  return found.ok ? found.value : undefined;
}
