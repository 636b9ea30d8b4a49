/**
 * The request log as an operator reads it (LOG_LEVEL=info): the line Fastify writes when a request
 * completes names the request as the merchant knows it (its X-SVC-Request-Id, or the gw_ id of a
 * rejection before step 3) and the failure code.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import pino from 'pino';
import { loggerOptions } from '../../src/platform/log.ts';
import { type Merchant, type TestApp, call, orderBody, provision, startTestApp } from '../helpers/app.ts';
import { OPEN, send } from './gate-kit.test.ts';

const lines: Record<string, unknown>[] = [];
let t: TestApp;
let m: Merchant;
before(async () => {
  t = await startTestApp(
    {},
    { logger: { level: 'info', stream: { write: (l: string) => void lines.push(JSON.parse(l) as Record<string, unknown>) } } as never },
  );
  m = await provision(t);
});
after(() => t.stop());

const completed = (requestId: string) => lines.filter((l) => l.msg === 'request completed' && l.requestId === requestId);

test('a success: its X-SVC-Request-Id on the completed line, no code', async () => {
  const s = await send(t, m, 'POST', `${OPEN}/payments`, orderBody());
  assert.equal(s.r.statusCode, 201);
  const [l] = completed(s.requestId);
  assert.ok(l, 'a completed line with the request id');
  assert.equal((l.res as { statusCode: number }).statusCode, 201);
  assert.equal(l.code, undefined);
});

test('a failure after step 3: the request id and the code', async () => {
  const s = await send(t, m, 'GET', `${OPEN}/payments/NOPE_0001`);
  assert.equal(s.r.statusCode, 404);
  const [l] = completed(s.requestId);
  assert.equal(l?.code, 'OPEN_API_NOT_FOUND');
});

test('a rejection before step 3: the gw_ id the body carries, and the code', async () => {
  const r = await call(t, m, 'GET', `${OPEN}/settlement/accounts`, undefined, { omit: ['X-SVC-Nonce'] });
  assert.equal(r.statusCode, 400);
  const id = r.json().requestId as string;
  assert.match(id, /^gw_/);
  const [l] = completed(id);
  assert.equal(l?.code, 'OPEN_API_HEADER_INVALID');
});

test('a cashier token is never logged: with the logger npm start makes, an unknown path under /cashier/ is logged without its token', async () => {
  const lines: string[] = [];
  const logger = pino(loggerOptions('info'), { write: (l: string) => void lines.push(l) });
  const app = await startTestApp({}, { logger } as never);
  try {
    const token = 'Tok0kenOfAPaymentPage_0123456789abcdefghijk';
    for (const url of [`/cashier/${token}/`, `/cashier/${token}/status/x`, `/cashier/${token}/sandbox/pay`, `/cashier/${token}?via=page`]) {
      await app.server.inject({ method: 'GET', url });
    }
    await app.server.inject({ method: 'POST', url: `/cashier/${token}/status` });
    assert.ok(lines.length > 0, 'the unknown paths are logged');
    assert.ok(
      lines.some((l) => l.includes('/cashier/[token]/status/x')),
      lines.join('\n'),
    );
    assert.ok(
      lines.every((l) => !l.includes(token)),
      lines.filter((l) => l.includes(token)).join('\n'),
    );
  } finally {
    await app.stop();
  }
});
