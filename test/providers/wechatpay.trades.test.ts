/**
 * WeChat Pay's products beyond an attempt's H5 order, adapter against the simulator: the JSAPI
 * order (for an openid from the official account's web authorization) and its paySign, the Native
 * order and its code_url, an out_trade_no used again with another product, an identical order asked
 * again; the web authorization itself (inside WeChat only, codes single-use and valid 5 minutes,
 * exchanged on the server with the AppSecret); the simulator's stand-in for the in-WeChat payment
 * call, which verifies paySign and the payer; the H5 page refused inside WeChat; faults both ways.
 */
import assert from 'node:assert/strict';
import { createPublicKey, createSecretKey } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { newId } from '../../src/domain/ids.ts';
import { type CreateTradeInput, ProviderRejectedError, ProviderUncertainError } from '../../src/providers/provider.ts';
import { WechatOAuth, maskOpenId } from '../../src/providers/wechatpay/oauth.ts';
import { jsapiPayMessage, verifyMessage } from '../../src/providers/wechatpay/protocol.ts';
import { type WechatPayHarness, startHarness } from './wechatpay-harness.ts';

const WECHAT_UA =
  'Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 Mobile/15E148 MicroMessenger/8.0.47 NetType/WIFI';

describe('WeChat Pay trades, web authorization and the in-WeChat payment (simulator)', () => {
  let h: WechatPayHarness;
  let now = Date.now();
  before(async () => {
    h = await startHarness({ sim: { now: () => now } });
  });
  after(() => h.close());

  function trade(o: Partial<CreateTradeInput> = {}): CreateTradeInput {
    return {
      tradeNo: newId.trade(),
      product: 'NATIVE',
      payerOpenId: null,
      openOrderId: newId.order(),
      amountFen: 2100,
      currency: 'CNY',
      subject: 'Trades test',
      expireAt: new Date(now + 15 * 60_000),
      payerClientIp: '203.0.113.7',
      ...o,
    };
  }

  /** WeChat's authorize page as the user's WeChat browser opens it: the code it redirects back with. */
  async function authorize(
    user: string,
    o: { ua?: string; state?: string } = {},
  ): Promise<{ status: number; code: string | null; state: string | null; body: string }> {
    const identity = h.provider.buyerIdentity!;
    const url = identity.authorizeUrl('https://shop.example/cashier/TOKEN/wechat/callback', o.state ?? 'abc123');
    assert.ok(url.endsWith('#wechat_redirect'));
    assert.match(
      url,
      /\/connect\/oauth2\/authorize\?appid=[^&]+&redirect_uri=https%3A%2F%2Fshop\.example%2Fcashier%2FTOKEN%2Fwechat%2Fcallback&response_type=code&scope=snsapi_base&state=/,
    );
    const res = await fetch(url.replace(/#.*$/, ''), {
      redirect: 'manual',
      headers: { 'user-agent': o.ua ?? WECHAT_UA, cookie: `sim_wechat_user=${user}` },
    });
    const location = res.headers.get('location');
    const back = location ? new URL(location) : null;
    return {
      status: res.status,
      code: back?.searchParams.get('code') ?? null,
      state: back?.searchParams.get('state') ?? null,
      body: await res.text(),
    };
  }

  test('a Native order gives a code_url; a WeChat user scans and pays it; notified under the trade number', async () => {
    const i = trade();
    const r = await h.provider.createTrade(i);
    assert.equal(r.outcome, 'ACCEPTED');
    const code = (r as { material: string }).material;
    assert.match(code, /^weixin:\/\/wxpay\/bizpayurl\?pr=/);
    // The identical order asked again answers the same code (how a lost answer's material is had again).
    assert.deepEqual(await h.provider.createTrade(i), r);
    assert.equal((await h.provider.queryPayment(i.tradeNo)).state, 'OPEN');
    await h.sim.controls.scanPay(code);
    const q = await h.provider.queryPayment(i.tradeNo);
    assert.equal(q.state, 'PAID');
    assert.equal(q.amountFen, 2100);
    const notice = await h.provider.parseNotification(h.delivered.at(-1)!.rawBody, h.delivered.at(-1)!.headers);
    assert.equal(notice.kind, 'PAYMENT');
    assert.equal((notice as { attemptId: string }).attemptId, i.tradeNo);
    // Paid: asked again, the order reports the payment (the money is real).
    assert.equal((await h.provider.createTrade(i)).outcome, 'PAID');
  });

  test('an out_trade_no used again with another product is refused (商户订单号重复); so is an H5 number reused for Native', async () => {
    const i = trade();
    await h.provider.createTrade(i);
    await assert.rejects(
      h.provider.createTrade({ ...i, product: 'JSAPI', payerOpenId: h.sim.controls.openIdOf('x') }),
      (e: unknown) => e instanceof ProviderRejectedError && e.reason === 'OUT_TRADE_NO_USED',
    );
    const attemptId = newId.attempt();
    await h.provider.createAttempt({
      attemptId,
      openOrderId: newId.order(),
      channel: 'WECHAT_H5',
      amountFen: 2100,
      currency: 'CNY',
      subject: 'Trades test',
      expireAt: new Date(now + 15 * 60_000),
      payerClientIp: '203.0.113.7',
      returnUrl: null,
    });
    await assert.rejects(h.provider.createTrade(trade({ tradeNo: attemptId })), /OUT_TRADE_NO_USED/);
  });

  test("web authorization: inside WeChat only; the code once, within 5 minutes, for the user's openid; never with a wrong secret", async () => {
    const identity = h.provider.buyerIdentity!;
    const outside = await authorize('alice', { ua: 'Mozilla/5.0 (Windows NT 10.0) Chrome/124.0' });
    assert.equal(outside.status, 200);
    assert.equal(outside.code, null);
    assert.match(outside.body, /请在微信客户端打开链接/);
    const a = await authorize('alice', { state: 'S7ateOfThePage' });
    assert.equal(a.status, 302);
    assert.equal(a.state, 'S7ateOfThePage');
    const openid = await identity.openIdOf(a.code!);
    assert.equal(openid, h.sim.controls.openIdOf('alice'));
    assert.notEqual(openid, h.sim.controls.openIdOf('bob'));
    await assert.rejects(
      identity.openIdOf(a.code!),
      (e: unknown) => e instanceof ProviderRejectedError && e.reason === 'OAUTH_40163',
      'used',
    );
    const late = await authorize('alice');
    now += 5 * 60_000 + 1000;
    await assert.rejects(identity.openIdOf(late.code!), /OAUTH_42003/, 'expired');
    now = Date.now();
    await assert.rejects(identity.openIdOf('made-up'), /OAUTH_40029/);
    const wrong = new WechatOAuth({
      appId: h.config.appId,
      appSecret: createSecretKey(Buffer.from('0123456789abcdef0123456789abcdef')),
      oauthUrl: h.sim.url,
      snsUrl: h.sim.url,
      timeoutMs: 1000,
      fetch,
    });
    await assert.rejects(wrong.openIdOf((await authorize('alice')).code!), /OAUTH_40125/);
    assert.equal(maskOpenId(openid), `${openid.slice(0, 4)}…${openid.slice(-2)}`);
  });

  test('a JSAPI order for the openid; its paySign verifies; the stand-in of the in-WeChat call verifies it and the payer, then pays', async () => {
    const openid = h.sim.controls.openIdOf('carol');
    const i = trade({ product: 'JSAPI', payerOpenId: openid });
    const r = await h.provider.createTrade(i);
    assert.equal(r.outcome, 'ACCEPTED');
    const prepayId = (r as { material: string }).material;
    const p = h.provider.jsapiPayment(prepayId);
    assert.equal(p.appId, h.config.appId);
    assert.equal(p.package, `prepay_id=${prepayId}`);
    assert.equal(p.signType, 'RSA');
    assert.match(p.timeStamp, /^\d{10}$/);
    assert.match(p.nonceStr, /^[0-9A-Za-z]{32}$/);
    const merchantPublic = createPublicKey(h.config.privateKey);
    assert.equal(verifyMessage(jsapiPayMessage(p.appId, p.timeStamp, p.nonceStr, p.package), p.paySign, merchantPublic), true);
    // The stand-in refuses a tampered call, another WeChat user, and a signature of other parameters.
    const fail = 'get_brand_wcpay_request:fail';
    assert.equal((await h.sim.controls.jsapiPay({ ...p, nonceStr: `${p.nonceStr.slice(1)}x` }, openid)).err_msg, fail);
    assert.equal((await h.sim.controls.jsapiPay({ ...p, paySign: 'AAAA' }, openid)).err_msg, fail);
    assert.equal((await h.sim.controls.jsapiPay({ ...p, signType: 'MD5' }, openid)).err_msg, fail);
    assert.equal((await h.sim.controls.jsapiPay(p, h.sim.controls.openIdOf('dave'))).err_msg, fail);
    assert.equal((await h.provider.queryPayment(i.tradeNo)).state, 'OPEN');
    assert.deepEqual(await h.sim.controls.jsapiPay(p, openid), { err_msg: 'get_brand_wcpay_request:ok' });
    assert.equal((await h.provider.queryPayment(i.tradeNo)).state, 'PAID');
    // Without an openid no JSAPI order is made.
    await assert.rejects(h.provider.createTrade(trade({ product: 'JSAPI' })), /PAYER_OPENID_REQUIRED/);
  });

  test('faults both ways: made but the answer lost (uncertain; asked again, the same material); lost before (uncertain; nothing made)', async () => {
    const i = trade();
    h.sim.controls.programFault('native', { kind: 'noAnswer' });
    await assert.rejects(h.provider.createTrade(i), ProviderUncertainError);
    assert.equal((await h.provider.queryPayment(i.tradeNo)).state, 'OPEN');
    const again = await h.provider.createTrade(i);
    assert.equal((again as { material: string }).material, h.sim.controls.order(i.tradeNo)!.codeUrl);
    const j = trade();
    h.sim.controls.programFault('native', { kind: 'drop' });
    await assert.rejects(h.provider.createTrade(j), ProviderUncertainError);
    assert.equal((await h.provider.queryPayment(j.tradeNo)).state, 'NOT_FOUND');
    h.sim.controls.programFault('jsapi', { kind: 'error', status: 403, code: 'NO_AUTH' });
    await assert.rejects(h.provider.createTrade(trade({ product: 'JSAPI', payerOpenId: 'oX' })), /NO_AUTH/);
  });

  test('the H5 page refuses a buyer inside WeChat, as WeChat Pay does', async () => {
    const attemptId = newId.attempt();
    const r = await h.provider.createAttempt({
      attemptId,
      openOrderId: newId.order(),
      channel: 'WECHAT_H5',
      amountFen: 100,
      currency: 'CNY',
      subject: 'H5',
      expireAt: new Date(now + 15 * 60_000),
      payerClientIp: '203.0.113.7',
      returnUrl: null,
    });
    const url = (r as { material: { redirectUrl: string } }).material.redirectUrl;
    const inside = await (await fetch(url, { headers: { 'user-agent': WECHAT_UA } })).text();
    assert.match(inside, /请在微信外打开订单，进行支付/);
    assert.match(await (await fetch(url, { headers: { 'user-agent': 'Mozilla/5.0 (Linux; Android 14) Mobile' } })).text(), /id="pay"/);
  });
});
