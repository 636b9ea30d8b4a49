/**
 * Every place a buyer opens the payment link, in a real (headless) browser with that place's
 * User-Agent, against the service in live mode (PROVIDER=live) and the two gateway simulators, end
 * to end to PAYMENT_SUCCEEDED at the merchant, in Chinese and in English, at 390 and 1280 px:
 *
 *  - inside WeChat (WECHAT_H5): the page starts WeChat's silent web authorization, the browser goes
 *    to the simulator's authorize page and back with a code, the service exchanges it for the
 *    buyer's openid and makes a JSAPI order; the page's button hands the signed parameters to a
 *    test stand-in for WeixinJSBridge, which passes them to the simulator, which verifies paySign
 *    and the payer and pays;
 *  - a phone's browser (WECHAT_H5): WeChat Pay's H5 page, paid there;
 *  - a computer (WECHAT_H5): the QR code on the page decodes (jsQR) to the simulator's code_url of
 *    the attempt's Native order, which a WeChat user scans and pays;
 *  - Alipay opened inside WeChat (ALIPAY_H5): no Alipay link at all, the guidance to open the page
 *    in the browser, the collection code (decoded, and paid as scanned).
 *
 * And a buyer who pays through two products (JSAPI, then the Native code) is charged once. Any
 * console error (a CSP violation included) fails the test; no page shows or carries the openid.
 * Screenshots under test-results/cashier/. Skipped when /usr/bin/chromium is absent.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import jsQRModule from 'jsqr';
import { type Browser, type BrowserContext, type Page, devices } from 'playwright-core';
import type { LiveSimulators } from '../../simulators/live.ts';
import { type Merchant, type TestApp, call, orderBody } from '../helpers/app.ts';
import { FakeClock, type Receiver, waitFor } from '../helpers/events.ts';
import { type LiveService, startLiveService } from '../helpers/live.ts';
import { browserSkipReason, launchChromium } from './launch.ts';

// jsqr is CommonJS: its function is the exports' `default` (Node's default import is the exports object).
type JsQR = (rgba: Uint8ClampedArray, width: number, height: number) => { data: string } | null;
const jsQR = ((jsQRModule as unknown as { default?: JsQR }).default ?? jsQRModule) as unknown as JsQR;
const RESULTS = path.resolve(import.meta.dirname, '../../test-results/cashier');
const HOOK = '/hooks/places';
const WAIT_MS = 15_000;

const UA = {
  wechat:
    'Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148 MicroMessenger/8.0.47(0x18002f2c) NetType/WIFI Language/zh_CN',
  wechatPc:
    'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/81.0.4044.138 Safari/537.36 NetType/WIFI MicroMessenger/7.0.20.1781(0x6700143B) WindowsWechat(0x63090a13) XWEB/9129',
  phone: devices['Pixel 7'].userAgent,
  computer: 'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36',
};
const WIDTHS = {
  390: { viewport: { width: 390, height: 844 }, deviceScaleFactor: 2, isMobile: true, hasTouch: true },
  1280: { viewport: { width: 1280, height: 800 }, deviceScaleFactor: 1 },
} as const;
const TEXT = {
  'zh-CN': {
    locale: 'zh-CN',
    authorize: '微信支付',
    payNow: '立即支付',
    paid: '支付成功',
    h5: '去微信支付付款',
    alipayGuide: '请在浏览器中打开',
    native: '请用微信扫一扫付款。',
    nativeWay: '微信扫码支付',
    jsapiWay: '微信内支付',
  },
  en: {
    locale: 'en-US',
    authorize: 'Pay with WeChat Pay',
    payNow: 'Pay now',
    paid: 'Payment successful',
    h5: 'Pay with WeChat Pay',
    alipayGuide: 'Open this page in your browser',
    native: 'Scan the code with WeChat to pay.',
    nativeWay: 'Scan with WeChat',
    jsapiWay: 'Pay in WeChat',
  },
} as const;
type Lang = keyof typeof TEXT;

describe('the cashier wherever the link is opened (live mode, simulators)', { skip: browserSkipReason() }, () => {
  const clock = new FakeClock();
  let live: LiveService;
  let sims: LiveSimulators;
  let t: TestApp;
  let m: Merchant;
  let rx: Receiver;
  let browser: Browser;

  before(async () => {
    live = await startLiveService(clock, HOOK);
    ({ sims, t, m, rx } = live);
    browser = await launchChromium();
    await fs.mkdir(RESULTS, { recursive: true });
  });
  after(async () => {
    await browser?.close();
    await live?.stop();
  });

  const api = (method: string, url: string, body?: unknown) =>
    call(t, m, method, url, body, { timestamp: String(Math.floor(clock.now() / 1000)) });

  async function createOrder(o: Record<string, unknown>): Promise<{ openOrderId: string; outTradeNo: string; payUrl: string }> {
    const r = await api('POST', '/api/open/v1/payments', orderBody({ subject: '燕麦拿铁', amountFen: 1890, ...o }));
    assert.equal(r.statusCode, 201, r.body);
    return r.json();
  }

  const attemptOf = async (openOrderId: string) => (await t.admin('GET', `/orders/${openOrderId}`)).json().attempts.at(-1);

  /** The workers run until PAYMENT_SUCCEEDED reached the merchant (the dispatcher delivers it). */
  async function succeededAtMerchant(outTradeNo: string): Promise<void> {
    await waitFor('PAYMENT_SUCCEEDED at the merchant', async () => {
      await t.workers.tick();
      return rx.at(HOOK).some((r) => {
        const e = JSON.parse(r.body) as { eventType: string; outTradeNo: string };
        return e.outTradeNo === outTradeNo && e.eventType === 'PAYMENT_SUCCEEDED';
      });
    });
  }

  /** A context of one place: its User-Agent, width and language; the WeixinJSBridge stand-in inside WeChat. */
  async function placeContext(ua: string, width: 390 | 1280, lang: Lang, wechatUser?: string): Promise<BrowserContext> {
    const context = await browser.newContext({ ...WIDTHS[width], userAgent: ua, locale: TEXT[lang].locale });
    if (wechatUser) {
      // Who is signed in to WeChat (the simulator's authorize page reads it), and WeChat's bridge:
      // the page's call is passed, parameters as the page gave them, to the simulator's payment.
      await context.addCookies([{ name: 'sim_wechat_user', value: wechatUser, url: sims.wechatpay.url }]);
      await context.exposeBinding('__simWechatPay', (_src, params: Record<string, unknown>) =>
        sims.wechatpay.controls.jsapiPay(params, sims.wechatpay.controls.openIdOf(wechatUser)),
      );
      await context.addInitScript(() => {
        const w = globalThis as unknown as {
          __simWechatPay(p: unknown): Promise<{ err_msg: string }>;
          WeixinJSBridge: unknown;
          document: { dispatchEvent(e: unknown): void };
          Event: new (name: string) => unknown;
        };
        w.WeixinJSBridge = {
          invoke(name: string, params: unknown, cb: (res: { err_msg: string }) => void) {
            if (name !== 'getBrandWCPayRequest') return cb({ err_msg: `${name}:fail` });
            w.__simWechatPay(params).then(cb, () => cb({ err_msg: 'get_brand_wcpay_request:fail' }));
          },
        };
        setTimeout(() => w.document.dispatchEvent(new w.Event('WeixinJSBridgeReady')), 0);
      });
    }
    return context;
  }

  interface Watched {
    page: Page;
    problems: string[];
  }

  async function open(context: BrowserContext, url: string): Promise<Watched> {
    const page = await context.newPage();
    page.setDefaultTimeout(WAIT_MS);
    const problems: string[] = [];
    // The cashier's own problems (the simulators' pages are not under test here).
    const ours = new URL(url).origin;
    page.on('console', (msg) => {
      if (msg.type() === 'error' && msg.location().url.startsWith(ours)) problems.push(msg.text());
    });
    page.on('pageerror', (err) => problems.push(err.message));
    const res = await page.goto(url);
    assert.equal(res?.status(), 200);
    return { page, problems };
  }

  const stateIs = (page: Page, state: string) => page.waitForSelector(`main#cashier[data-state="${state}"]`, { timeout: WAIT_MS });

  /** The QR code the page shows, decoded from its pixels (jsQR). */
  async function decodeQr(page: Page): Promise<string> {
    const img = page.locator('img.qr');
    await img.waitFor({ state: 'visible' });
    const px = await img.evaluate((el) => {
      const image = el as unknown as { naturalWidth: number; naturalHeight: number };
      type Pixels = { width: number; height: number; data: Uint8Array };
      type Canvas = {
        width: number;
        height: number;
        getContext(k: '2d'): {
          drawImage(i: unknown, x: number, y: number): void;
          getImageData(x: number, y: number, w: number, h: number): Pixels;
        };
      };
      const d = (globalThis as unknown as { document: { createElement(t: 'canvas'): Canvas } }).document;
      const canvas = d.createElement('canvas');
      canvas.width = image.naturalWidth;
      canvas.height = image.naturalHeight;
      const ctx = canvas.getContext('2d');
      ctx.drawImage(el, 0, 0);
      const data = ctx.getImageData(0, 0, canvas.width, canvas.height);
      // The pixels as base64 (a JSON array of a million numbers would be slow to pass over).
      const bytes = data.data;
      let bin = '';
      for (let i = 0; i < bytes.length; i += 0x8000) bin += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
      return {
        width: data.width,
        height: data.height,
        rgba: (globalThis as unknown as { btoa(s: string): string }).btoa(bin),
      };
    });
    const code = jsQR(new Uint8ClampedArray(Buffer.from(px.rgba, 'base64')), px.width, px.height);
    assert.ok(code, 'the QR code decodes');
    return code.data;
  }

  /** No horizontal overflow at this width, and at the other one. */
  async function assertFits(page: Page, where: string): Promise<void> {
    const original = page.viewportSize()!;
    for (const width of [390, 1280]) {
      await page.setViewportSize({ width, height: original.height });
      const { scroll, vw } = await page.evaluate(() => {
        const d = (globalThis as unknown as { document: { documentElement: { scrollWidth: number; clientWidth: number } } }).document;
        return { scroll: d.documentElement.scrollWidth, vw: d.documentElement.clientWidth };
      });
      assert.ok(scroll <= vw, `${where} at ${width}px: no horizontal overflow (${scroll} > ${vw})`);
    }
    await page.setViewportSize(original);
  }

  async function shot(page: Page, name: string): Promise<void> {
    await page.screenshot({ path: path.join(RESULTS, `places-${name}.png`), fullPage: true });
  }

  for (const lang of ['zh-CN', 'en'] as const) {
    const txt = TEXT[lang];

    test(`${lang}: inside WeChat, WECHAT_H5 is paid in WeChat's own payment sheet (OAuth, JSAPI, paySign verified)`, async () => {
      const order = await createOrder({ channel: 'WECHAT_H5' });
      const user = `buyer-${lang}`;
      const openid = sims.wechatpay.controls.openIdOf(user);
      const context = await placeContext(UA.wechat, 390, lang, user);
      const { page, problems } = await open(context, order.payUrl);
      await stateIs(page, 'PAYABLE');
      // No H5 link (WeChat refuses it there); the Native code offered as the other way.
      assert.equal(await page.locator(`a[href^="${sims.wechatpay.url}/pay/h5"]`).count(), 0);
      assert.deepEqual(await page.locator('nav.ways a').allTextContents(), [txt.nativeWay]);
      await assertFits(page, `${lang} wechat`);
      await shot(page, `${lang}-390-wechat-authorize`);
      await page.getByRole('link', { name: txt.authorize }).click();
      // To WeChat's authorize page (the simulator's) and back with a code: the page with this buyer's JSAPI order.
      const pay = page.getByRole('button', { name: txt.payNow });
      await pay.waitFor();
      // (The fragment of the authorize address, `#wechat_redirect`, stays through the redirects, as browsers keep it.)
      assert.match(page.url(), /\?via=jsapi&payer=[A-Za-z0-9_-]{22}(#wechat_redirect)?$/);
      assert.ok(
        !page.url().includes(openid) && !(await page.content()).includes(openid),
        'the openid is neither in the address nor in the page',
      );
      await shot(page, `${lang}-390-wechat-jsapi`);
      await pay.click();
      await stateIs(page, 'PAID');
      await page.getByRole('heading', { name: txt.paid }).waitFor();
      const attempt = await attemptOf(order.openOrderId);
      assert.equal(attempt.trades.length, 1);
      assert.equal(attempt.trades[0].product, 'JSAPI');
      const sold = sims.wechatpay.controls.order(attempt.trades[0].tradeNo)!;
      assert.equal(sold.tradeType, 'JSAPI');
      assert.equal(sold.payerOpenid, openid);
      assert.equal(sold.tradeState, 'SUCCESS');
      await succeededAtMerchant(order.outTradeNo);
      assert.deepEqual(problems, [], 'no console errors or CSP violations');
      await context.close();
    });

    test(`${lang}: in a phone's browser, WECHAT_H5 is paid on WeChat Pay's H5 page`, async () => {
      const order = await createOrder({ channel: 'WECHAT_H5' });
      const context = await placeContext(UA.phone, 390, lang);
      const { page, problems } = await open(context, order.payUrl);
      await stateIs(page, 'PAYABLE');
      await assertFits(page, `${lang} phone`);
      await shot(page, `${lang}-390-phone-h5`);
      await page.getByRole('link', { name: txt.h5 }).click();
      await page.waitForURL(`${sims.wechatpay.url}/pay/h5?**`);
      await page.locator('#pay').click();
      await page.locator('#note').waitFor();
      await page.goto(order.payUrl);
      await stateIs(page, 'PAID');
      await succeededAtMerchant(order.outTradeNo);
      assert.deepEqual(problems, []);
      await context.close();
    });

    test(`${lang}: on a computer, WECHAT_H5 shows the Native code: it decodes to the simulator's code_url, scanned and paid`, async () => {
      const order = await createOrder({ channel: 'WECHAT_H5' });
      const context = await placeContext(UA.computer, 1280, lang);
      const { page, problems } = await open(context, order.payUrl);
      await stateIs(page, 'PAYABLE');
      await page.getByText(txt.native).waitFor();
      const codeUrl = await decodeQr(page);
      const attempt = await attemptOf(order.openOrderId);
      const native = sims.wechatpay.controls.order(attempt.trades[0].tradeNo)!;
      assert.equal(native.tradeType, 'NATIVE');
      assert.equal(codeUrl, native.codeUrl);
      await assertFits(page, `${lang} computer`);
      await shot(page, `${lang}-1280-computer-native`);
      await sims.wechatpay.controls.scanPay(codeUrl);
      await stateIs(page, 'PAID');
      await page.getByRole('heading', { name: txt.paid }).waitFor();
      await succeededAtMerchant(order.outTradeNo);
      assert.deepEqual(problems, []);
      await context.close();
    });

    test(`${lang}: Alipay opened inside WeChat: no Alipay link, the guidance to the browser, the collection code paid`, async () => {
      const order = await createOrder({ channel: 'ALIPAY_H5' });
      const context = await placeContext(UA.wechat, 390, lang);
      const { page, problems } = await open(context, order.payUrl);
      await stateIs(page, 'PAYABLE');
      await page.getByText(txt.alipayGuide).waitFor();
      const hrefs = await page.locator('a').evaluateAll((as) => as.map((a) => (a as unknown as { href: string }).href));
      assert.deepEqual(
        hrefs.filter((h) => h.startsWith('alipays:') || h.startsWith(sims.alipay.url)),
        [],
        'no link to Alipay inside WeChat',
      );
      const attempt = await attemptOf(order.openOrderId);
      assert.ok((await decodeQr(page)).startsWith(`${sims.alipay.url}/qr/`), 'the official collection code');
      await assertFits(page, `${lang} alipay in wechat`);
      await shot(page, `${lang}-390-alipay-in-wechat`);
      await sims.alipay.pay(attempt.attemptId);
      await stateIs(page, 'PAID');
      await succeededAtMerchant(order.outTradeNo);
      assert.deepEqual(problems, []);
      await context.close();
    });
  }

  test('WeChat on a computer: the same in-WeChat payment at 1280 px', async () => {
    const order = await createOrder({ channel: 'WECHAT_H5' });
    const context = await placeContext(UA.wechatPc, 1280, 'zh-CN', 'pc-buyer');
    const { page, problems } = await open(context, order.payUrl);
    await page.getByRole('link', { name: TEXT['zh-CN'].authorize }).click();
    await page.getByRole('button', { name: TEXT['zh-CN'].payNow }).click();
    await stateIs(page, 'PAID');
    await succeededAtMerchant(order.outTradeNo);
    assert.deepEqual(problems, []);
    await context.close();
  });

  test('a buyer who pays through two products (JSAPI, then the Native code) is charged once: the second is refunded', async () => {
    const order = await createOrder({ channel: 'WECHAT_H5', amountFen: 2500 });
    const context = await placeContext(UA.wechat, 390, 'zh-CN', 'twice');
    const { page, problems } = await open(context, order.payUrl);
    // The buyer switches to the code first (to long-press it), keeps it, then pays inside WeChat.
    await page.getByRole('link', { name: TEXT['zh-CN'].nativeWay }).click();
    const codeUrl = await decodeQr(page);
    await page.getByRole('link', { name: TEXT['zh-CN'].jsapiWay }).click();
    await page.getByRole('link', { name: TEXT['zh-CN'].authorize }).click();
    await page.getByRole('button', { name: TEXT['zh-CN'].payNow }).click();
    await stateIs(page, 'PAID');
    // The code is scanned and paid too, before the service has closed that order.
    await sims.wechatpay.controls.scanPay(codeUrl);
    const native = (await attemptOf(order.openOrderId)).trades.find((x: { product: string }) => x.product === 'NATIVE');
    await waitFor('the second payment refunded', async () => {
      clock.advance(4_000);
      await t.workers.tick();
      const dups = (await t.admin('GET', `/orders/${order.openOrderId}`)).json().duplicatePayments as {
        tradeNo: string;
        refundState: string;
      }[];
      return dups.length === 1 && dups[0]!.tradeNo === native.tradeNo && dups[0]!.refundState === 'REFUNDED';
    });
    assert.equal(sims.wechatpay.controls.refund(`dup_${native.tradeNo.slice(4)}`)?.status, 'SUCCESS');
    await succeededAtMerchant(order.outTradeNo);
    const events = rx
      .at(HOOK)
      .map((r) => JSON.parse(r.body) as { eventType: string; outTradeNo: string })
      .filter((e) => e.outTradeNo === order.outTradeNo);
    assert.deepEqual(
      events.map((e) => e.eventType),
      ['PAYMENT_SUCCEEDED'],
    );
    assert.equal((await api('GET', `/api/open/v1/payments/${order.outTradeNo}`)).json().status, 'SUCCEEDED');
    assert.deepEqual(problems, []);
    await context.close();
  });
});
