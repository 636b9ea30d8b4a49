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
import { alipayAppLink, formatDuration, formatFen } from '../../src/cashier/page.ts';
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

const page = (token: string) => t.server.inject({ method: 'GET', url: `/cashier/${token}` });
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
  test('fen as currency with integer arithmetic', () => {
    assert.equal(formatFen(1234), '¥12.34');
    assert.equal(formatFen(1), '¥0.01');
    assert.equal(formatFen(100), '¥1.00');
    assert.equal(formatFen(123_456_789), '¥1,234,567.89');
    assert.equal(formatFen(10_000_000_000), '¥100,000,000.00');
    assert.equal(formatFen(9_007_199_254_740_991), '¥90,071,992,547,409.91', 'exact at the largest safe integer');
    assert.throws(() => formatFen(12.5), RangeError);
    assert.throws(() => formatFen(-1), RangeError);
  });
  test('time left', () => {
    assert.equal(formatDuration(0), '0:00');
    assert.equal(formatDuration(59), '0:59');
    assert.equal(formatDuration(900), '15:00');
    assert.equal(formatDuration(7200), '2:00:00');
    assert.equal(formatDuration(3661), '1:01:01');
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
    assert.ok(!unknown.body.includes('Test Shop') && !unknown.body.includes('Coffee'));
    const s = await status(randomBytes(32).toString('base64url'));
    assert.equal(s.statusCode, 404);
    assert.deepEqual(s.json(), { error: 'NOT_FOUND', message: 'Not found.' });
    const a = await action(randomBytes(32).toString('base64url'), 'pay');
    assert.equal(a.statusCode, 404);
    // A token whose percent-encoding does not decode is just another unknown token.
    for (const url of ['/cashier/%ZZ', '/cashier/%E4%B8', '/cashier/abc%zz']) {
      const r = await t.server.inject({ method: 'GET', url });
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
    assert.match(p.body, /<p class="amount">¥12\.34<\/p>/);
    const left = Number(/data-seconds-left="(\d+)"/.exec(p.body)![1]);
    assert.ok(left > 890 && left <= 900, `about 15 minutes left (${left})`);
    assert.ok(p.body.includes(`data-countdown>${formatDuration(left)}<`));
    const qr = await QRCode.toDataURL(c.order.qrCode, { errorCorrectionLevel: 'M', margin: 2, width: 480 });
    assert.ok(p.body.includes(`<img class="qr" src="${qr}"`), 'the QR image encodes the attempt collection code');
    assert.ok(p.body.includes(`href="${alipayAppLink(c.order.qrCode).replaceAll('&', '&amp;')}"`));
    assert.ok(
      alipayAppLink(c.order.qrCode).startsWith(`alipays://platformapi/startapp?saId=10000007&qrcode=${encodeURIComponent(c.order.qrCode)}`),
    );
    assert.match(p.body, /data-sandbox-action="pay">Pay \(sandbox\)</);
    assert.match(p.body, /data-sandbox-action="fail">Fail \(sandbox\)</);
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
      assert.ok(!p.body.includes('data-sandbox-action') && !p.body.includes('Sandbox'));
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
