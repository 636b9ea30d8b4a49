/**
 * Configuration from environment variables (decisions.md section 8, plus the project's own
 * documented additions in docs/configuration.md). Validated once at start; a wrong value stops the
 * process with one plain line naming the variable.
 */
import path from 'node:path';
import { CidrList } from '../net/ip.ts';
import { STATEMENT_FILES_KEPT_DAYS, STATEMENT_MAX_AGE_DAYS } from '../domain/statements.ts';

export class ConfigError extends Error {
  override name = 'ConfigError';
}

export interface Config {
  port: number;
  host: string;
  dataDir: string;
  databaseUrl: string | null;
  redisUrl: string | null;
  adminToken: string | null;
  publicBaseUrl: string;
  /** databaseUrl is the service's own embedded PostgreSQL (set by main.ts), not DATABASE_URL. */
  databaseUrlEmbedded?: boolean;
  /** PUBLIC_BASE_URL was unset: publicBaseUrl is http://HOST:PORT (see withListenPort). */
  publicBaseUrlDefaulted?: boolean;
  /** `sandbox`: the sandbox serves both channels; `live`: ALIPAY_H5 by Alipay, WECHAT_H5 by WeChat Pay (src/providers/setup.ts). */
  provider: 'sandbox' | 'live';
  /** Channels whose creates are refused (422 OPEN_API_CHANNEL_UNAVAILABLE) whatever the app allows. */
  channelsDisabled: ('ALIPAY_H5' | 'WECHAT_H5')[];
  /** The ALIPAY_* and WECHATPAY_* variables, read by the live providers' configuration (docs/providers.md). */
  providerEnv: Record<string, string>;
  platformKeyFile: string | null;
  logLevel: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
  /** LOG_FORMAT: one JSON object per line, or one readable line per event; null: pretty on a terminal, JSON elsewhere. */
  logFormat: 'json' | 'pretty' | null;
  /** Peers whose forwarding headers (X-Forwarded-For, Forwarded, X-Real-IP) are honoured. */
  trustedProxies: string[];
  /** Platform source allowlist; null = none configured. */
  platformIpAllowlist: string[] | null;
  platformIpDenylist: string[];
  allowIpv4: boolean;
  allowIpv6: boolean;
  /** Failed authentications from one address within authFailureWindowSeconds before it is blocked. */
  authFailureLimit: number;
  authFailureWindowSeconds: number;
  authBlockSeconds: number;
  /** Notify URLs may point at a loopback host, over plain http too (WEBHOOK_ALLOW_LOOPBACK; default: with the sandbox provider). */
  webhookAllowLoopback: boolean;
  /** Allow notification delivery to private, loopback or link-local addresses (tests, private networks). */
  webhookAllowPrivateTargets: boolean;
  /** Background workers (expiry, provider checks, outbox delivery) on/off. */
  workersEnabled: boolean;
  /** A connection must have sent a request's whole header section within this (slow senders are cut). */
  httpHeadersTimeoutMs: number;
  /** ... and the whole request, body included, within this. */
  httpRequestTimeoutMs: number;
  /** An idle kept-alive connection is closed after this. */
  httpKeepAliveTimeoutMs: number;
  /** libuv's worker threads as SCHED_BATCH (Linux; src/platform/thread-pool.ts). */
  threadPoolSchedBatch: boolean;
  /** Statement files made at once by this instance (downloads and first summaries): per app, and in all (docs/configuration.md, "Statement downloads"). */
  statementDownloadsPerApp: number;
  statementDownloadsTotal: number;
  /** A statement download whose client has taken nothing for this long is cut. */
  statementStallTimeoutMs: number;
  /** A statement file's bytes are kept this many days after its day (docs/configuration.md, "What is kept, for how long"); 0: never. */
  statementFilesKeptDays: number;
  /** The embedded PostgreSQL's processes as SCHED_BATCH (Linux; src/store/embedded.ts). */
  embeddedPgSchedBatch: boolean;
  /** Threads of their own that hash passwords (src/lib/password-hash.ts), never libuv's pool. */
  passwordHashThreads: number;
  /** The most of its time each hashing thread may be busy; it rests after each hash accordingly. */
  passwordHashBusyPercent: number;
  /** Console and portal sign-ins in progress at once on this instance; one more is refused (503 with Retry-After). */
  signInMaxConcurrent: number;
  /** Refusals before authentication (and rate-limit 429s) answered at once to one address a second, past its burst; past it each is held (src/gate/refusal-pacer.ts). */
  refusalsPerAddressPerSecond: number;
  /** How many such refusals one address may get at once before the pace applies. */
  refusalsBurstPerAddress: number;
}

type Env = Record<string, string | undefined>;

function str(env: Env, name: string): string | undefined {
  const v = env[name];
  return v === undefined || v === '' ? undefined : v;
}

function int(env: Env, name: string, def: number, min: number, max: number): number {
  const v = str(env, name);
  if (v === undefined) return def;
  if (!/^\d+$/.test(v) || Number(v) < min || Number(v) > max) {
    throw new ConfigError(`${name} must be an integer from ${min} to ${max} (got '${v}')`);
  }
  return Number(v);
}

function bool(env: Env, name: string, def: boolean): boolean {
  const v = str(env, name);
  if (v === undefined) return def;
  if (v === 'true' || v === '1') return true;
  if (v === 'false' || v === '0') return false;
  throw new ConfigError(`${name} must be true or false (or 1 or 0) (got '${v}')`);
}

function list(env: Env, name: string): string[] | undefined {
  const v = str(env, name);
  if (v === undefined) return undefined;
  return v
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
}

/** A URL as it may be printed: the password of its user info replaced by `***`. */
export function withoutPassword(v: string): string {
  return v.replace(/^([a-z][a-z0-9+.-]*:\/\/[^:/?#@]*:)[^@/?#]*@/i, '$1***@');
}

function url(env: Env, name: string, protocols: string[]): string | undefined {
  const v = str(env, name);
  if (v === undefined) return undefined;
  let u: URL;
  try {
    // libpq's socket form has an empty host (postgresql://user@/db?host=/run/dir), which URL refuses.
    u = new URL(v.replace(/^([a-z]+:\/\/[^/?#]*@)\//i, '$1localhost/'));
  } catch {
    throw new ConfigError(`${name} must be a URL (got '${withoutPassword(v)}')`);
  }
  if (!protocols.includes(u.protocol)) {
    throw new ConfigError(`${name} must use ${protocols.join(' or ')} (got '${withoutPassword(v)}')`);
  }
  return v;
}

/**
 * DATABASE_URL: one node, or several as libpq takes them (`postgres://u@h1:5432,h2:5432/db?
 * target_session_attrs=read-write`), whose primary the pool follows (docs/high-availability.md).
 * Each node of a list is checked as an address of its own.
 */
function databaseAddress(env: Env): string | null {
  const v = str(env, 'DATABASE_URL');
  if (v === undefined) return null;
  const m = /^(postgres(?:ql)?:\/\/(?:[^@/?#]*@)?)([^/?#]*,[^/?#]*)(.*)$/i.exec(v);
  if (m === null) return url(env, 'DATABASE_URL', ['postgres:', 'postgresql:'])!;
  for (const node of m[2]!.split(',')) url({ DATABASE_URL: `${m[1]}${node}${m[3]}` }, 'DATABASE_URL', ['postgres:', 'postgresql:']);
  const attrs = new URLSearchParams(m[3]!.split('?')[1] ?? '').get('target_session_attrs');
  if (attrs !== null && attrs !== 'read-write' && attrs !== 'primary') {
    throw new ConfigError(`DATABASE_URL's target_session_attrs must be read-write (the service writes; got '${attrs}')`);
  }
  return v;
}

/**
 * The database index of a REDIS_URL: its path, `/N` (or none: 0). Anything else is refused here,
 * naming the variable: the Redis client would send `SELECT NaN` and fail outside any handler.
 */
export function redisDatabase(v: string): number {
  const p = new URL(v).pathname;
  if (p === '' || p === '/') return 0;
  const m = /^\/(\d{1,9})$/.exec(p);
  if (!m) throw new ConfigError(`REDIS_URL must have a database number as its path, /0 to /N (got '${p}')`);
  return Number(m[1]);
}

/** A comma list of addresses or CIDRs, checked here so that a bad entry names its variable. */
function cidrs(env: Env, name: string): string[] | undefined {
  const v = list(env, name);
  if (v === undefined) return undefined;
  try {
    CidrList.parse(v);
  } catch (err) {
    throw new ConfigError(`${name} must be a comma list of addresses or CIDRs: ${(err as Error).message}`);
  }
  return v;
}

/** A shorter ADMIN_TOKEN is accepted with a warning at start (use a long random one in production). */
export const ADMIN_TOKEN_ADVISED_LENGTH = 16;

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

export function loadConfig(env: Env = process.env): Config {
  const port = int(env, 'PORT', 8080, 0, 65535);
  const host = str(env, 'HOST') ?? '127.0.0.1';
  if (/\s/.test(host)) throw new ConfigError(`HOST must be a host name or address (got '${host}')`);
  const dataDir = path.resolve(str(env, 'DATA_DIR') ?? './data');
  const databaseUrl = databaseAddress(env);
  const redisUrl = url(env, 'REDIS_URL', ['redis:', 'rediss:']) ?? null;
  if (redisUrl !== null) redisDatabase(redisUrl);
  const adminToken = str(env, 'ADMIN_TOKEN') ?? null;
  // Any length is accepted (main.ts warns below ADMIN_TOKEN_ADVISED_LENGTH); it must be sendable
  // as a bearer token: visible ASCII, no spaces.
  if (adminToken !== null && !/^[\x21-\x7e]+$/.test(adminToken)) {
    throw new ConfigError('ADMIN_TOKEN must be visible ASCII characters (no spaces)');
  }
  const base = url(env, 'PUBLIC_BASE_URL', ['http:', 'https:']);
  if (base !== undefined) {
    const u = new URL(base);
    if (u.search !== '' || u.hash !== '' || u.username !== '' || u.password !== '') {
      throw new ConfigError(`PUBLIC_BASE_URL must have no query, fragment or user info (got '${base}')`);
    }
  }
  const displayHost = urlHost(host);
  try {
    // A host a URL cannot carry (999.1.1.1, a bad IPv6) would otherwise fail later without a name.
    new URL(`http://${displayHost}:${port}`);
  } catch {
    throw new ConfigError(`HOST must be a host name or address (got '${host}')`);
  }
  const publicBaseUrl = (base ?? `http://${displayHost}:${port}`).replace(/\/+$/, '');
  const provider = str(env, 'PROVIDER') ?? 'sandbox';
  if (provider !== 'sandbox' && provider !== 'live') throw new ConfigError(`PROVIDER must be sandbox or live (got '${provider}')`);
  const channelsDisabled = list(env, 'CHANNELS_DISABLED') ?? [];
  for (const c of channelsDisabled) {
    if (c !== 'ALIPAY_H5' && c !== 'WECHAT_H5')
      throw new ConfigError(`CHANNELS_DISABLED must list ALIPAY_H5 and/or WECHAT_H5 (got '${c}')`);
  }
  const providerEnv: Record<string, string> = {};
  for (const [k, v] of Object.entries(env)) if (/^(ALIPAY|WECHATPAY)_/.test(k) && v !== undefined && v !== '') providerEnv[k] = v;
  const platformKeyFile = str(env, 'PLATFORM_KEY_FILE') ?? null;
  const logLevel = (str(env, 'LOG_LEVEL') ?? 'info') as Config['logLevel'];
  if (!LOG_LEVELS.includes(logLevel)) {
    throw new ConfigError(`LOG_LEVEL must be one of ${LOG_LEVELS.join(', ')} (got '${logLevel}')`);
  }
  const logFormat = str(env, 'LOG_FORMAT') ?? null;
  if (logFormat !== null && logFormat !== 'json' && logFormat !== 'pretty') {
    throw new ConfigError(`LOG_FORMAT must be json or pretty (got '${logFormat}')`);
  }
  const families = list(env, 'SOURCE_IP_FAMILIES') ?? ['ipv4', 'ipv6'];
  for (const f of families) {
    if (f !== 'ipv4' && f !== 'ipv6') throw new ConfigError(`SOURCE_IP_FAMILIES must list ipv4 and/or ipv6 (got '${f}')`);
  }
  // No family at all would refuse every source: a mistake, not a policy.
  if (families.length === 0) throw new ConfigError(`SOURCE_IP_FAMILIES must list ipv4 and/or ipv6 (got '${env.SOURCE_IP_FAMILIES}')`);
  return {
    port,
    host,
    dataDir,
    databaseUrl,
    redisUrl,
    adminToken,
    publicBaseUrl,
    publicBaseUrlDefaulted: base === undefined,
    provider,
    channelsDisabled: channelsDisabled as Config['channelsDisabled'],
    providerEnv,
    platformKeyFile,
    logLevel,
    logFormat,
    trustedProxies: cidrs(env, 'TRUSTED_PROXIES') ?? [],
    platformIpAllowlist: cidrs(env, 'PLATFORM_IP_ALLOWLIST') ?? null,
    platformIpDenylist: cidrs(env, 'PLATFORM_IP_DENYLIST') ?? [],
    allowIpv4: families.includes('ipv4'),
    allowIpv6: families.includes('ipv6'),
    authFailureLimit: int(env, 'AUTH_FAILURE_LIMIT', 50, 1, 1_000_000),
    authFailureWindowSeconds: int(env, 'AUTH_FAILURE_WINDOW_SECONDS', 60, 1, 86_400),
    authBlockSeconds: int(env, 'AUTH_BLOCK_SECONDS', 60, 1, 86_400),
    // Explicit, or the provider's default: a sandbox deployment takes no real money and is for
    // development and tests; a live one never reaches its own host unless told so.
    webhookAllowLoopback: bool(env, 'WEBHOOK_ALLOW_LOOPBACK', provider === 'sandbox'),
    webhookAllowPrivateTargets: bool(env, 'WEBHOOK_ALLOW_PRIVATE_TARGETS', false),
    workersEnabled: bool(env, 'WORKERS_ENABLED', true),
    ...httpTimeouts(env),
    threadPoolSchedBatch: bool(env, 'THREADPOOL_SCHED_BATCH', true),
    embeddedPgSchedBatch: bool(env, 'EMBEDDED_PG_SCHED_BATCH', true),
    ...statementDownloads(env),
    passwordHashThreads: int(env, 'PASSWORD_HASH_THREADS', 1, 1, 64),
    passwordHashBusyPercent: int(env, 'PASSWORD_HASH_BUSY_PERCENT', 50, 1, 100),
    signInMaxConcurrent: int(env, 'SIGN_IN_MAX_CONCURRENT', 4, 1, 10_000),
    refusalsPerAddressPerSecond: int(env, 'REFUSALS_PER_ADDRESS_PER_SECOND', 100, 1, 1_000_000),
    refusalsBurstPerAddress: int(env, 'REFUSALS_BURST_PER_ADDRESS', 1000, 1, 1_000_000),
  };
}

function httpTimeouts(env: Env): Pick<Config, 'httpHeadersTimeoutMs' | 'httpRequestTimeoutMs' | 'httpKeepAliveTimeoutMs'> {
  const headers = int(env, 'HTTP_HEADERS_TIMEOUT_MS', 10_000, 100, 600_000);
  const request = int(env, 'HTTP_REQUEST_TIMEOUT_MS', 30_000, 100, 3_600_000);
  if (headers > request) {
    throw new ConfigError(
      `HTTP_HEADERS_TIMEOUT_MS (${headers}) must not exceed HTTP_REQUEST_TIMEOUT_MS (${request}): the headers are part of the request`,
    );
  }
  return {
    httpHeadersTimeoutMs: headers,
    httpRequestTimeoutMs: request,
    httpKeepAliveTimeoutMs: int(env, 'HTTP_KEEP_ALIVE_TIMEOUT_MS', 72_000, 100, 3_600_000),
  };
}

function statementDownloads(
  env: Env,
): Pick<Config, 'statementDownloadsPerApp' | 'statementDownloadsTotal' | 'statementStallTimeoutMs' | 'statementFilesKeptDays'> {
  const perApp = int(env, 'STATEMENT_DOWNLOADS_PER_APP', 2, 1, 1000);
  const total = int(env, 'STATEMENT_DOWNLOADS_TOTAL', 8, 1, 10_000);
  if (perApp > total) {
    throw new ConfigError(`STATEMENT_DOWNLOADS_PER_APP (${perApp}) must not exceed STATEMENT_DOWNLOADS_TOTAL (${total})`);
  }
  return {
    statementDownloadsPerApp: perApp,
    statementDownloadsTotal: total,
    statementStallTimeoutMs: int(env, 'STATEMENT_STALL_TIMEOUT_MS', 30_000, 100, 3_600_000),
    statementFilesKeptDays: int(env, 'STATEMENT_FILES_KEPT_DAYS', STATEMENT_FILES_KEPT_DAYS, 0, STATEMENT_MAX_AGE_DAYS),
  };
}

/** The configuration with the port actually listened on (PORT=0: any free port) in its defaulted base URL. */
export function withListenPort(config: Config, port: number): Config {
  if (config.port === port) return config;
  return {
    ...config,
    port,
    publicBaseUrl: config.publicBaseUrlDefaulted ? `http://${urlHost(config.host)}:${port}` : config.publicBaseUrl,
  };
}

/** A host as a URL carries it (an IPv6 address in brackets). */
function urlHost(host: string): string {
  return host.includes(':') ? `[${host}]` : host;
}
