/**
 * The hosted cashier page behind payUrl, through inject (docs/cashier.md): headers, neutral 404,
 * the page per channel and per state, the status endpoint, the sandbox buyer actions, and the
 * routes' absence with a non-sandbox provider.
 */
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { LightMyRequestResponse } from 'fastify';
import QRCode from 'qrcode';
import { buildApp } from '../../src/app.ts';
import { MESSAGES, formatDuration, formatFen, negotiateLang } from '../../src/cashier/i18n.ts';
import { type CashierView, alipayAppLink, renderCashierPage } from '../../src/cashier/page.ts';
import { loadConfig } from '../../src/config/config.ts';
import { SandboxProvider } from '../../src/providers/sandbox/sandbox.ts';
import { createPool } from '../../src/store/db.ts';
import { createTestDatabase } from '../helpers/db.ts';
import { ADMIN_TOKEN, type Merchant, type TestApp, call, orderBody, provision, startTestApp } from '../helpers/app.ts';

const BASE = 'https://pay.example.test';
const FINAL_STATES = ['PAID', 'EXPIRED', 'CLOSED', 'SUPERSEDED', 'FAILED'];

let t: TestApp;
let m: Merchant;
before(async () => {
  t = await startTestApp({ PUBLIC_BASE_URL: BASE });
  m = await provision(t);
});
after(() => t.stop());

interface Created {
  body: Record<string, unknown>;
  order: Record<string, unknown> & { openOrderId: string; outTradeNo: string; payUrl: string; qrCode?: string | null };
  token: string;
}

async function createOrder(o: Record<string, unknown> = {}): Promise<Created> {
  const body = orderBody(o);
  const r = await call(t, m, 'POST', '/api/open/v1/payments', body);
  assert.equal(r.statusCode, 201, r.body);
  const order = r.json();
  assert.ok(order.payUrl.startsWith(`${BASE}/cashier/`), order.payUrl);
  return { body, order, token: order.payUrl.slice(`${BASE}/cashier/`.length) };
}

/** The page as an English-speaking browser asks for it (`{}`: a browser that states no language). */
/** A phone's browser (where.ts): the page's ways to pay depend on where it is opened. */
const PHONE_UA = 'Mozilla/5.0 (Linux; Android 14; Pixel 7) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0 Mobile Safari/537.36';
const page = (token: string, headers: Record<string, string> = { 'accept-language': 'en' }) =>
  t.server.inject({ method: 'GET', url: `/cashier/${token}`, headers: { 'user-agent': PHONE_UA, ...headers } });
const status = (token: string) => t.server.inject({ method: 'GET', url: `/cashier/${token}/status` });
const action = (token: string, what: 'pay' | 'fail', headers: Record<string, string> = { 'x-cashier-request': 'sandbox' }) =>
  t.server.inject({ method: 'POST', url: `/cashier/${token}/sandbox/${what}`, headers });
const queryOrder = (no: string) => call(t, m, 'GET', `/api/open/v1/payments/${no}`);

function assertSecurityHeaders(r: LightMyRequestResponse): void {
  const csp = String(r.headers['content-security-policy']);
  for (const d of [
    "default-src 'none'",
    "img-src 'self' data:",
    "script-src 'self'",
    "connect-src 'self'",
    "form-action 'self'",
    "frame-ancestors 'none'",
    "base-uri 'none'",
  ]) {
    assert.ok(csp.includes(d), `CSP has ${d}: ${csp}`);
  }
  assert.match(csp, /style-src 'sha256-[A-Za-z0-9+/]+=*'/);
  assert.ok(!csp.includes('unsafe'), 'no unsafe-* source');
  assert.equal(r.headers['x-frame-options'], 'DENY');
  assert.equal(r.headers['referrer-policy'], 'no-referrer');
  assert.equal(r.headers['x-content-type-options'], 'nosniff');
  assert.equal(r.headers['cache-control'], 'no-store');
}

/** The page of an attempt that is no longer payable: its state, and none of the old material. */
function assertNoMaterial(html: string, c: Created): void {
  assert.ok(!html.includes('<img'), 'no QR image');
  assert.ok(!html.includes('data:image'), 'no QR data');
  assert.ok(!html.includes('alipays://'), 'no Alipay hand-off');
  if (c.order.qrCode) assert.ok(!html.includes(c.order.qrCode) && !html.includes(encodeURIComponent(c.order.qrCode)), 'no collection code');
  assert.ok(!html.includes('data-sandbox-action'), 'no sandbox actions');
  assert.ok(!html.includes('data-countdown'), 'no countdown');
}

function stateOf(html: string): string {
  const s = /<main id="cashier"[^>]* data-state="([A-Z_]+)"/.exec(html);
  assert.ok(s, 'page carries its state');
  return s[1]!;
}

async function attemptIds(openOrderId: string): Promise<string[]> {
  const r = await t.svc.db.query<{ id: string }>('SELECT id FROM attempts WHERE order_id = $1 ORDER BY seq', [openOrderId]);
  return r.rows.map((x) => x.id);
}

describe('formatting', () => {
  test('fen as currency with integer arithmetic, in each language', () => {
    assert.equal(formatFen(1234, 'zh-CN'), '¥12.34');
    assert.equal(formatFen(1, 'zh-CN'), '¥0.01');
    assert.equal(formatFen(100, 'zh-CN'), '¥1.00');
    assert.equal(formatFen(123_456_789, 'zh-CN'), '¥1,234,567.89');
    assert.equal(formatFen(10_000_000_000, 'zh-CN'), '¥100,000,000.00');
    assert.equal(formatFen(9_007_199_254_740_991, 'zh-CN'), '¥90,071,992,547,409.91', 'exact at the largest safe integer');
    assert.equal(formatFen(1234, 'en'), 'CN¥12.34');
    assert.equal(formatFen(123_456_789, 'en'), 'CN¥1,234,567.89');
    for (const lang of ['zh-CN', 'en'] as const) {
      assert.throws(() => formatFen(12.5, lang), RangeError);
      assert.throws(() => formatFen(-1, lang), RangeError);
    }
  });
  test("the amounts read as the locale's own currency format (CLDR, through Intl)", () => {
    for (const fen of [0, 1, 99, 1234, 100_000, 123_456_789, 10_000_000_000]) {
      for (const [lang, locale] of [
        ['zh-CN', 'zh-CN'],
        ['en', 'en-US'],
      ] as const) {
        const intl = new Intl.NumberFormat(locale, { style: 'currency', currency: 'CNY' }).format(fen / 100);
        assert.equal(formatFen(fen, lang), intl, `${fen} in ${lang}`);
      }
    }
  });
  test('time left, in each language', () => {
    assert.equal(formatDuration(0, 'en'), '0:00');
    assert.equal(formatDuration(59, 'en'), '0:59');
    assert.equal(formatDuration(900, 'en'), '15:00');
    assert.equal(formatDuration(7200, 'en'), '2:00:00');
    assert.equal(formatDuration(3661, 'en'), '1:01:01');
    assert.equal(formatDuration(0, 'zh-CN'), '0分00秒');
    assert.equal(formatDuration(65, 'zh-CN'), '1分05秒');
    assert.equal(formatDuration(900, 'zh-CN'), '15分00秒');
    assert.equal(formatDuration(3661, 'zh-CN'), '1小时01分01秒');
    assert.equal(formatDuration(-5, 'zh-CN'), '0分00秒');
  });
});

describe('headers and not found', () => {
  test('every cashier response carries the strict headers, the inline style matches its CSP hash', async () => {
    const c = await createOrder();
    const p = await page(c.token);
    assert.equal(p.statusCode, 200);
    assert.match(String(p.headers['content-type']), /^text\/html; charset=utf-8/);
    const css = /<style>([\s\S]*?)<\/style>/.exec(p.body)![1]!;
    const hash = createHash('sha256').update(css).digest('base64');
    assert.ok(String(p.headers['content-security-policy']).includes(`style-src 'sha256-${hash}'`));
    assert.ok(!/\sstyle=/.test(p.body), 'no inline style attributes (they would need unsafe-hashes)');
    assert.ok(!/<script>/.test(p.body), 'no inline script');
    assert.match(p.body, /<script src="assets\/cashier\.js" defer><\/script>/);
    const js = await t.server.inject({ method: 'GET', url: '/cashier/assets/cashier.js' });
    assert.equal(js.statusCode, 200);
    assert.match(String(js.headers['content-type']), /^text\/javascript/);
    for (const r of [
      p,
      js,
      await status(c.token),
      await page('x'.repeat(43)),
      await page('not-a-token'),
      await status('x'.repeat(43)),
      await t.server.inject({ method: 'GET', url: '/cashier/a/b/c' }),
      await t.server.inject({ method: 'GET', url: '/cashier' }),
      await action(c.token, 'pay', {}),
      await t.server.inject({
        method: 'POST',
        url: `/cashier/${c.token}/sandbox/pay`,
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        payload: 'a=1',
      }),
    ]) {
      assertSecurityHeaders(r);
    }
  });

  test('an unknown, malformed or foreign-looking token gets one neutral 404 page', async () => {
    const c = await createOrder();
    const unknown = await page(randomBytes(32).toString('base64url'));
    const malformed = await page('ord_abc');
    const byOrderNo = await page(c.order.openOrderId);
    const byTradeNo = await page(c.order.outTradeNo);
    for (const r of [unknown, malformed, byOrderNo, byTradeNo]) {
      assert.equal(r.statusCode, 404);
      assert.match(String(r.headers['content-type']), /^text\/html/);
      assert.equal(r.body, unknown.body, 'the same page whatever the token was');
    }
    assert.match(unknown.body, /Payment page not found/);
    assert.match(unknown.body, /<html lang="en">/);
    assert.ok(!unknown.body.includes('Test Shop') && !unknown.body.includes('Coffee'));
    const s = await status(randomBytes(32).toString('base64url'));
    assert.equal(s.statusCode, 404);
    assert.deepEqual(s.json(), { error: 'NOT_FOUND', message: 'Not found.' });
    const a = await action(randomBytes(32).toString('base64url'), 'pay');
    assert.equal(a.statusCode, 404);
    // A token whose percent-encoding does not decode is just another unknown token.
    for (const url of ['/cashier/%ZZ', '/cashier/%E4%B8', '/cashier/abc%zz']) {
      const r = await t.server.inject({ method: 'GET', url, headers: { 'accept-language': 'en' } });
      assert.equal(r.statusCode, 404, url);
      assert.equal(r.body, unknown.body, url);
      assertSecurityHeaders(r);
    }
    const bad = await t.server.inject({ method: 'GET', url: '/cashier/%ZZ/status' });
    assert.equal(bad.statusCode, 404);
    assert.deepEqual(bad.json(), { error: 'NOT_FOUND', message: 'Not found.' });
    assertSecurityHeaders(bad);
  });

  test('HEAD answers like GET without a body: a live payUrl is 200, an unknown one 404', async () => {
    const c = await createOrder();
    const live = await t.server.inject({ method: 'HEAD', url: `/cashier/${c.token}` });
    assert.equal(live.statusCode, 200);
    assert.equal(live.body, '');
    assert.match(String(live.headers['content-type']), /^text\/html/);
    assertSecurityHeaders(live);
    const st = await t.server.inject({ method: 'HEAD', url: `/cashier/${c.token}/status` });
    assert.equal(st.statusCode, 200);
    const gone = await t.server.inject({ method: 'HEAD', url: `/cashier/${randomBytes(32).toString('base64url')}` });
    assert.equal(gone.statusCode, 404);
    assert.equal(gone.body, '');
    assertSecurityHeaders(gone);
  });
});

describe('payable page', () => {
  test('ALIPAY_H5: merchant, subject, amount, time left, QR of the collection code and the Alipay hand-off', async () => {
    const c = await createOrder({ amountFen: 1234, subject: 'Flat white' });
    assert.ok(c.order.qrCode);
    const p = await page(c.token);
    assert.equal(p.statusCode, 200);
    assert.equal(stateOf(p.body), 'PAYABLE');
    assert.match(p.body, /<p class="merchant">Test Shop<\/p>/);
    assert.match(p.body, /<h1 class="subject">Flat white<\/h1>/);
    assert.match(p.body, /<p class="amount">CN¥12\.34<\/p>/);
    const left = Number(/data-seconds-left="(\d+)"/.exec(p.body)![1]);
    assert.ok(left > 890 && left <= 900, `about 15 minutes left (${left})`);
    assert.ok(p.body.includes(`>${formatDuration(left, 'en')}</strong>`));
    const qr = await QRCode.toDataURL(c.order.qrCode, { errorCorrectionLevel: 'M', margin: 2, width: 480 });
    assert.ok(p.body.includes(`<img class="qr" src="${qr}"`), 'the QR image encodes the attempt collection code');
    assert.ok(p.body.includes(`href="${alipayAppLink(c.order.qrCode).replaceAll('&', '&amp;')}"`));
    assert.ok(
      alipayAppLink(c.order.qrCode).startsWith(`alipays://platformapi/startapp?saId=10000007&qrcode=${encodeURIComponent(c.order.qrCode)}`),
    );
    assert.match(p.body, /data-sandbox-action="pay">Simulate payment</);
    assert.match(p.body, /data-sandbox-action="fail">Simulate failure</);
    assert.match(p.body, /This is a test payment/);
    // Nothing that identifies the order, the attempt, the app or the merchant beyond what the buyer needs.
    const [attemptId] = await attemptIds(c.order.openOrderId);
    for (const secret of [c.order.openOrderId, c.order.outTradeNo, attemptId!, m.appId, m.merchantId]) {
      assert.ok(!p.body.includes(secret), `page does not contain ${secret}`);
    }
  });

  test('WECHAT_H5: the JSAPI hand-off explanation, no invented material', async () => {
    const c = await createOrder({ channel: 'WECHAT_H5', amountFen: 5, subject: 'Gum' });
    const p = await page(c.token);
    assert.equal(stateOf(p.body), 'PAYABLE');
    assert.match(p.body, /<main id="cashier" class="wechat"/);
    assert.match(p.body, /¥0\.05/);
    assert.match(p.body, /Pay inside WeChat/);
    assert.ok(!p.body.includes('<img') && !p.body.includes('alipays://') && !p.body.includes('wx_prepay'), 'no QR, no prepay id');
    assert.match(p.body, /data-sandbox-action="pay"/);
  });

  test('the subject and merchant name are escaped', async () => {
    const c = await createOrder({ subject: '<script>alert(1)</script> & "quotes"' });
    const p = await page(c.token);
    assert.ok(!p.body.includes('<script>alert(1)'));
    assert.ok(p.body.includes('&lt;script&gt;alert(1)&lt;/script&gt; &amp; &quot;quotes&quot;'));
  });

  test('status: PAYABLE with the window, no material and no ids', async () => {
    const c = await createOrder();
    const s = await status(c.token);
    assert.equal(s.statusCode, 200);
    const b = s.json();
    assert.deepEqual(Object.keys(b).sort(), ['expireAt', 'secondsLeft', 'state']);
    assert.equal(b.state, 'PAYABLE');
    assert.equal(b.expireAt, c.order.expireAt);
    assert.ok(b.secondsLeft > 890 && b.secondsLeft <= 900);
  });
});

describe('states after the payable one show no material', () => {
  test('superseded after re-create; the new link is payable with new material', async () => {
    const c = await createOrder();
    const r = await call(t, m, 'POST', `/api/open/v1/payments/${c.order.outTradeNo}/attempts`);
    assert.equal(r.statusCode, 201, r.body);
    const next = r.json();
    assert.notEqual(next.payUrl, c.order.payUrl);
    assert.notEqual(next.qrCode, c.order.qrCode);
    const old = await page(c.token);
    assert.equal(old.statusCode, 200);
    assert.equal(stateOf(old.body), 'SUPERSEDED');
    assert.match(old.body, /Link replaced/);
    assertNoMaterial(old.body, c);
    assert.deepEqual((await status(c.token)).json(), { state: 'SUPERSEDED', expireAt: c.order.expireAt, secondsLeft: 0 });
    const a = await action(c.token, 'pay');
    assert.equal(a.statusCode, 409);
    assert.equal(a.json().state, 'SUPERSEDED');
    const fresh = await page(next.payUrl.slice(`${BASE}/cashier/`.length));
    assert.equal(stateOf(fresh.body), 'PAYABLE');
    assert.ok(fresh.body.includes(encodeURIComponent(next.qrCode)));
    assert.ok(!fresh.body.includes(encodeURIComponent(c.order.qrCode!)), 'the new page never shows the old code');
  });

  test('paid through the sandbox action: the order SUCCEEDED through the open API, return to merchant', async () => {
    const c = await createOrder({ returnUrl: 'https://shop.example/orders/done' });
    const a = await action(c.token, 'pay');
    assert.equal(a.statusCode, 200, a.body);
    assert.deepEqual(a.json(), { state: 'PAID', expireAt: c.order.expireAt, secondsLeft: 0 });
    const q = await queryOrder(c.order.outTradeNo);
    assert.equal(q.statusCode, 200);
    assert.equal(q.json().status, 'SUCCEEDED');
    assert.equal(q.json().latestAttempt.state, 'PAID');
    const p = await page(c.token);
    assert.equal(stateOf(p.body), 'PAID');
    assert.match(p.body, /Payment successful/);
    assert.match(p.body, /<a class="btn primary" href="https:\/\/shop\.example\/orders\/done" rel="noreferrer">Return to merchant<\/a>/);
    assertNoMaterial(p.body, c);
    assert.equal((await status(c.token)).json().state, 'PAID');
    const again = await action(c.token, 'pay');
    assert.equal(again.statusCode, 409, 'a paid attempt cannot be acted on again');
    assert.equal(again.json().state, 'PAID');
  });

  test('paid through the provider notification path (sandbox helper) without a returnUrl: no return link', async () => {
    const c = await createOrder();
    const r = await t.sandbox('POST', `/payments/${c.order.openOrderId}/pay`);
    assert.equal(r.statusCode, 200, r.body);
    const p = await page(c.token);
    assert.equal(stateOf(p.body), 'PAID');
    assert.ok(!p.body.includes('Return to merchant'));
    assertNoMaterial(p.body, c);
  });

  test('failed through the sandbox action: the order FAILED', async () => {
    const c = await createOrder({ returnUrl: 'https://shop.example/orders/done' });
    const a = await action(c.token, 'fail');
    assert.equal(a.statusCode, 200, a.body);
    assert.equal(a.json().state, 'FAILED');
    assert.equal((await queryOrder(c.order.outTradeNo)).json().status, 'FAILED');
    const p = await page(c.token);
    assert.equal(stateOf(p.body), 'FAILED');
    assert.match(p.body, /Payment failed/);
    assert.ok(!p.body.includes('Return to merchant'), 'the return link is for a paid order only');
    assertNoMaterial(p.body, c);
  });

  test('expired: at once when the window ends, and after the expiry worker closed the order', async () => {
    const c = await createOrder();
    const e = await t.sandbox('POST', `/payments/${c.order.openOrderId}/expire`);
    assert.equal(e.statusCode, 200, e.body);
    let p = await page(c.token);
    assert.equal(stateOf(p.body), 'EXPIRED', 'expired before the worker runs');
    assertNoMaterial(p.body, c);
    const s = (await status(c.token)).json();
    assert.equal(s.state, 'EXPIRED');
    assert.equal(s.secondsLeft, 0);
    assert.equal((await action(c.token, 'pay')).statusCode, 409);
    await t.workers.tick();
    const q = (await queryOrder(c.order.outTradeNo)).json();
    assert.equal(q.status, 'CLOSED');
    assert.equal(q.closedReason, 'EXPIRED');
    p = await page(c.token);
    assert.equal(stateOf(p.body), 'EXPIRED');
    assert.match(p.body, /Payment expired/);
    assertNoMaterial(p.body, c);
  });

  test('closed by the merchant through the open API', async () => {
    const c = await createOrder();
    const r = await call(t, m, 'POST', `/api/open/v1/payments/${c.order.outTradeNo}/close`);
    assert.equal(r.statusCode, 200, r.body);
    assert.equal(r.json().closeState, 'CLOSE_REQUESTED');
    const p = await page(c.token);
    assert.equal(stateOf(p.body), 'CLOSED');
    assert.match(p.body, /Payment closed/);
    assertNoMaterial(p.body, c);
    assert.equal((await status(c.token)).json().state, 'CLOSED');
    assert.equal((await action(c.token, 'fail')).statusCode, 409);
  });

  test('an attempt whose outcome is uncertain shows PROCESSING, without material, and keeps polling', async () => {
    const f = await t.sandbox('POST', '/faults', { operation: 'CREATE_ATTEMPT', outcome: 'TIMEOUT', times: 1 });
    assert.equal(f.statusCode, 201, f.body);
    const body = orderBody();
    const r = await call(t, m, 'POST', '/api/open/v1/payments', body);
    assert.ok(r.statusCode === 201 || r.statusCode === 200, r.body);
    assert.equal(r.json().payUrl, null, 'no payUrl while the attempt is uncertain');
    const tok = await t.svc.db.query<{ cashier_token: string }>('SELECT cashier_token FROM attempts WHERE order_id = $1', [
      r.json().openOrderId,
    ]);
    const token = tok.rows[0]!.cashier_token;
    const p = await page(token);
    assert.equal(stateOf(p.body), 'PROCESSING');
    assert.ok(!p.body.includes('<img') && !p.body.includes('alipays://') && !p.body.includes('data-sandbox-action'));
    const s = (await status(token)).json();
    assert.equal(s.state, 'PROCESSING');
    assert.ok(!FINAL_STATES.includes(s.state) && s.secondsLeft > 0);
    assert.equal((await action(token, 'pay')).statusCode, 409, 'only a payable attempt can be acted on');
  });
});

describe('sandbox actions are protected against cross-site requests', () => {
  test('refused without the page header, from another origin, or cross-site; accepted from the cashier origin', async () => {
    const c = await createOrder();
    for (const headers of [
      {},
      { 'x-cashier-request': 'other' },
      { 'x-cashier-request': 'sandbox', origin: 'https://evil.example' },
      { 'x-cashier-request': 'sandbox', origin: 'null' },
      { 'x-cashier-request': 'sandbox', 'sec-fetch-site': 'cross-site' },
      { 'x-cashier-request': 'sandbox', 'sec-fetch-site': 'same-site' },
    ] as Record<string, string>[]) {
      const r = await action(c.token, 'pay', headers);
      assert.equal(r.statusCode, 403, JSON.stringify(headers));
      assert.equal(r.json().error, 'FORBIDDEN');
    }
    const form = await t.server.inject({
      method: 'POST',
      url: `/cashier/${c.token}/sandbox/pay`,
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      payload: 'x=1',
    });
    assert.ok(form.statusCode >= 400 && form.statusCode < 500, 'a plain form post is refused');
    assert.equal((await queryOrder(c.order.outTradeNo)).json().status, 'PAYING', 'nothing happened');
    const get = await t.server.inject({ method: 'GET', url: `/cashier/${c.token}/sandbox/pay` });
    assert.equal(get.statusCode, 404);
    const ok = await action(c.token, 'pay', { 'x-cashier-request': 'sandbox', origin: BASE, 'sec-fetch-site': 'same-origin' });
    assert.equal(ok.statusCode, 200, ok.body);
    assert.equal(ok.json().state, 'PAID');
  });

  test('an action acts only on the attempt behind its own token', async () => {
    const a = await createOrder();
    const b = await createOrder();
    assert.equal((await action(a.token, 'pay')).statusCode, 200);
    assert.equal((await queryOrder(a.order.outTradeNo)).json().status, 'SUCCEEDED');
    assert.equal((await queryOrder(b.order.outTradeNo)).json().status, 'PAYING');
    assert.equal(stateOf((await page(b.token)).body), 'PAYABLE');
  });
});

describe('with a provider other than the sandbox', () => {
  test('the page shows the material but no sandbox actions, and the action routes do not exist', async () => {
    const db = await createTestDatabase();
    const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'mps-cashier-'));
    const config = loadConfig({ DATABASE_URL: db.url, DATA_DIR: dataDir, ADMIN_TOKEN, LOG_LEVEL: 'silent', PUBLIC_BASE_URL: BASE });
    // The sandbox implementation passed in as "another provider": svc.sandbox stays null.
    const pool = createPool(db.url, 2);
    const built = await buildApp(config, { provider: new SandboxProvider(pool) });
    try {
      assert.equal(built.svc.sandbox, null);
      const admin = (method: string, url: string, body?: unknown) =>
        built.server.inject({
          method: method as 'POST',
          url: `/api/admin/v1${url}`,
          headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
          payload: JSON.stringify(body ?? {}),
        });
      const other = { ...built, config, admin, sandbox: admin, stop: async () => {} } as unknown as TestApp;
      const mch = await provision(other);
      const r = await call(other, mch, 'POST', '/api/open/v1/payments', orderBody());
      assert.equal(r.statusCode, 201, r.body);
      const token = r.json().payUrl.slice(`${BASE}/cashier/`.length);
      const p = await built.server.inject({ method: 'GET', url: `/cashier/${token}` });
      assert.equal(stateOf(p.body), 'PAYABLE');
      assert.match(p.body, /<img class="qr"/);
      assert.ok(!p.body.includes('data-sandbox-action') && !p.body.includes('class="sandbox"'));
      const a = await built.server.inject({
        method: 'POST',
        url: `/cashier/${token}/sandbox/pay`,
        headers: { 'x-cashier-request': 'sandbox' },
      });
      assert.equal(a.statusCode, 404);
      assertSecurityHeaders(a);
      assert.equal((await call(other, mch, 'GET', `/api/open/v1/payments/${r.json().outTradeNo}`)).json().status, 'PAYING');
    } finally {
      await built.close();
      await pool.end();
      await db.drop();
      await fs.rm(dataDir, { recursive: true, force: true });
    }
  });
});

const ASSETS = { css: 'body{}', scriptPath: 'assets/cashier.js' };
const baseView: CashierView = {
  state: 'PAYABLE',
  merchantName: 'Test Shop',
  subject: 'Coffee',
  amountFen: 1234,
  channel: 'ALIPAY_H5',
  secondsLeft: 600,
  payable: null,
  providerPageUrl: null,
  returnUrl: null,
  sandboxActions: false,
  place: 'PHONE',
  way: 'page',
  otherWays: [],
  wechatCode: null,
  jsapi: null,
  wayProblem: null,
};

describe('languages', () => {
  const langOf = (html: string) => /<html lang="([^"]+)">/.exec(html)?.[1];

  test('negotiation: q-values, Chinese tags, and Chinese without a usable preference', () => {
    for (const [header, lang] of [
      [undefined, 'zh-CN'],
      ['', 'zh-CN'],
      ['en-US,en;q=0.9', 'en'],
      ['en;q=0.5, zh-CN;q=0.8', 'zh-CN'],
      ['zh-CN,zh;q=0.9,en;q=0.8', 'zh-CN'],
      ['en-US,en;q=0.9,zh-CN;q=0.8', 'en'],
      ['zh', 'zh-CN'],
      ['zh-Hans-CN', 'zh-CN'],
      ['zh-TW', 'zh-CN'],
      ['zh-HK, en;q=0.9', 'zh-CN'],
      ['EN-gb', 'en'],
      ['en, zh', 'en'],
      ['zh, en', 'zh-CN'],
      ['fr-FR, fr;q=0.9', 'zh-CN'],
      ['fr, en;q=0.1', 'en'],
      ['en;q=0', 'zh-CN'],
      ['zh;q=0, *', 'en'],
      ['*', 'zh-CN'],
      ['*;q=0.5, en;q=0.4', 'zh-CN'],
      ['en;q=1.5', 'zh-CN'],
      ['en;q=abc', 'zh-CN'],
      ['en;level=1', 'zh-CN'],
      ['%%%, ;;;, =', 'zh-CN'],
      ['\u00e9n, 中文', 'zh-CN'],
    ] as const) {
      assert.equal(negotiateLang(header), lang, JSON.stringify(header));
    }
  });

  test('the payable page in Chinese by default and for zh browsers, in English when asked, Vary on Accept-Language', async () => {
    const c = await createOrder({ amountFen: 1234, subject: '燕麦拿铁' });
    for (const [headers, lang] of [
      [{}, 'zh-CN'],
      [{ 'accept-language': 'zh-CN,zh;q=0.9' }, 'zh-CN'],
      [{ 'accept-language': 'en;q=0.5, zh-CN;q=0.8' }, 'zh-CN'],
      [{ 'accept-language': 'zh-TW' }, 'zh-CN'],
      [{ 'accept-language': 'not a language;q=2' }, 'zh-CN'],
      [{ 'accept-language': 'en-US,en;q=0.9' }, 'en'],
    ] as const) {
      const p = await page(c.token, headers);
      assert.equal(p.statusCode, 200);
      assert.equal(langOf(p.body), lang, JSON.stringify(headers));
      assert.match(String(p.headers.vary), /accept-language/i);
      assert.equal(p.headers['content-language'], lang);
    }
    const zh = (await page(c.token, {})).body;
    assert.match(zh, /<p class="amount">¥12\.34<\/p>/);
    assert.match(zh, /<p class="channel">支付宝<\/p>/);
    assert.match(
      zh,
      /剩余支付时间 <strong data-countdown data-format-minutes="\{m\}分\{ss\}秒" data-format-hours="\{h\}小时\{mm\}分\{ss\}秒">1[45]分\d\d秒<\/strong>/,
    );
    assert.match(zh, /alt="支付宝付款码"/);
    assert.match(zh, />在支付宝中打开<\/a>/);
    assert.match(zh, /data-sandbox-action="pay">模拟付款成功</);
    assert.match(zh, /data-sandbox-action="fail">模拟付款失败</);
    assert.match(zh, /这是一笔测试付款，不会扣除真实款项。/);
    assert.match(zh, /data-error-failed="操作未能完成，请重试。" data-error-network="网络错误，请重试。"/);
    assert.match(zh, /<title>¥12\.34 · Test Shop<\/title>/);
    const en = (await page(c.token, { 'accept-language': 'en-US,en;q=0.9' })).body;
    assert.match(en, /<p class="channel">Alipay<\/p>/);
    assert.match(
      en,
      /Time left <strong data-countdown data-format-minutes="\{m\}:\{ss\}" data-format-hours="\{h\}:\{mm\}:\{ss\}">1[45]:\d\d<\/strong>/,
    );
    assert.match(en, />Open in Alipay<\/a>/);
    // No English left on the Chinese page, no Chinese on the English one (but for the order's own subject).
    const visible = (html: string) =>
      html
        .replace(/<style>[\s\S]*?<\/style>/, '')
        .replace(/<[^>]*>/g, ' ')
        .replace(/&[a-z#0-9]+;/g, ' ');
    assert.deepEqual(visible(zh).match(/[A-Za-z]{2,}/g), ['Test', 'Shop', 'Test', 'Shop'], 'only the merchant name is Latin text');
    assert.deepEqual(visible(en).match(/\p{Script=Han}+/gu), ['燕麦拿铁'], 'only the subject is Chinese');
  });

  test('the WeChat Pay page and the outcome pages in both languages', async () => {
    const w = await createOrder({ channel: 'WECHAT_H5' });
    const wzh = (await page(w.token, {})).body;
    assert.match(wzh, /<p class="channel">微信支付<\/p>/);
    assert.match(wzh, /请在微信中付款/);
    assert.match(wzh, /测试付款无需打开微信，请使用下方按钮。/);
    const wen = (await page(w.token)).body;
    assert.match(wen, /<p class="channel">WeChat Pay<\/p>/);
    assert.match(wen, /Pay inside WeChat/);
    assert.match(wen, /For this test payment, use the buttons below instead\./);

    const paid = await createOrder({ returnUrl: 'https://shop.example/done' });
    assert.equal((await action(paid.token, 'pay')).statusCode, 200);
    const pzh = (await page(paid.token, {})).body;
    assert.match(pzh, /<h2>支付成功<\/h2><p>商家已收到您的付款。<\/p>/);
    assert.match(pzh, /rel="noreferrer">返回商家<\/a>/);
    assert.match((await page(paid.token)).body, /<h2>Payment successful<\/h2>/);

    const closed = await createOrder();
    assert.equal((await call(t, m, 'POST', `/api/open/v1/payments/${closed.order.outTradeNo}/close`)).statusCode, 200);
    assert.match((await page(closed.token, {})).body, /<h2>支付已关闭<\/h2>/);
    const expired = await createOrder();
    assert.equal((await t.sandbox('POST', `/payments/${expired.order.openOrderId}/expire`)).statusCode, 200);
    assert.match((await page(expired.token, {})).body, /<h2>支付已超时<\/h2>/);
    assert.match((await page(expired.token)).body, /<h2>Payment expired<\/h2>/);
  });

  test('every state has its heading and text in both languages', () => {
    for (const lang of ['zh-CN', 'en'] as const) {
      for (const state of FINAL_STATES.concat('PROCESSING')) {
        const view: CashierView = { ...baseView, state: state as CashierView['state'], secondsLeft: 0, payable: null };
        const html = renderCashierPage(view, ASSETS, lang);
        const h = MESSAGES[lang].outcomes[state as keyof (typeof MESSAGES)['en']['outcomes']];
        assert.ok(h.title && h.text && html.includes(`<h2>${h.title}</h2><p>${h.text}</p>`), `${state} in ${lang}`);
      }
    }
    assert.notEqual(MESSAGES['zh-CN'].outcomes.PAID.title, MESSAGES.en.outcomes.PAID.title);
  });

  test('the status JSON is the same whatever the language, and does not vary', async () => {
    const c = await createOrder();
    const zh = await t.server.inject({ method: 'GET', url: `/cashier/${c.token}/status`, headers: { 'accept-language': 'zh-CN' } });
    const en = await t.server.inject({ method: 'GET', url: `/cashier/${c.token}/status`, headers: { 'accept-language': 'en' } });
    assert.deepEqual(Object.keys(zh.json()).sort(), ['expireAt', 'secondsLeft', 'state']);
    assert.equal(zh.json().state, en.json().state);
    assert.equal(zh.headers.vary, undefined);
    const gone = await t.server.inject({
      method: 'GET',
      url: `/cashier/${'x'.repeat(43)}/status`,
      headers: { 'accept-language': 'zh-CN' },
    });
    assert.deepEqual(gone.json(), { error: 'NOT_FOUND', message: 'Not found.' });
  });

  test('the 404 page in both languages, the same for every token in one language', async () => {
    const zh = [await page('x'.repeat(43), {}), await page('ord_abc', { 'accept-language': 'zh-CN' })];
    for (const r of zh) {
      assert.equal(r.statusCode, 404);
      assert.equal(langOf(r.body), 'zh-CN');
      assert.match(r.body, /<title>找不到支付页面<\/title>/);
      assert.match(r.body, /此链接无效。请检查链接，或向商家索取新的支付链接。/);
      assert.match(String(r.headers.vary), /accept-language/i);
      assertSecurityHeaders(r);
    }
    assert.equal(zh[0]!.body, zh[1]!.body);
    const en = await t.server.inject({ method: 'GET', url: '/cashier/a/b/c', headers: { 'accept-language': 'en-GB' } });
    assert.equal(en.statusCode, 404);
    assert.equal(langOf(en.body), 'en');
    assert.match(en.body, /Payment page not found/);
    assert.match(String(en.headers.vary), /accept-language/i);
  });

  test('the unavailable page (503) in both languages', async (tc) => {
    const c = await createOrder();
    tc.mock.method(t.svc.db, 'query', () => Promise.reject(new Error('database unreachable')));
    const zh = await page(c.token, {});
    const en = await page(c.token, { 'accept-language': 'en-US,en;q=0.9' });
    const st = await status(c.token);
    tc.mock.restoreAll();
    assert.equal(zh.statusCode, 503);
    assert.equal(langOf(zh.body), 'zh-CN');
    assert.match(zh.body, /<h2>暂时无法访问<\/h2><p>支付页面暂时无法显示，请稍后再试。<\/p>/);
    assert.match(String(zh.headers.vary), /accept-language/i);
    assertSecurityHeaders(zh);
    assert.equal(en.statusCode, 503);
    assert.equal(langOf(en.body), 'en');
    assert.match(en.body, /<h2>Temporarily unavailable<\/h2>/);
    assert.equal(st.statusCode, 503);
    assert.deepEqual(st.json(), { error: 'SERVICE_UNAVAILABLE', message: 'Service unavailable.' });
    assert.equal(stateOf((await page(c.token)).body), 'PAYABLE', 'answers again once the database does');
  });
});

describe("hand-off to the provider's own payment page (providerPageUrl)", () => {
  const ALIPAY_PAGE = 'https://openapi.alipay.com/gateway.do?method=alipay.trade.wap.pay&sign=a%2Bb&biz=1';
  const WECHAT_PAGE = 'https://wx.tenpay.com/cgi-bin/mmpayweb-bin/checkmweb?prepay_id=wx1&package=2';
  const qr = { qrCode: 'https://qr.alipay.com/bax01234', qrImage: 'data:image/png;base64,AAAA' };
  const link = (url: string, text: string) =>
    `<a class="btn primary" href="${url.replaceAll('&', '&amp;')}" referrerpolicy="origin">${text}</a>`;

  test('ALIPAY_H5: the collection code stays, the primary button goes to Alipay, origin-only referrer', () => {
    const v: CashierView = { ...baseView, payable: qr, providerPageUrl: ALIPAY_PAGE };
    const zh = renderCashierPage(v, ASSETS, 'zh-CN');
    assert.ok(zh.includes(link(ALIPAY_PAGE, '去支付宝付款')), zh);
    assert.ok(zh.includes(`<img class="qr" src="${qr.qrImage}"`));
    assert.match(zh, /可用另一部手机的支付宝扫码付款。/);
    assert.ok(!zh.includes('alipays://'), "the provider's page replaces the app link");
    const en = renderCashierPage(v, ASSETS, 'en');
    assert.ok(en.includes(link(ALIPAY_PAGE, 'Pay with Alipay')));
    // Without the provider's page (the sandbox, today): the app link, as before.
    const sandbox = renderCashierPage({ ...v, providerPageUrl: null }, ASSETS, 'en');
    assert.ok(sandbox.includes('alipays://') && !sandbox.includes('referrerpolicy'));
  });

  test("WECHAT_H5: the button goes to WeChat Pay's h5_url instead of the in-WeChat explanation", () => {
    const v: CashierView = { ...baseView, channel: 'WECHAT_H5', providerPageUrl: WECHAT_PAGE };
    const zh = renderCashierPage(v, ASSETS, 'zh-CN');
    assert.ok(zh.includes(link(WECHAT_PAGE, '去微信支付付款')), zh);
    assert.match(zh, /将打开微信完成付款。/);
    assert.ok(!zh.includes('请在微信中付款') && !zh.includes('<img'));
    assert.ok(renderCashierPage(v, ASSETS, 'en').includes(link(WECHAT_PAGE, 'Pay with WeChat Pay')));
  });

  test('only an http(s) page is linked, escaped; never outside PAYABLE', () => {
    for (const bad of ['javascript:alert(1)', 'alipays://platformapi/startapp', 'data:text/html,x', '/relative', 'not a url']) {
      const html = renderCashierPage({ ...baseView, providerPageUrl: bad }, ASSETS, 'en');
      assert.ok(!html.includes('referrerpolicy') && !html.includes(bad), bad);
    }
    const quoted = renderCashierPage({ ...baseView, providerPageUrl: 'https://p.example/?a="><script>' }, ASSETS, 'en');
    assert.ok(quoted.includes('href="https://p.example/?a=&quot;&gt;&lt;script&gt;"') && !quoted.includes('"><script>'));
    for (const state of FINAL_STATES.concat('PROCESSING')) {
      const html = renderCashierPage({ ...baseView, state: state as CashierView['state'], providerPageUrl: ALIPAY_PAGE }, ASSETS, 'zh-CN');
      assert.ok(!html.includes('openapi.alipay.com') && !html.includes('去支付宝付款'), state);
    }
  });
});
