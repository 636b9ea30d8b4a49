/**
 * buildApp(config): a ready service that is not listening. Connects to PostgreSQL (config must
 * carry a DATABASE_URL; main.ts starts the embedded one when needed), applies migrations, loads
 * the platform keys and registers one scoped plugin per surface.
 */
import { randomBytes } from 'node:crypto';
import http, { STATUS_CODES } from 'node:http';
import type { Duplex } from 'node:stream';
import { OPEN_API_ERRORS } from './gate/open-errors.ts';
import { newId } from './domain/ids.ts';
import Fastify, { type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import type { Config } from './config/config.ts';
import { adminPlugin } from './http/admin.ts';
import { openMethodNotAllowed, openPlugin } from './http/open.ts';
import { providerNotifyPlugin } from './http/provider-notify.ts';
import { docsPlugin } from './http/openapi.ts';
import { registerFrontPage } from './http/front-page.ts';
import { createMetrics, installMetrics } from './http/metrics.ts';
import { sandboxPlugin } from './http/sandbox.ts';
import { cashierPlugin } from './cashier/cashier.ts';
import { consolePlugin } from './console/console.ts';
import { portalPlugin } from './portal/portal.ts';
import { originForm, requestTarget } from './gate/gate.ts';
import { type RefusalPacer, paceKey } from './gate/refusal-pacer.ts';
import { PlatformKeyRing } from './platform/keys.ts';
import type { PaymentProvider } from './providers/provider.ts';
import type { Clock } from './domain/clock.ts';
import { type Services, createServices } from './services.ts';
import { type Db, createPool, migrate } from './store/db.ts';
import { agreeOnNotifyUrlPolicy } from './usecases/deployment.ts';
import { handleProviderNotification } from './usecases/notifications.ts';
import { Workers } from './workers.ts';
import { type EventDispatcher, createDispatcher } from './events/dispatcher.ts';

export interface BuiltApp {
  server: FastifyInstance;
  svc: Services;
  adminToken: string;
  adminTokenGenerated: boolean;
  workers: Workers;
  /** Stops workers, waits for in-flight work, closes the server and the pool. */
  close(): Promise<void>;
}

export interface AppOverrides {
  db?: Db;
  clock?: Clock;
  provider?: PaymentProvider;
  logger?: FastifyBaseLogger | boolean;
  /** CONNECTION_IDLE_TIMEOUT_MS (tests shorten it). */
  connectionIdleTimeoutMs?: number;
  /**
   * This instance owns its database (the embedded PostgreSQL behind its DATA_DIR lock): every
   * other instance registered there is a crashed predecessor, whose requests are taken over at once.
   */
  aloneOnDatabase?: boolean;
}

function platformEnvelope(status: number, error: string, message: string) {
  return { status, error, message };
}

/**
 * The open routes (method and path, query aside; src/http/open.ts OPEN_ROUTES): a request to one
 * of them that Node's parser refuses for a header (a control character in a value, a bad byte in
 * a name) is a malformed header of the open API, answered as the gate's step 3 answers one.
 */
const OPEN_ROUTE =
  /^(?:POST \/api\/open\/v1\/(?:payments|refunds|payments\/[^/?\s]+\/(?:attempts|close)|events\/[^/?\s]+\/redeliveries)|GET \/api\/open\/v1\/(?:payments\/[^/?\s]+|refunds\/[^/?\s]+|settlement\/accounts|platform-keys|statements\/[^/?\s]+(?:\/file)?|events(?:\/[^/?\s]+)?))(?:\?\S*)? HTTP\/1\.[01]\r?\n/;

/** Parser errors of a bad byte in the header section: a control character or a byte not allowed in a name (INVALID_HEADER_TOKEN), a lone CR (LF_EXPECTED), a bare LF (CR_EXPECTED). */
const BAD_HEADER_BYTE = new Set(['HPE_INVALID_HEADER_TOKEN', 'HPE_LF_EXPECTED', 'HPE_CR_EXPECTED']);

/**
 * A request Node's HTTP parser refuses before any route is known (conflicting Content-Length /
 * Transfer-Encoding, an unknown method, a bad chunk size, headers over 16 KB, a request that took
 * too long): answered in the platform envelope, like an unknown path, and the connection closed
 * (the rest of the stream cannot be trusted). A reset connection gets nothing. The one exception:
 * a bad byte in a header of a request to an open route is 400 `OPEN_API_HEADER_INVALID` in the
 * open API's failure envelope (seed: a malformed header; the nonce's "no control characters"), with
 * a generated `gw_` requestId and no `X-SVC-Request-Id` header, as the gate's step 3 answers.
 */
export function clientErrorAnswer(err: NodeJS.ErrnoException, socket: Duplex, pacer?: RefusalPacer): void {
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  const rawPacket = (err as { rawPacket?: unknown }).rawPacket; // the bytes the parser had read
  let status: number;
  let body: string;
  if (BAD_HEADER_BYTE.has(err.code ?? '') && Buffer.isBuffer(rawPacket) && OPEN_ROUTE.test(rawPacket.toString('latin1', 0, 8192))) {
    const message = OPEN_API_ERRORS.OPEN_API_HEADER_INVALID.message;
    status = 400;
    body = JSON.stringify({ code: 'OPEN_API_HEADER_INVALID', message, requestId: newId.gateway() });
  } else {
    const [s, error, message] =
      err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? REQUEST_TIMEOUT
        : err.code === 'HPE_HEADER_OVERFLOW'
          ? ([431, 'REQUEST_HEADER_FIELDS_TOO_LARGE', 'The request line and headers are over 16 KB.'] as const)
          : ([400, 'BAD_REQUEST', 'The request is not valid HTTP/1.1.'] as const);
    status = s;
    body = JSON.stringify(platformEnvelope(s, error, message));
  }
  // Past its address's budget (gate/refusal-pacer.ts), the answer waits with the connection paused;
  // a request that timed out has taken its time already.
  const peer = (socket as Duplex & { remoteAddress?: string }).remoteAddress;
  const delayMs = pacer !== undefined && err.code !== 'ERR_HTTP_REQUEST_TIMEOUT' && peer ? pacer.delayFor(paceKey(peer)) : 0;
  if (delayMs === 0) return answerAndClose(socket, status, body);
  socket.pause();
  pacer!.hold(delayMs, () => answerAndClose(socket, status, body));
}

const REQUEST_TIMEOUT = [408, 'REQUEST_TIMEOUT', 'The request was not received in time.'] as const;

/** Writes a whole answer straight to the socket (no response object owns it) and closes it. */
function answerAndClose(socket: Duplex, status: number, body: string): void {
  if (socket.writable) {
    socket.write(
      `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n${body}`,
    );
  }
  socket.destroy();
}

/**
 * A connection on which nothing arrives or leaves for this long during a request is closed: a
 * client that stalls mid-body (or never sends the rest) no longer holds it open for ever. Between
 * requests, Node's keep-alive timeout governs instead (Fastify's 72 s). No request waits this long
 * for the service (its longest waits are ~20 s, and a provider call is bounded), so only a stalled
 * client meets it.
 */
export const CONNECTION_IDLE_TIMEOUT_MS = 120_000;

/** A connection idle past the timeout: a request still being received gets 408 in the platform envelope. */
function onIdleConnection(socket: Duplex & { _httpMessage?: { headersSent?: boolean } | null }): void {
  const res = socket._httpMessage;
  if (res && !res.headersSent) {
    answerAndClose(socket, REQUEST_TIMEOUT[0], JSON.stringify(platformEnvelope(...REQUEST_TIMEOUT)));
  } else {
    socket.destroy();
  }
}

const isLogger = (l: AppOverrides['logger']): l is FastifyBaseLogger => typeof l === 'object' && typeof l.child === 'function';

/**
 * A path whose percent-encoding does not decode (`/payments/%ZZ`, `/cashier/%FF`) is a malformed
 * reference, not a framework 400: on the open API it goes through the gate like any other and gets
 * the neutral 404; a cashier token gets the neutral 404 page. Its `%` are escaped for routing only;
 * the gate signs and keys the request by the target as sent (gate.ts, requestTarget). A target in
 * absolute form (through a forward proxy) is routed, signed and keyed by its path and query.
 */
function routableUrl(req: { url?: string }): string {
  const url = originForm(req.url ?? '/');
  if (!url.includes('%')) return url;
  const q = url.indexOf('?');
  const path = q === -1 ? url : url.slice(0, q);
  try {
    decodeURIComponent(path);
    return url;
  } catch {
    return path.replaceAll('%', '%25') + (q === -1 ? '' : url.slice(q));
  }
}

/**
 * A framework error (e.g. a malformed URL): answered in the platform envelope, never a 500. It
 * runs before any plugin, so it carries the strictest headers of any surface (the cashier's).
 */
function frameworkErrorAnswer(err: Error, reply: unknown): void {
  (reply as { headers(h: Record<string, string>): { code(n: number): { send(b: unknown): void } } })
    .headers({
      'content-security-policy': "default-src 'none'; frame-ancestors 'none'; base-uri 'none'",
      'x-frame-options': 'DENY',
      'referrer-policy': 'no-referrer',
      'x-content-type-options': 'nosniff',
      'cache-control': 'no-store',
    })
    .code(400)
    .send(platformEnvelope(400, 'BAD_REQUEST', err.message));
}

/** The Fastify server with its connection limits and the answers given before any route. */
function createServer(config: Config, o: AppOverrides, pacing: { pacer?: RefusalPacer }) {
  const idleTimeoutMs = o.connectionIdleTimeoutMs ?? CONNECTION_IDLE_TIMEOUT_MS;
  const server = Fastify({
    // The logger instance given (main.ts's, in its LOG_FORMAT), or options (tests), or JSON at LOG_LEVEL.
    loggerInstance: isLogger(o.logger) ? o.logger : undefined,
    logger: isLogger(o.logger) ? undefined : o.logger === undefined ? { level: config.logLevel } : (o.logger as boolean),
    exposeHeadRoutes: false,
    routerOptions: { maxParamLength: 16_384 },
    bodyLimit: 1024 * 1024,
    return503OnClosing: false,
    requestIdHeader: false,
    forceCloseConnections: 'idle',
    connectionTimeout: idleTimeoutMs,
    // Slow senders are cut (docs/configuration.md): the header section within
    // HTTP_HEADERS_TIMEOUT_MS, the whole request within HTTP_REQUEST_TIMEOUT_MS, an idle kept-alive
    // connection after HTTP_KEEP_ALIVE_TIMEOUT_MS; the deadlines are checked every second.
    requestTimeout: config.httpRequestTimeoutMs,
    keepAliveTimeout: config.httpKeepAliveTimeoutMs,
    serverFactory: (handler) =>
      http
        .createServer(
          {
            headersTimeout: config.httpHeadersTimeoutMs,
            requestTimeout: config.httpRequestTimeoutMs,
            keepAliveTimeout: config.httpKeepAliveTimeoutMs,
            connectionsCheckingInterval: 1000,
          },
          handler,
        )
        .setTimeout(idleTimeoutMs),
    clientErrorHandler: (err, socket) => clientErrorAnswer(err, socket, pacing.pacer),
    rewriteUrl: routableUrl,
    frameworkErrors: (err, _req, reply) => frameworkErrorAnswer(err, reply),
  });
  // With a listener, Node no longer destroys an idle connection by itself: onIdleConnection does.
  server.server.on('timeout', onIdleConnection);
  // An `Expect:` other than 100-continue: Node would answer 417 with an empty body; answered in the
  // platform envelope instead, like the other requests refused before any route.
  server.server.on('checkExpectation', (req) => {
    answerAndClose(
      req.socket,
      417,
      JSON.stringify(platformEnvelope(417, 'EXPECTATION_FAILED', 'Only "Expect: 100-continue" is supported.')),
    );
  });
  // Unmatched paths (404) and other methods of open paths (405) must not judge a body: the
  // default parsers would answer 400/413/415. Each surface installs its own parsers.
  server.removeAllContentTypeParsers();
  server.addContentTypeParser('*', (_req, payload, done) => {
    payload.resume();
    done(null, undefined);
  });
  return server;
}

/** Migrations applied, then the platform keys and the services on the database. */
async function openServices(config: Config, o: AppOverrides, db: Db, log: FastifyBaseLogger): Promise<Services> {
  await migrate(db, (m) => log.info(m)).catch((err: unknown) => {
    const where = config.databaseUrlEmbedded ? 'the embedded PostgreSQL' : 'the PostgreSQL at DATABASE_URL';
    throw new Error(`cannot use ${where}: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
  });
  const keys = await PlatformKeyRing.load({
    clock: o.clock,
    keyFile: config.platformKeyFile,
    dataDir: config.dataDir,
    log: (m) => log.info(m),
    error: (m) => log.error(m),
  });
  const svc = await createServices({ config, db, keys, log, clock: o.clock, provider: o.provider });
  const sandbox = svc.sandbox;
  sandbox?.setNotificationSink(async (raw, headers) => {
    await handleProviderNotification(svc, sandbox, raw, headers);
  });
  await svc.units.start({ alone: o.aloneOnDatabase === true });
  await agreeOnNotifyUrlPolicy(svc, svc.notifyUrlPolicy, svc.units.instanceId).catch(async (err: unknown) => {
    await svc.units.stop();
    throw err;
  });
  return svc;
}

/**
 * The answers of no surface: while stopping, 503 in the surface's envelope (the open API's is the
 * contract's); an unknown route, 404; an error no surface handled, its 4xx or 503, in the
 * platform envelope.
 */
function installPlatformAnswers(server: FastifyInstance, isClosing: () => boolean): void {
  server.addHook('onRequest', async (req, reply) => {
    if (!isClosing()) return;
    reply.code(503).header('connection', 'close');
    return reply.send(
      req.url.startsWith('/api/open/')
        ? { code: 'OPEN_API_GUARD_UNAVAILABLE', message: 'The service is temporarily unavailable.', requestId: newId.gateway() }
        : platformEnvelope(503, 'SERVICE_UNAVAILABLE', 'The service is stopping.'),
    );
  });
  server.setNotFoundHandler((req, reply) => {
    reply.code(404).send(platformEnvelope(404, 'ROUTE_NOT_FOUND', `No route ${req.method} ${requestTarget(req).split('?')[0]}.`));
  });
  server.setErrorHandler((err: Error & { statusCode?: number }, req, reply) => {
    const status = typeof err.statusCode === 'number' && err.statusCode >= 400 && err.statusCode < 500 ? err.statusCode : 503;
    if (status === 503) req.log.error({ err }, 'request failed');
    reply
      .code(status)
      .send(
        platformEnvelope(
          status,
          status === 503 ? 'SERVICE_UNAVAILABLE' : 'BAD_REQUEST',
          status === 503 ? 'Service unavailable.' : err.message,
        ),
      );
  });
}

/** One scoped plugin per surface, each under its prefix. */
async function registerSurfaces(server: FastifyInstance, svc: Services, config: Config, adminToken: string): Promise<void> {
  await server.register(openPlugin, { prefix: '/api/open/v1', svc });
  await server.register(openMethodNotAllowed, { prefix: '/api/open/v1' });
  await server.register(adminPlugin, { prefix: '/api/admin/v1', svc, adminToken });
  if (svc.sandbox) await server.register(sandboxPlugin, { prefix: '/api/sandbox/v1', svc, sandbox: svc.sandbox, adminToken });
  await server.register(providerNotifyPlugin, { prefix: '/api/provider/v1/notifications', svc });
  await server.register(cashierPlugin, { prefix: '/cashier', svc });
  await server.register(consolePlugin, { prefix: '/console', svc });
  await server.register(portalPlugin, { prefix: '/portal', svc });
  await server.register(docsPlugin, { prefix: '/docs', publicBaseUrl: config.publicBaseUrl });
  server.get('/healthz', async () => ({ status: 'ok' }));
  registerFrontPage(server);
}

/** The instance's worker loop: the job runner, the event dispatcher and the sandbox's own notices. */
function createWorkers(svc: Services): { workers: Workers; dispatcher: EventDispatcher } {
  const dispatcher = createDispatcher(svc);
  const sandbox = svc.sandbox;
  const workers = new Workers(svc, [
    dispatcher,
    // The sandbox provider's own notices (a provider's retries and settlements, simulated).
    ...(sandbox
      ? [{ name: 'sandbox notices', run: async () => (await sandbox.redeliverNotices()) + (await sandbox.sendDueRefundNotices()) }]
      : []),
  ]);
  svc.wakeWorkers = () => workers.wake();
  return { workers, dispatcher };
}

export async function buildApp(config: Config, o: AppOverrides = {}): Promise<BuiltApp> {
  if (o.db === undefined && config.databaseUrl === null) throw new Error('buildApp needs config.databaseUrl (or a db)');
  // The refusals' pace (gate/refusal-pacer.ts) is the services'; the parser's refusals use it once they exist.
  const pacing: { pacer?: RefusalPacer } = {};
  const server = createServer(config, o, pacing);
  const ownDb = o.db === undefined;
  const db = o.db ?? createPool(config.databaseUrl!);
  try {
    const svc = await openServices(config, o, db, server.log);
    pacing.pacer = svc.refusals;
    const adminTokenGenerated = config.adminToken === null;
    const adminToken = config.adminToken ?? randomBytes(24).toString('base64url');
    let closing = false;
    installPlatformAnswers(server, () => closing);
    installMetrics(server, createMetrics(svc), adminToken);
    await registerSurfaces(server, svc, config, adminToken);
    await server.ready();
    const { workers, dispatcher } = createWorkers(svc);
    let closed = false;
    return {
      server,
      svc,
      adminToken,
      adminTokenGenerated,
      workers,
      async close() {
        if (closed) return;
        closed = true;
        closing = true;
        await workers.stop();
        await dispatcher.stop();
        svc.refusals.releaseAll();
        await server.close();
        await svc.units.stop();
        svc.keys.close();
        await svc.redis?.quit().catch(() => {});
        if (ownDb) await db.end();
      },
    };
  } catch (err) {
    if (ownDb) await db.end().catch(() => {});
    throw err;
  }
}
