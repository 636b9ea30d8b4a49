/**
 * Server-rendered HTML of the cashier page. No framework and no external resources: the styles are
 * inlined (allowed by their CSP hash), the one script is same-origin, the QR code is a data: image.
 * Payment material appears only in the PAYABLE branch, and the caller passes it only then.
 */
import type { CashierState } from './state.ts';

export interface CashierView {
  state: CashierState;
  merchantName: string;
  subject: string;
  amountFen: number;
  channel: 'ALIPAY_H5' | 'WECHAT_H5';
  secondsLeft: number;
  /** Only while PAYABLE (ALIPAY_H5): the official collection code and its QR image (data: URL). */
  payable: { qrCode: string; qrImage: string } | null;
  /** Only when PAID: the returnUrl frozen on the order, if it had one. */
  returnUrl: string | null;
  /** Only while PAYABLE with the sandbox provider: show the sandbox buyer actions. */
  sandboxActions: boolean;
}

export interface PageAssets {
  css: string;
  scriptPath: string;
}

const HTML_ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

export function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => HTML_ESCAPES[c]!);
}

/** Fen as yuan, e.g. 123456 -> "¥1,234.56". Integer arithmetic only (money never goes through a float). */
export function formatFen(fen: number): string {
  if (!Number.isSafeInteger(fen) || fen < 0) throw new RangeError(`not an amount in fen: ${fen}`);
  const cents = fen % 100;
  const yuan = String((fen - cents) / 100).replace(/\B(?=(\d{3})+(?!\d))/g, ',');
  return `¥${yuan}.${String(cents).padStart(2, '0')}`;
}

/** Seconds as m:ss, or h:mm:ss from one hour (payment windows are up to 2 hours). */
export function formatDuration(seconds: number): string {
  const s = Math.max(0, Math.floor(seconds));
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  const ss = String(s % 60).padStart(2, '0');
  return h > 0 ? `${h}:${String(m).padStart(2, '0')}:${ss}` : `${m}:${ss}`;
}

/** The Alipay app's hand-off for a collection code (opens the code as if scanned). */
export function alipayAppLink(qrCode: string): string {
  return `alipays://platformapi/startapp?saId=10000007&qrcode=${encodeURIComponent(qrCode)}`;
}

const CHANNEL_NAME = { ALIPAY_H5: 'Alipay', WECHAT_H5: 'WeChat Pay' } as const;

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
const OUTCOMES: Record<Exclude<CashierState, 'PAYABLE'>, { icon: keyof typeof ICONS; tone: string; title: string; text: string }> = {
  PAID: { icon: 'ok', tone: 'good', title: 'Payment successful', text: 'The merchant has received your payment.' },
  PROCESSING: {
    icon: 'busy',
    tone: 'wait',
    title: 'Confirming payment',
    text: 'The payment is being confirmed with the payment provider. This page updates by itself.',
  },
  EXPIRED: {
    icon: 'clock',
    tone: 'bad',
    title: 'Payment expired',
    text: 'The time to pay this order has run out. Ask the merchant for a new payment link.',
  },
  CLOSED: { icon: 'stop', tone: 'bad', title: 'Payment closed', text: 'This payment has been closed and can no longer be paid.' },
  SUPERSEDED: {
    icon: 'swap',
    tone: 'bad',
    title: 'Link replaced',
    text: 'The merchant has issued a new payment link for this order. This one can no longer be used.',
  },
  FAILED: { icon: 'stop', tone: 'bad', title: 'Payment failed', text: 'The payment did not go through. Ask the merchant to try again.' },
};

function payableBlock(v: CashierView): string {
  const timer = `<p class="timer">Time left <strong data-countdown>${formatDuration(v.secondsLeft)}</strong></p>`;
  let how: string;
  if (v.channel === 'ALIPAY_H5' && v.payable) {
    const code = v.payable;
    how = `<img class="qr" src="${escapeHtml(code.qrImage)}" width="240" height="240" alt="Alipay payment code">
      <p class="hint">Scan with Alipay, or open it in the Alipay app on this phone.</p>
      <a class="btn primary" href="${escapeHtml(alipayAppLink(code.qrCode))}" rel="noreferrer">Open in Alipay</a>`;
  } else {
    // WECHAT_H5: the JSAPI payment runs inside WeChat's own browser; the attempt holds no material for
    // this page to show, so it explains the hand-off instead of inventing any.
    how = `<div class="handoff"><p><strong>Pay inside WeChat</strong></p>
      <p class="hint">Open this page in WeChat to pay with WeChat Pay.${v.sandboxActions ? ' In the sandbox there is no WeChat: use the sandbox buttons below.' : ''}</p></div>`;
  }
  const sandbox = v.sandboxActions
    ? `<div class="sandbox"><p class="tag">Sandbox</p>
      <p class="hint">Acts as the buyer at the sandbox provider; the result arrives as a provider notification.</p>
      <div class="row"><button class="btn primary" type="button" data-sandbox-action="pay">Pay (sandbox)</button>
      <button class="btn" type="button" data-sandbox-action="fail">Fail (sandbox)</button></div>
      <p class="error" data-error role="alert" hidden></p></div>`
    : '';
  return `${timer}${how}${sandbox}`;
}

function outcomeBlock(v: CashierView, state: Exclude<CashierState, 'PAYABLE'>): string {
  const o = OUTCOMES[state];
  const back = v.returnUrl ? `<a class="btn primary" href="${escapeHtml(v.returnUrl)}" rel="noreferrer">Return to merchant</a>` : '';
  const timer =
    state === 'PROCESSING' ? `<p class="timer">Time left <strong data-countdown>${formatDuration(v.secondsLeft)}</strong></p>` : '';
  return `<div class="outcome ${o.tone}">${icon(o.icon)}<h2>${o.title}</h2><p>${o.text}</p></div>${timer}${back}`;
}

function shell(title: string, body: string, assets: PageAssets, script: boolean): string {
  return `<!doctype html>
<html lang="en">
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

export function renderCashierPage(v: CashierView, assets: PageAssets): string {
  const amount = formatFen(v.amountFen);
  const main = `<main id="cashier" class="${v.channel === 'WECHAT_H5' ? 'wechat' : 'alipay'}" data-state="${v.state}" data-seconds-left="${v.secondsLeft}">
<section class="card">
<p class="merchant">${escapeHtml(v.merchantName)}</p>
<h1 class="subject">${escapeHtml(v.subject)}</h1>
<p class="amount">${amount}</p>
<p class="channel">${CHANNEL_NAME[v.channel]}</p>
<div class="state" aria-live="polite">
${v.state === 'PAYABLE' ? payableBlock(v) : outcomeBlock(v, v.state)}
</div>
</section>
<p class="foot">Secure payment page · do not share this link</p>
</main>`;
  return shell(`${amount} · ${v.merchantName}`, main, assets, true);
}

/** One neutral page for every unknown, malformed or foreign token: it tells nothing about any order. */
export function renderNotFoundPage(assets: PageAssets): string {
  const main = `<main id="cashier" data-state="NOT_FOUND"><section class="card"><div class="outcome bad">${icon('stop')}
<h2>Payment page not found</h2><p>This link is not valid. Check it, or ask the merchant for a new payment link.</p></div></section></main>`;
  return shell('Payment page not found', main, assets, false);
}

export function renderUnavailablePage(assets: PageAssets): string {
  const main = `<main id="cashier" data-state="UNAVAILABLE"><section class="card"><div class="outcome wait">${icon('busy')}
<h2>Temporarily unavailable</h2><p>The payment page cannot be shown right now. Please try again in a moment.</p></div></section></main>`;
  return shell('Temporarily unavailable', main, assets, false);
}
