/**
 * The merchants' portal in a real (headless) Chromium against a listening service, in English and
 * in zh-CN (docs/portal.md): an owner invited by an operator sets its password from the link and
 * signs in (a wrong password first, refused in the page's language); rotates the app's key (the new key pasted, the old one retired after an hour) while
 * requests signed with both keys keep being accepted; changes the notify URL; redelivers an event
 * of an order the open API made; turns TOTP on and signs in again with a code; and, the day
 * closed (the service's clock moved), downloads the day's statement. The order, paid by a code
 * scanned on a computer, shows its attempt's provider trade. The audit log shows each
 * change. Every page at 1280 px and 390 px with no horizontal overflow and no console error (a CSP
 * violation would be one). Screenshots are kept under test-results/portal/.
 */
import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { PORTAL_ZH } from '../../src/portal/ui/zh.ts';
import { SHARED_ZH } from '../../src/ui/zh.ts';
import { type Merchant, type TestApp, call, orderBody, provision, startTestApp } from '../helpers/app.ts';
import { cashierToken, payByNativeCode } from '../helpers/cashier.ts';
import { FakeClock, Receiver, waitFor } from '../helpers/events.ts';
import { PASSWORD } from '../helpers/operators.ts';
import { totpCode } from '../helpers/portal.ts';
import { browserSkipReason, freePort, launchChromium } from './launch.ts';

const RESULTS = path.resolve(import.meta.dirname, '../../test-results/portal');
const WAIT_MS = 15_000;
const DESKTOP = { width: 1280, height: 800 };
const PHONE = { width: 390, height: 844 };
type Lang = 'en' | 'zh-CN';

describe('merchant portal in a browser', { skip: browserSkipReason() }, () => {
  const clock = new FakeClock();
  let t: TestApp;
  let browser: Browser;
  let base: string;
  let rx: Receiver;

  before(async () => {
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    t = await startTestApp({ PUBLIC_BASE_URL: base, WEBHOOK_ALLOW_LOOPBACK: 'true' }, { clock });
    await t.server.listen({ port, host: '127.0.0.1' });
    t.workers.start();
    rx = await Receiver.start();
    browser = await launchChromium();
    await fs.mkdir(RESULTS, { recursive: true });
  });
  after(async () => {
    await browser?.close();
    await t?.stop();
    await rx?.close();
  });

  /** A page's text in the language of the test. */
  const say = (lang: Lang, text: string, vars: Record<string, string> = {}) => {
    const s = lang === 'zh-CN' ? (PORTAL_ZH[text] ?? SHARED_ZH[text] ?? text) : text;
    return s.replace(/\{(\w+)\}/g, (m, k: string) => vars[k] ?? m);
  };

  interface Opened {
    context: BrowserContext;
    page: Page;
    problems: string[];
  }

  async function open(lang: Lang, url: string, viewport = DESKTOP): Promise<Opened> {
    const context = await browser.newContext({ viewport, locale: lang, timezoneId: 'America/New_York', acceptDownloads: true });
    const page = await context.newPage();
    page.setDefaultTimeout(WAIT_MS);
    const problems: string[] = [];
    page.on('console', (msg) => {
      if (msg.type() === 'error' && !/status of (401|403|409|429)/.test(msg.text())) problems.push(msg.text());
    });
    page.on('pageerror', (err) => problems.push(err.message));
    page.on('response', (r) => {
      if (r.status() === 404) problems.push(`404 ${r.url()}`);
    });
    page.on('dialog', (d) => void d.accept());
    assert.equal((await page.goto(url))?.status(), 200);
    return { context, page, problems };
  }

  async function signIn(o: Opened, lang: Lang, login: string, code?: () => string): Promise<void> {
    const form = o.page.getByRole('form', { name: say(lang, 'Sign in') });
    await form.locator('input[name=login]').fill(login);
    await form.locator('input[name=password]').fill(PASSWORD);
    await form.getByRole('button', { name: say(lang, 'Sign in') }).click();
    if (code) {
      const field = form.locator('input[name=totpCode]');
      await field.waitFor();
      await field.fill(code());
      await form.getByRole('button', { name: say(lang, 'Sign in') }).click();
    }
    await o.page.locator(`.who[data-user="${login}"]`).waitFor();
  }

  const go = (page: Page, hash: string) =>
    page.evaluate((h) => {
      (globalThis as unknown as { location: { hash: string } }).location.hash = h;
    }, hash);
  const shot = (page: Page, name: string) => page.screenshot({ path: path.join(RESULTS, `${name}.png`), fullPage: true });

  async function noOverflow(page: Page, what: string): Promise<void> {
    const { scroll, inner } = await page.evaluate(() => {
      const g = globalThis as unknown as { innerWidth: number; document: { documentElement: { scrollWidth: number } } };
      return { scroll: g.document.documentElement.scrollWidth, inner: g.innerWidth };
    });
    assert.ok(scroll <= inner, `${what}: the page is ${scroll} px wide in a ${inner} px window`);
  }

  async function flow(lang: Lang): Promise<void> {
    const tag = lang === 'en' ? 'en' : 'zh';
    const shop: Merchant = await provision(t, {
      name: lang === 'en' ? 'Harbour Coffee' : '港湾咖啡',
      app: { notifyUrl: rx.url(`/${tag}/hook`) },
    });
    const login = `owner@${tag}.test`;
    // The operator invites the owner (the console's Merchants page calls this), and gives it the link.
    const inv = await t.admin('POST', `/merchants/${shop.merchantId}/users`, { login, role: 'owner' });
    assert.equal(inv.statusCode, 201, inv.body);
    const invitationUrl = inv.json().invitationUrl as string;
    assert.ok(invitationUrl.startsWith(`${base}/portal#/invitation/`));

    const o = await open(lang, invitationUrl);
    const { page } = o;
    const accept = page.getByRole('form', { name: say(lang, 'Accept the invitation') });
    await accept.locator('input[name=password]').fill(PASSWORD);
    await accept.locator('input[name=again]').fill(PASSWORD);
    await shot(page, `${tag}-invitation`);
    await accept.getByRole('button', { name: say(lang, 'Set my password') }).click();
    await page.getByRole('form', { name: say(lang, 'Sign in') }).waitFor();
    // The sign-in form says the password is set, the login filled in.
    assert.equal(await page.getByRole('status').textContent(), say(lang, 'Your password is set: sign in.'));
    assert.equal(
      await page
        .getByRole('form', { name: say(lang, 'Sign in') })
        .locator('input[name=login]')
        .inputValue(),
      login,
    );
    await shot(page, `${tag}-sign-in`);
    // A wrong password: the server's refusal, in the page's language (src/ui/errors.ts).
    const form = page.getByRole('form', { name: say(lang, 'Sign in') });
    await form.locator('input[name=login]').fill(login);
    await form.locator('input[name=password]').fill('not the password at all');
    await form.getByRole('button', { name: say(lang, 'Sign in') }).click();
    const refusal =
      lang === 'en' ? 'the name or the password is not right (PORTAL_UNAUTHORIZED)' : '用户名或密码不正确。（PORTAL_UNAUTHORIZED）';
    await page.getByRole('alert').filter({ hasText: refusal }).waitFor();
    assert.equal(await page.getByRole('alert').textContent(), refusal);
    await shot(page, `${tag}-sign-in-refused`);
    // Sign-in without TOTP.
    await signIn(o, lang, login);
    await page.getByRole('heading', { name: say(lang, 'Orders'), exact: true }).waitFor();
    assert.equal(
      await page.evaluate(
        () => (globalThis as unknown as { document: { documentElement: { lang: string } } }).document.documentElement.lang,
      ),
      lang,
    );

    // --- key rotation while signed requests keep flowing with both keys ---
    const next = generateKeyPairSync('rsa', { modulusLength: 2048 });
    const fresh: Merchant = { ...shop, keyId: 'key-2', privateKeyPem: next.privateKey.export({ type: 'pkcs8', format: 'pem' }).toString() };
    const results: { key: string; status: number }[] = [];
    let flowing = true;
    let useNew = false;
    const traffic = (async () => {
      while (flowing) {
        for (const m of useNew ? [shop, fresh] : [shop]) {
          const r = await call(t, m, 'GET', '/api/open/v1/settlement/accounts', undefined, {
            timestamp: String(Math.floor(clock.now() / 1000)),
          });
          results.push({ key: m.keyId, status: r.statusCode });
        }
        await new Promise((r) => setTimeout(r, 20));
      }
    })();
    await go(page, '#/apps');
    const add = page.getByRole('form', { name: say(lang, 'Add a key to {app}', { app: shop.appId }) });
    await add.locator('input[name=keyId]').fill('key-2');
    await add.locator('textarea[name=publicKeyPem]').fill(next.publicKey.export({ type: 'spki', format: 'pem' }).toString());
    await add.getByRole('button', { name: say(lang, 'Add key') }).click();
    await page.locator('tr[data-key="key-2"]').waitFor();
    useNew = true;
    const retire = page.getByRole('form', { name: say(lang, 'Retire key {key}', { key: shop.keyId }) });
    await retire.locator('select[name=after]').selectOption('3600');
    await retire.getByRole('button', { name: say(lang, 'Retire') }).click();
    await page.locator(`tr[data-key="${shop.keyId}"]`).filter({ hasText: 'UTC+8' }).waitFor();
    await waitFor('requests with both keys after the retirement was set', async () => results.filter((r) => r.key === 'key-2').length >= 3);
    flowing = false;
    await traffic;
    assert.ok(results.length >= 6, `${results.length} requests`);
    assert.deepEqual(
      results.filter((r) => r.status !== 200),
      [],
      'every request signed with a valid key was accepted during the rotation',
    );
    await shot(page, `${tag}-apps-rotated`);

    // --- the notify URL ---
    const change = page.getByRole('form', { name: say(lang, 'Change app {app}', { app: shop.appId }) });
    await change.locator('input[name=notifyUrl]').fill(rx.url(`/${tag}/moved`));
    await change.getByRole('button', { name: say(lang, 'Save') }).click();
    await page
      .locator('article.app dd')
      .filter({ hasText: rx.url(`/${tag}/moved`) })
      .waitFor();

    // --- an order made by the merchant's system, paid by a code scanned on a computer (a provider
    // trade of its attempt), its event redelivered from the portal ---
    const body = orderBody({ channel: 'WECHAT_H5' });
    const c = await call(t, fresh, 'POST', '/api/open/v1/payments', body, { timestamp: String(Math.floor(clock.now() / 1000)) });
    assert.equal(c.statusCode, 201, c.body);
    const orderId = c.json().openOrderId as string;
    await payByNativeCode(t, cashierToken(c.json().payUrl as string));
    const trade = (await t.admin('GET', `/orders/${orderId}`)).json().attempts[0].trades[0] as { tradeNo: string };
    await waitFor('the first delivery', async () => rx.at(`/${tag}/moved`).length >= 1);
    await go(page, '#/');
    await page.getByRole('link', { name: body.outTradeNo as string }).click();
    await page.locator('article.event').waitFor();
    await waitFor('the event delivered', async () => {
      await page.reload();
      await page.locator('article.event').waitFor();
      return (await page.locator('article.event').textContent())?.includes('DELIVERED');
    });
    await page
      .getByRole('button', { name: say(lang, 'Redeliver') })
      .first()
      .click();
    await page
      .getByRole('status')
      .filter({ hasText: say(lang, 'Queued for delivery again.') })
      .waitFor();
    await waitFor('the redelivery', async () => rx.at(`/${tag}/moved`).length >= 2);
    // The attempt's provider trade: its product, number and state, made and paid in Asia/Shanghai.
    await page.getByRole('heading', { level: 3, name: say(lang, 'Provider trades') }).waitFor();
    const cells = (await page.locator(`tr[data-trade="${trade.tradeNo}"] td`).allTextContents()).map((x) => x.trim());
    assert.deepEqual(cells.slice(0, 4), ['#1', say(lang, 'Native (a code scanned)'), trade.tradeNo, 'PAID']);
    for (const x of cells.slice(4)) assert.match(x, /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\sUTC\+8$/);
    await shot(page, `${tag}-order`);

    // --- TOTP on, then a sign-in with a code ---
    await go(page, '#/account');
    await page.getByRole('button', { name: say(lang, 'Set up') }).click();
    const secret = (await page.locator('code[data-totp-secret]').getAttribute('data-totp-secret'))!;
    const confirm = page.getByRole('form', { name: say(lang, 'Confirm the second factor') });
    await confirm.locator('input[name=code]').fill(totpCode(secret, clock.now()));
    await shot(page, `${tag}-totp-setup`);
    await confirm.getByRole('button', { name: say(lang, 'Turn on') }).click();
    await page.locator('[data-totp=on]').waitFor();
    await page.getByRole('button', { name: say(lang, 'Sign out') }).click();
    await page.getByRole('form', { name: say(lang, 'Sign in') }).waitFor();
    clock.advance(31_000); // the code used to turn it on is spent: the next one
    await signIn(o, lang, login, () => totpCode(secret, clock.now()));

    // --- the audit log shows the changes ---
    await go(page, '#/audit');
    for (const action of ['appKey.add', 'appKey.retire', 'app.update', 'event.redeliver', 'merchantUser.enableTotp']) {
      await page.locator(`tr[data-action="${action}"]`).first().waitFor();
    }
    await shot(page, `${tag}-audit`);

    // --- the day closes (the service's clock moves on a day): its statement downloaded ---
    const day = new Date(clock.now() + 8 * 3600_000).toISOString().slice(0, 10);
    clock.advance(26 * 3600_000);
    await page.reload();
    await signIn(o, lang, login, () => totpCode(secret, clock.now()));
    // The old key's overlap is over now: refused; the new key goes on.
    assert.equal(
      (await call(t, shop, 'GET', '/api/open/v1/settlement/accounts', undefined, { timestamp: String(Math.floor(clock.now() / 1000)) }))
        .statusCode,
      401,
    );
    await go(page, '#/statements');
    const find = page.getByRole('form', { name: say(lang, 'Find a statement') });
    await find.locator('select[name=appId]').selectOption(shop.appId);
    await find.locator('input[name=day]').fill(day);
    await find.getByRole('button', { name: say(lang, 'Show') }).click();
    const download = page.getByRole('link', { name: say(lang, 'Download') });
    await download.waitFor();
    const [file] = await Promise.all([page.waitForEvent('download'), download.click()]);
    const text = await fs.readFile((await file.path())!, 'utf8');
    assert.match(text, new RegExp(orderId));
    assert.match(file.suggestedFilename(), /\.csv$/);
    await shot(page, `${tag}-statement`);
    assert.deepEqual(o.problems, []);
    await o.context.close();

    // Every page, wide and narrow, in this language.
    for (const viewport of [DESKTOP, PHONE]) {
      const v = await open(lang, `${base}/portal`, viewport);
      await signIn(v, lang, login, () => {
        clock.advance(31_000);
        return totpCode(secret, clock.now());
      });
      for (const hash of [
        '#/',
        `#/orders/${orderId}`,
        '#/refunds',
        '#/events',
        '#/statements',
        '#/settlement',
        '#/apps',
        '#/platform-keys',
        '#/users',
        '#/audit',
        '#/account',
      ]) {
        await go(v.page, hash);
        await v.page.locator('main.content h1').first().waitFor();
        await v.page.waitForLoadState('networkidle');
        await noOverflow(v.page, `${lang} ${hash} at ${viewport.width} px`);
        await shot(v.page, `${tag}-${viewport.width}-${hash.replace(/[#/]+/g, '-').replace(/^-|-$/g, '') || 'orders'}`);
      }
      assert.deepEqual(v.problems, []);
      await v.context.close();
    }
  }

  test('in English: invited, signed in, key rotated, notify URL changed, event redelivered, TOTP, statement downloaded', async () => {
    await flow('en');
  });

  test('in zh-CN: the same flow, every label in Chinese', async () => {
    await flow('zh-CN');
  });
});
