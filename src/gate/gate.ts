/**
 * The open-API gate (decisions.md section 2), in its exact order:
 *  1 body guard  2 platform source IP  3 the six headers  4 timestamp/app/key/signature
 *  5 nonce  6 app IP allowlist  7 Content-Type on POST  8 rate limit  9 (route) replay, schema, business.
 * Every open response leaves through sendOpen(), which applies the X-SVC-Request-Id and
 * response-signature rules of how far the request got (decisions.md section 3). Step 9 is the open
 * surface's (src/http/open.ts).
 */
import { type KeyObject, createPublicKey, verify } from 'node:crypto';
import { Readable } from 'node:stream';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { responseSigningString, normalizeContentType, requestSigningString, sha256Hex } from '@mps/sdk/signing';
import type { Clock } from '../domain/clock.ts';
import { OPEN_API_ERRORS, type OpenApiCode } from './open-errors.ts';
import { newId } from '../domain/ids.ts';
import { CidrList } from '../net/ip.ts';
import { resolveSource } from '../net/source-ip.ts';
import { type PlatformKeyRing, SigningKeyUnavailableError } from '../platform/keys.ts';
import type { AppRow } from '../store/merchants.ts';
import type { AuthCache } from './auth-cache.ts';
import type { AuthFailureTracker } from './auth-failures.ts';
import { BodyError, type ParsedBody, parseJsonBody } from './body.ts';
import { type SignedHeaders, checkSignedHeaders, isStrictBase64 } from './headers.ts';
import type { IpPolicyHolder } from './ip-policy.ts';
import type { NonceStore } from './nonce-store.ts';
import type { AppRateLimiter } from './rate-limit.ts';
import { type RefusalPacer, paceKey } from './refusal-pacer.ts';

export const BODY_LIMIT_BYTES = 65_536;
export const TIMESTAMP_WINDOW_SECONDS = 300;

export interface GateContext {
  /** Set once step 3 passed: the merchant's X-SVC-Request-Id. */
  headers: SignedHeaders | null;
  /** Step 6 passed: responses are signed from here on. */
  signed: boolean;
  contentType: string | undefined;
  body: ParsedBody | undefined;
  app: AppRow | null;
  merchantEntityType: 'INDIVIDUAL' | 'CORPORATE' | null;
  clientKey: string | null;
  /** The service's clock when the request arrived (before the gate). */
  receivedAtMs: number;
}

declare module 'fastify' {
  interface FastifyRequest {
    gate: GateContext;
  }
}

/** What the gate works with (the service's wiring provides it). */
export interface GateDeps {
  clock: Clock;
  keys: PlatformKeyRing;
  ipPolicy: IpPolicyHolder;
  authFailures: AuthFailureTracker;
  authCache: AuthCache;
  nonces: NonceStore;
  allowlists: AllowlistCache;
  rateLimiter: AppRateLimiter;
  refusals: RefusalPacer;
}

/** An open-API answer before it is serialized: the gate's refusals, and the results and refusals of step 9. */
export interface OpenAnswer {
  status: number;
  body: Record<string, unknown>;
  headers?: Record<string, string>;
}

/** The open API's failure envelope {code, message, requestId[, details]} (the one builder of it). */
export function failureAnswer(code: OpenApiCode, requestId: string, message?: string, details?: Record<string, unknown>): OpenAnswer {
  const body: Record<string, unknown> = { code, message: message ?? OPEN_API_ERRORS[code].message, requestId };
  if (details !== undefined) body.details = details;
  return { status: OPEN_API_ERRORS[code].status, body };
}

/** The failure envelope of a request at the gate: a gw_ id only when no X-SVC-Request-Id was accepted. */
export function failure(req: FastifyRequest, code: OpenApiCode, message?: string, details?: Record<string, unknown>): OpenAnswer {
  return failureAnswer(code, req.gate.headers?.requestId ?? newId.gateway(), message, details);
}

/** decisions.md section 3: the answer when the platform signing key is unavailable (sent unsigned). */
function keyUnavailableBody(): Record<string, unknown> {
  return { code: 'OPEN_API_GUARD_UNAVAILABLE', message: OPEN_API_ERRORS.OPEN_API_GUARD_UNAVAILABLE.message, requestId: '' };
}

/** Serializes and sends an open-API response with the header and signature rules of section 3. */
export async function sendOpen(
  svc: GateDeps,
  req: FastifyRequest,
  reply: FastifyReply,
  status: number,
  payload: string,
  extra?: Record<string, string>,
): Promise<FastifyReply> {
  let code: string | undefined;
  if (status >= 400) {
    // For metrics: the failure envelope starts with its code (replays included).
    const m = /^\{"code":"([A-Z_]{1,64})"/.exec(payload);
    if (m) (req as { openFailureCode?: string }).openFailureCode = code = m[1];
  }
  // (pino's logger; with logging off, Fastify's stand-in has neither method.)
  const log = req.log as typeof req.log & { isLevelEnabled?(l: string): boolean; setBindings?(b: Record<string, string>): void };
  if (log.setBindings !== undefined && log.isLevelEnabled?.('info') === true) {
    // The request's log lines ("request completed") name the request as the merchant sees it: its
    // X-SVC-Request-Id (or the gw_ id of an early rejection) and the failure code.
    const id = req.gate.headers?.requestId ?? /"requestId":"(gw_[A-Za-z0-9]{1,64})"/.exec(payload)?.[1];
    log.setBindings({ ...(id !== undefined ? { requestId: id } : {}), ...(code !== undefined ? { code } : {}) });
  }
  reply.code(status).header('content-type', 'application/json; charset=utf-8').header('cache-control', 'no-store');
  if (extra) for (const [k, v] of Object.entries(extra)) reply.header(k, v);
  if (!(await identifyAndSign(svc, req, reply, status, () => sha256Hex(payload)))) return reply;
  return reply.send(payload);
}

/**
 * A successful answer whose body is a file streamed as it is made (a statement): its SHA-256 and
 * size are known beforehand, so the answer is signed over them (section 3's BODY_SHA256) before
 * the first byte leaves, and carries its Content-Length. The body stream must deliver exactly those
 * bytes; if it fails, the connection is cut, so the receiver never holds a complete other file.
 */
export async function sendOpenStream(
  svc: GateDeps,
  req: FastifyRequest,
  reply: FastifyReply,
  file: { contentType: string; sha256: string; sizeBytes: number; headers: Record<string, string> },
  body: Readable,
): Promise<FastifyReply> {
  reply.code(200).header('cache-control', 'no-store');
  if (!(await identifyAndSign(svc, req, reply, 200, () => file.sha256))) {
    body.destroy();
    return reply;
  }
  reply.header('content-type', file.contentType).header('content-length', String(file.sizeBytes));
  for (const [k, v] of Object.entries(file.headers)) reply.header(k, v);
  body.on('error', (err) => {
    req.log.error({ err }, 'streamed answer failed; connection cut');
    req.raw.socket?.destroy();
  });
  return reply.send(body);
}

/**
 * Section 3's headers of an answer: X-SVC-Request-Id once step 3 has passed, and the response
 * signature over the body's SHA-256 once the gate signs (step 6 passed). Answers false when the
 * signing key was unavailable: section 3's 503 has been sent instead (unsigned, requestId "").
 */
async function identifyAndSign(
  svc: GateDeps,
  req: FastifyRequest,
  reply: FastifyReply,
  status: number,
  bodySha256: () => string,
): Promise<boolean> {
  const g = req.gate;
  const requestId = g.headers?.requestId;
  if (requestId !== undefined) reply.header('X-SVC-Request-Id', requestId);
  if (!g.signed || requestId === undefined) return true;
  const ts = String(Math.floor(svc.clock.now() / 1000));
  const nonce = newId.nonce32();
  try {
    const s = await svc.keys.sign(responseSigningString({ timestamp: ts, nonce, requestId, status, bodySha256: bodySha256() }));
    reply
      .header('X-SVC-Response-Sign', s.signature)
      .header('X-SVC-Response-Key-Id', s.keyId)
      .header('X-SVC-Response-Timestamp', ts)
      .header('X-SVC-Response-Nonce', nonce);
    return true;
  } catch (err) {
    if (!(err instanceof SigningKeyUnavailableError)) req.log.error({ err }, 'response signing failed');
    else req.log.error('platform signing key unavailable');
    // decisions.md section 3: 503, unsigned, requestId "" in the body, the value in the header.
    reply.code(503).header('content-type', 'application/json; charset=utf-8');
    reply.send(JSON.stringify(keyUnavailableBody()));
    return false;
  }
}

export function sendResult(svc: GateDeps, req: FastifyRequest, reply: FastifyReply, r: OpenAnswer): Promise<FastifyReply> {
  return sendOpen(svc, req, reply, r.status, JSON.stringify(r.body), r.headers);
}

/** After a 413, how much more of the body is read and thrown away, and for how long, before the connection is cut. */
export const DISCARD_LIMIT_BYTES = 16 * 1024 * 1024;
export const DISCARD_LIMIT_MS = 10_000;

type BodyStream = NodeJS.ReadableStream & { socket?: { destroy?: () => void } | null };

/**
 * The rest of an oversized body: read and discarded, so the client (which may still be sending)
 * reads the 413 instead of a reset and a keep-alive connection stays usable. Bounded: past
 * DISCARD_LIMIT_BYTES or DISCARD_LIMIT_MS the connection is closed (the 413 went out long before).
 */
function discardRest(stream: BodyStream): void {
  let discarded = 0;
  const cut = () => {
    cleanup();
    const socket = stream.socket;
    if (socket && typeof socket.destroy === 'function') socket.destroy();
  };
  const onData = (chunk: Buffer) => {
    discarded += chunk.length;
    if (discarded > DISCARD_LIMIT_BYTES) cut();
  };
  const timer = setTimeout(cut, DISCARD_LIMIT_MS);
  timer.unref();
  const cleanup = () => {
    clearTimeout(timer);
    stream.removeListener('data', onData);
    stream.removeListener('end', cleanup);
    stream.removeListener('close', cleanup);
    stream.removeListener('error', cleanup);
  };
  stream.on('data', onData);
  stream.on('end', cleanup);
  stream.on('close', cleanup);
  stream.on('error', cleanup);
  stream.resume();
}

/** Reads the raw body with a streaming limit, without destroying the connection on overflow. */
function readBody(stream: BodyStream, declaredLength: string | undefined): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    if (declaredLength !== undefined && /^\d+$/.test(declaredLength) && Number(declaredLength) > BODY_LIMIT_BYTES) {
      // The answer goes out at once; what arrives is discarded.
      discardRest(stream);
      reject(new BodyError('TOO_LARGE', OPEN_API_ERRORS.OPEN_API_BODY_TOO_LARGE.message));
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > BODY_LIMIT_BYTES) {
        cleanup();
        discardRest(stream);
        reject(new BodyError('TOO_LARGE', OPEN_API_ERRORS.OPEN_API_BODY_TOO_LARGE.message));
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = () => {
      cleanup();
      resolve(Buffer.concat(chunks, size));
    };
    const onError = (err: Error) => {
      cleanup();
      reject(err);
    };
    const cleanup = () => {
      stream.removeListener('data', onData);
      stream.removeListener('end', onEnd);
      stream.removeListener('error', onError);
    };
    stream.on('data', onData);
    stream.on('end', onEnd);
    stream.on('error', onError);
  });
}

/** The forwarding headers of a request's raw header list, one entry per line received (also the back office's source address). */
export function forwardingHeaders(raw: readonly string[]): { xForwardedFor: string[]; forwarded: string[]; xRealIp: string[] } {
  const out = { xForwardedFor: [] as string[], forwarded: [] as string[], xRealIp: [] as string[] };
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const n = raw[i]!.toLowerCase();
    if (n === 'x-forwarded-for') out.xForwardedFor.push(raw[i + 1]!);
    else if (n === 'forwarded') out.forwarded.push(raw[i + 1]!);
    else if (n === 'x-real-ip') out.xRealIp.push(raw[i + 1]!);
  }
  return out;
}

/**
 * The path and query of a request target: itself in origin form (`/path?query`, what clients
 * send), the part after the authority in absolute form (`http://host:port/path?query`, what a
 * client sends through a forward proxy; RFC 9112 section 3.2.2: a server accepts both), "/" when
 * the absolute form has no path.
 */
export function originForm(target: string): string {
  const m = /^[A-Za-z][A-Za-z0-9+.-]*:\/\/[^/?#]*/.exec(target);
  if (m === null) return target;
  const rest = target.slice(m[0].length);
  return rest.startsWith('/') ? rest : `/${rest}`;
}

/** The path and query exactly as sent (before any routing rewrite, app.ts `rewriteUrl`), in origin form. */
export function requestTarget(req: FastifyRequest): string {
  return originForm((req.raw as { originalUrl?: string }).originalUrl ?? req.raw.url ?? '');
}

/** Installs the gate on the open scope: body guard (preParsing) and steps 2-8 (preValidation). */
export function installGate(scope: FastifyInstance, svc: GateDeps): void {
  scope.decorateRequest('gate', null as unknown as GateContext);

  scope.addHook('onRequest', async (req) => {
    req.gate = {
      headers: null,
      signed: false,
      contentType: undefined,
      body: undefined,
      app: null,
      merchantEntityType: null,
      clientKey: null,
      receivedAtMs: svc.clock.now(),
    };
  });

  // Step 1: the body guard, before any header is looked at, for every method.
  scope.addHook('preParsing', async (req, _reply, payload) => {
    const h = req.headers;
    req.gate.contentType = typeof h['content-type'] === 'string' ? h['content-type'] : undefined;
    const raw = await readBody(payload, typeof h['content-length'] === 'string' ? h['content-length'] : undefined);
    req.gate.body = parseJsonBody(raw, { ignored: (req.routeOptions.config as { readsBody?: boolean }).readsBody !== true });
    // The body is consumed here; Fastify sees an empty one and no media type to judge.
    delete h['content-type'];
    delete h['transfer-encoding'];
    h['content-length'] = '0';
    return Readable.from([]);
  });

  scope.addHook('preValidation', async (req, reply) => {
    const r = await runGate(svc, req);
    if (r !== null) {
      await sendRefusal(svc, req, reply, r);
      return reply;
    }
  });

  scope.setErrorHandler(async (err: Error & { code?: string; statusCode?: number }, req, reply) => {
    if (!req.gate) return reply.code(503).send({ code: 'OPEN_API_GUARD_UNAVAILABLE', message: 'unavailable', requestId: '' });
    if (err instanceof BodyError) {
      return sendRefusal(
        svc,
        req,
        reply,
        failure(req, err.kind === 'TOO_LARGE' ? 'OPEN_API_BODY_TOO_LARGE' : 'OPEN_API_BODY_INVALID', err.message),
      );
    }
    if (err.code === 'FST_ERR_CTP_BODY_TOO_LARGE') return sendRefusal(svc, req, reply, failure(req, 'OPEN_API_BODY_TOO_LARGE'));
    // Client aborts and framework faults end here too: never a 500 (seed "Common rules").
    if (req.raw.aborted || err.code === 'ECONNRESET') req.log.info({ err: err.message }, 'client aborted the request');
    else req.log.error({ err }, 'open API fault');
    return sendResult(svc, req, reply, failure(req, 'OPEN_API_GUARD_UNAVAILABLE'));
  });
}

/**
 * The refusals paced per source address: those given before the request is known to come from an
 * app (steps 1 to 4, and 6's), and the rate limit's (step 8) to a client that keeps asking past it.
 */
const PACED: ReadonlySet<string> = new Set<OpenApiCode>([
  'OPEN_API_BODY_INVALID',
  'OPEN_API_BODY_TOO_LARGE',
  'OPEN_API_SOURCE_IP_REJECTED',
  'OPEN_API_HEADER_INVALID',
  'OPEN_API_AUTH_FAILED',
  'OPEN_API_RATE_LIMITED',
]);

/**
 * A refusal of the gate, sent as sendResult sends it; a paced one (PACED) is held first when its
 * source address is past its budget (refusal-pacer.ts), its connection paused meanwhile so that
 * nothing more is read from it. The answer is unchanged (a 429 keeps the Retry-After of its window).
 */
async function sendRefusal(svc: GateDeps, req: FastifyRequest, reply: FastifyReply, r: OpenAnswer): Promise<FastifyReply> {
  if (PACED.has(r.body.code as string)) {
    const delayMs = svc.refusals.delayFor(await paceKeyOf(svc, req));
    if (delayMs > 0) await held(svc.refusals, req, delayMs);
  }
  return sendResult(svc, req, reply, r);
}

/** The address a request is paced by: the client as step 2 resolves it (without its blocks), else the TCP peer. */
async function paceKeyOf(svc: GateDeps, req: FastifyRequest): Promise<string> {
  if (req.gate.clientKey !== null) return paceKey(req.gate.clientKey);
  const peer = req.raw.socket?.remoteAddress;
  const src = resolveSource(peer, forwardingHeaders(req.raw.rawHeaders), await svc.ipPolicy.current());
  return paceKey(src.ok ? src.key : (peer ?? ''));
}

type PausableSocket = { pause?: () => void; resume?: () => void; destroyed?: boolean; _paused?: boolean } | null | undefined;

/** Waits `delayMs` with the request's connection paused (resumed after, unless Node paused it for its own reasons). */
function held(pacer: RefusalPacer, req: FastifyRequest, delayMs: number): Promise<void> {
  const socket = req.raw.socket as PausableSocket;
  socket?.pause?.();
  return new Promise((resolve) =>
    pacer.hold(delayMs, () => {
      if (socket && socket.destroyed !== true && socket._paused !== true) socket.resume?.();
      resolve();
    }),
  );
}

async function runGate(svc: GateDeps, req: FastifyRequest): Promise<OpenAnswer | null> {
  const g = req.gate;
  const raw = req.raw.rawHeaders;

  // Step 2: platform source-IP policy. The observed address is never echoed.
  const policy = await svc.ipPolicy.current();
  const src = resolveSource(req.raw.socket.remoteAddress, forwardingHeaders(raw), policy, (k) => svc.authFailures.isBlocked(k));
  if (!src.ok) return failure(req, 'OPEN_API_SOURCE_IP_REJECTED', undefined, { reason: src.reason });
  g.clientKey = src.key;

  // Step 3: the six headers.
  const hc = checkSignedHeaders(raw);
  if (!hc.ok) {
    return failure(req, 'OPEN_API_HEADER_INVALID', hc.repeated ? `The header ${hc.repeated} was sent more than once.` : undefined);
  }
  const h = hc.headers;
  g.headers = h;

  // Step 4: time window, app and key known and active, signature. One answer for every failure.
  const authFailed = () => {
    svc.authFailures.recordFailure(src.key);
    return failure(req, 'OPEN_API_AUTH_FAILED');
  };
  const nowSec = Math.floor(svc.clock.now() / 1000);
  if (Math.abs(nowSec - Number(h.timestamp)) > TIMESTAMP_WINDOW_SECONDS) return authFailed();
  // Both lookups always, and a verification even when the app or key is unknown: the answer and
  // its timing do not reveal whether the app or the key exists.
  const [authApp, authKey] = await Promise.all([svc.authCache.app(h.appId), svc.authCache.key(h.appId, h.keyId)]);
  // A key past its validity (the end of a rotation's overlap, docs/portal.md) is refused like an unknown one.
  const key = authKey !== null && (authKey.validUntilMs === null || svc.clock.now() < authKey.validUntilMs) ? authKey.key : null;
  const known = authApp !== null && authApp.app.status === 'ACTIVE' && key !== null;
  if (!isStrictBase64(h.sign)) return authFailed();
  const signingString = requestSigningString({
    method: req.method,
    target: requestTarget(req),
    appId: h.appId,
    keyId: h.keyId,
    timestamp: h.timestamp,
    nonce: h.nonce,
    requestId: h.requestId,
    contentType: g.contentType,
    body: g.body?.raw ?? Buffer.alloc(0),
  });
  // On libuv's pool, not the event loop: the main thread is the serial stage of every request
  // (docs/performance.md, "Signature verification on libuv's pool": query +4-16% at peak, create
  // p99 lower, in A/B runs).
  const good = await verifyOnPool(signingString, key ?? decoyKey(), h.sign);
  if (!good || !known || !authApp) return authFailed();
  svc.authFailures.recordSuccess(src.key);
  g.app = authApp.app;
  g.merchantEntityType = authApp.merchantEntityType;

  // Step 5: nonce replay, per app.
  if (!(await svc.nonces.claim(h.appId, h.nonce))) return failure(req, 'OPEN_API_NONCE_REPLAYED');

  // Step 6: the application's IP allowlist (the same resolved address as step 2): three fields only.
  if (authApp.app.ipAllowlist.length > 0 && !svc.allowlists.get(authApp.app.ipAllowlist).contains(src.address)) {
    return failure(req, 'OPEN_API_SOURCE_IP_REJECTED');
  }
  // From here every answer is signed (section 3). With the signing key unavailable the answer is
  // section 3's 503 (unsigned, requestId "" in the body, the id in the header): given here, before
  // the operation runs and before a rate-limit token is spent, rather than after performing the
  // operation and failing to sign its answer; and left unsigned even if the key returns meanwhile.
  if (svc.keys.current === null) {
    return {
      status: 503,
      body: keyUnavailableBody(),
    };
  }
  g.signed = true;

  // Step 7: Content-Type on POST.
  if (req.method === 'POST' && normalizeContentType(g.contentType) !== 'application/json') {
    return failure(req, 'OPEN_API_CONTENT_TYPE_INVALID');
  }

  // Step 8: per-app rate limit.
  const rl = await svc.rateLimiter.consume(h.appId, authApp.app.rateLimitPerSecond);
  if (!rl.allowed) {
    const r = failure(req, 'OPEN_API_RATE_LIMITED');
    r.headers = { 'Retry-After': String(rl.retryAfterSeconds) };
    return r;
  }
  return null;
}

/** RSASSA-PKCS1-v1_5 / SHA-256 verification on libuv's thread pool; false on any error. */
function verifyOnPool(signingString: string, key: KeyObject, signB64: string): Promise<boolean> {
  return new Promise((resolve) => {
    try {
      verify('sha256', Buffer.from(signingString, 'utf8'), key, Buffer.from(signB64, 'base64'), (err, ok) => resolve(!err && ok));
    } catch {
      resolve(false);
    }
  });
}

/**
 * A public key nobody holds the private half of: verified against when the app or key is unknown,
 * so that such a failure costs the same as a bad signature.
 */
const DECOY_PUBLIC_KEY_PEM = `-----BEGIN PUBLIC KEY-----
MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA3z2R4mGuyjJOAXDo/LYW
04vS2x4T+rYR9vsCU0BrRFSK4eKtcYd0aUTUpujmE7Y3pBBCHmp6pzutc9djT9Q9
E6vFrZlDJRW1iW0q7hNEEJacNy6C9zgyDCwJQvtmG55PNFQDvJ+GpY1e8X1h5PmO
jTSe0JTeo1KKwyUqwPQ3BMQ+dPKv+mXin1VHbh5XpFEmtDLGtjgL7e2Ed9LFgeTF
rrI2DjP9yiJWzx9fgEdto+cKCkwdNL9S+Qo2YskSYUdlz46Muc3FZR1WTh6KW2tc
zUBwilVfCTDrVY65N8momM4VP1+ozAUuI2/ot/y9u9hNBB/RKV/OZ5oo8gpLS/Xy
qwIDAQAB
-----END PUBLIC KEY-----
`;
let decoy: KeyObject | null = null;
function decoyKey(): KeyObject {
  decoy ??= createPublicKey(DECOY_PUBLIC_KEY_PEM);
  return decoy;
}

/** Compiled app allowlists, cached by content. */
export class AllowlistCache {
  readonly #m = new Map<string, CidrList>();
  get(entries: string[]): CidrList {
    const k = entries.join(',');
    let l = this.#m.get(k);
    if (!l) {
      l = CidrList.parse(entries);
      if (this.#m.size > 5000) this.#m.clear();
      this.#m.set(k, l);
    }
    return l;
  }
}
