/**
 * The API reference at /docs in a real (headless) Chromium: Swagger UI renders the served OpenAPI
 * document (the title, every operation, the webhook, the schemas), with no "Try it out", no CSP
 * violation and not one request leaving the service's origin; the links to the pages beside it
 * work both ways; the front page leads to it. Screenshots are kept under test-results/docs/.
 * Skipped when /usr/bin/chromium is absent.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { Browser, Page } from 'playwright-core';
import { DOC_PAGES, DOC_PAGE_LABELS } from '../../src/http/docs-pages.ts';
import { type TestApp, startTestApp } from '../helpers/app.ts';
import { browserSkipReason, freePort, launchChromium } from './launch.ts';

const RESULTS = path.resolve(import.meta.dirname, '../../test-results/docs');
const WAIT_MS = 20_000;

describe('the API reference in a browser', { skip: browserSkipReason() }, () => {
  let t: TestApp;
  let browser: Browser;
  let base: string;

  before(async () => {
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    t = await startTestApp({ PUBLIC_BASE_URL: base });
    await t.server.listen({ port, host: '127.0.0.1' });
    browser = await launchChromium();
    await fs.mkdir(RESULTS, { recursive: true });
  });
  after(async () => {
    await browser?.close();
    await t?.stop();
  });

  /** A page that records every request it makes and every console error (a CSP violation is one). */
  async function open(url: string): Promise<{ page: Page; requests: string[]; problems: string[]; close(): Promise<void> }> {
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 }, locale: 'en-US' });
    const page = await context.newPage();
    page.setDefaultTimeout(WAIT_MS);
    const requests: string[] = [];
    const problems: string[] = [];
    page.on('request', (r) => requests.push(r.url()));
    page.on('response', (r) => {
      if (r.status() >= 400) problems.push(`${r.status()} ${r.url()}`);
    });
    page.on('console', (msg) => {
      if (msg.type() === 'error') problems.push(`${msg.text()} ${msg.location().url}`);
    });
    page.on('pageerror', (err) => problems.push(err.message));
    const res = await page.goto(url);
    assert.equal(res?.status(), 200, url);
    return { page, requests, problems, close: () => context.close() };
  }

  test('/docs renders every operation, the webhook and the schemas of the served document, from this origin only', async () => {
    const doc = (await (await fetch(`${base}/docs/openapi.json`)).json()) as {
      info: { title: string };
      paths: Record<string, Record<string, { operationId: string }>>;
    };
    const operations = Object.values(doc.paths).flatMap((item) => Object.values(item).map((op) => op.operationId));
    assert.ok(operations.length >= 12);
    const { page, requests, problems, close } = await open(`${base}/docs`);
    try {
      await page.locator('.swagger-ui .info .title').waitFor();
      assert.match(await page.locator('.swagger-ui .info .title').innerText(), new RegExp(doc.info.title));
      for (const id of operations) {
        await page.locator(`[id^="operations-"][id$="-${id}"]`).first().waitFor({ state: 'attached' });
      }
      const paths = await page.locator('.opblock-summary-path').allInnerTexts();
      for (const p of Object.keys(doc.paths)) {
        assert.ok(
          paths.some((shown) => shown.replace(/\u200b/g, '') === p),
          `${p} is shown`,
        );
      }
      assert.match(await page.locator('.swagger-ui').innerText(), /Webhooks/i);
      assert.match(await page.locator('.swagger-ui').innerText(), /Schemas/);

      // An operation opens with its description; there is no "Try it out" (requests are signed).
      await page.locator('[id$="-createOrder"] .opblock-summary').first().click();
      await page.locator('[id$="-createOrder"] .opblock-description-wrapper').first().waitFor();
      assert.match(await page.locator('[id$="-createOrder"]').first().innerText(), /outTradeNo is the idempotency identity/);
      assert.equal(await page.locator('.try-out__btn').count(), 0, 'no Try it out');
      await page.screenshot({ path: path.join(RESULTS, 'reference.png'), fullPage: false });

      const origin = new URL(base).origin;
      const elsewhere = requests.filter((u) => !u.startsWith('data:') && new URL(u).origin !== origin);
      assert.deepEqual(elsewhere, [], 'nothing is fetched from outside the service');
      assert.ok(requests.includes(`${base}/docs/openapi.json`), 'the served document is the one rendered');
      assert.deepEqual(problems, [], 'no console error, no CSP violation');
    } finally {
      await close();
    }
  });

  test('the reference links the pages beside it, and each page links back', async () => {
    const { page, problems, close } = await open(`${base}/docs`);
    try {
      await page.locator('.swagger-ui .info .title').waitFor();
      // A link in the document's own text (the security scheme's) names its page by absolute URL.
      await page.locator(`.swagger-ui .info a[href="${base}/docs/authentication"]`).first().waitFor({ state: 'attached' });
      const href = (name: string) =>
        page
          .locator('nav')
          .getByRole('link', { name, exact: true })
          .evaluate((a) => (a as unknown as { href: string }).href);
      const pages: string[] = [];
      for (const p of DOC_PAGES) pages.push(await href(DOC_PAGE_LABELS[p]));
      assert.deepEqual(
        pages,
        DOC_PAGES.map((p) => `${base}/docs/${p}`),
      );
      for (const p of DOC_PAGES) {
        await page.goto(`${base}/docs/${p}`);
        assert.ok((await page.locator('main h1').innerText()).length > 0, `${p} has its title`);
        assert.equal(await href('API reference'), `${base}/docs`, `${p} links back to the reference`);
      }
      // Followed by a click: the reference renders again.
      await page.locator('nav').getByRole('link', { name: 'API reference', exact: true }).click();
      await page.waitForURL(`${base}/docs`);
      await page.locator('.swagger-ui .info .title').waitFor();
      assert.deepEqual(problems, []);
    } finally {
      await close();
    }
  });

  test('the front page leads to the reference', async () => {
    const { page, problems, close } = await open(`${base}/`);
    try {
      assert.equal(await page.title(), 'Merchant Payment Service');
      await page.getByRole('link', { name: 'API reference' }).click();
      await page.waitForURL(`${base}/docs`);
      await page.locator('.swagger-ui .info .title').waitFor();
      await page.screenshot({ path: path.join(RESULTS, 'front-page-to-reference.png') });
      assert.deepEqual(problems, []);
    } finally {
      await close();
    }
  });
});
