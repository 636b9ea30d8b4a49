/**
 * The operators' console in a real (headless) Chromium against a listening service: sign-in and
 * sign-out, a wrong password and the throttle; the flow of an operations operator (a merchant, an
 * app, a key uploaded from a file, an order made through the open API found and opened, its event
 * redelivered) and the audit log showing every step with the operator's name; what each role sees
 * and what the server refuses it from the browser; a cross-site form and a planted session cookie
 * that fail; every page at 1280 px and 390 px with no horizontal overflow and no CSP violation.
 * Screenshots are kept under test-results/console/. Skipped when /usr/bin/chromium is absent.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { SANDBOX_OPENID } from '../../src/providers/sandbox/sandbox.ts';
import { type Merchant, type TestApp, call, merchantKeyPair, orderBody, provision, startTestApp } from '../helpers/app.ts';
import { cashierToken, openInWeChat, payByNativeCode } from '../helpers/cashier.ts';
import { Receiver, waitFor } from '../helpers/events.ts';
import { PASSWORD, type TestOperator, createOperator } from '../helpers/operators.ts';
import { browserSkipReason, freePort, launchChromium } from './launch.ts';

const RESULTS = path.resolve(import.meta.dirname, '../../test-results/console');
const WAIT_MS = 10_000;
const DESKTOP = { width: 1280, height: 800 };

const PHONE = { width: 390, height: 844 };

describe('operator console in a browser', { skip: browserSkipReason() }, () => {
  let t: TestApp;
  let browser: Browser;
  let base: string;
  let rx: Receiver;
  const ops: Record<string, TestOperator> = {};
  /** Set by the flow test, read by the page tour. */
  let flow: { merchantId: string; appId: string; orderId: string; eventId: string } | null = null;

  before(async () => {
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    t = await startTestApp({ PUBLIC_BASE_URL: base });
    await t.server.listen({ port, host: '127.0.0.1' });
    // As `npm start` runs it: the workers deliver events and settle what is due.
    t.workers.start();
    rx = await Receiver.start();
    for (const [name, role] of [
      ['alice', 'admin'],
      ['oscar', 'operations'],
      ['fiona', 'finance'],
      ['sam', 'support'],
    ] as const) {
      ops[role] = await createOperator(t, name, role);
    }
    browser = await launchChromium();
    await fs.mkdir(RESULTS, { recursive: true });
  });
  after(async () => {
    await browser?.close();
    await t?.stop();
    await rx?.close();
  });

  interface Opened {
    context: BrowserContext;
    page: Page;
    /** Console errors and page errors (a CSP violation shows up here). */
    problems: string[];
  }

  async function open(viewport = DESKTOP): Promise<Opened> {
    const context = await browser.newContext({ viewport, locale: 'en-US', timezoneId: 'America/New_York' });
    const page = await context.newPage();
    page.setDefaultTimeout(WAIT_MS);
    const problems: string[] = [];
    page.on('console', (msg) => {
      // A refused call the page shows to the operator is not a page problem.
      if (msg.type() === 'error' && !/status of (401|403|409|429)/.test(msg.text())) problems.push(msg.text());
    });
    page.on('pageerror', (err) => problems.push(err.message));
    page.on('dialog', (d) => void d.accept());
    const res = await page.goto(`${base}/console`);
    assert.equal(res?.status(), 200);
    return { context, page, problems };
  }

  async function signIn(o: Opened, name: string, password = PASSWORD): Promise<void> {
    const form = o.page.getByRole('form', { name: 'Sign in' });
    await form.locator('input[name=name]').fill(name);
    await form.locator('input[name=password]').fill(password);
    await form.getByRole('button', { name: 'Sign in' }).click();
  }

  async function signedIn(name: string, viewport = DESKTOP): Promise<Opened> {
    const o = await open(viewport);
    await signIn(o, name);
    await o.page.locator(`.who[data-operator="${name}"]`).waitFor();
    return o;
  }

  const shot = (page: Page, name: string) => page.screenshot({ path: path.join(RESULTS, `${name}.png`), fullPage: true });

  async function go(page: Page, hash: string): Promise<void> {
    await page.evaluate((h) => {
      (globalThis as unknown as { location: { hash: string } }).location.hash = h;
    }, hash);
  }

  async function noOverflow(page: Page, what: string): Promise<void> {
    const { scroll, inner } = await page.evaluate(() => {
      const g = globalThis as unknown as { innerWidth: number; document: { documentElement: { scrollWidth: number } } };
      return { scroll: g.document.documentElement.scrollWidth, inner: g.innerWidth };
    });
    assert.ok(scroll <= inner, `${what}: the page is ${scroll} px wide in a ${inner} px window`);
  }

  /** A call the page's own script could make: the session cookie plus the CSRF token the page holds. */
  function fetchAsPage(page: Page, method: string, url: string, body?: unknown) {
    return page.evaluate(
      async ([m, u, b]) => {
        const s = (await (await fetch('/console/api/session')).json()) as { csrfToken: string };
        const r = await fetch(u as string, {
          method: m as string,
          headers: { 'content-type': 'application/json', 'x-csrf-token': s.csrfToken },
          body: b === undefined ? undefined : JSON.stringify(b),
        });
        return { status: r.status, body: (await r.json()) as { code?: string } };
      },
      [method, url, body] as const,
    );
  }

  test('sign-in, a wrong password, the throttle; sign-out ends the session', async () => {
    await createOperator(t, 'wanda', 'support');
    const o = await open();
    await o.page.getByRole('form', { name: 'Sign in' }).waitFor();
    await shot(o.page, 'sign-in');
    await signIn(o, 'wanda', 'not the password at all');
    await o.page.getByRole('alert').filter({ hasText: 'the name or the password is not right' }).waitFor();
    await shot(o.page, 'sign-in-wrong-password');
    for (let i = 0; i < 4; i++) {
      await signIn(o, 'wanda', `still wrong ${i}!!`);
      await waitFor('the refusal', async () => (await o.page.getByRole('alert').textContent())?.includes('not right'));
    }
    await signIn(o, 'wanda', PASSWORD);
    await o.page.getByRole('alert').filter({ hasText: 'too many failed sign-ins' }).waitFor();
    await shot(o.page, 'sign-in-throttled');
    await o.context.close();

    const a = await signedIn('alice');
    await a.page.getByRole('heading', { name: 'Dashboard' }).waitFor();
    const cookie = (await a.context.cookies()).find((c) => c.name === 'mps_console')!;
    assert.ok(cookie.httpOnly, 'HttpOnly');
    assert.equal(cookie.sameSite, 'Strict');
    assert.equal(
      await a.page.evaluate(() => (globalThis as unknown as { document: { cookie: string } }).document.cookie),
      '',
      'the page script cannot read the session cookie',
    );
    await a.page.getByRole('button', { name: 'Sign out' }).click();
    await a.page.getByRole('form', { name: 'Sign in' }).waitFor();
    await shot(a.page, 'signed-out');
    const replay = await t.server.inject({
      method: 'GET',
      url: '/api/admin/v1/merchants',
      headers: { cookie: `mps_console=${cookie.value}` },
    });
    assert.equal(replay.statusCode, 401, 'the cookie of a signed-out session is refused');
    assert.deepEqual(a.problems, []);
    await a.context.close();
  });

  test('operations: merchant -> app -> key from a file -> an order appears -> its event redelivered; the audit log names every step', async () => {
    const o = await signedIn('oscar');
    const { page } = o;
    await go(page, '#/merchants');
    const newMerchant = page.getByRole('form', { name: 'New merchant' });
    await newMerchant.locator('input[name=name]').fill('Blue Bottle Shanghai');
    await newMerchant.getByRole('button', { name: 'Create merchant' }).click();
    await page.getByRole('heading', { name: 'Blue Bottle Shanghai' }).waitFor();
    const merchantId = decodeURIComponent(new URL(page.url()).hash.split('/')[2]!);

    const newApp = page.getByRole('form', { name: 'New app' });
    await newApp.locator('input[name=notifyUrl]').fill(rx.url('/hooks/blue'));
    await newApp.getByRole('button', { name: 'Create app' }).click();
    const appCard = page.locator('article.app');
    await appCard.waitFor();
    const appId = (await appCard.getAttribute('data-app'))!;

    const upload = page.getByRole('form', { name: `Upload a key for ${appId}` });
    await upload.locator('input[name=keyId]').fill('key-2025');
    await upload.locator('input[type=file]').setInputFiles({
      name: 'merchant-public.pem',
      mimeType: 'application/x-pem-file',
      buffer: Buffer.from(merchantKeyPair().publicKeyPem),
    });
    await waitFor('the PEM read from the file', async () => (await upload.locator('textarea').inputValue()).includes('BEGIN PUBLIC KEY'));
    await upload.getByRole('button', { name: 'Upload key' }).click();
    await page.locator('tr[data-key="key-2025"]').filter({ hasText: 'ACTIVE' }).waitFor();
    await shot(page, 'merchant-with-app-and-key');

    // The merchant's system creates an order through the open API; the buyer pays in the sandbox.
    const m: Merchant = { merchantId, appId, keyId: 'key-2025', privateKeyPem: merchantKeyPair().privateKeyPem };
    const created = await call(t, m, 'POST', '/api/open/v1/payments', orderBody({ amountFen: 2599, subject: 'Flat white' }));
    assert.equal(created.statusCode, 201, created.body);
    const orderId = created.json().openOrderId as string;
    const paid = await t.sandbox('POST', `/payments/${orderId}/pay`);
    assert.equal(paid.statusCode, 200, paid.body);
    await waitFor('the event delivered', async () => rx.at('/hooks/blue').length === 1);

    await go(page, '#/orders');
    const search = page.getByRole('form', { name: 'Search orders' });
    await search.locator('input[name=outTradeNo]').fill(created.json().outTradeNo);
    await search.getByRole('button', { name: 'Search' }).click();
    await page.getByRole('link', { name: orderId }).click();
    await page.getByRole('heading', { name: `Order ${orderId}` }).waitFor();
    const event = page.locator('article.event');
    await event.filter({ hasText: 'DELIVERED' }).waitFor();
    const eventId = (await event.getAttribute('data-event'))!;
    await shot(page, 'order-paid');
    await event.getByRole('button', { name: 'Redeliver' }).click();
    await waitFor('the event delivered again', async () => rx.at('/hooks/blue').length === 2);
    await page.reload();
    await page.locator('article.event tbody tr').nth(1).waitFor();
    await page.locator('.timeline').filter({ hasText: 'event.redeliver by oscar' }).waitFor();
    await shot(page, 'order-redelivered');
    flow = { merchantId, appId, orderId, eventId };

    await go(page, '#/audit');
    for (const action of ['merchant.create', 'app.create', 'appKey.add', 'event.redeliver']) {
      await page.locator(`tr[data-action="${action}"]`).filter({ hasText: 'oscar' }).first().waitFor();
    }
    const rows = await page.locator('tr[data-action]').filter({ hasText: 'oscar' }).allTextContents();
    assert.ok(rows.some((r) => r.includes(merchantId)) && rows.some((r) => r.includes(appId)) && rows.some((r) => r.includes(eventId)));
    await shot(page, 'audit-log');
    const csv = await page.evaluate(async () => (await fetch('/api/admin/v1/audit/export.csv?operator=oscar')).text());
    assert.ok(csv.split('\r\n').filter((l) => l.includes(',oscar,')).length >= 4, csv);
    assert.deepEqual(o.problems, []);
    await o.context.close();
  });

  test('each role sees what it may, and the server refuses the rest from the browser too', async () => {
    const navOf = async (page: Page) => (await page.locator('nav.side a').allTextContents()).map((s) => s.trim());
    const merchantId = (await t.admin('POST', '/merchants', { name: 'Roles Shop', entityType: 'CORPORATE' })).json().merchantId as string;
    const appId = (await t.admin('POST', `/merchants/${merchantId}/apps`, {})).json().appId as string;

    const sam = await signedIn('sam');
    assert.deepEqual(await navOf(sam.page), [
      'Dashboard',
      'Merchants',
      'Orders',
      'Refunds',
      'Events',
      'Reconciliation',
      'Platform',
      'My account',
    ]);
    await go(sam.page, '#/reconciliation');
    await sam.page.getByRole('form', { name: 'Filter runs' }).waitFor();
    assert.equal(await sam.page.getByRole('form', { name: 'Reconcile a day' }).count(), 0, 'support reads runs, asks for none');
    await go(sam.page, `#/merchants/${merchantId}`);
    await sam.page.getByRole('heading', { name: 'Roles Shop' }).waitFor();
    assert.equal(await sam.page.getByRole('form').count(), 0, 'support sees no form on a merchant');
    await shot(sam.page, 'role-support-merchant');
    const refused = await fetchAsPage(sam.page, 'POST', '/api/admin/v1/merchants', { name: 'Nope', entityType: 'CORPORATE' });
    assert.equal(refused.status, 403);
    assert.equal(refused.body.code, 'ADMIN_FORBIDDEN');
    const audit = await fetchAsPage(sam.page, 'GET', '/api/admin/v1/audit');
    assert.equal(audit.status, 403);
    await go(sam.page, '#/audit');
    await sam.page.getByRole('alert').filter({ hasText: 'ADMIN_FORBIDDEN' }).waitFor();
    await shot(sam.page, 'role-support-audit-refused');
    await sam.context.close();

    const fiona = await signedIn('fiona');
    assert.deepEqual(await navOf(fiona.page), [
      'Dashboard',
      'Merchants',
      'Orders',
      'Refunds',
      'Events',
      'Reconciliation',
      'Platform',
      'Audit log',
      'My account',
    ]);
    // Finance asks for the reconciliation of yesterday; the workers run it.
    await go(fiona.page, '#/reconciliation');
    await fiona.page.getByRole('form', { name: 'Reconcile a day' }).getByRole('button', { name: 'Reconcile' }).click();
    await fiona.page.getByText('Queued: the workers run it within seconds.').waitFor();
    await waitFor('the run to complete', async () => {
      const runs = (await t.admin('GET', '/reconciliation/runs')).json().runs as { status: string }[];
      return runs.length > 0 && runs.every((r) => r.status === 'COMPLETED');
    });
    await go(fiona.page, '#/');
    await go(fiona.page, '#/reconciliation');
    await fiona.page.locator('table .badge-completed').first().waitFor();
    await shot(fiona.page, 'role-finance-reconciliation');
    await go(fiona.page, `#/merchants/${merchantId}`);
    await fiona.page.getByRole('form', { name: 'Fee rule' }).waitFor();
    // No rule of its own yet: the page says which applies (docs/fees.md).
    await fiona.page
      .getByText('No rule of its own: the platform default applies: 60 bps, 38 bps from ¥100,000.00; merchant rate 60 bps')
      .waitFor();
    assert.equal(await fiona.page.getByRole('form', { name: 'New app' }).count(), 0);
    const fee = fiona.page.getByRole('form', { name: 'Fee rule' });
    for (const [k, v] of Object.entries({
      ruleVersion: 3,
      standardRateBps: 60,
      largeRateBps: 38,
      thresholdFen: 10_000_000,
      merchantRateBps: 60,
    })) {
      await fee.locator(`input[name=${k}]`).fill(String(v));
    }
    await fee.getByRole('button', { name: 'Save fee rule' }).click();
    await fiona.page.getByText('Version 3: 60 bps').waitFor();
    await shot(fiona.page, 'role-finance-merchant');
    assert.equal((await fetchAsPage(fiona.page, 'PATCH', `/api/admin/v1/apps/${appId}`, { rateLimitPerSecond: 5 })).status, 403);
    assert.equal((await fetchAsPage(fiona.page, 'POST', '/api/admin/v1/platform-keys/rotate', {})).status, 403);
    await fiona.context.close();

    const oscar = await signedIn('oscar');
    assert.ok(!(await navOf(oscar.page)).includes('Operators'));
    assert.equal((await fetchAsPage(oscar.page, 'GET', '/api/admin/v1/operators')).status, 403);
    assert.equal((await fetchAsPage(oscar.page, 'PUT', `/api/admin/v1/merchants/${merchantId}/fee-rule`, {})).status, 403);
    await oscar.context.close();

    const alice = await signedIn('alice');
    assert.ok((await navOf(alice.page)).includes('Operators'));
    await go(alice.page, '#/operators');
    const form = alice.page.getByRole('form', { name: 'New operator' });
    await form.locator('input[name=name]').fill('newbie');
    await form.locator('select[name=role]').selectOption('support');
    await form.locator('input[name=password]').fill('a long enough password');
    await form.getByRole('button', { name: 'Create operator' }).click();
    await alice.page.locator('tr[data-operator="newbie"]').waitFor();
    await shot(alice.page, 'role-admin-operators');
    await alice.context.close();
  });

  test('a cross-site form and a planted session cookie get nowhere', async () => {
    const before = (await t.admin('GET', '/merchants')).json().merchants.length;
    // Another site (another host name, so SameSite applies) with a form that posts to the admin API.
    const evil = http.createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/html' })
        .end(`<!doctype html><form id="f" method="POST" action="${base}/api/admin/v1/merchants" enctype="text/plain">
<input name='{"name":"Evil","entityType":"CORPORATE","x":"' value='"}'></form><script>document.getElementById('f').submit()</script>`);
    });
    await new Promise<void>((resolve) => evil.listen(0, '127.0.0.1', resolve));
    const evilUrl = `http://localhost:${(evil.address() as AddressInfo).port}/`;
    try {
      const o = await signedIn('oscar');
      const answered = o.page.waitForResponse((r) => r.url().endsWith('/api/admin/v1/merchants') && r.request().method() === 'POST');
      await o.page.goto(evilUrl);
      const r = await answered;
      assert.ok([401, 403].includes(r.status()), `the forged request is refused (${r.status()})`);
      await shot(o.page, 'csrf-refused');
      await o.context.close();
    } finally {
      evil.close();
    }
    assert.equal((await t.admin('GET', '/merchants')).json().merchants.length, before, 'nothing was created');

    // Session fixation: a cookie planted before sign-in is replaced by a new one, and stays refused.
    const o = await open();
    const planted = 'A'.repeat(43);
    await o.context.addCookies([{ name: 'mps_console', value: planted, url: base }]);
    await signIn(o, 'sam');
    await o.page.locator('.who[data-operator="sam"]').waitFor();
    const now = (await o.context.cookies()).find((c) => c.name === 'mps_console')!;
    assert.notEqual(now.value, planted);
    const r = await t.server.inject({ method: 'GET', url: '/api/admin/v1/merchants', headers: { cookie: `mps_console=${planted}` } });
    assert.equal(r.statusCode, 401);
    await o.context.close();
  });

  test('the fixes operators asked for: recent orders at once, a merchant column, times labelled in Asia/Shanghai, "to, inclusive", wide tables that fit', async () => {
    // Two merchants whose systems use the same order number.
    const a = await provision(t, { name: 'Tea House A' });
    const b = await provision(t, { name: 'Tea House B' });
    const no = `SHARED_${Date.now()}`;
    for (const m of [a, b])
      assert.equal((await call(t, m, 'POST', '/api/open/v1/payments', orderBody({ outTradeNo: no }))).statusCode, 201);
    const o = await signedIn('alice');
    const { page } = o;
    await go(page, '#/orders');
    // Without pressing Search, the newest orders are listed, each with its merchant.
    const rows = page.locator('tr[data-order]').filter({ hasText: no });
    await waitFor('both orders listed', async () => (await rows.count()) === 2);
    const merchants = await rows.locator('td[data-merchant]').allTextContents();
    assert.deepEqual(merchants.sort(), ['Tea House A', 'Tea House B']);
    // Every time is Asia/Shanghai's, labelled (the browser's zone here is New York's).
    const created = await rows.first().locator('td.when').textContent();
    assert.match(created!, /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\sUTC\+8$/);
    const r = (await t.admin('GET', `/orders?outTradeNo=${no}`)).json().orders[0];
    const shanghai = new Date(Date.parse(r.createdAt) + 8 * 3600_000).toISOString().replace('T', ' ').slice(0, 19);
    assert.ok(merchants.length === 2 && (await rows.locator('td.when').allTextContents()).some((x) => x.startsWith(shanghai.slice(0, 16))));
    await page.locator('.top .zone').filter({ hasText: 'Asia/Shanghai' }).waitFor();
    await shot(page, 'orders-two-merchants');
    // The day filters say the same everywhere.
    for (const hash of ['#/orders', '#/audit']) {
      await go(page, hash);
      await page.getByText('To (day, inclusive)').waitFor();
      assert.equal(await page.getByText('exclusive').count(), 0, hash);
    }
    // The audit log and the reconciliation tables fit a 1280 px screen: nothing scrolls sideways.
    for (const hash of ['#/audit', '#/reconciliation']) {
      await go(page, hash);
      await page.locator('.table-wrap table').first().waitFor();
      await page.waitForLoadState('networkidle');
      const overflowing = await page.evaluate(() => {
        type Box = { scrollWidth: number; clientWidth: number };
        const doc = (globalThis as unknown as { document: { querySelectorAll(s: string): ArrayLike<Box> } }).document;
        return Array.from(doc.querySelectorAll('.table-wrap'))
          .filter((w) => w.scrollWidth > w.clientWidth + 1)
          .map((w) => `${w.scrollWidth} > ${w.clientWidth}`);
      });
      assert.deepEqual(overflowing, [], `${hash}: tables wider than their card at 1280 px`);
    }
    assert.deepEqual(o.problems, []);
    await o.context.close();
  });

  test("in zh-CN: the console in Chinese (the server's refusals too), switched to English and back; a portal user invited from a merchant", async () => {
    const context = await browser.newContext({ viewport: DESKTOP, locale: 'zh-CN', timezoneId: 'Asia/Shanghai' });
    const page = await context.newPage();
    page.setDefaultTimeout(WAIT_MS);
    const problems: string[] = [];
    page.on('pageerror', (err) => problems.push(err.message));
    await page.goto(`${base}/console`);
    const form = page.getByRole('form', { name: '登录' });
    // A refusal of the server shown in Chinese (the API answers in English, by its code; src/ui/errors.ts).
    await form.locator('input[name=name]').fill('oscar');
    await form.locator('input[name=password]').fill('not the password at all');
    await form.getByRole('button', { name: '登录' }).click();
    const refused = page.getByRole('alert');
    await refused.filter({ hasText: '用户名或密码不正确。' }).waitFor();
    assert.equal(await refused.textContent(), '用户名或密码不正确。（ADMIN_UNAUTHORIZED）');
    await shot(page, 'zh-sign-in-wrong-password');
    await form.locator('input[name=password]').fill(PASSWORD);
    await form.getByRole('button', { name: '登录' }).click();
    await page.getByRole('heading', { level: 1, name: '概览', exact: true }).waitFor();
    assert.equal(
      await page.evaluate(
        () => (globalThis as unknown as { document: { documentElement: { lang: string } } }).document.documentElement.lang,
      ),
      'zh-CN',
    );
    const nav = (await page.locator('nav.side a').allTextContents()).map((x) => x.trim());
    assert.deepEqual(nav.slice(0, 3), ['概览', '商户', '订单']);
    await shot(page, 'zh-dashboard');
    const merchant = await provision(t, { name: '茶馆' });
    await go(page, `#/merchants/${merchant.merchantId}`);
    const invite = page.getByRole('form', { name: '邀请用户' });
    await invite.locator('input[name=login]').fill('owner@teahouse.test');
    await invite.locator('select[name=role]').selectOption('owner');
    await invite.getByRole('button', { name: '邀请' }).click();
    const link = await page.locator('input.invitation-link').inputValue();
    assert.match(link, /\/portal#\/invitation\//);
    await page.locator('tr[data-user="owner@teahouse.test"]').filter({ hasText: 'INVITED' }).waitFor();
    assert.equal(await invite.locator('input[name=login]').inputValue(), '', 'the form is empty for the next invitation');
    await shot(page, 'zh-merchant-portal-users');
    // The same login again: the server's refusal (a validation message naming the login) in Chinese.
    await invite.locator('input[name=login]').fill('owner@teahouse.test');
    await invite.getByRole('button', { name: '邀请' }).click();
    await page.getByRole('alert').filter({ hasText: '登录名 owner@teahouse.test 已被使用。' }).waitFor();
    await page.getByRole('button', { name: 'English' }).click();
    await page.getByRole('heading', { level: 2, name: 'Merchant portal users' }).waitFor();
    await page.getByRole('button', { name: '中文' }).click();
    await page.getByRole('heading', { level: 2, name: '商户平台用户' }).waitFor();
    assert.deepEqual(problems, []);
    await context.close();
  });

  test("an order's provider trades on its page, in English and in zh-CN: product, number, state, times in Asia/Shanghai; never the openid", async () => {
    const shop = await provision(t, { name: 'Trades Shop' });
    const c = await call(t, shop, 'POST', '/api/open/v1/payments', orderBody({ channel: 'WECHAT_H5', amountFen: 1290 }));
    assert.equal(c.statusCode, 201, c.body);
    const { openOrderId, payUrl } = c.json() as { openOrderId: string; payUrl: string };
    // The buyer opens the link inside WeChat (a JSAPI trade), then on a computer (a Native code), and pays by the code.
    const token = cashierToken(payUrl);
    await openInWeChat(t, token);
    await payByNativeCode(t, token);
    const trades = (await t.admin('GET', `/orders/${openOrderId}`)).json().attempts[0].trades as { tradeNo: string; product: string }[];
    const native = trades.find((x) => x.product === 'NATIVE')!;
    const jsapi = trades.find((x) => x.product === 'JSAPI')!;

    for (const [lang, text] of [
      ['en-US', { heading: 'Provider trades', native: 'Native (a code scanned)', jsapi: 'JSAPI (inside WeChat)', paid: 'Paid' }],
      ['zh-CN', { heading: '渠道交易', native: 'Native（扫码支付）', jsapi: 'JSAPI（微信内支付）', paid: '支付时间' }],
    ] as const) {
      const context = await browser.newContext({ viewport: DESKTOP, locale: lang, timezoneId: 'America/New_York' });
      const page = await context.newPage();
      page.setDefaultTimeout(WAIT_MS);
      await page.goto(`${base}/console`);
      const form = page.locator('form.card');
      await form.locator('input[name=name]').fill('sam');
      await form.locator('input[name=password]').fill(PASSWORD);
      await form.locator('button[type=submit]').click();
      await page.locator('.who[data-operator="sam"]').waitFor();
      await go(page, `#/orders/${openOrderId}`);
      await page.getByRole('heading', { level: 3, name: text.heading }).waitFor();
      const row = page.locator(`tr[data-trade="${native.tradeNo}"]`);
      const cells = (await row.locator('td').allTextContents()).map((x) => x.trim());
      assert.deepEqual(cells.slice(1, 4), [text.native, native.tradeNo, 'PAID']);
      const times = await row.locator('td.when').allTextContents();
      assert.equal(times.length, 2);
      for (const x of times) assert.match(x, /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\sUTC\+8$/, 'made and paid, in Asia/Shanghai');
      const other = page.locator(`tr[data-trade="${jsapi.tradeNo}"]`);
      assert.ok((await other.textContent())!.includes(text.jsapi));
      assert.equal((await other.locator('td.when').allTextContents())[1], '—', 'not paid');
      assert.ok((await page.locator('.trades th').allTextContents()).includes(text.paid));
      await page.locator('.timeline').filter({ hasText: native.tradeNo }).waitFor();
      assert.ok(!(await page.content()).includes(SANDBOX_OPENID), 'the openid is nowhere on the page');
      await shot(page, `order-trades-${lang}`);
      await context.close();
    }
  });

  test('every page at 1280 px and 390 px: readable, no horizontal overflow, no CSP violation', async () => {
    assert.ok(flow, 'the flow test ran first');
    const runId = ((await t.admin('GET', '/reconciliation/runs')).json().runs as { runId: string }[])[0]!.runId;
    const pages: [string, string, string][] = [
      ['dashboard', '#/', 'Dashboard'],
      ['merchants', '#/merchants', 'Merchants'],
      ['merchant', `#/merchants/${flow.merchantId}`, 'Blue Bottle Shanghai'],
      ['orders', '#/orders', 'Orders'],
      ['order', `#/orders/${flow.orderId}`, `Order ${flow.orderId}`],
      ['refunds', '#/refunds', 'Refunds'],
      ['events', '#/events', 'Events'],
      ['event', `#/events/${flow.eventId}`, `Event ${flow.eventId}`],
      ['reconciliation', '#/reconciliation', 'Reconciliation'],
      ['reconciliation-run', `#/reconciliation/${runId}`, `Run ${runId}`],
      ['platform', '#/platform', 'Platform'],
      ['operators', '#/operators', 'Operators'],
      ['audit', '#/audit', 'Audit log'],
      ['account', '#/account', 'My account'],
    ];
    for (const [size, viewport] of [
      ['1280', DESKTOP],
      ['390', PHONE],
    ] as const) {
      const o = await signedIn('alice', viewport);
      for (const [name, hash, heading] of pages) {
        await go(o.page, hash);
        await o.page.getByRole('heading', { level: 1, name: heading, exact: true }).waitFor();
        await o.page.locator('.card').first().waitFor();
        await o.page.waitForLoadState('networkidle');
        await waitFor(`${name} loaded`, async () => (await o.page.getByText('Loading…').count()) === 0);
        await noOverflow(o.page, `${name} at ${size} px`);
        await shot(o.page, `${name}-${size}`);
      }
      if (size === '390') {
        // The menu folds away on a phone and opens with its button.
        assert.equal(await o.page.locator('nav.side').isVisible(), false);
        await o.page.getByRole('button', { name: 'Menu' }).click();
        await o.page.locator('nav.side').getByRole('link', { name: 'Orders' }).click();
        await o.page.getByRole('heading', { level: 1, name: 'Orders', exact: true }).waitFor();
      }
      assert.deepEqual(o.problems, [], `no console error at ${size} px`);
      await o.context.close();
    }
  });
});
