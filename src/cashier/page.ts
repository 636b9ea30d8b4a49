/**
 * Server-rendered HTML of the cashier page. No framework and no external resources: the styles are
 * inlined (allowed by their CSP hash), the one script is same-origin, the QR code is a data: image.
 * Payment material appears only in the PAYABLE branch, and the caller passes it only then. Every
 * page is rendered in one language (i18n.ts), its texts from MESSAGES only.
 */
import type { JsapiPayment } from '../providers/provider.ts';
import { type Lang, MESSAGES, formatDuration, formatFen } from './i18n.ts';
import type { CashierState } from './state.ts';
import { escapeHtml } from '../lib/html.ts';
import type { Place, Way } from './where.ts';

export interface CashierView {
  state: CashierState;
  merchantName: string;
  subject: string;
  amountFen: number;
  channel: 'ALIPAY_H5' | 'WECHAT_H5';
  secondsLeft: number;
  /** Only while PAYABLE (ALIPAY_H5): the official collection code and its QR image (data: URL). */
  payable: { qrCode: string; qrImage: string } | null;
  /**
   * Only while PAYABLE: the provider's own payment page for this attempt (the attempt's redirectUrl:
   * Alipay's mobile-web page, WeChat Pay's h5_url); null for the sandbox. Shown only if http(s).
   */
  providerPageUrl: string | null;
  /** Only when PAID: the returnUrl frozen on the order, if it had one. */
  returnUrl: string | null;
  /** Only while PAYABLE with the sandbox provider: show the sandbox buyer actions. */
  sandboxActions: boolean;
  /** Where the page is opened (where.ts). */
  place: Place;
  /** How this page offers to pay (where.ts), and the other ways the buyer can switch to (`?via=`). */
  way: Way;
  otherWays: Way[];
  /** Only while PAYABLE, `native`: WeChat Pay's code_url of the attempt's Native trade, and its QR image. */
  wechatCode: { codeUrl: string; qrImage: string } | null;
  /**
   * Only while PAYABLE, `jsapi`: before WeChat's authorization, the link that starts it; after, the
   * signed parameters of WeChat's payment call for the buyer's JSAPI trade.
   */
  jsapi: { authorizeHref: string } | { payment: JsapiPayment } | null;
  /** The way's material could not be had: ask again (RETRY), not offered (UNAVAILABLE), WeChat's authorization failed (AUTH). */
  wayProblem: 'RETRY' | 'UNAVAILABLE' | 'AUTH' | null;
}

export interface PageAssets {
  css: string;
  scriptPath: string;
}

/** The Alipay app's hand-off for a collection code (opens the code as if scanned). */
export function alipayAppLink(qrCode: string): string {
  return `alipays://platformapi/startapp?saId=10000007&qrcode=${encodeURIComponent(qrCode)}`;
}

/** The URL itself when it is an absolute http(s) URL, else null (never a javascript: or app link). */
function webUrl(s: string | null): string | null {
  if (!s) return null;
  try {
    const { protocol } = new URL(s);
    return protocol === 'https:' || protocol === 'http:' ? s : null;
  } catch {
    return null;
  }
}

const ICONS = {
  ok: '<path d="M7 12.5l3.2 3.2L17 9" />',
  stop: '<path d="M8 8l8 8M16 8l-8 8" />',
  clock: '<path d="M12 7v5l3 2" />',
  swap: '<path d="M7 9h10l-3-3M17 15H7l3 3" />',
  busy: '<path d="M12 7v5" /><path d="M12 16v.5" />',
} as const;

function icon(kind: keyof typeof ICONS): string {
  return `<svg class="icon" viewBox="0 0 24 24" aria-hidden="true" focusable="false"><circle cx="12" cy="12" r="11" />${ICONS[kind]}</svg>`;
}

/** Final and waiting states: a heading, one explanation, never any payment material. */
const OUTCOMES: Record<Exclude<CashierState, 'PAYABLE'>, { icon: keyof typeof ICONS; tone: string }> = {
  PAID: { icon: 'ok', tone: 'good' },
  PROCESSING: { icon: 'busy', tone: 'wait' },
  EXPIRED: { icon: 'clock', tone: 'bad' },
  CLOSED: { icon: 'stop', tone: 'bad' },
  SUPERSEDED: { icon: 'swap', tone: 'bad' },
  FAILED: { icon: 'stop', tone: 'bad' },
};

function outcome(tone: string, kind: keyof typeof ICONS, h: { title: string; text: string }): string {
  return `<div class="outcome ${tone}">${icon(kind)}<h2>${h.title}</h2><p>${h.text}</p></div>`;
}

/** The countdown; the page's script keeps it running with the templates it carries. */
function timer(v: CashierView, lang: Lang): string {
  const t = MESSAGES[lang];
  return `<p class="timer">${t.timeLeft} <strong data-countdown data-format-minutes="${escapeHtml(t.durationMinutes)}" data-format-hours="${escapeHtml(t.durationHours)}">${formatDuration(v.secondsLeft, lang)}</strong></p>`;
}

/** The QR image of a code (the collection code, WeChat Pay's code_url), shown at 240 CSS px (a buyer can long-press it). */
function qrImage(src: string, alt: string): string {
  return `<img class="qr" src="${escapeHtml(src)}" width="240" height="240" alt="${alt}">`;
}

function problemText(v: CashierView, lang: Lang): string {
  const t = MESSAGES[lang];
  if (!v.wayProblem) return '';
  const text = v.wayProblem === 'RETRY' ? t.wayRetry : v.wayProblem === 'AUTH' ? t.wechatAuthFailed : t.wayUnavailable;
  return `<p class="error" role="alert">${text}</p>`;
}

/** ALIPAY_H5: the collection code everywhere; Alipay's page (or the app link) only where it opens (`page`); inside WeChat no link at all. */
function alipayBlock(v: CashierView, lang: Lang, providerPage: string): string {
  const t = MESSAGES[lang];
  const code = v.payable;
  if (!code) return providerPage;
  const img = qrImage(code.qrImage, t.qrAlt);
  if (v.place === 'WECHAT') {
    return `<div class="guide"><p><strong>${t.alipayInWechatTitle}</strong></p><p class="hint">${t.alipayInWechatText}</p></div>${img}
      <p class="hint">${t.alipayInWechatCode}</p>`;
  }
  if (v.way === 'code') return `${img}<p class="hint">${t.alipayCodeHint}</p>`;
  // With the provider's page, its link replaces the app link (Alipay's page opens the app itself).
  const appLink = `<a class="btn primary" href="${escapeHtml(alipayAppLink(code.qrCode))}" rel="noreferrer">${t.alipayOpenApp}</a>`;
  return `${img}
      <p class="hint">${providerPage ? t.alipayHintWithPage : t.alipayHint}</p>
      ${providerPage || appLink}`;
}

/** WECHAT_H5: WeChat's own payment sheet inside WeChat (`jsapi`), WeChat Pay's H5 page (`h5`), or a code to scan (`native`). */
function wechatBlock(v: CashierView, lang: Lang, providerPage: string): string {
  const t = MESSAGES[lang];
  if (v.way === 'native') {
    if (!v.wechatCode) return problemText(v, lang);
    return `${qrImage(v.wechatCode.qrImage, t.wechatQrAlt)}<p class="hint">${v.place === 'WECHAT' ? t.nativeHintInWechat : t.nativeHint}</p>`;
  }
  if (v.way === 'jsapi') {
    const j = v.jsapi;
    if (j && 'payment' in j) {
      const p = j.payment;
      const data = [
        ['app-id', p.appId],
        ['time-stamp', p.timeStamp],
        ['nonce-str', p.nonceStr],
        ['package', p.package],
        ['sign-type', p.signType],
        ['pay-sign', p.paySign],
      ]
        .map(([k, val]) => `data-${k}="${escapeHtml(val!)}"`)
        .join(' ');
      return `<p class="hint">${t.wechatPayHint}</p>
      <button class="btn primary" type="button" data-jsapi ${data}>${t.wechatPayNow}</button>
      <p class="error" data-jsapi-error data-error-cancelled="${escapeHtml(t.wechatPayNotDone)}" data-error-bridge="${escapeHtml(t.wechatNoBridge)}" role="alert" hidden></p>`;
    }
    const start = j && 'authorizeHref' in j ? `<a class="btn primary" href="${escapeHtml(j.authorizeHref)}">${t.wechatAuthorize}</a>` : '';
    return `${problemText(v, lang)}<p class="hint">${t.wechatAuthorizeHint}</p>${start}`;
  }
  if (providerPage) return `<p class="hint">${t.wechatPageHint}</p>${providerPage}`;
  if (v.wayProblem) return problemText(v, lang);
  // The sandbox's H5 has no provider page: its buyer acts with the buttons below.
  return `<div class="handoff"><p><strong>${t.wechatInside}</strong></p>
      <p class="hint">${t.wechatInsideHint}</p>${v.sandboxActions ? `<p class="hint">${t.sandboxWechat}</p>` : ''}</div>`;
}

/** The other ways the page can show at this place (`?via=`), when there are. */
function otherWays(v: CashierView, lang: Lang): string {
  const t = MESSAGES[lang];
  if (v.otherWays.length === 0) return '';
  const links = v.otherWays.map((w) => `<a href="?via=${w}" data-way="${w}">${t.ways[w]}</a>`).join('');
  return `<nav class="ways" aria-label="${t.otherWays}"><p>${t.otherWays}</p>${links}</nav>`;
}

function payableBlock(v: CashierView, lang: Lang): string {
  const t = MESSAGES[lang];
  const url = webUrl(v.providerPageUrl);
  // Origin only: WeChat Pay refuses an h5_url opened without a Referer of the registered domain, and the
  // full URL (this page's) carries the cashier token.
  const providerPage = url
    ? `<a class="btn primary" href="${escapeHtml(url)}" referrerpolicy="origin">${t.providerPage[v.channel]}</a>`
    : '';
  const how = v.channel === 'ALIPAY_H5' ? alipayBlock(v, lang, providerPage) : wechatBlock(v, lang, providerPage);
  const sandbox = v.sandboxActions
    ? `<div class="sandbox"><p class="tag">${t.sandboxTag}</p>
      <p class="hint">${t.sandboxText}</p>
      <div class="row"><button class="btn primary" type="button" data-sandbox-action="pay">${t.sandboxPay}</button>
      <button class="btn" type="button" data-sandbox-action="fail">${t.sandboxFail}</button></div>
      <p class="error" data-error data-error-failed="${escapeHtml(t.actionFailed)}" data-error-network="${escapeHtml(t.networkError)}" role="alert" hidden></p></div>`
    : '';
  return `${timer(v, lang)}${how}${sandbox}${otherWays(v, lang)}`;
}

function outcomeBlock(v: CashierView, state: Exclude<CashierState, 'PAYABLE'>, lang: Lang): string {
  const t = MESSAGES[lang];
  const back = v.returnUrl ? `<a class="btn primary" href="${escapeHtml(v.returnUrl)}" rel="noreferrer">${t.returnToMerchant}</a>` : '';
  return `${outcome(OUTCOMES[state].tone, OUTCOMES[state].icon, t.outcomes[state])}${state === 'PROCESSING' ? timer(v, lang) : ''}${back}`;
}

function shell(lang: Lang, title: string, body: string, assets: PageAssets, script: boolean): string {
  return `<!doctype html>
<html lang="${lang}">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1, viewport-fit=cover">
<meta name="referrer" content="no-referrer">
<meta name="robots" content="noindex, nofollow">
<meta name="format-detection" content="telephone=no">
<link rel="icon" href="data:,">
<title>${escapeHtml(title)}</title>
<style>${assets.css}</style>
${script ? `<script src="${assets.scriptPath}" defer></script>\n` : ''}</head>
<body>
${body}
</body>
</html>
`;
}

export function renderCashierPage(v: CashierView, assets: PageAssets, lang: Lang): string {
  const t = MESSAGES[lang];
  const amount = formatFen(v.amountFen, lang);
  const main = `<main id="cashier" class="${v.channel === 'WECHAT_H5' ? 'wechat' : 'alipay'}" data-state="${v.state}" data-seconds-left="${v.secondsLeft}">
<section class="card">
<p class="merchant">${escapeHtml(v.merchantName)}</p>
<h1 class="subject">${escapeHtml(v.subject)}</h1>
<p class="amount">${amount}</p>
<p class="channel">${t.channel[v.channel]}</p>
<div class="state" aria-live="polite">
${v.state === 'PAYABLE' ? payableBlock(v, lang) : outcomeBlock(v, v.state, lang)}
</div>
</section>
<p class="foot">${t.foot}</p>
</main>`;
  return shell(lang, `${amount} · ${v.merchantName}`, main, assets, true);
}

function messagePage(lang: Lang, state: 'NOT_FOUND' | 'UNAVAILABLE', assets: PageAssets): string {
  const h = state === 'NOT_FOUND' ? MESSAGES[lang].notFound : MESSAGES[lang].unavailable;
  const block = state === 'NOT_FOUND' ? outcome('bad', 'stop', h) : outcome('wait', 'busy', h);
  return shell(lang, h.title, `<main id="cashier" data-state="${state}"><section class="card">${block}</section></main>`, assets, false);
}

/** One neutral page for every unknown, malformed or foreign token: it tells nothing about any order. */
export function renderNotFoundPage(assets: PageAssets, lang: Lang): string {
  return messagePage(lang, 'NOT_FOUND', assets);
}

export function renderUnavailablePage(assets: PageAssets, lang: Lang): string {
  return messagePage(lang, 'UNAVAILABLE', assets);
}
