/**
 * The cashier page's languages: Simplified Chinese (the default) and English, chosen from the
 * browser's Accept-Language; every text the buyer reads, and the locale's amount and countdown forms.
 * Machine-read bodies (the status JSON, the sandbox actions' JSON) stay language-neutral.
 */
import type { CashierState } from './state.ts';
import type { Way } from './where.ts';

export const LANGS = ['zh-CN', 'en'] as const;
export type Lang = (typeof LANGS)[number];
/** For a buyer whose browser states no usable preference: the buyers of Alipay and WeChat Pay read Chinese. */
export const DEFAULT_LANG: Lang = 'zh-CN';

/** The primary subtag that selects each language (zh, zh-CN, zh-Hans, zh-TW, zh-HK... all get zh-CN). */
const PRIMARY: Record<string, Lang> = { zh: 'zh-CN', en: 'en' };
const RANGE_RE = /^(?:\*|[a-z]{1,8}(?:-[a-z0-9]{1,8})*)$/i;
const QVALUE_RE = /^q=(0(?:\.\d{0,3})?|1(?:\.0{0,3})?)$/i;

/**
 * The language for an Accept-Language header (RFC 9110 §12.5.4): each supported language takes the
 * highest q-value of the ranges naming it by primary subtag, or else that of `*`; q=0 means "not
 * this one". The highest q wins; on a tie the range listed first wins (a named language before
 * `*`). Malformed entries are ignored; no acceptable supported language gives DEFAULT_LANG.
 */
export function negotiateLang(header: string | undefined): Lang {
  if (!header) return DEFAULT_LANG;
  let wildcard: { q: number; pos: number } | null = null;
  const named = new Map<Lang, { q: number; pos: number }>();
  const entries = header.split(',');
  entries: for (let pos = 0; pos < entries.length; pos++) {
    const [range = '', ...params] = entries[pos]!.split(';').map((s) => s.trim());
    if (!RANGE_RE.test(range)) continue;
    let q = 1;
    for (const p of params) {
      const m = QVALUE_RE.exec(p);
      if (!m) continue entries; // a malformed parameter makes the whole entry unusable
      q = Number(m[1]);
    }
    if (range === '*') {
      wildcard ??= { q, pos };
      continue;
    }
    const lang = PRIMARY[range.split('-')[0]!.toLowerCase()];
    const seen = lang && named.get(lang);
    if (lang && (!seen || q > seen.q)) named.set(lang, { q, pos });
  }
  let best: { lang: Lang; q: number; pos: number } = { lang: DEFAULT_LANG, q: 0, pos: Infinity };
  for (const lang of LANGS) {
    // `*` stands for the languages not named; it ranks after any named one of the same q.
    const pref = named.get(lang) ?? (wildcard ? { q: wildcard.q, pos: Infinity } : null);
    if (pref && pref.q > 0 && (pref.q > best.q || (pref.q === best.q && pref.pos < best.pos))) best = { lang, ...pref };
  }
  return best.lang;
}

type Channel = 'ALIPAY_H5' | 'WECHAT_H5';
type Heading = { title: string; text: string };

export interface Messages {
  /** Before the amount (CLDR: "¥" in zh-CN, "CN¥" in English, where "¥" alone reads as yen). */
  currency: string;
  /** The countdown under one hour and from one hour: {h}, {m} (no padding), {mm}, {ss} (two digits). */
  durationMinutes: string;
  durationHours: string;
  channel: Record<Channel, string>;
  timeLeft: string;
  qrAlt: string;
  alipayHint: string;
  /** With the provider's own page: the code is for scanning from another device. */
  alipayHintWithPage: string;
  alipayOpenApp: string;
  /** The link to the provider's own payment page. */
  providerPage: Record<Channel, string>;
  wechatInside: string;
  wechatInsideHint: string;
  wechatPageHint: string;
  /** Alipay opened inside WeChat: no Alipay link works there. */
  alipayInWechatTitle: string;
  alipayInWechatText: string;
  alipayInWechatCode: string;
  /** The collection code alone (a computer). */
  alipayCodeHint: string;
  /** WeChat Pay's Native code. */
  wechatQrAlt: string;
  nativeHint: string;
  nativeHintInWechat: string;
  /** Inside WeChat: WeChat's silent authorization first, then WeChat's own payment sheet. */
  wechatAuthorize: string;
  wechatAuthorizeHint: string;
  wechatAuthFailed: string;
  wechatPayNow: string;
  wechatPayHint: string;
  wechatPayNotDone: string;
  wechatNoBridge: string;
  /** A way's material could not be had. */
  wayRetry: string;
  wayUnavailable: string;
  /** The switch between ways. */
  otherWays: string;
  ways: Record<Way, string>;
  sandboxTag: string;
  sandboxText: string;
  sandboxWechat: string;
  sandboxPay: string;
  sandboxFail: string;
  actionFailed: string;
  networkError: string;
  returnToMerchant: string;
  foot: string;
  outcomes: Record<Exclude<CashierState, 'PAYABLE'>, Heading>;
  notFound: Heading;
  unavailable: Heading;
}

export const MESSAGES: Record<Lang, Messages> = {
  'zh-CN': {
    currency: '¥',
    durationMinutes: '{m}分{ss}秒',
    durationHours: '{h}小时{mm}分{ss}秒',
    channel: { ALIPAY_H5: '支付宝', WECHAT_H5: '微信支付' },
    timeLeft: '剩余支付时间',
    qrAlt: '支付宝付款码',
    alipayHint: '请用支付宝扫码，或在本机的支付宝中打开。',
    alipayHintWithPage: '可用另一部手机的支付宝扫码付款。',
    alipayOpenApp: '在支付宝中打开',
    providerPage: { ALIPAY_H5: '去支付宝付款', WECHAT_H5: '去微信支付付款' },
    wechatInside: '请在微信中付款',
    wechatInsideHint: '请在微信中打开此页面，使用微信支付付款。',
    wechatPageHint: '将打开微信完成付款。',
    alipayInWechatTitle: '请在浏览器中打开',
    alipayInWechatText: '微信内无法打开支付宝。请点击右上角“···”，选择“在浏览器打开”，再完成付款。',
    alipayInWechatCode: '也可以长按保存下方二维码，用支付宝扫码付款。',
    alipayCodeHint: '请用支付宝扫码付款。',
    wechatQrAlt: '微信支付二维码',
    nativeHint: '请用微信扫一扫付款。',
    nativeHintInWechat: '长按二维码，选择“识别图中二维码”付款。',
    wechatAuthorize: '微信支付',
    wechatAuthorizeHint: '将在微信中确认您的身份后付款。',
    wechatAuthFailed: '微信未能确认您的身份，请重试。',
    wechatPayNow: '立即支付',
    wechatPayHint: '请在微信中确认付款。',
    wechatPayNotDone: '付款未完成，可再次点击付款。',
    wechatNoBridge: '请在微信中打开此页面付款。',
    wayRetry: '暂时无法获取付款信息，请刷新页面重试，或选择其他付款方式。',
    wayUnavailable: '此付款方式暂不可用，请选择其他付款方式。',
    otherWays: '其他付款方式',
    ways: { jsapi: '微信内支付', h5: '在此浏览器中支付', native: '微信扫码支付', page: '打开支付宝支付', code: '支付宝扫码支付' },
    sandboxTag: '测试',
    sandboxText: '这是一笔测试付款，不会扣除真实款项。',
    sandboxWechat: '测试付款无需打开微信，请使用下方按钮。',
    sandboxPay: '模拟付款成功',
    sandboxFail: '模拟付款失败',
    actionFailed: '操作未能完成，请重试。',
    networkError: '网络错误，请重试。',
    returnToMerchant: '返回商家',
    foot: '安全支付页面 · 请勿分享此链接',
    outcomes: {
      PAID: { title: '支付成功', text: '商家已收到您的付款。' },
      PROCESSING: { title: '正在确认支付结果', text: '正在与支付机构确认付款结果，本页面会自动更新。' },
      EXPIRED: { title: '支付已超时', text: '本订单的付款时间已过，请向商家索取新的支付链接。' },
      CLOSED: { title: '支付已关闭', text: '这笔支付已关闭，无法继续付款。' },
      SUPERSEDED: { title: '链接已失效', text: '商家已为此订单发出新的支付链接，此链接不能再使用。' },
      FAILED: { title: '支付失败', text: '付款未成功，请联系商家重新发起。' },
    },
    notFound: { title: '找不到支付页面', text: '此链接无效。请检查链接，或向商家索取新的支付链接。' },
    unavailable: { title: '暂时无法访问', text: '支付页面暂时无法显示，请稍后再试。' },
  },
  en: {
    currency: 'CN¥',
    durationMinutes: '{m}:{ss}',
    durationHours: '{h}:{mm}:{ss}',
    channel: { ALIPAY_H5: 'Alipay', WECHAT_H5: 'WeChat Pay' },
    timeLeft: 'Time left',
    qrAlt: 'Alipay payment code',
    alipayHint: 'Scan with Alipay, or open it in the Alipay app on this phone.',
    alipayHintWithPage: 'Scan with Alipay on another phone, or use the button below.',
    alipayOpenApp: 'Open in Alipay',
    providerPage: { ALIPAY_H5: 'Pay with Alipay', WECHAT_H5: 'Pay with WeChat Pay' },
    wechatInside: 'Pay inside WeChat',
    wechatInsideHint: 'Open this page in WeChat to pay with WeChat Pay.',
    wechatPageHint: 'WeChat opens to complete the payment.',
    alipayInWechatTitle: 'Open this page in your browser',
    alipayInWechatText: 'Alipay cannot be opened inside WeChat. Tap “···” at the top right, choose “Open in Browser”, then pay.',
    alipayInWechatCode: 'Or press and hold the code below to save it, and scan it with Alipay.',
    alipayCodeHint: 'Scan the code with Alipay to pay.',
    wechatQrAlt: 'WeChat Pay code',
    nativeHint: 'Scan the code with WeChat to pay.',
    nativeHintInWechat: 'Press and hold the code, then choose “Scan QR Code in Image”.',
    wechatAuthorize: 'Pay with WeChat Pay',
    wechatAuthorizeHint: 'WeChat confirms who you are, then you pay.',
    wechatAuthFailed: 'WeChat could not confirm who you are. Please try again.',
    wechatPayNow: 'Pay now',
    wechatPayHint: 'Confirm the payment in WeChat.',
    wechatPayNotDone: 'The payment was not completed. Tap to try again.',
    wechatNoBridge: 'Open this page in WeChat to pay.',
    wayRetry: 'The payment details are not available right now. Reload the page to try again, or choose another way to pay.',
    wayUnavailable: 'This way to pay is not available. Choose another way to pay.',
    otherWays: 'Other ways to pay',
    ways: { jsapi: 'Pay in WeChat', h5: 'Pay in this browser', native: 'Scan with WeChat', page: 'Open Alipay', code: 'Scan with Alipay' },
    sandboxTag: 'Test',
    sandboxText: 'This is a test payment: no real money is charged.',
    sandboxWechat: 'For this test payment, use the buttons below instead.',
    sandboxPay: 'Simulate payment',
    sandboxFail: 'Simulate failure',
    actionFailed: 'The action could not be completed. Please try again.',
    networkError: 'Network error. Please try again.',
    returnToMerchant: 'Return to merchant',
    foot: 'Secure payment page · do not share this link',
    outcomes: {
      PAID: { title: 'Payment successful', text: 'The merchant has received your payment.' },
      PROCESSING: {
        title: 'Confirming payment',
        text: 'The payment is being confirmed with the payment provider. This page updates by itself.',
      },
      EXPIRED: { title: 'Payment expired', text: 'The time to pay this order has run out. Ask the merchant for a new payment link.' },
      CLOSED: { title: 'Payment closed', text: 'This payment has been closed and can no longer be paid.' },
      SUPERSEDED: {
        title: 'Link replaced',
        text: 'The merchant has issued a new payment link for this order. This one can no longer be used.',
      },
      FAILED: { title: 'Payment failed', text: 'The payment did not go through. Ask the merchant to try again.' },
    },
    notFound: { title: 'Payment page not found', text: 'This link is not valid. Check it, or ask the merchant for a new payment link.' },
    unavailable: { title: 'Temporarily unavailable', text: 'The payment page cannot be shown right now. Please try again in a moment.' },
  },
};

/** Fen as yuan in the language's form, e.g. 123456 -> "¥1,234.56". Integer arithmetic only (money never goes through a float). */
export function formatFen(fen: number, lang: Lang): string {
  if (!Number.isSafeInteger(fen) || fen < 0) throw new RangeError(`not an amount in fen: ${fen}`);
  const cents = fen % 100;
  const yuan = String((fen - cents) / 100).replace(/\B(?=(\d{3})+(?!\d))/g, ',');
  return `${MESSAGES[lang].currency}${yuan}.${String(cents).padStart(2, '0')}`;
}

/** Fills {name} placeholders. The page's script does the same with the templates the page carries. */
export function fill(template: string, values: Record<string, string | number>): string {
  return template.replace(/\{(\w+)\}/g, (all, k: string) => (k in values ? String(values[k]) : all));
}

/** The time left in the language's form ("14:05" / "14分05秒"; from one hour "1:02:03" / "1小时02分03秒"). */
export function formatDuration(seconds: number, lang: Lang): string {
  const s = Math.max(0, Math.floor(seconds));
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  const parts = { h, m, mm: String(m).padStart(2, '0'), ss: String(s % 60).padStart(2, '0') };
  return fill(h > 0 ? MESSAGES[lang].durationHours : MESSAGES[lang].durationMinutes, parts);
}
