/**
 * Where the cashier page is opened, and which way to pay it offers there (docs/cashier.md, "Where
 * the page is opened"). Pure: decided from the User-Agent and the buyer's own choice (`?via=`).
 *
 * Detection, first rule that matches the User-Agent:
 *   - `MicroMessenger/`: inside WeChat (its in-app browser, on a phone or on a computer);
 *   - `AlipayClient/`: inside the Alipay app;
 *   - `Mobi`, `Android`, `iPhone`, `iPod`, `iPad`, `HarmonyOS`, `OpenHarmony`, `Windows Phone`: a
 *     phone's (or tablet's) browser;
 *   - anything else, or none: a computer.
 * A browser that hides what it is (iPadOS Safari's desktop User-Agent, a phone's "desktop site")
 * is taken for a computer; the buyer can switch by hand to the other ways the place allows.
 */
import type { Channel } from '../domain/open-schemas.ts';

export type Place = 'WECHAT' | 'ALIPAY_APP' | 'PHONE' | 'COMPUTER';

/**
 * A way to pay:
 *   WECHAT_H5: `jsapi` (inside WeChat: the payment sheet of WeChat itself, after its silent
 *   authorization), `h5` (a phone's browser: WeChat Pay's H5 page opens WeChat), `native` (a code
 *   to scan with WeChat).
 *   ALIPAY_H5: `page` (Alipay's mobile-web page, which opens the Alipay app, with the collection
 *   code beside it), `code` (the collection code alone: to scan, or to long-press inside WeChat).
 */
export type Way = 'jsapi' | 'h5' | 'native' | 'page' | 'code';
export const WAYS: readonly Way[] = ['jsapi', 'h5', 'native', 'page', 'code'];

export function placeOf(userAgent: string | undefined): Place {
  const ua = userAgent ?? '';
  if (/MicroMessenger\//i.test(ua)) return 'WECHAT';
  if (/AlipayClient\//i.test(ua)) return 'ALIPAY_APP';
  if (/Mobi|Android|iPhone|iPod|iPad|HarmonyOS|OpenHarmony|Windows Phone/i.test(ua)) return 'PHONE';
  return 'COMPUTER';
}

/** What the provider of the attempt can do besides its own order. */
export interface Capabilities {
  /** JSAPI trades, and WeChat's web authorization to get the buyer's openid. */
  jsapi: boolean;
  /** Native trades (a code_url). */
  native: boolean;
}

/**
 * The ways the page offers at a place, the first being the one it starts with. Never offered: JSAPI
 * outside WeChat (WeChat's bridge exists nowhere else), H5 inside WeChat (WeChat Pay refuses it
 * there: "请在微信外打开订单，进行支付"), any Alipay link inside WeChat (WeChat blocks Alipay's
 * pages and `alipays://` links: the code and the guidance to open the page in a browser instead).
 */
export function waysAt(channel: Channel, place: Place, caps: Capabilities): Way[] {
  if (channel === 'ALIPAY_H5') {
    if (place === 'WECHAT') return ['code'];
    return place === 'COMPUTER' ? ['code', 'page'] : ['page', 'code'];
  }
  const native: Way[] = caps.native ? ['native'] : [];
  if (place === 'WECHAT') return caps.jsapi ? ['jsapi', ...native] : native.length ? native : ['h5'];
  return place === 'COMPUTER' ? [...native, 'h5'] : ['h5', ...native];
}

/** The way asked for (`?via=`) when the place offers it, else the place's first. */
export function chooseWay(ways: readonly Way[], asked: unknown): Way {
  return typeof asked === 'string' && (ways as readonly string[]).includes(asked) ? (asked as Way) : ways[0]!;
}
