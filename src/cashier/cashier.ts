/**
 * The hosted cashier page behind payUrl (seed "payUrl", "Re-create attempt"; docs/cashier.md).
 *
 *   GET  /cashier/:token                  the page (HTML); `?via=` a way to pay (where.ts), `&payer=` a JSAPI trade's handle
 *   GET  /cashier/:token/status           {state, expireAt, secondsLeft}, polled by the page
 *   GET  /cashier/:token/wechat/authorize starts WeChat's silent web authorization (302 to WeChat)
 *   GET  /cashier/:token/wechat/callback  where WeChat sends the buyer back (code, state): 303 to the page
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
import {
  type TradeForPage,
  beginAuthorization,
  finishAuthorization,
  freshProviderPage,
  jsapiPaymentOf,
  jsapiTradeForPage,
  offersProduct,
  tradeForPage,
  tradeNoOfWay,
} from '../usecases/cashier-trades.ts';
import { type Lang, negotiateLang } from './i18n.ts';
import { type CashierView, type PageAssets, renderCashierPage, renderNotFoundPage, renderUnavailablePage } from './page.ts';
import { type CashierState, type CashierStatus, cashierState, cashierStatus } from './state.ts';
import { type Place, type Way, chooseWay, placeOf, waysAt } from './where.ts';

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
/** WeChat's authorization round trip: redirects, no HEAD (a link checker must not start one). */
const OAUTH_ROUTE = { ...ROUTE_LOG, exposeHeadRoute: false, config: { html: true } };
/** A JSAPI trade's handle in the page's address (newId.tradeHandle()). */
const HANDLE_RE = /^[A-Za-z0-9_-]{22}$/;
/** WeChat's `state` (letters and digits) and `code` (visible ASCII), as far as the page accepts them. */
const STATE_RE = /^[A-Za-z0-9]{1,128}$/;
const CODE_RE = /^[\x21-\x7e]{1,256}$/;
const QR = { errorCorrectionLevel: 'M', margin: 2, width: 480 } as const;

/** A query parameter given once as a string, else null. */
function param(q: unknown, name: string): string | null {
  const v = (q as Record<string, unknown> | undefined)?.[name];
  return typeof v === 'string' ? v : null;
}
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

  const p = pages(assets);
  const { sendPage, notFoundPage } = p;

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

  registerPage(scope, svc, p);
  registerWechatAuthorization(scope, svc, p);
  scope.get<{ Params: { token: string } }>('/:token/status', STATUS_ROUTE, async (req, reply) => {
    const c = await load(svc, req.params.token);
    if (!c) return notFoundJson(reply);
    return cashierStatus(c.state, c.order, c.attempt, c.nowMs);
  });

  // With any other provider these routes do not exist (404 from the not-found handler).
  if (svc.sandbox) registerSandboxActions(scope, svc, svc.sandbox, cashierOrigin);
}

const notFoundJson = (reply: FastifyReply) => reply.code(404).send({ error: 'NOT_FOUND', message: 'Not found.' });

/** How the page's routes answer in HTML. */
interface Pages {
  assets: PageAssets;
  /** Every HTML answer: in the buyer's language, and marked as depending on Accept-Language. */
  sendPage(req: FastifyRequest, reply: FastifyReply, code: number, render: (lang: Lang) => string): FastifyReply;
  notFoundPage(req: FastifyRequest, reply: FastifyReply): FastifyReply;
}

function pages(assets: PageAssets): Pages {
  const sendPage: Pages['sendPage'] = (req, reply, code, render) => {
    const lang = negotiateLang(req.headers['accept-language']);
    return reply.code(code).type(HTML).header('vary', 'Accept-Language').header('content-language', lang).send(render(lang));
  };
  return { assets, sendPage, notFoundPage: (req, reply) => sendPage(req, reply, 404, (lang) => renderNotFoundPage(assets, lang)) };
}

/** The page: the way to pay chosen for the buyer's browser, and its material while the attempt is payable. */
function registerPage(scope: FastifyInstance, svc: Services, p: Pages): void {
  scope.get<{ Params: { token: string } }>('/:token', PAGE_ROUTE, async (req, reply) => {
    const c = await load(svc, req.params.token);
    if (!c) return p.notFoundPage(req, reply);
    const { order, attempt, state } = c;
    const merchant = { name: await merchantName(svc, order.merchantId) };
    const payable = state === 'PAYABLE';
    const place = placeOf(req.headers['user-agent']);
    const ways = waysAtPlace(svc, c, place);
    const way = chooseWay(ways, param(req.query, 'via'));
    // Material only while payable: an ended, replaced or paid attempt never shows its old code. A
    // trade is made only by a GET (a HEAD, e.g. a link preview, makes none).
    const qrCode = payable && order.channel === 'ALIPAY_H5' ? attempt.qrCode : null;
    const material = payable && req.method === 'GET' ? await wayMaterial(svc, req, c, way) : NO_MATERIAL;
    const view: CashierView = {
      state,
      merchantName: merchant?.name ?? '',
      subject: order.subject,
      amountFen: order.amountFen,
      channel: order.channel,
      secondsLeft: cashierStatus(state, order, attempt, c.nowMs).secondsLeft,
      payable: qrCode ? { qrCode, qrImage: await QRCode.toDataURL(qrCode, QR) } : null,
      // The provider's own payment page (the live adapters' redirectUrl), like the code only while
      // PAYABLE; the sandbox has none (its buyer acts on this page).
      providerPageUrl: payable ? attempt.redirectUrl : null,
      returnUrl: state === 'PAID' ? order.returnUrl : null,
      sandboxActions: payable && svc.sandbox !== null && attempt.provider === svc.sandbox.name,
      place,
      way,
      otherWays: ways.filter((w) => w !== way),
      ...material,
    };
    return p.sendPage(req, reply, 200, (lang) => renderCashierPage(view, p.assets, lang));
  });
}

/** The ways to pay the page offers for this order at `place` (where its link is opened). */
function waysAtPlace(svc: Services, c: Loaded, place: Place): Way[] {
  return waysAt(c.order.channel, place, {
    jsapi: offersProduct(svc, c.attempt, 'JSAPI'),
    native: offersProduct(svc, c.attempt, 'NATIVE'),
  });
}

type Material = Pick<CashierView, 'wechatCode' | 'jsapi' | 'wayProblem'> & { providerPageUrl?: string | null };
const NO_MATERIAL: Material = { wechatCode: null, jsapi: null, wayProblem: null };
const problemOf = (r: TradeForPage): CashierView['wayProblem'] =>
  r.problem === null ? null : r.problem === 'UNCERTAIN' || r.problem === 'REJECTED' ? 'RETRY' : 'UNAVAILABLE';

/** What the way needs beyond the attempt's own material: a Native trade's code, a JSAPI trade's signed parameters. */
async function wayMaterial(svc: Services, req: FastifyRequest<{ Params: { token: string } }>, c: Loaded, way: Way): Promise<Material> {
  if (way === 'native') {
    const r = await tradeForPage(svc, c.order, c.attempt, 'NATIVE');
    const code = r.trade?.state === 'OPEN' ? r.trade.material : null;
    if (!code) return { ...NO_MATERIAL, wayProblem: problemOf(r) ?? 'RETRY' };
    return { ...NO_MATERIAL, wechatCode: { codeUrl: code, qrImage: await QRCode.toDataURL(code, QR) } };
  }
  if (way === 'jsapi') {
    const handle = param(req.query, 'payer');
    const authorize = { authorizeHref: `${req.params.token}/wechat/authorize` };
    if (handle === null || !HANDLE_RE.test(handle)) {
      return { ...NO_MATERIAL, jsapi: authorize, wayProblem: param(req.query, 'oauth') === 'failed' ? 'AUTH' : null };
    }
    const r = await jsapiTradeForPage(svc, c.order, c.attempt, handle);
    // A handle of no trade of this attempt: authorized again.
    if (!r) return { ...NO_MATERIAL, jsapi: authorize };
    const payment = r.trade ? jsapiPaymentOf(svc, r.trade) : null;
    return payment ? { ...NO_MATERIAL, jsapi: { payment } } : { ...NO_MATERIAL, jsapi: authorize, wayProblem: problemOf(r) ?? 'RETRY' };
  }
  // The attempt's own order: its material came with it; WeChat Pay's page, which lives 5 minutes,
  // is asked again when older (a live WECHAT_H5 attempt without its page can only be asked again later).
  if (way === 'h5' && c.attempt.provider !== svc.sandbox?.name) {
    const page = await freshProviderPage(svc, c.order, c.attempt);
    return page === null ? { ...NO_MATERIAL, wayProblem: 'RETRY' } : { ...NO_MATERIAL, providerPageUrl: page };
  }
  return NO_MATERIAL;
}

/**
 * WeChat's silent web authorization (snsapi_base): a state bound to this page's attempt, used
 * once; the code exchanged on the server for the buyer's openid, which never leaves the server.
 */
function registerWechatAuthorization(scope: FastifyInstance, svc: Services, p: Pages): void {
  const pageUrl = (token: string, query = '') => `${svc.config.publicBaseUrl}/cashier/${token}${query}`;
  const backToPage = (reply: FastifyReply, token: string, query: string) =>
    reply.code(303).header('location', pageUrl(token, query)).send();

  scope.get<{ Params: { token: string } }>('/:token/wechat/authorize', OAUTH_ROUTE, async (req, reply) => {
    const c = await load(svc, req.params.token);
    if (!c) return p.notFoundPage(req, reply);
    // Only where the page offers JSAPI (a WECHAT_H5 order, inside WeChat): never a WeChat Pay
    // trade for an Alipay order, nor an authorization a browser elsewhere cannot pay with.
    if (c.state !== 'PAYABLE' || !waysAtPlace(svc, c, placeOf(req.headers['user-agent'])).includes('jsapi'))
      return backToPage(reply, req.params.token, '');
    const url = await beginAuthorization(svc, c.attempt, `${pageUrl(req.params.token)}/wechat/callback`);
    if (url === null) return backToPage(reply, req.params.token, '?via=jsapi&oauth=failed');
    return reply.code(302).header('location', url).send();
  });

  scope.get<{ Params: { token: string } }>('/:token/wechat/callback', OAUTH_ROUTE, async (req, reply) => {
    const c = await load(svc, req.params.token);
    if (!c) return p.notFoundPage(req, reply);
    if (c.state !== 'PAYABLE' || !waysAtPlace(svc, c, placeOf(req.headers['user-agent'])).includes('jsapi'))
      return backToPage(reply, req.params.token, '');
    const state = param(req.query, 'state');
    const code = param(req.query, 'code');
    if (state === null || code === null || !STATE_RE.test(state) || !CODE_RE.test(code)) {
      return backToPage(reply, req.params.token, '?via=jsapi&oauth=failed');
    }
    const r = await finishAuthorization(svc, c.order, c.attempt, state, code);
    if ('problem' in r) return backToPage(reply, req.params.token, '?via=jsapi&oauth=failed');
    return backToPage(reply, req.params.token, `?via=jsapi&payer=${r.handle}`);
  });
}

/** The sandbox buyer's actions (pay, fail), sent by the page's own script only. */
function registerSandboxActions(
  scope: FastifyInstance,
  svc: Services,
  sandbox: NonNullable<Services['sandbox']>,
  cashierOrigin: string,
): void {
  const notPayable = (reply: FastifyReply, status: CashierStatus) =>
    reply.code(409).send({ error: 'NOT_PAYABLE', message: 'This payment can no longer be acted on.', ...status });
  const buyer = (action: 'PAY' | 'FAIL') => async (req: FastifyRequest<{ Params: { token: string } }>, reply: FastifyReply) => {
    const refusal = sandboxActionRefusal(req, cashierOrigin);
    if (refusal) return reply.code(403).send({ error: 'FORBIDDEN', message: refusal });
    const c = await load(svc, req.params.token);
    if (!c) return notFoundJson(reply);
    if (c.state !== 'PAYABLE') return notPayable(reply, cashierStatus(c.state, c.order, c.attempt, c.nowMs));
    // The same path as a real provider: the sandbox records the buyer's action and notifies the
    // service. A payment pays the provider order of the way the page shows (`?via=`: the attempt's
    // own, or its Native or JSAPI trade); a failure is the attempt's own payment failing.
    const payer = param(req.query, 'payer');
    const no =
      action === 'PAY'
        ? await tradeNoOfWay(svc, c.attempt, param(req.query, 'via') ?? '', payer && HANDLE_RE.test(payer) ? payer : null)
        : c.attempt.id;
    const outcome = await sandbox.buyerAction(no, action);
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
