/**
 * The open API under /api/open/v1: one scope with the gate; thin handlers, one use case each.
 * Paths and methods not mounted here answer with the platform envelope (see app.ts).
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { ApiError } from '../domain/errors.ts';
import { parseCreateOrder, parseCreateRefund } from '../domain/order-input.ts';
import { installGate, runRead, runWithReplay } from '../gate/gate.ts';
import type { Services } from '../services.ts';
import { type Caller, closeOrder, createOrder, queryOrder, recreateAttempt } from '../usecases/orders.ts';
import { createRefund, queryRefund, readSettlement } from '../usecases/refunds.ts';

export const OPEN_ROUTES = [
  { method: 'POST', url: '/payments', operationId: 'createOrder' },
  { method: 'POST', url: '/payments/:outTradeNo/attempts', operationId: 'recreateAttempt' },
  { method: 'GET', url: '/payments/:outTradeNo', operationId: 'queryOrder' },
  { method: 'POST', url: '/payments/:outTradeNo/close', operationId: 'closeOrder' },
  { method: 'POST', url: '/refunds', operationId: 'createRefund' },
  { method: 'GET', url: '/refunds/:outRefundNo', operationId: 'queryRefund' },
  { method: 'GET', url: '/settlement/accounts', operationId: 'readSettlement' },
] as const;

function caller(req: FastifyRequest): Caller {
  const g = req.gate;
  return { app: g.app!, merchantEntityType: g.merchantEntityType!, requestId: g.headers!.requestId, receivedAtMs: g.receivedAtMs };
}

function body(req: FastifyRequest): { value: unknown; decimals: ReadonlySet<string> } {
  const b = req.gate.body;
  if (b?.schemaRefusal !== undefined) throw new ApiError('OPEN_API_BODY_INVALID', b.schemaRefusal);
  if (!b || b.value === undefined) throw new ApiError('OPEN_API_BODY_INVALID', 'A JSON body is required.');
  return { value: b.value, decimals: b.decimalLiterals };
}

type P = { Params: Record<string, string> };

export async function openPlugin(scope: FastifyInstance, opts: { svc: Services }): Promise<void> {
  const { svc } = opts;
  installGate(scope, svc);

  // The two strict endpoints read their body; every other one ignores a valid body (http/common.ts).
  const readsBody = { config: { readsBody: true } };
  scope.post('/payments', readsBody, (req, reply) =>
    runWithReplay(
      svc,
      req,
      reply,
      async (replay) => {
        const b = body(req);
        return createOrder(svc, caller(req), parseCreateOrder(b.value, b.decimals), replay);
      },
      { inlineClaim: true },
    ),
  );
  scope.post<P>('/payments/:outTradeNo/attempts', (req, reply) =>
    runWithReplay(svc, req, reply, () => recreateAttempt(svc, caller(req), req.params.outTradeNo!)),
  );
  scope.get<P>('/payments/:outTradeNo', (req, reply) =>
    runRead(svc, req, reply, () => queryOrder(svc, caller(req), req.params.outTradeNo!)),
  );
  scope.post<P>('/payments/:outTradeNo/close', (req, reply) =>
    runWithReplay(svc, req, reply, () => closeOrder(svc, caller(req), req.params.outTradeNo!)),
  );
  scope.post('/refunds', readsBody, (req, reply) =>
    runWithReplay(svc, req, reply, async () => {
      const b = body(req);
      return createRefund(svc, caller(req), parseCreateRefund(b.value, b.decimals));
    }),
  );
  scope.get<P>('/refunds/:outRefundNo', (req, reply) =>
    runRead(svc, req, reply, () => queryRefund(svc, caller(req), req.params.outRefundNo!)),
  );
  scope.get('/settlement/accounts', (req, reply) => runRead(svc, req, reply, () => readSettlement(svc, caller(req))));
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
