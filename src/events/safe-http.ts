/**
 * Outgoing notification requests that cannot be turned against the platform's own network:
 * - the URL is checked again at every delivery (checkNotifyUrl: https, or plain http to a loopback
 *   host where loopback is allowed; no user info);
 * - the host is resolved once and every address must be allowed (public unicast; loopback only
 *   where loopback or private targets are allowed; other private, link-local and reserved
 *   ranges only when private targets are allowed; unspecified, multicast and broadcast never);
 * - the connection goes to the address that was checked (a custom `lookup` returns it), so a DNS
 *   answer that changes between check and connect (rebinding) cannot move the request;
 * - redirects are never followed (node:http does not follow them; a 3xx is just a failed attempt);
 * - one deadline covers resolution, connection, TLS, request and response; the response body is
 *   read up to a size cap, then the connection is closed.
 */
import { promises as dns } from 'node:dns';
import http from 'node:http';
import https from 'node:https';
import type { LookupFunction } from 'node:net';
import { isIP } from 'node:net';
import { isPublicIp, normalizeIp, parseIpStrict } from '../net/ip.ts';
import { type NotifyUrlPolicy, checkNotifyUrl } from './notify-url.ts';

export interface ResolvedAddress {
  address: string;
  family: number;
}

/** Resolves a host name to all its addresses (injectable for tests). */
export type Resolver = (host: string) => Promise<readonly ResolvedAddress[]>;

/**
 * At most `max` lookups of `resolver` at once; the others wait their turn, in order. A slot is
 * freed when the underlying lookup ends, not when its caller gives up, so the bound holds for the
 * work actually running.
 */
export function limitResolver(resolver: Resolver, max: number): Resolver {
  let running = 0;
  const waiting: Array<() => void> = [];
  const next = () => {
    running--;
    waiting.shift()?.();
  };
  return (host) =>
    new Promise((resolve, reject) => {
      const start = () => {
        running++;
        resolver(host).then(resolve, reject).finally(next);
      };
      if (running < max && waiting.length === 0) start();
      else waiting.push(start);
    });
}

/**
 * Answers of `resolver` kept for `ttlMs`, failures for `failureTtlMs` (at most `max` names, the
 * oldest dropped first); callers asking for a name already being looked up share that lookup. The
 * addresses are still checked against the policy at every attempt.
 */
export function cacheResolver(
  resolver: Resolver,
  ttlMs: number,
  max: number,
  now: () => number = Date.now,
  failureTtlMs: number = Math.min(ttlMs, 10_000),
): Resolver {
  type Entry = { at: number; addresses?: readonly ResolvedAddress[]; error?: unknown };
  const kept = new Map<string, Entry>();
  const running = new Map<string, Promise<readonly ResolvedAddress[]>>();
  const keep = (host: string, e: Entry) => {
    kept.delete(host);
    kept.set(host, e);
    if (kept.size > max) kept.delete(kept.keys().next().value!);
  };
  return (host) => {
    const hit = kept.get(host);
    if (hit) {
      const age = now() - hit.at;
      if (hit.addresses && age < ttlMs) return Promise.resolve(hit.addresses);
      if (hit.error !== undefined && age < failureTtlMs) return Promise.reject(hit.error);
    }
    let p = running.get(host);
    if (!p) {
      p = resolver(host).then(
        (addresses) => {
          keep(host, { at: now(), addresses });
          return addresses;
        },
        (error: unknown) => {
          keep(host, { at: now(), error });
          throw error;
        },
      );
      running.set(host, p);
      void p.then(
        () => running.delete(host),
        () => running.delete(host),
      );
    }
    return p;
  };
}

/** Lookups of the system resolver running at once: two of libuv's four threads at most, so two stay for signing. */
export const LOOKUP_CONCURRENCY = 2;
/** How long a resolved name is reused. */
export const LOOKUP_TTL_MS = 30_000;

/**
 * The system's resolver (getaddrinfo: /etc/hosts, then DNS). getaddrinfo blocks a thread of libuv's
 * pool for as long as the answer takes (seconds when a name server does not answer), and that
 * pool also verifies every request and signs every response: at most two lookups at a time, so
 * slow names can hold at most two of its four threads and never stall the open API. A name being
 * looked up is looked up once for all its callers; answers are reused for 30 s and failures for
 * 10 s, so a dead name server costs one slot per 10 s, not one per delivery (docs/events.md).
 */
export const systemResolver: Resolver = cacheResolver(
  limitResolver((host) => dns.lookup(host, { all: true, order: 'verbatim' }), LOOKUP_CONCURRENCY),
  LOOKUP_TTL_MS,
  1000,
);

/** Whether a notification may be sent to this address under the policy. */
export function isAllowedTarget(address: string, policy: NotifyUrlPolicy): boolean {
  const parsed = parseIpStrict(address);
  if (parsed === null) return false; // e.g. a zone id: never a notification target
  if (isPublicIp(address)) return true;
  const range = normalizeIp(parsed).range();
  if (range === 'unspecified' || range === 'multicast' || range === 'broadcast') return false;
  if (range === 'loopback') return policy.allowLoopback || policy.allowPrivateTargets;
  return policy.allowPrivateTargets;
}

export class TargetRefusedError extends Error {
  override name = 'TargetRefusedError';
}

/**
 * Resolves `host` (a name or an IP literal, without brackets) and returns the address to connect
 * to. Every resolved address must be allowed: a name that mixes a public and a private address is
 * refused, whichever one would have been picked.
 */
export async function resolveTarget(host: string, policy: NotifyUrlPolicy, resolver: Resolver = systemResolver): Promise<ResolvedAddress> {
  const literal = isIP(host);
  const addresses = literal !== 0 ? [{ address: host, family: literal }] : await resolver(host);
  if (addresses.length === 0) throw new TargetRefusedError('the host has no address');
  for (const a of addresses) {
    if (!isAllowedTarget(a.address, policy)) throw new TargetRefusedError(`address ${a.address} is not an allowed target`);
  }
  return addresses[0]!;
}

export interface PostOptions {
  /** Deadline for the whole exchange, resolution included. */
  timeoutMs: number;
  /** Response bytes read before the connection is closed. */
  maxResponseBytes: number;
  policy: NotifyUrlPolicy;
  resolver?: Resolver;
  userAgent?: string;
  /**
   * Keep the connection open for the next notification to the same address (one pool per
   * receiver address, sockets idle at most KEEP_ALIVE_IDLE_MS). A request that fails on a reused
   * connection before any answer (the receiver closed it meanwhile, or read it and then reset
   * the connection) is sent once more on a new one, with the headers `resign` gives.
   */
  keepAlive?: boolean;
  /** The headers of that second send, signed afresh (a new timestamp and nonce); without it, the same headers. */
  resign?: () => Promise<Record<string, string>>;
}

/** How long an idle kept-alive connection to a receiver stays open. */
export const KEEP_ALIVE_IDLE_MS = 4_000;
/** Receiver addresses with a connection pool, at most (the oldest pool is closed beyond). */
const MAX_POOLS = 1_000;
const pools = new Map<string, http.Agent>();

/** The pool of connections to one checked address (so that a kept connection always goes where it was checked). */
function poolFor(protocol: string, host: string, target: ResolvedAddress, port: string): http.Agent {
  const key = `${protocol}|${host}|${target.address}|${port}`;
  let agent = pools.get(key);
  if (agent) {
    pools.delete(key);
    pools.set(key, agent);
    return agent;
  }
  const o = {
    keepAlive: true,
    keepAliveMsecs: 1_000,
    maxSockets: 64,
    maxFreeSockets: 64,
    timeout: KEEP_ALIVE_IDLE_MS,
    scheduling: 'lifo' as const,
  };
  agent = protocol === 'https:' ? new https.Agent(o) : new http.Agent(o);
  pools.set(key, agent);
  if (pools.size > MAX_POOLS) {
    const [oldest, a] = pools.entries().next().value as [string, http.Agent];
    pools.delete(oldest);
    a.destroy();
  }
  return agent;
}

export interface PostOutcome {
  /** The HTTP status received, or null when no response arrived. */
  statusCode: number | null;
  /** Short, log-safe reason when there is no status, or when a 3xx was not followed; else null. */
  error: string | null;
  /**
   * The start of the receiver's answer (its first EXCERPT_CHARS characters, control characters as
   * spaces), shown to the merchant with the attempt; null when there was no answer or it was empty.
   */
  excerpt?: string | null;
}

/** How much of a receiver's answer is kept with the attempt. */
export const EXCERPT_CHARS = 200;

/** The first EXCERPT_CHARS characters of an answer's first bytes, printable, or null. */
export function answerExcerpt(head: Buffer): string | null {
  const text = [...head.toString('utf8').replace(/[\p{Cc}\p{Cs}\uFFFD]/gu, ' ')].slice(0, EXCERPT_CHARS).join('').trim();
  return text === '' ? null : text;
}

const TIMEOUT = 'TIMEOUT';

/** POSTs `body` to `url`; never throws (every failure is an outcome). */
export async function postNotification(
  url: string,
  body: Uint8Array,
  headers: Record<string, string>,
  o: PostOptions,
): Promise<PostOutcome> {
  const problem = checkNotifyUrl(url, o.policy);
  if (problem !== null) return { statusCode: null, error: `URL_NOT_ALLOWED: ${problem}` };
  const u = new URL(url);
  const host = u.hostname.replace(/^\[|\]$/g, '');
  const ac = new AbortController();
  const timer = setTimeout(() => ac.abort(), o.timeoutMs);
  try {
    let target: ResolvedAddress;
    try {
      target = await abortable(resolveTarget(host, o.policy, o.resolver), ac.signal);
    } catch (err) {
      if (err instanceof TargetRefusedError) return { statusCode: null, error: `ADDRESS_NOT_ALLOWED: ${err.message}` };
      if (err === TIMEOUT) return { statusCode: null, error: TIMEOUT };
      return { statusCode: null, error: `DNS_FAILED: ${errorCode(err)}` };
    }
    const agent = o.keepAlive ? poolFor(u.protocol, host, target, u.port) : false;
    const first = await send(u, host, target, body, headers, ac.signal, o, agent);
    if (!first.reusedConnectionFailed) return first.outcome;
    let again = headers;
    try {
      if (o.resign) again = await abortable(o.resign(), ac.signal);
    } catch {
      return first.outcome;
    }
    return (await send(u, host, target, body, again, ac.signal, o, false)).outcome;
  } finally {
    clearTimeout(timer);
  }
}

/**
 * One request; `reusedConnectionFailed`: it failed on a kept connection before any answer (most
 * often nothing reached the receiver; a receiver may also have read it and then reset).
 */
function send(
  u: URL,
  host: string,
  target: ResolvedAddress,
  body: Uint8Array,
  headers: Record<string, string>,
  signal: AbortSignal,
  o: PostOptions,
  agent: http.Agent | false,
): Promise<{ outcome: PostOutcome; reusedConnectionFailed: boolean }> {
  return new Promise((resolve) => {
    let settled = false;
    let statusCode: number | null = null;
    let reusedFailed = false;
    const head: Buffer[] = [];
    let headBytes = 0;
    const settle = (error: string | null) => {
      if (settled) return;
      settled = true;
      const redirect = statusCode !== null && statusCode >= 300 && statusCode < 400;
      const outcome = {
        statusCode,
        error: error ?? (redirect ? 'REDIRECT_NOT_FOLLOWED' : null),
        excerpt: statusCode === null ? null : answerExcerpt(Buffer.concat(head)),
      };
      resolve({ outcome, reusedConnectionFailed: reusedFailed });
    };
    // The connection goes to the checked address whatever the name would resolve to now.
    const pinned: LookupFunction = (_name, options, cb) => {
      if (options.all) (cb as (e: null, a: ResolvedAddress[]) => void)(null, [target]);
      else cb(null, target.address, target.family);
    };
    const mod = u.protocol === 'https:' ? https : http;
    const req = mod.request(
      {
        method: 'POST',
        host,
        port: u.port === '' ? undefined : Number(u.port),
        path: `${u.pathname}${u.search}`,
        headers: {
          ...headers,
          'Content-Length': String(body.byteLength),
          'User-Agent': o.userAgent ?? 'merchant-payment-service-notifier/1',
        },
        lookup: pinned,
        agent,
        signal,
      },
      (res) => {
        // The status line is the acknowledgement; the body is read (capped) only to end cleanly.
        statusCode = res.statusCode ?? null;
        let received = 0;
        res.on('data', (chunk: Buffer) => {
          received += chunk.length;
          // The excerpt's bytes (4 per character at most).
          if (headBytes < EXCERPT_CHARS * 4) {
            head.push(chunk.subarray(0, EXCERPT_CHARS * 4 - headBytes));
            headBytes += Math.min(chunk.length, EXCERPT_CHARS * 4 - headBytes);
          }
          if (received > o.maxResponseBytes) res.destroy();
        });
        res.on('error', () => {}); // aborted or capped after the status arrived
        res.on('end', () => settle(null));
        res.on('close', () => settle(null));
      },
    );
    req.on('error', (err) => {
      if (statusCode !== null) return settle(null);
      // A kept connection the receiver had closed (or reset after reading): the caller sends it again.
      if (req.reusedSocket && !signal.aborted && ['ECONNRESET', 'EPIPE'].includes(errorCode(err))) reusedFailed = true;
      settle(signal.aborted ? TIMEOUT : connectionError(err));
    });
    req.end(body);
  });
}

function abortable<T>(p: Promise<T>, signal: AbortSignal): Promise<T> {
  return new Promise((resolve, reject) => {
    const onAbort = () => reject(TIMEOUT);
    if (signal.aborted) return onAbort();
    signal.addEventListener('abort', onAbort, { once: true });
    p.then(
      (v) => {
        signal.removeEventListener('abort', onAbort);
        resolve(v);
      },
      (e: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(e);
      },
    );
  });
}

function errorCode(err: unknown): string {
  const e = err as { code?: unknown; name?: unknown };
  return typeof e?.code === 'string' ? e.code : typeof e?.name === 'string' ? e.name : 'UNKNOWN';
}

function connectionError(err: unknown): string {
  const code = errorCode(err);
  if (code === 'ECONNREFUSED') return 'CONNECTION_REFUSED';
  if (code === 'ECONNRESET' || code === 'EPIPE') return 'CONNECTION_RESET';
  // EPROTO: the TLS handshake failed (e.g. a plain-HTTP server behind an https:// URL).
  if (code === 'EPROTO' || /CERT|TLS|SSL|SELF_SIGNED|ALTNAME/i.test(code)) return `TLS_FAILED: ${code}`;
  return `CONNECTION_FAILED: ${code}`;
}
