/**
 * The buyer at the cashier page (inject, the sandbox provider): where it is opened (User-Agents),
 * WeChat's authorization round trip (the sandbox's one WeChat user), and a payment by the Native
 * code a computer is shown, each making a provider trade of the attempt (docs/cashier.md).
 */
import assert from 'node:assert/strict';
import type { TestApp } from './app.ts';

export const CASHIER_UA = {
  wechat: 'Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 Mobile/15E148 MicroMessenger/8.0.47 NetType/WIFI',
  computer: 'Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4 Safari/605.1.15',
};

/** The cashier token of an order's payUrl. */
export const cashierToken = (payUrl: string) => new URL(payUrl).pathname.split('/').at(-1)!;

const page = (t: TestApp, url: string, ua: string) => t.server.inject({ method: 'GET', url, headers: { 'user-agent': ua } });

/** The page opened inside WeChat and authorized: the attempt's JSAPI trade for the sandbox's WeChat user, made. */
export async function openInWeChat(t: TestApp, token: string): Promise<void> {
  const authorize = new URL(String((await page(t, `/cashier/${token}/wechat/authorize`, CASHIER_UA.wechat)).headers.location));
  const back = new URL(String((await page(t, `${authorize.pathname}${authorize.search}`, CASHIER_UA.wechat)).headers.location));
  assert.match(back.search, /[?&]payer=/);
  await page(t, `/cashier/${token}${back.search}`, CASHIER_UA.wechat);
}

/** The page opened on a computer (the attempt's Native trade made) and its code paid with the sandbox's button. */
export async function payByNativeCode(t: TestApp, token: string): Promise<void> {
  await page(t, `/cashier/${token}`, CASHIER_UA.computer);
  const paid = await t.server.inject({
    method: 'POST',
    url: `/cashier/${token}/sandbox/pay?via=native`,
    headers: { 'x-cashier-request': 'sandbox' },
  });
  assert.equal(paid.json().state, 'PAID', paid.body);
}
