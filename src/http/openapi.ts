/**
 * The OpenAPI 3.1 document of the open API, generated from the schemas the routes validate with
 * (src/domain/open-schemas.ts), the response schemas the tests check responses against, the gate's
 * header rules and the closed error table. Served at GET /docs/openapi.json.
 */
import type { FastifyInstance } from 'fastify';
import { OPEN_API_ERRORS, type OpenApiCode } from '../domain/errors.ts';
import { createOrderSchema, createRefundSchema } from '../domain/open-schemas.ts';
import {
  failureSchema,
  orderCloseSchema,
  orderCreatedSchema,
  orderQuerySchema,
  refundSchema,
  settlementSchema,
  webhookEventSchema,
} from '../domain/response-schemas.ts';
import { SIGNED_HEADERS } from '../gate/headers.ts';

const GATE_CODES: OpenApiCode[] = [
  'OPEN_API_BODY_INVALID',
  'OPEN_API_BODY_TOO_LARGE',
  'OPEN_API_SOURCE_IP_REJECTED',
  'OPEN_API_HEADER_INVALID',
  'OPEN_API_AUTH_FAILED',
  'OPEN_API_NONCE_REPLAYED',
  'OPEN_API_RATE_LIMITED',
  'OPEN_API_GUARD_UNAVAILABLE',
];
const POST_CODES: OpenApiCode[] = ['OPEN_API_CONTENT_TYPE_INVALID', 'OPEN_API_REQUEST_ID_CONFLICT'];

interface Op {
  method: 'get' | 'post';
  path: string;
  operationId: string;
  summary: string;
  body?: object;
  success: Record<string, { description: string; schema: object }>;
  codes: OpenApiCode[];
  pathParam?: string;
}

const OPS: Op[] = [
  {
    method: 'post',
    path: '/payments',
    operationId: 'createOrder',
    summary: 'Create order',
    body: createOrderSchema,
    success: {
      '201': { description: 'Created', schema: orderCreatedSchema },
      '200': { description: 'Idempotent replay (replayed=true)', schema: orderCreatedSchema },
    },
    codes: [
      'OPEN_API_IDEMPOTENCY_CONFLICT',
      'OPEN_API_CHANNEL_UNAVAILABLE',
      'OPEN_API_TRADE_SCOPE_UNAVAILABLE',
      'OPEN_API_LIMIT_EXCEEDED',
      'OPEN_API_PROVIDER_REJECTED',
    ],
  },
  {
    method: 'post',
    path: '/payments/{outTradeNo}/attempts',
    operationId: 'recreateAttempt',
    summary: 'Re-create payment attempt',
    pathParam: 'outTradeNo',
    success: {
      '201': { description: 'New attempt', schema: orderCreatedSchema },
      '200': { description: 'Projection of a concurrent winner', schema: orderCreatedSchema },
    },
    codes: [
      'OPEN_API_NOT_FOUND',
      'OPEN_API_STATE_INVALID',
      'OPEN_API_CHANNEL_UNAVAILABLE',
      'OPEN_API_TRADE_SCOPE_UNAVAILABLE',
      'OPEN_API_LIMIT_EXCEEDED',
      'OPEN_API_PROVIDER_REJECTED',
    ],
  },
  {
    method: 'get',
    path: '/payments/{outTradeNo}',
    operationId: 'queryOrder',
    summary: 'Query order (local ledger only)',
    pathParam: 'outTradeNo',
    success: { '200': { description: 'Order snapshot with latestAttempt', schema: orderQuerySchema } },
    codes: ['OPEN_API_NOT_FOUND'],
  },
  {
    method: 'post',
    path: '/payments/{outTradeNo}/close',
    operationId: 'closeOrder',
    summary: 'Close order (the provider confirms unpaid first)',
    pathParam: 'outTradeNo',
    success: { '200': { description: 'closeState and the order snapshot', schema: orderCloseSchema } },
    codes: ['OPEN_API_NOT_FOUND', 'OPEN_API_STATE_INVALID', 'OPEN_API_PROVIDER_REJECTED'],
  },
  {
    method: 'post',
    path: '/refunds',
    operationId: 'createRefund',
    summary: 'Create refund',
    body: createRefundSchema,
    success: {
      '201': { description: 'Accepted', schema: refundSchema },
      '200': { description: 'Idempotent replay', schema: refundSchema },
    },
    codes: [
      'OPEN_API_NOT_FOUND',
      'OPEN_API_IDEMPOTENCY_CONFLICT',
      'OPEN_API_STATE_INVALID',
      'OPEN_API_LIMIT_EXCEEDED',
      'OPEN_API_PROVIDER_REJECTED',
    ],
  },
  {
    method: 'get',
    path: '/refunds/{outRefundNo}',
    operationId: 'queryRefund',
    summary: 'Query refund (local state)',
    pathParam: 'outRefundNo',
    success: { '200': { description: 'Refund projection (replayed is always true)', schema: refundSchema } },
    codes: ['OPEN_API_NOT_FOUND'],
  },
  {
    method: 'get',
    path: '/settlement/accounts',
    operationId: 'readSettlement',
    summary: 'Read settlement accounts',
    success: { '200': { description: 'Settlement view', schema: settlementSchema } },
    codes: [],
  },
];

const RESPONSE_SIGNATURE_HEADERS = {
  'X-SVC-Request-Id': { description: 'Echoes the request identity (from gate step 4 on).', schema: { type: 'string' } },
  'X-SVC-Response-Sign': {
    description: 'Base64 RSA-SHA256 over the 5-line response signing string (decisions section 3).',
    schema: { type: 'string' },
  },
  'X-SVC-Response-Key-Id': { description: 'Platform key id (GET /api/admin/v1/platform-keys).', schema: { type: 'string' } },
  'X-SVC-Response-Timestamp': { description: 'Seconds.', schema: { type: 'string', pattern: '^[0-9]+$' } },
  'X-SVC-Response-Nonce': { description: '32 characters A-Za-z0-9.', schema: { type: 'string', pattern: '^[A-Za-z0-9]{32}$' } },
};

export function openApiDocument(serverUrl: string): Record<string, unknown> {
  const headerParams = Object.values(SIGNED_HEADERS).map((h) => ({
    name: h.name,
    in: 'header',
    required: true,
    schema: { type: 'string', pattern: h.re.source },
  }));
  const paths: Record<string, Record<string, unknown>> = {};
  for (const op of OPS) {
    const codes = [...GATE_CODES, ...(op.method === 'post' ? POST_CODES : []), ...op.codes];
    const byStatus = new Map<number, OpenApiCode[]>();
    for (const c of codes) byStatus.set(OPEN_API_ERRORS[c].status, [...(byStatus.get(OPEN_API_ERRORS[c].status) ?? []), c]);
    const responses: Record<string, unknown> = {};
    for (const [status, s] of Object.entries(op.success)) {
      responses[status] = {
        description: s.description,
        headers: RESPONSE_SIGNATURE_HEADERS,
        content: { 'application/json': { schema: s.schema } },
      };
    }
    for (const [status, cs] of [...byStatus].sort((a, b) => a[0] - b[0])) {
      responses[String(status)] = {
        description: cs.map((c) => `${c}: ${OPEN_API_ERRORS[c].message}`).join(' | '),
        headers:
          status === 429 ? { ...RESPONSE_SIGNATURE_HEADERS, 'Retry-After': { schema: { type: 'integer' } } } : RESPONSE_SIGNATURE_HEADERS,
        content: {
          'application/json': {
            schema: { ...failureSchema, properties: { ...failureSchema.properties, code: { type: 'string', enum: cs } } },
          },
        },
      };
    }
    const parameters: unknown[] = [...headerParams];
    if (op.method === 'post')
      parameters.push({ name: 'Content-Type', in: 'header', required: true, schema: { type: 'string', const: 'application/json' } });
    if (op.pathParam)
      parameters.push({ name: op.pathParam, in: 'path', required: true, schema: { type: 'string', pattern: '^[A-Za-z0-9_-]{6,64}$' } });
    paths[op.path] = {
      ...(paths[op.path] ?? {}),
      [op.method]: {
        operationId: op.operationId,
        summary: op.summary,
        parameters,
        ...(op.body ? { requestBody: { required: true, content: { 'application/json': { schema: op.body } } } } : {}),
        responses,
      },
    };
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'Merchant Payment Service open API',
      version: '1.0.0',
      description:
        'Server-to-server payment API. Every request is signed (RSA-SHA256 over a 9-line string, see docs/authentication.md); responses past the authentication chain carry a response signature. Amounts are integer fen.',
    },
    servers: [{ url: `${serverUrl}/api/open/v1` }],
    paths,
    webhooks: {
      event: {
        post: {
          operationId: 'eventNotification',
          summary: "Event notification, POSTed to the app's notifyUrl (docs/events.md)",
          description:
            'Signing string: four lines, each ending in \\n: X-SVC-Notify-Timestamp, X-SVC-Notify-Nonce, X-SVC-Event-Id, lower-case hex SHA-256 of the body; RSA-SHA256 with the platform key named by X-SVC-Notify-Key-Id, standard Base64. Any 2xx within 10 s acknowledges; otherwise retried after 15 s, 30 s, 1 min, 3 min, 10 min, 20 min, 30 min, 1 h, 3 h, 6 h, 12 h, 24 h.',
          parameters: ['X-SVC-Event-Id', 'X-SVC-Notify-Timestamp', 'X-SVC-Notify-Nonce', 'X-SVC-Notify-Key-Id', 'X-SVC-Notify-Sign'].map(
            (name) => ({ name, in: 'header', required: true, schema: { type: 'string' } }),
          ),
          requestBody: { required: true, content: { 'application/json': { schema: webhookEventSchema } } },
          responses: { '2XX': { description: 'Acknowledged' } },
        },
      },
    },
  };
}

export async function docsPlugin(scope: FastifyInstance, opts: { publicBaseUrl: string }): Promise<void> {
  const doc = JSON.stringify(openApiDocument(opts.publicBaseUrl));
  scope.get('/openapi.json', async (_req, reply) => reply.type('application/json; charset=utf-8').send(doc));
}
