/**
 * The cashier page in a real (headless) browser against a listening service: a real payUrl, the
 * page's own script polling and acting, the CSP enforced by the browser; the page in Chinese and in
 * English on a 390 px phone and a 1280 px desktop (no horizontal overflow, no wrapped button, the
 * Chinese glyphs drawn with a CJK font); the hand-off to a provider's own payment page. Screenshots
 * are kept under test-results/cashier/. Skipped when /usr/bin/chromium is absent.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { type Browser, type BrowserContext, type Page, devices } from 'playwright-core';
import { type CashierView, renderCashierPage } from '../../src/cashier/page.ts';
import { type Merchant, type TestApp, call, orderBody, provision, startTestApp } from '../helpers/app.ts';
import { browserSkipReason, freePort, launchChromium } from './launch.ts';
import { CJK_FONT, skipUnless } from '../helpers/prerequisites.ts';

const RESULTS = path.resolve(import.meta.dirname, '../../test-results/cashier');
const WAIT_MS = 10_000;

describe('cashier page in a mobile browser', { skip: browserSkipReason() }, () => {
  let t: TestApp;
  let m: Merchant;
  let browser: Browser;
  let base: string;

  before(async () => {
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    t = await startTestApp({ PUBLIC_BASE_URL: base });
    await t.server.listen({ port, host: '127.0.0.1' });
    m = await provision(t, { entityType: 'CORPORATE' });
    browser = await launchChromium();
    await fs.mkdir(RESULTS, { recursive: true });
  });
  after(async () => {
    await browser?.close();
    await t?.stop();
  });

  type Order = { openOrderId: string; outTradeNo: string; payUrl: string; qrCode: string | null };

  interface Watched {
    page: Page;
    /** Console errors and page errors (a CSP violation shows up here). */
    problems: string[];
    /** Full page loads seen (the page must never reload itself). */
    loads: () => number;
    /** Requests to the status endpoint seen. */
    polls: () => number;
  }

  interface Opened extends Watched {
    context: BrowserContext;
    order: Order;
  }

  async function createOrder(o: Record<string, unknown> = {}, merchant: Merchant = m): Promise<Order> {
    const r = await call(
      t,
      merchant,
      'POST',
      '/api/open/v1/payments',
      orderBody({ subject: 'Flat white, oat milk', amountFen: 1234, ...o }),
    );
    assert.equal(r.statusCode, 201, r.body);
    const order = r.json();
    assert.ok(order.payUrl.startsWith(`${base}/cashier/`), order.payUrl);
    return order;
  }

  /** A new page in the context, watched for errors, loads and polls, before it opens the URL. */
  async function watchPage(context: BrowserContext, url: string, prepare?: (page: Page) => Promise<unknown>): Promise<Watched> {
    const page = await context.newPage();
    page.setDefaultTimeout(WAIT_MS);
    const problems: string[] = [];
    let loads = 0;
    let polls = 0;
    page.on('console', (msg) => {
      if (msg.type() === 'error') problems.push(msg.text());
    });
    page.on('pageerror', (err) => problems.push(err.message));
    page.on('load', () => loads++);
    page.on('request', (req) => {
      if (req.url().endsWith('/status')) polls++;
    });
    await prepare?.(page);
    const res = await page.goto(url);
    assert.equal(res?.status(), 200);
    return { page, problems, loads: () => loads, polls: () => polls };
  }

  async function openCashier(o: Record<string, unknown> = {}): Promise<Opened> {
    const order = await createOrder(o);
    const context = await browser.newContext({ ...devices['Pixel 7'], locale: 'en-US' });
    return { ...(await watchPage(context, order.payUrl)), context, order };
  }

  const stateIs = (page: Page, state: string) => page.waitForSelector(`main#cashier[data-state="${state}"]`);
  const shot = (page: Page, name: string) => page.screenshot({ path: path.join(RESULTS, `${name}.png`), fullPage: true });

  async function assertNoMaterial(page: Page): Promise<void> {
    assert.equal(await page.locator('img').count(), 0, 'no QR image');
    assert.equal(await page.locator('a[href^="alipays:"]').count(), 0, 'no Alipay hand-off');
    assert.equal(await page.locator('[data-sandbox-action]').count(), 0, 'no sandbox actions');
  }

  test('payable, then paid with the sandbox button: updates without reload, order SUCCEEDED', async () => {
    const c = await openCashier({ returnUrl: 'https://shop.example/orders/done' });
    const { page } = c;
    await stateIs(page, 'PAYABLE');
    const qr = page.locator('img.qr');
    await qr.waitFor({ state: 'visible' });
    const size = await qr.evaluate((img) => {
      const i = img as unknown as { naturalWidth: number; complete: boolean; width: number };
      return { natural: i.naturalWidth, complete: i.complete, shown: i.width };
    });
    assert.ok(size.complete && size.natural === 480, `the QR image loaded under the CSP (${JSON.stringify(size)})`);
    assert.ok(size.shown >= 200, 'the QR is large enough to scan');
    assert.equal(await page.locator('.merchant').textContent(), 'Test Shop');
    assert.equal(await page.locator('.amount').textContent(), 'CN¥12.34');
    assert.match((await page.locator('[data-countdown]').textContent()) ?? '', /^1[45]:\d\d$/);
    const href = await page.locator('a[href^="alipays:"]').getAttribute('href');
    assert.equal(href, `alipays://platformapi/startapp?saId=10000007&qrcode=${encodeURIComponent(c.order.qrCode!)}`);
    // The countdown runs on the client.
    const before = await page.locator('[data-countdown]').textContent();
    await page.waitForFunction(
      (b) =>
        (globalThis as unknown as { document: { querySelector(s: string): { textContent: string } | null } }).document.querySelector(
          '[data-countdown]',
        )?.textContent !== b,
      before,
    );
    await shot(page, 'flow-payable');

    await page.evaluate(() => ((globalThis as Record<string, unknown>).__sameDocument = true));
    await page.getByRole('button', { name: 'Simulate payment' }).click();
    await stateIs(page, 'PAID');
    assert.equal(await page.evaluate(() => (globalThis as Record<string, unknown>).__sameDocument), true, 'no reload');
    assert.equal(c.loads(), 1, 'one page load only');
    await page.getByRole('heading', { name: 'Payment successful' }).waitFor();
    const back = page.getByRole('link', { name: 'Return to merchant' });
    assert.equal(await back.getAttribute('href'), 'https://shop.example/orders/done');
    await assertNoMaterial(page);
    const q = await call(t, m, 'GET', `/api/open/v1/payments/${c.order.outTradeNo}`);
    assert.equal(q.json().status, 'SUCCEEDED');
    await shot(page, 'flow-paid');

    // Polling stops at a final state.
    const polls = c.polls();
    await page.waitForTimeout(4500);
    assert.equal(c.polls(), polls, 'no status request after a final state');
    assert.deepEqual(c.problems, [], 'no console errors or CSP violations');
    await c.context.close();
  });

  test('expired: the window ends while the page is open', async () => {
    const c = await openCashier();
    const { page } = c;
    await stateIs(page, 'PAYABLE');
    await page.locator('img.qr').waitFor({ state: 'visible' });
    const e = await t.sandbox('POST', `/payments/${c.order.openOrderId}/expire`);
    assert.equal(e.statusCode, 200, e.body);
    await stateIs(page, 'EXPIRED');
    await page.getByRole('heading', { name: 'Payment expired' }).waitFor();
    await assertNoMaterial(page);
    assert.equal(c.loads(), 1, 'updated without reload');
    await shot(page, 'flow-expired');
    await t.workers.tick();
    const q = (await call(t, m, 'GET', `/api/open/v1/payments/${c.order.outTradeNo}`)).json();
    assert.deepEqual([q.status, q.closedReason], ['CLOSED', 'EXPIRED']);
    await page.reload();
    await stateIs(page, 'EXPIRED');
    await assertNoMaterial(page);
    assert.deepEqual(c.problems, []);
    await c.context.close();
  });

  test('superseded: the merchant re-creates the attempt while the old page is open', async () => {
    const c = await openCashier();
    const { page } = c;
    await stateIs(page, 'PAYABLE');
    await page.locator('img.qr').waitFor({ state: 'visible' });
    const r = await call(t, m, 'POST', `/api/open/v1/payments/${c.order.outTradeNo}/attempts`);
    assert.equal(r.statusCode, 201, r.body);
    await stateIs(page, 'SUPERSEDED');
    await page.getByRole('heading', { name: 'Link replaced' }).waitFor();
    await assertNoMaterial(page);
    assert.equal(c.loads(), 1, 'updated without reload');
    await shot(page, 'flow-superseded');
    // The new link is payable with the new code.
    await page.goto(r.json().payUrl);
    await stateIs(page, 'PAYABLE');
    const href = await page.locator('a[href^="alipays:"]').getAttribute('href');
    assert.ok(href?.endsWith(encodeURIComponent(r.json().qrCode)));
    assert.deepEqual(c.problems, []);
    await c.context.close();
  });

  test('WeChat: the hand-off explanation, then failed with the sandbox button', async () => {
    const c = await openCashier({ channel: 'WECHAT_H5', subject: 'Bus ticket', amountFen: 200 });
    const { page } = c;
    await stateIs(page, 'PAYABLE');
    await page.getByText('Pay inside WeChat').waitFor();
    assert.equal(await page.locator('img').count(), 0, 'no invented QR');
    await shot(page, 'flow-wechat');
    await page.getByRole('button', { name: 'Simulate failure' }).click();
    await stateIs(page, 'FAILED');
    await page.getByRole('heading', { name: 'Payment failed' }).waitFor();
    await assertNoMaterial(page);
    assert.equal(c.loads(), 1);
    assert.equal((await call(t, m, 'GET', `/api/open/v1/payments/${c.order.outTradeNo}`)).json().status, 'FAILED');
    await shot(page, 'flow-failed');
    assert.deepEqual(c.problems, []);
    await c.context.close();
  });

  test('another origin cannot trigger the sandbox action (CORS preflight, no-cors fetch, form post)', async () => {
    const c = await openCashier();
    const target = `${c.order.payUrl}/sandbox/pay`;
    // The attacker's page: another origin (another port) with no CSP of its own.
    const evilServer = http.createServer((_req, res) => res.writeHead(200, { 'content-type': 'text/html' }).end('<!doctype html><p>evil'));
    await new Promise<void>((resolve) => evilServer.listen(0, '127.0.0.1', resolve));
    const evilOrigin = `http://127.0.0.1:${(evilServer.address() as AddressInfo).port}`;
    const seen: number[] = [];
    try {
      const evil = await c.context.newPage();
      evil.on('response', (res) => {
        if (res.url() === target) seen.push(res.status());
      });
      await evil.goto(`${evilOrigin}/`);
      const fetched = await evil.evaluate(async (url) => {
        const out: string[] = [];
        try {
          await fetch(url, { method: 'POST', headers: { 'X-Cashier-Request': 'sandbox' } });
          out.push('custom-header fetch went through');
        } catch {
          out.push('custom-header fetch blocked');
        }
        await fetch(url, { method: 'POST', mode: 'no-cors' }).catch(() => undefined);
        return out;
      }, target);
      assert.deepEqual(fetched, ['custom-header fetch blocked']);
      await Promise.all([
        evil.waitForURL(target),
        evil.evaluate((url) => {
          const d = (
            globalThis as unknown as { document: { createElement(t: string): Record<string, unknown>; body: { append(n: unknown): void } } }
          ).document;
          const f = d.createElement('form');
          Object.assign(f, { method: 'POST', action: url, enctype: 'text/plain' });
          d.body.append(f);
          (f.submit as () => void)();
        }, target),
      ]);
      // The no-cors answer is unreadable to the attacker (CORP same-origin); the form post is refused.
      assert.deepEqual(seen, [403], 'only the form navigation gets a readable answer: 403');
    } finally {
      await new Promise((resolve) => evilServer.close(resolve));
    }
    assert.equal((await call(t, m, 'GET', `/api/open/v1/payments/${c.order.outTradeNo}`)).json().status, 'PAYING');
    await c.page.reload();
    await stateIs(c.page, 'PAYABLE');
    await c.context.close();
  });

  // ---- The page in both languages, on a phone and on a desktop ----

  const WIDTHS = {
    390: { viewport: { width: 390, height: 844 }, deviceScaleFactor: 2, isMobile: true, hasTouch: true },
    1280: { viewport: { width: 1280, height: 800 }, deviceScaleFactor: 1 },
  } as const;

  /**
   * What each language shows (the browser's locale sets its Accept-Language). The countdown of a
   * 15-minute window, read up to a few minutes after the orders were made (twenty pages in turn,
   * slower on a busy machine): minutes and seconds, 10 to 15 minutes left.
   */
  const LANGS = {
    'zh-CN': {
      locale: 'zh-CN',
      channel: { ALIPAY_H5: '支付宝', WECHAT_H5: '微信支付' },
      amount: '¥12.34',
      countdown: /^1[0-5]分\d\d秒$/,
      sandbox: ['模拟付款成功', '模拟付款失败'],
      headings: { PAID: '支付成功', CLOSED: '支付已关闭', EXPIRED: '支付已超时' },
    },
    en: {
      locale: 'en-US',
      channel: { ALIPAY_H5: 'Alipay', WECHAT_H5: 'WeChat Pay' },
      amount: 'CN¥12.34',
      countdown: /^1[0-5]:\d\d$/,
      sandbox: ['Simulate payment', 'Simulate failure'],
      headings: { PAID: 'Payment successful', CLOSED: 'Payment closed', EXPIRED: 'Payment expired' },
    },
  } as const;

  interface Layout {
    viewport: number;
    scrollWidth: number;
    /** Elements whose box reaches outside the viewport horizontally. */
    outside: string[];
    /** Every button and button-like link: its box height (one line: 48 px) and whether its text is cut. */
    buttons: { text: string; height: number; clipped: boolean }[];
  }

  // Runs in the page (a string: the test's TypeScript has no DOM types).
  const MEASURE = `(() => {
    const vw = document.documentElement.clientWidth;
    const outside = [];
    for (const el of document.querySelectorAll('body *')) {
      const r = el.getBoundingClientRect();
      if (r.width === 0 && r.height === 0) continue;
      if (r.left < -0.5 || r.right > vw + 0.5) outside.push(el.tagName + '.' + el.getAttribute('class') + ' ' + Math.round(r.left) + '..' + Math.round(r.right));
    }
    const buttons = [...document.querySelectorAll('.btn')].map((el) => ({
      text: el.textContent.trim(),
      height: el.getBoundingClientRect().height,
      clipped: el.scrollWidth > el.clientWidth,
    }));
    return { viewport: vw, scrollWidth: document.documentElement.scrollWidth, outside, buttons };
  })()`;

  // Marks every element with Chinese text of its own (for the font check below).
  const MARK_HAN = `(() => {
    let n = 0;
    for (const el of document.querySelectorAll('body *')) {
      const own = [...el.childNodes].filter((c) => c.nodeType === 3).map((c) => c.textContent).join('');
      if (/\\p{Script=Han}/u.test(own)) { el.setAttribute('data-han', ''); n++; }
    }
    return n;
  })()`;

  // Draws each Chinese character of the page in the page's font: none may come out as the missing-glyph
  // box (what an unassigned code point draws) or as nothing.
  const MISSING_GLYPHS = `(() => {
    const chars = [...new Set(document.body.innerText.match(/\\p{Script=Han}/gu) || [])];
    const canvas = document.createElement('canvas');
    canvas.width = canvas.height = 48;
    const g = canvas.getContext('2d');
    g.font = '32px ' + getComputedStyle(document.body).fontFamily;
    const draw = (ch) => { g.clearRect(0, 0, 48, 48); g.fillText(ch, 4, 36); return g.getImageData(0, 0, 48, 48).data.join(''); };
    const missing = draw('\\u{10FFFD}');
    const blank = draw(' ');
    return chars.filter((ch) => [missing, blank].includes(draw(ch)));
  })()`;

  async function assertLayout(page: Page, where: string): Promise<void> {
    const l = (await page.evaluate(MEASURE)) as Layout;
    assert.ok(l.scrollWidth <= l.viewport, `${where}: no horizontal overflow (${l.scrollWidth} > ${l.viewport})`);
    assert.deepEqual(l.outside, [], `${where}: every element within the viewport`);
    for (const b of l.buttons) {
      assert.ok(b.height < 59, `${where}: "${b.text}" on one line (${b.height} px high)`);
      assert.ok(!b.clipped, `${where}: "${b.text}" not cut`);
    }
  }

  /** Every element with Chinese text is drawn with a CJK font (fonts-noto-cjk), not with boxes. */
  async function assertCjkGlyphs(context: BrowserContext, page: Page, where: string): Promise<number> {
    const marked = (await page.evaluate(MARK_HAN)) as number;
    const cdp = await context.newCDPSession(page);
    try {
      await cdp.send('DOM.enable');
      await cdp.send('CSS.enable');
      const { root } = await cdp.send('DOM.getDocument', { depth: -1 });
      const { nodeIds } = await cdp.send('DOM.querySelectorAll', { nodeId: root.nodeId, selector: '[data-han]' });
      assert.equal(nodeIds.length, marked);
      for (const nodeId of nodeIds) {
        const { fonts } = await cdp.send('CSS.getPlatformFontsForNode', { nodeId });
        const families = fonts.map((f) => f.familyName);
        assert.ok(
          families.some((f) => /CJK|Source Han|WenQuanYi|Droid Sans Fallback/i.test(f)),
          `${where}: Chinese text drawn with ${families.join(', ')}: install fonts-noto-cjk`,
        );
      }
    } finally {
      await cdp.detach();
    }
    assert.deepEqual(await page.evaluate(MISSING_GLYPHS), [], `${where}: every Chinese character has a glyph`);
    return marked;
  }

  test(
    'in Chinese and English at 390 px and 1280 px: lang, texts, amounts, no overflow, no wrapped button, CJK glyphs',
    { skip: skipUnless(CJK_FONT) },
    async () => {
      const shop = await provision(t, { name: '山城小面（国贸店）' });
      const order = (o: Record<string, unknown>) => createOrder({ subject: '燕麦拿铁（大杯）', amountFen: 1234, ...o }, shop);
      const alipay = await order({});
      const wechat = await order({ channel: 'WECHAT_H5', subject: '地铁单程票' });
      const paid = await order({ returnUrl: 'https://shop.example/orders/done' });
      assert.equal((await t.sandbox('POST', `/payments/${paid.openOrderId}/pay`)).statusCode, 200);
      const closed = await order({});
      assert.equal((await call(t, shop, 'POST', `/api/open/v1/payments/${closed.outTradeNo}/close`)).statusCode, 200);
      const expired = await order({ channel: 'WECHAT_H5' });
      assert.equal((await t.sandbox('POST', `/payments/${expired.openOrderId}/expire`)).statusCode, 200);
      const cases = [
        { name: 'alipay-payable', order: alipay, state: 'PAYABLE', channel: 'ALIPAY_H5' },
        { name: 'wechat-payable', order: wechat, state: 'PAYABLE', channel: 'WECHAT_H5' },
        { name: 'paid', order: paid, state: 'PAID', channel: 'ALIPAY_H5' },
        { name: 'closed', order: closed, state: 'CLOSED', channel: 'ALIPAY_H5' },
        { name: 'expired', order: expired, state: 'EXPIRED', channel: 'WECHAT_H5' },
      ] as const;

      for (const lang of ['zh-CN', 'en'] as const) {
        const want = LANGS[lang];
        for (const width of [390, 1280] as const) {
          const context = await browser.newContext({ ...WIDTHS[width], locale: want.locale });
          for (const c of cases) {
            const where = `${lang} ${width}px ${c.name}`;
            const w = await watchPage(context, c.order.payUrl);
            const { page } = w;
            await stateIs(page, c.state);
            assert.equal(await page.locator('html').getAttribute('lang'), lang, where);
            assert.equal(await page.locator('.channel').textContent(), want.channel[c.channel], where);
            assert.equal(await page.locator('.amount').textContent(), want.amount, where);
            assert.equal(await page.locator('.merchant').textContent(), '山城小面（国贸店）');
            if (c.state === 'PAYABLE') {
              assert.match((await page.locator('[data-countdown]').textContent()) ?? '', want.countdown, where);
              assert.deepEqual(await page.locator('[data-sandbox-action]').allTextContents(), want.sandbox, where);
              if (c.channel === 'ALIPAY_H5') {
                const qr = page.locator('img.qr');
                await qr.waitFor({ state: 'visible' });
                assert.equal(
                  await qr.evaluate((img) => (img as unknown as { naturalWidth: number }).naturalWidth),
                  480,
                  `${where}: QR loaded`,
                );
              }
            } else {
              await page.getByRole('heading', { name: want.headings[c.state] }).waitFor();
            }
            await shot(page, `${lang}-${width}-${c.name}`);
            await assertLayout(page, where);
            const han = await assertCjkGlyphs(context, page, where);
            // The merchant name and the subject are Chinese in every language; the rest only in Chinese.
            assert.ok(lang === 'zh-CN' ? han >= 5 : han >= 2, `${where}: ${han} elements with Chinese text`);
            assert.deepEqual(w.problems, [], `${where}: no console errors or CSP violations`);
            await page.close();
          }
          await context.close();
        }
      }
    },
  );

  test('in Chinese: the action errors come from the page, then paid in Chinese without a reload', async () => {
    const order = await createOrder({ subject: '燕麦拿铁' });
    const context = await browser.newContext({ ...WIDTHS[390], locale: 'zh-CN' });
    const w = await watchPage(context, order.payUrl);
    const { page } = w;
    await stateIs(page, 'PAYABLE');
    const error = page.locator('[data-error]');
    const pay = page.getByRole('button', { name: '模拟付款成功' });
    // A refusal (its JSON message is English, for machines) and a network failure, in the page's words.
    await page.route('**/sandbox/pay', (route) =>
      route.fulfill({ status: 403, contentType: 'application/json', body: '{"error":"FORBIDDEN","message":"Refused."}' }),
    );
    await pay.click();
    await error.waitFor({ state: 'visible' });
    assert.equal(await error.textContent(), '操作未能完成，请重试。');
    await page.unroute('**/sandbox/pay');
    await page.route('**/sandbox/pay', (route) => route.abort());
    await pay.click();
    await page.waitForFunction(
      () =>
        (globalThis as unknown as { document: { querySelector(s: string): { textContent: string } | null } }).document.querySelector(
          '[data-error]',
        )?.textContent === '网络错误，请重试。',
    );
    await shot(page, 'zh-CN-390-action-error');
    await page.unroute('**/sandbox/pay');
    await pay.click();
    await stateIs(page, 'PAID');
    await page.getByRole('heading', { name: '支付成功' }).waitFor();
    assert.equal(await page.locator('html').getAttribute('lang'), 'zh-CN');
    assert.equal(w.loads(), 1, 'no reload');
    // The refused and the aborted request are the only console errors.
    assert.ok(
      w.problems.every((p) => /403|ERR_FAILED/.test(p)),
      w.problems.join('\n'),
    );
    await context.close();
  });

  test("the provider's own payment page: the link opens it with only this origin as referrer", async () => {
    // The "provider": another origin that records what it is sent.
    const seen: { url: string; referer: string | undefined }[] = [];
    const provider = http.createServer((req, res) => {
      seen.push({ url: req.url ?? '', referer: req.headers.referer });
      res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end('<!doctype html><title>provider</title><p>provider');
    });
    await new Promise<void>((resolve) => provider.listen(0, '127.0.0.1', resolve));
    const providerBase = `http://127.0.0.1:${(provider.address() as AddressInfo).port}`;
    try {
      for (const [channel, lang, label] of [
        ['ALIPAY_H5', 'zh-CN', '去支付宝付款'],
        ['WECHAT_H5', 'en', 'Pay with WeChat Pay'],
      ] as const) {
        const order = await createOrder({ channel, subject: '燕麦拿铁' });
        const providerPageUrl = `${providerBase}/pay?channel=${channel}&sign=a%2Bb`;
        const context = await browser.newContext({ ...WIDTHS[390], locale: LANGS[lang].locale });
        // The attempt does not carry a provider page yet: the page the service serves (its headers, CSP
        // included, and its styles) is re-rendered from the same view with providerPageUrl set.
        const w = await watchPage(context, order.payUrl, (page) =>
          page.route(order.payUrl, async (route) => {
            if (route.request().resourceType() !== 'document') return route.continue();
            const res = await route.fetch();
            const html = await res.text();
            const qrImage = /<img class="qr" src="([^"]+)"/.exec(html)?.[1];
            const view: CashierView = {
              state: 'PAYABLE',
              merchantName: 'Test Shop',
              subject: '燕麦拿铁',
              amountFen: 1234,
              channel,
              secondsLeft: Number(/data-seconds-left="(\d+)"/.exec(html)![1]),
              payable: qrImage ? { qrCode: order.qrCode!, qrImage } : null,
              providerPageUrl,
              returnUrl: null,
              sandboxActions: true,
              place: 'PHONE',
              way: channel === 'ALIPAY_H5' ? 'page' : 'h5',
              otherWays: [],
              wechatCode: null,
              jsapi: null,
              wayProblem: null,
            };
            const css = /<style>([\s\S]*?)<\/style>/.exec(html)![1]!;
            await route.fulfill({ response: res, body: renderCashierPage(view, { css, scriptPath: 'assets/cashier.js' }, lang) });
          }),
        );
        const { page } = w;
        await stateIs(page, 'PAYABLE');
        const link = page.getByRole('link', { name: label });
        assert.equal(await link.getAttribute('href'), providerPageUrl);
        assert.equal(await page.locator('img.qr').count(), channel === 'ALIPAY_H5' ? 1 : 0, 'the collection code stays for Alipay');
        await assertLayout(page, `${channel} provider page`);
        await shot(page, `${lang}-390-${channel === 'ALIPAY_H5' ? 'alipay' : 'wechat'}-provider-page`);
        await Promise.all([page.waitForURL(`${providerBase}/**`), link.click()]);
        assert.deepEqual(seen.pop(), { url: `/pay?channel=${channel}&sign=a%2Bb`, referer: `${base}/` }, 'origin only: no token');
        assert.deepEqual(w.problems, [], 'the navigation passes the CSP');
        await context.close();
      }
    } finally {
      await new Promise((resolve) => provider.close(resolve));
    }
  });
});
