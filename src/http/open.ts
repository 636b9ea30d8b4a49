/**
 * The open API under /api/open/v1: one scope with the gate (steps 1-8, src/gate/gate.ts), then
 * step 9 here: the request-id unit of the POST operations, and one use case per route, whose
 * result or refusal is rendered by src/http/open-answers.ts. Paths and methods not mounted here
 * answer with the platform envelope (see app.ts).
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { sha256Hex } from '@mps/sdk/signing';
import { DomainError } from '../domain/errors.ts';
import { parseCreateOrder, parseCreateRefund } from '../domain/order-input.ts';
import { parseEventQuery } from '../domain/event-log.ts';
import { statementCompression, statementFileName } from '../domain/statements.ts';
import { type OpenAnswer, failure, installGate, requestTarget, sendOpen, sendOpenStream, sendResult } from '../gate/gate.ts';
import { keptForReplay } from '../gate/open-errors.ts';
import type { Services } from '../services.ts';
import { closeOrder } from '../usecases/close-order.ts';
import { createOrder } from '../usecases/create-order.ts';
import type { Caller } from '../usecases/deps.ts';
import { queryOrder, queryRefund, readSettlement } from '../usecases/queries.ts';
import { recreateAttempt } from '../usecases/recreate-attempt.ts';
import { getEvent, listEvents, redeliverEvent } from '../usecases/event-log.ts';
import { createRefund } from '../usecases/refunds.ts';
import { statementFile, statementSummary } from '../usecases/statements.ts';
import { type Decided, type FinalAnswer, RequestDecided, type RequestUnit } from '../usecases/request-units.ts';
import type { OpenResult } from '../usecases/results.ts';
import { type RenderContext, renderRefusal, renderResult } from './open-answers.ts';
import { statementContentType } from '../views/open.ts';

export const OPEN_ROUTES = [
  { method: 'POST', url: '/payments', operationId: 'createOrder' },
  { method: 'POST', url: '/payments/:outTradeNo/attempts', operationId: 'recreateAttempt' },
  { method: 'GET', url: '/payments/:outTradeNo', operationId: 'queryOrder' },
  { method: 'POST', url: '/payments/:outTradeNo/close', operationId: 'closeOrder' },
  { method: 'POST', url: '/refunds', operationId: 'createRefund' },
  { method: 'GET', url: '/refunds/:outRefundNo', operationId: 'queryRefund' },
  { method: 'GET', url: '/settlement/accounts', operationId: 'readSettlement' },
  { method: 'GET', url: '/statements/:settlementDate', operationId: 'getStatement' },
  { method: 'GET', url: '/statements/:settlementDate/file', operationId: 'downloadStatement' },
  { method: 'GET', url: '/events', operationId: 'listEvents' },
  { method: 'GET', url: '/events/:eventId', operationId: 'getEvent' },
  { method: 'POST', url: '/events/:eventId/redeliveries', operationId: 'redeliverEvent' },
  { method: 'GET', url: '/platform-keys', operationId: 'listPlatformKeys' },
] as const;

function caller(req: FastifyRequest): Caller {
  const g = req.gate;
  return { app: g.app!, merchantEntityType: g.merchantEntityType!, requestId: g.headers!.requestId, receivedAtMs: g.receivedAtMs };
}

/** The strict body of a create operation (parsed at step 1, judged here at step 9). */
function body(req: FastifyRequest): { value: unknown; decimals: ReadonlySet<string> } {
  const b = req.gate.body;
  if (b?.schemaRefusal !== undefined) throw new DomainError('VALIDATION_FAILED', b.schemaRefusal);
  if (!b || b.value === undefined) throw new DomainError('VALIDATION_FAILED', 'A JSON body is required.');
  return { value: b.value, decimals: b.decimalLiterals };
}

type P = { Params: Record<string, string> };

/**
 * The query of the request as sent (the signed target's), for the operations that read one (the
 * statement and the event log judge it strictly; the others ignore any query).
 */
function query(req: FastifyRequest): URLSearchParams {
  const target = requestTarget(req);
  const q = target.indexOf('?');
  return new URLSearchParams(q === -1 ? '' : target.slice(q + 1));
}

function context(svc: Services, req: FastifyRequest): RenderContext {
  return {
    requestId: req.gate.headers!.requestId,
    nowMs: svc.clock.now(),
    publicBaseUrl: svc.config.publicBaseUrl,
    voidedLinks: req.gate.app!.voidedLinks,
  };
}

/** The use case's result or refusal as an answer; anything else is a fault (the scope's 503). */
async function answerOf(svc: Services, req: FastifyRequest, op: () => Promise<OpenResult>): Promise<OpenAnswer> {
  try {
    return renderResult(await op(), context(svc, req));
  } catch (err) {
    if (err instanceof DomainError) return renderRefusal(err, req.gate.headers!.requestId);
    throw err;
  }
}

function decided(svc: Services, req: FastifyRequest, reply: FastifyReply, d: Decided): Promise<FastifyReply> {
  if (d.kind === 'conflict') return sendResult(svc, req, reply, failure(req, 'OPEN_API_REQUEST_ID_CONFLICT'));
  if (d.kind === 'busy') return sendResult(svc, req, reply, failure(req, 'OPEN_API_GUARD_UNAVAILABLE'));
  return sendOpen(svc, req, reply, d.status, d.body);
}

/** An answer as the request unit sends and keeps it: 429 and 503 are not kept for replay. */
const final = (a: OpenAnswer): FinalAnswer => ({ status: a.status, body: JSON.stringify(a.body), kept: keptForReplay(a.status) });

/**
 * Step 9 of a POST: the request id's unit around the operation. The id is claimed first, or,
 * with `joined`, by the operation's first write. The operation's answer (a result or a contract
 * refusal) is kept and replayed byte for byte; 429/503 and faults are not kept.
 */
async function runPost(
  svc: Services,
  req: FastifyRequest,
  reply: FastifyReply,
  op: (unit: RequestUnit) => Promise<OpenResult>,
  o: { joined?: boolean } = {},
): Promise<FastifyReply> {
  const g = req.gate;
  const unit = svc.units.open(
    {
      appId: g.app!.id,
      requestId: g.headers!.requestId,
      method: req.method,
      target: requestTarget(req),
      bodySha256: sha256Hex(g.body?.raw ?? Buffer.alloc(0)),
    },
    (result) => final(renderResult(result as OpenResult, context(svc, req))),
  );
  try {
    if (!o.joined) await unit.claim();
    let result: OpenResult | undefined;
    let refusal: OpenAnswer | undefined;
    try {
      result = await op(unit);
    } catch (err) {
      if (!(err instanceof DomainError)) throw err;
      refusal = renderRefusal(err, g.headers!.requestId);
    }
    // A result the operation recorded with its last write is sent as recorded: rendered only otherwise.
    const sent = await unit.finish(() => final(refusal ?? renderResult(result!, context(svc, req))));
    return await sendOpen(svc, req, reply, sent.status, sent.body, refusal?.headers);
  } catch (err) {
    if (err instanceof RequestDecided) return decided(svc, req, reply, err.outcome);
    await unit.abandon().catch(() => {});
    throw err;
  }
}

/** Step 9 of a GET: answered from current state. */
async function runRead(svc: Services, req: FastifyRequest, reply: FastifyReply, op: () => Promise<OpenResult>): Promise<FastifyReply> {
  return sendResult(svc, req, reply, await answerOf(svc, req, op));
}

/** A day's statement file, signed over its SHA-256 and streamed (docs/statements.md). */
async function sendStatementFile(svc: Services, req: FastifyRequest<P>, reply: FastifyReply): Promise<FastifyReply> {
  let file;
  try {
    file = await statementFile(svc, caller(req), req.params.settlementDate!, statementCompression(query(req)));
  } catch (err) {
    if (err instanceof DomainError) return sendResult(svc, req, reply, renderRefusal(err, req.gate.headers!.requestId));
    throw err;
  }
  const s = file.summary;
  return sendOpenStream(
    svc,
    req,
    reply,
    {
      contentType: statementContentType(s.compression),
      sha256: s.digest.sha256,
      sizeBytes: s.digest.sizeBytes,
      headers: { 'content-disposition': `attachment; filename="${statementFileName(s.appId, s.day.day, s.compression)}"` },
    },
    file.body,
  );
}

export async function openPlugin(scope: FastifyInstance, opts: { svc: Services }): Promise<void> {
  const { svc } = opts;
  installGate(scope, svc);

  // The requests in progress that statement work gives way to (src/usecases/statement-downloads.ts):
  // every open-API request but the statement's own, from its start until its answer ends (sent or cut).
  scope.addHook('onRequest', async (req, reply) => {
    if (req.routeOptions.url?.startsWith('/api/open/v1/statements/') === true) return;
    reply.raw.once('close', svc.openRequests.start());
  });
  const post = (req: FastifyRequest, reply: FastifyReply, op: (unit: RequestUnit) => Promise<OpenResult>, o?: { joined?: boolean }) =>
    runPost(svc, req, reply, op, o);
  const read = (req: FastifyRequest, reply: FastifyReply, op: () => Promise<OpenResult>) => runRead(svc, req, reply, op);

  // The two strict endpoints read their body; every other one ignores a valid body (gate/body.ts).
  const readsBody = { config: { readsBody: true } };
  scope.post('/payments', readsBody, (req, reply) =>
    post(
      req,
      reply,
      (unit) => {
        const b = body(req);
        return createOrder(svc, caller(req), parseCreateOrder(b.value, b.decimals), unit);
      },
      { joined: true },
    ),
  );
  scope.post<P>('/payments/:outTradeNo/attempts', (req, reply) =>
    post(req, reply, () => recreateAttempt(svc, caller(req), req.params.outTradeNo!)),
  );
  scope.get<P>('/payments/:outTradeNo', (req, reply) => read(req, reply, () => queryOrder(svc, caller(req), req.params.outTradeNo!)));
  scope.post<P>('/payments/:outTradeNo/close', (req, reply) =>
    post(req, reply, (unit) => closeOrder(svc, caller(req), req.params.outTradeNo!, unit), { joined: true }),
  );
  scope.post('/refunds', readsBody, (req, reply) =>
    post(
      req,
      reply,
      async (unit) => {
        const b = body(req);
        return createRefund(svc, caller(req), parseCreateRefund(b.value, b.decimals), unit);
      },
      { joined: true },
    ),
  );
  scope.get<P>('/refunds/:outRefundNo', (req, reply) => read(req, reply, () => queryRefund(svc, caller(req), req.params.outRefundNo!)));
  scope.get('/settlement/accounts', (req, reply) => read(req, reply, () => readSettlement(svc, caller(req))));

  // Statements (docs/statements.md): the summary, then the file, signed over its SHA-256 and streamed.
  scope.get<P>('/statements/:settlementDate', (req, reply) =>
    read(req, reply, async () => statementSummary(svc, caller(req), req.params.settlementDate!, statementCompression(query(req)))),
  );
  scope.get<P>('/statements/:settlementDate/file', (req, reply) => sendStatementFile(svc, req, reply));

  // The event log (docs/events.md, "Your event log").
  scope.get('/events', (req, reply) => read(req, reply, async () => listEvents(svc, caller(req), parseEventQuery(query(req)))));
  scope.get<P>('/events/:eventId', (req, reply) => read(req, reply, () => getEvent(svc, caller(req), req.params.eventId!)));
  scope.post<P>('/events/:eventId/redeliveries', (req, reply) =>
    post(req, reply, () => redeliverEvent(svc, caller(req), req.params.eventId!)),
  );

  // The platform's public keys, signed like every answer (docs/authentication.md, "Platform keys").
  scope.get('/platform-keys', (req, reply) => read(req, reply, async () => ({ kind: 'platform-keys', keys: await svc.keys.published() })));
}

/** 405 METHOD_NOT_ALLOWED (platform envelope) for the other methods of the mounted open paths. */
export async function openMethodNotAllowed(scope: FastifyInstance): Promise<void> {
  const byUrl = new Map<string, Set<string>>();
  for (const r of OPEN_ROUTES) byUrl.set(r.url, (byUrl.get(r.url) ?? new Set()).add(r.method));
  for (const [url, methods] of byUrl) {
    const others = scope.supportedMethods.filter((m) => !methods.has(m));
    scope.route({
      method: others as unknown as string[],
      url,
      handler: async (_req, reply) => {
        reply.code(405).header('allow', [...methods].join(', '));
        return { status: 405, error: 'METHOD_NOT_ALLOWED', message: `Method not allowed; this path accepts ${[...methods].join(', ')}.` };
      },
    });
  }
}
