/**
 * The cashier page in a real (headless) phone browser against a listening service: a real payUrl,
 * the page's own script polling and acting, the CSP enforced by the browser. Screenshots of each
 * state go to test-results/cashier-<state>.png. Skipped when /usr/bin/chromium is absent.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { type Browser, type BrowserContext, type Page, devices } from 'playwright-core';
import { type Merchant, type TestApp, call, orderBody, provision, startTestApp } from '../helpers/app.ts';
import { browserSkipReason, freePort, launchChromium } from './launch.ts';

const RESULTS = path.resolve(import.meta.dirname, '../../test-results');
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

  interface Opened {
    page: Page;
    context: BrowserContext;
    order: { openOrderId: string; outTradeNo: string; payUrl: string; qrCode: string | null };
    /** Console errors and page errors (a CSP violation shows up here). */
    problems: string[];
    /** Full page loads seen (the page must never reload itself). */
    loads: () => number;
    /** Requests to the status endpoint seen. */
    polls: () => number;
  }

  async function openCashier(o: Record<string, unknown> = {}): Promise<Opened> {
    const r = await call(t, m, 'POST', '/api/open/v1/payments', orderBody({ subject: 'Flat white, oat milk', amountFen: 1234, ...o }));
    assert.equal(r.statusCode, 201, r.body);
    const order = r.json();
    assert.ok(order.payUrl.startsWith(`${base}/cashier/`), order.payUrl);
    const context = await browser.newContext({ ...devices['Pixel 7'], locale: 'en-US' });
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
    const res = await page.goto(order.payUrl);
    assert.equal(res?.status(), 200);
    return { page, context, order, problems, loads: () => loads, polls: () => polls };
  }

  const stateIs = (page: Page, state: string) => page.waitForSelector(`main#cashier[data-state="${state}"]`);
  const shot = (page: Page, name: string) => page.screenshot({ path: path.join(RESULTS, `cashier-${name}.png`), fullPage: true });

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
    await shot(page, 'payable');

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
    await shot(page, 'paid');

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
    await shot(page, 'expired');
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
    await shot(page, 'superseded');
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
    await shot(page, 'wechat');
    await page.getByRole('button', { name: 'Simulate failure' }).click();
    await stateIs(page, 'FAILED');
    await page.getByRole('heading', { name: 'Payment failed' }).waitFor();
    await assertNoMaterial(page);
    assert.equal(c.loads(), 1);
    assert.equal((await call(t, m, 'GET', `/api/open/v1/payments/${c.order.outTradeNo}`)).json().status, 'FAILED');
    await shot(page, 'failed');
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
});
