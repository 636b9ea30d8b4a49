/**
 * The hosted cashier page behind payUrl (seed "payUrl", "Re-create attempt"; docs/cashier.md).
 *
 *   GET  /cashier/:token                  the page (HTML)
 *   GET  /cashier/:token/status           {state, expireAt, secondsLeft}, polled by the page
 *   POST /cashier/:token/sandbox/pay|fail the sandbox buyer's actions (only with the sandbox provider)
 *   GET  /cashier/assets/cashier.js       the page's one script
 *
 * The token is the attempt's 256-bit cashier token; it is the only key and it reaches nothing but
 * its own order. Every response carries the strict headers below, errors and 404s included. Every
 * HTML page is in the language the browser's Accept-Language asks for (i18n.ts); the JSON is not.
 */
import { createHash } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import QRCode from 'qrcode';
import type { Services } from '../services.ts';
import type { AttemptRow } from '../store/attempts.ts';
import type { OrderRow } from '../store/orders.ts';
import { cashierAttempt, merchantName } from '../usecases/cashier.ts';
import { type Lang, negotiateLang } from './i18n.ts';
import { type CashierView, type PageAssets, renderCashierPage, renderNotFoundPage, renderUnavailablePage } from './page.ts';
import { type CashierState, type CashierStatus, cashierState, cashierStatus } from './state.ts';

const ASSETS_DIR = path.join(import.meta.dirname, 'assets');
/** newId.cashierToken(): 32 random bytes, base64url without padding. Anything else is not looked up. */
const TOKEN_RE = /^[A-Za-z0-9_-]{43}$/;
/** The header the page's script sends with a sandbox action (see sandboxActionRefusal). */
const ACTION_HEADER = 'x-cashier-request';
const HTML = 'text/html; charset=utf-8';

// The token in the URL is a bearer secret: keep these routes' access lines (which log the URL) out of
// the info log. Warnings and errors are still logged.
const ROUTE_LOG = { logLevel: 'warn' } as const;
/** The page and its status also answer HEAD (link checkers, previews): same status and headers, no body. */
const PAGE_ROUTE = { ...ROUTE_LOG, exposeHeadRoute: true, config: { html: true } };
const STATUS_ROUTE = { ...ROUTE_LOG, exposeHeadRoute: true };

function securityHeaders(styleHash: string): Record<string, string> {
  return {
    'content-security-policy': [
      "default-src 'none'",
      "img-src 'self' data:",
      `style-src '${styleHash}'`,
      "script-src 'self'",
      "connect-src 'self'",
      "form-action 'self'",
      "frame-ancestors 'none'",
      "base-uri 'none'",
    ].join('; '),
    'x-frame-options': 'DENY',
    'referrer-policy': 'no-referrer',
    'x-content-type-options': 'nosniff',
    'cache-control': 'no-store',
    'cross-origin-opener-policy': 'same-origin',
    'cross-origin-resource-policy': 'same-origin',
    'permissions-policy': 'camera=(), microphone=(), geolocation=(), payment=()',
    'x-robots-tag': 'noindex, nofollow',
  };
}

interface Loaded {
  order: OrderRow;
  attempt: AttemptRow;
  state: CashierState;
  nowMs: number;
}

async function load(svc: Services, token: string): Promise<Loaded | null> {
  if (!TOKEN_RE.test(token)) return null;
  const found = await cashierAttempt(svc, token);
  if (!found) return null;
  const { order, attempt, latestSeq } = found;
  const nowMs = svc.clock.now();
  return { order, attempt, state: cashierState(order, attempt, latestSeq, nowMs), nowMs };
}

/**
 * Sandbox actions change money state, so they must come from this page's own script: a custom header
 * (cross-site it forces a CORS preflight, which is never approved here; an HTML form cannot send it),
 * and, when the browser says where the request comes from, that must be the cashier's own origin.
 */
function sandboxActionRefusal(req: FastifyRequest, cashierOrigin: string): string | null {
  if (req.headers[ACTION_HEADER] !== 'sandbox') return 'The action must be sent by the cashier page.';
  const origin = req.headers.origin;
  if (origin !== undefined && origin !== cashierOrigin) return 'Cross-origin actions are refused.';
  const site = req.headers['sec-fetch-site'];
  if (site !== undefined && site !== 'same-origin') return 'Cross-site actions are refused.';
  return null;
}

export async function cashierPlugin(scope: FastifyInstance, opts: { svc: Services }): Promise<void> {
  const { svc } = opts;
  const css = (await fs.readFile(path.join(ASSETS_DIR, 'cashier.css'), 'utf8')).trim();
  const script = await fs.readFile(path.join(ASSETS_DIR, 'cashier.js'), 'utf8');
  // Relative to /cashier/:token, so it also works when PUBLIC_BASE_URL carries a path prefix.
  const assets: PageAssets = { css, scriptPath: 'assets/cashier.js' };
  const headers = securityHeaders(`sha256-${createHash('sha256').update(css).digest('base64')}`);
  const cashierOrigin = new URL(svc.config.publicBaseUrl).origin;

  scope.addHook('onRequest', async (_req, reply) => {
    reply.headers(headers);
  });

  const notFoundJson = (reply: FastifyReply) => reply.code(404).send({ error: 'NOT_FOUND', message: 'Not found.' });
  /** Every HTML answer: in the buyer's language, and marked as depending on Accept-Language. */
  const sendPage = (req: FastifyRequest, reply: FastifyReply, code: number, render: (lang: Lang) => string) => {
    const lang = negotiateLang(req.headers['accept-language']);
    return reply.code(code).type(HTML).header('vary', 'Accept-Language').header('content-language', lang).send(render(lang));
  };
  const notFoundPage = (req: FastifyRequest, reply: FastifyReply) => sendPage(req, reply, 404, (lang) => renderNotFoundPage(assets, lang));

  scope.setNotFoundHandler((req, reply) =>
    req.method === 'GET' || req.method === 'HEAD' ? notFoundPage(req, reply) : notFoundJson(reply),
  );
  scope.setErrorHandler((err: FastifyError, req, reply) => {
    const status = typeof err.statusCode === 'number' && err.statusCode >= 400 && err.statusCode < 500 ? err.statusCode : 503;
    if (status === 503) req.log.error({ err }, 'cashier request failed');
    if ((req.routeOptions.config as { html?: boolean }).html) {
      return sendPage(req, reply, status, (lang) =>
        status === 503 ? renderUnavailablePage(assets, lang) : renderNotFoundPage(assets, lang),
      );
    }
    return reply
      .code(status)
      .send(
        status === 503
          ? { error: 'SERVICE_UNAVAILABLE', message: 'Service unavailable.' }
          : { error: 'BAD_REQUEST', message: 'Bad request.' },
      );
  });

  scope.get('/assets/cashier.js', ROUTE_LOG, async (_req, reply) => reply.type('text/javascript; charset=utf-8').send(script));

  scope.get<{ Params: { token: string } }>('/:token', PAGE_ROUTE, async (req, reply) => {
    const c = await load(svc, req.params.token);
    if (!c) return notFoundPage(req, reply);
    const { order, attempt, state } = c;
    const merchant = { name: await merchantName(svc, order.merchantId) };
    // Material only while payable: an ended, replaced or paid attempt never shows its old code.
    const qrCode = state === 'PAYABLE' && order.channel === 'ALIPAY_H5' ? attempt.qrCode : null;
    const view: CashierView = {
      state,
      merchantName: merchant?.name ?? '',
      subject: order.subject,
      amountFen: order.amountFen,
      channel: order.channel,
      secondsLeft: cashierStatus(state, order, attempt, c.nowMs).secondsLeft,
      payable: qrCode ? { qrCode, qrImage: await QRCode.toDataURL(qrCode, { errorCorrectionLevel: 'M', margin: 2, width: 480 }) } : null,
      // The provider's own payment page (the live adapters' redirectUrl), like the code only while
      // PAYABLE; the sandbox has none (its buyer acts on this page).
      providerPageUrl: state === 'PAYABLE' ? attempt.redirectUrl : null,
      returnUrl: state === 'PAID' ? order.returnUrl : null,
      sandboxActions: state === 'PAYABLE' && svc.sandbox !== null && attempt.provider === svc.sandbox.name,
    };
    return sendPage(req, reply, 200, (lang) => renderCashierPage(view, assets, lang));
  });

  scope.get<{ Params: { token: string } }>('/:token/status', STATUS_ROUTE, async (req, reply) => {
    const c = await load(svc, req.params.token);
    if (!c) return notFoundJson(reply);
    return cashierStatus(c.state, c.order, c.attempt, c.nowMs);
  });

  // With any other provider these routes do not exist (404 from the not-found handler).
  const sandbox = svc.sandbox;
  if (!sandbox) return;
  const notPayable = (reply: FastifyReply, status: CashierStatus) =>
    reply.code(409).send({ error: 'NOT_PAYABLE', message: 'This payment can no longer be acted on.', ...status });
  const buyer = (action: 'PAY' | 'FAIL') => async (req: FastifyRequest<{ Params: { token: string } }>, reply: FastifyReply) => {
    const refusal = sandboxActionRefusal(req, cashierOrigin);
    if (refusal) return reply.code(403).send({ error: 'FORBIDDEN', message: refusal });
    const c = await load(svc, req.params.token);
    if (!c) return notFoundJson(reply);
    if (c.state !== 'PAYABLE') return notPayable(reply, cashierStatus(c.state, c.order, c.attempt, c.nowMs));
    // The same path as a real provider: the sandbox records the buyer's action and notifies the service.
    const outcome = await sandbox.buyerAction(c.attempt.id, action);
    const after = (await load(svc, req.params.token))!;
    const status = cashierStatus(after.state, after.order, after.attempt, after.nowMs);
    // NOT_OPEN / NOT_FOUND / EXPIRED: the provider already ended this payment (a race with a re-create, a close or
    // the end of the window).
    if (outcome !== 'OK') return notPayable(reply, status);
    return status;
  };
  scope.post('/:token/sandbox/pay', ROUTE_LOG, buyer('PAY'));
  scope.post('/:token/sandbox/fail', ROUTE_LOG, buyer('FAIL'));
}
