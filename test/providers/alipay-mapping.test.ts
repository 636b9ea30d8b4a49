/**
 * Every row of the Alipay answer table (src/providers/alipay/mapping.ts, docs/providers-alipay.md) and
 * what each call makes of it: first the table itself, then each call against the simulator's
 * faults (realistic answers), then against a scripted gateway for the answers no gateway should
 * give (duplicate names, another trade, a redirect, an oversized body).
 */
import assert from 'node:assert/strict';
import { createSign, generateKeyPairSync } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { newId } from '../../src/domain/ids.ts';
import { AlipayProvider, MAX_ANSWER_BYTES } from '../../src/providers/alipay/alipay.ts';
import { ANSWER_TABLE, type AnswerMeaning, answerRow } from '../../src/providers/alipay/mapping.ts';
import { type CreateAttemptInput, ProviderRejectedError, ProviderUncertainError } from '../../src/providers/provider.ts';
import type { SimFault, SimulatedMethod } from '../../simulators/alipay/simulator.ts';
import { attemptInput, useAlipayHarness } from './alipay-harness.ts';

const input = (o: Partial<CreateAttemptInput> = {}) => attemptInput({ subject: 'Mapping test', ...o });

const uncertain = (e: unknown) => e instanceof ProviderUncertainError;
const rejectedAs = (reason: string) => (e: unknown) => e instanceof ProviderRejectedError && e.reason === reason;

describe('the answer table', () => {
  const examples: [string, string | null, AnswerMeaning][] = [
    ['10000', null, 'SUCCESS'],
    ['20000', 'isp.unknow-error', 'UNCERTAIN'],
    ['20000', null, 'UNCERTAIN'],
    ['40004', 'ACQ.SYSTEM_ERROR', 'UNCERTAIN'],
    ['40004', 'aop.ACQ.SYSTEM_ERROR', 'UNCERTAIN'],
    ['40002', 'isp.unknow-error', 'UNCERTAIN'],
    ['40004', 'ACQ.TRADE_NOT_EXIST', 'NOT_FOUND'],
    ['40004', 'ACQ.TRADE_HAS_SUCCESS', 'PAID'],
    ['40004', 'ACQ.TRADE_STATUS_ERROR', 'STATUS'],
    ['40004', 'ACQ.SELLER_BALANCE_NOT_ENOUGH', 'REJECTED'],
    ['40004', null, 'REJECTED'],
    ['20001', 'aop.invalid-auth-token', 'REJECTED'],
    ['40001', 'isv.missing-signature', 'REJECTED'],
    ['40002', 'isv.invalid-signature', 'REJECTED'],
    ['40003', 'isv.insufficient-isv-permissions', 'REJECTED'],
    ['40006', 'isv.insufficient-user-permissions', 'REJECTED'],
    ['99999', null, 'UNCERTAIN'],
    ['', null, 'UNCERTAIN'],
  ];
  for (const [code, subCode, meaning] of examples) {
    test(`${code || "''"} ${subCode ?? '(no sub_code)'} -> ${meaning}`, () => assert.equal(answerRow(code, subCode).meaning, meaning));
  }

  test('every row of the table is reached by an example', () => {
    const reached = new Set(examples.map(([c, s]) => answerRow(c, s)));
    for (const row of ANSWER_TABLE) assert.ok(reached.has(row), `row ${row.code} ${String(row.subCode)} (${row.why})`);
  });
});

describe('each call against the simulator: transport and answer rows', () => {
  const harness = useAlipayHarness({}, 500);

  async function open(): Promise<CreateAttemptInput> {
    const i = input();
    await harness().provider.createAttempt(i);
    return i;
  }
  async function paid(): Promise<CreateAttemptInput> {
    const i = await open();
    await harness().sim.pay(i.attemptId);
    return i;
  }

  /** Each call, on a fresh payment of the kind it needs. */
  const calls: { name: string; method: SimulatedMethod; run: () => Promise<unknown> }[] = [
    { name: 'createAttempt', method: 'alipay.trade.precreate', run: () => harness().provider.createAttempt(input()) },
    { name: 'queryPayment', method: 'alipay.trade.query', run: async () => harness().provider.queryPayment((await open()).attemptId) },
    { name: 'closePayment', method: 'alipay.trade.close', run: async () => harness().provider.closePayment((await open()).attemptId) },
    {
      name: 'refund',
      method: 'alipay.trade.refund',
      run: async () => {
        const i = await paid();
        return harness().provider.refund({
          refundId: newId.refund(),
          paidAttemptId: i.attemptId,
          amountFen: 100,
          paymentAmountFen: 1000,
          reason: null,
        });
      },
    },
    {
      name: 'queryRefund',
      method: 'alipay.trade.fastpay.refund.query',
      run: async () => harness().provider.queryRefund({ refundId: newId.refund(), paidAttemptId: (await paid()).attemptId }),
    },
  ];

  const rows: { fault: SimFault; expect: 'UNCERTAIN' | 'REJECTED' | 'SUCCESS'; what: string }[] = [
    { fault: { kind: 'timeout' }, expect: 'UNCERTAIN', what: 'no answer within the timeout' },
    { fault: { kind: 'http', status: 502 }, expect: 'UNCERTAIN', what: 'HTTP 502' },
    { fault: { kind: 'http', status: 500, doWork: true }, expect: 'UNCERTAIN', what: 'HTTP 500 after the work was done' },
    { fault: { kind: 'badSignature' }, expect: 'UNCERTAIN', what: 'a signature that does not verify' },
    { fault: { kind: 'unsigned' }, expect: 'UNCERTAIN', what: 'an unsigned answer' },
    { fault: { kind: 'business', code: '20000', subCode: 'isp.unknow-error' }, expect: 'UNCERTAIN', what: '20000 isp.unknow-error' },
    { fault: { kind: 'business', code: '40004', subCode: 'ACQ.SYSTEM_ERROR' }, expect: 'UNCERTAIN', what: '40004 ACQ.SYSTEM_ERROR' },
    { fault: { kind: 'business', code: '12345', subCode: null }, expect: 'UNCERTAIN', what: 'a code the table does not know' },
    {
      fault: { kind: 'business', code: '40002', subCode: 'isv.invalid-signature' },
      expect: 'REJECTED',
      what: '40002 isv.invalid-signature',
    },
    {
      fault: { kind: 'business', code: '40004', subCode: 'ACQ.INVALID_PARAMETER' },
      expect: 'REJECTED',
      what: '40004 ACQ.INVALID_PARAMETER',
    },
    { fault: { kind: 'business', code: '40006', subCode: 'isv.insufficient-isv-permissions' }, expect: 'REJECTED', what: '40006' },
    { fault: { kind: 'slashVariant' }, expect: 'SUCCESS', what: 'a signature over the text with \\/ read as /' },
  ];

  for (const c of calls) {
    describe(c.name, () => {
      for (const r of rows) {
        test(`${r.what}: ${r.expect}`, async () => {
          harness().sim.clearFaults();
          // Set-up calls (precreate, the buyer paying) use other methods: the fault is the call's own.
          harness().sim.programFault(c.method, r.fault);
          if (r.expect === 'UNCERTAIN') await assert.rejects(c.run, uncertain);
          else if (r.expect === 'REJECTED') await assert.rejects(c.run, (e) => e instanceof ProviderRejectedError && e.reason !== '');
          else await c.run();
          harness().sim.clearFaults();
        });
      }
    });
  }
});

describe('each call against the simulator: what each call makes of its answers', () => {
  const harness = useAlipayHarness({ refundSettleMs: 200 }, 1000);

  test('createAttempt: ACCEPTED with the QR code and a signed wap.pay page URL naming the same trade', async () => {
    const i = input({ amountFen: 12345, subject: 'Tea & cake / 2=two' });
    const r = await harness().provider.createAttempt(i);
    assert.equal(r.outcome, 'ACCEPTED');
    if (r.outcome !== 'ACCEPTED') return;
    assert.equal(r.providerRef, i.attemptId, 'no trade_no exists yet: the out_trade_no');
    assert.match(r.material.qrCode!, /^http:\/\/127\.0\.0\.1:\d+\/qr\//);
    const page = new URL(r.material.redirectUrl!);
    assert.equal(page.origin + page.pathname, harness().sim.gatewayUrl);
    assert.equal(page.searchParams.get('method'), 'alipay.trade.wap.pay');
    assert.equal(page.searchParams.get('return_url'), 'https://merchant.example/return');
    assert.equal(page.searchParams.get('notify_url'), harness().notifyUrl);
    const biz = JSON.parse(page.searchParams.get('biz_content')!) as Record<string, string>;
    assert.equal(biz.out_trade_no, i.attemptId);
    assert.equal(biz.total_amount, '123.45');
    assert.equal(biz.product_code, 'QUICK_WAP_WAY');
    assert.equal(biz.subject, 'Tea   cake   2 two', 'Alipay refuses / = & in a subject');
    assert.equal(biz.time_expire, harness().sim.trade(i.attemptId)!.timeExpire);
  });

  test('createAttempt: a trade paid already (ACQ.TRADE_HAS_SUCCESS) is PAID with its trade_no, confirmed by a query', async () => {
    harness().sim.programFault('alipay.trade.precreate', { kind: 'paid' });
    const i = input();
    const r = await harness().provider.createAttempt(i);
    assert.deepEqual(r, { outcome: 'PAID', providerRef: harness().sim.trade(i.attemptId)!.tradeNo });
  });

  test('createAttempt: another channel, currency or an amount out of range is refused before any call', async () => {
    const before = harness().sim.requestCount('alipay.trade.precreate');
    await assert.rejects(() => harness().provider.createAttempt(input({ channel: 'WECHAT_H5' })), rejectedAs('CHANNEL_NOT_SERVED'));
    await assert.rejects(() => harness().provider.createAttempt(input({ amountFen: 0 })), rejectedAs('AMOUNT_OUT_OF_RANGE'));
    await assert.rejects(() => harness().provider.createAttempt(input({ amountFen: 10_000_000_001 })), rejectedAs('AMOUNT_OUT_OF_RANGE'));
    assert.equal(harness().sim.requestCount('alipay.trade.precreate'), before);
  });

  test('createAttempt: the same out_trade_no with another amount is a refusal (ACQ.CONTEXT_INCONSISTENT)', async () => {
    const i = input();
    await harness().provider.createAttempt(i);
    await assert.rejects(() => harness().provider.createAttempt({ ...i, amountFen: 999 }), rejectedAs('ACQ.CONTEXT_INCONSISTENT'));
  });

  test('queryPayment: WAIT_BUYER_PAY OPEN, TRADE_SUCCESS PAID with trade_no and amount, unknown NOT_FOUND', async () => {
    const i = input({ amountFen: 777 });
    await harness().provider.createAttempt(i);
    assert.deepEqual(await harness().provider.queryPayment(i.attemptId), {
      state: 'OPEN',
      providerRef: i.attemptId,
      material: null,
      amountFen: 777,
    });
    const { tradeNo } = await harness().sim.pay(i.attemptId);
    assert.deepEqual(await harness().provider.queryPayment(i.attemptId), {
      state: 'PAID',
      providerRef: tradeNo,
      material: null,
      amountFen: 777,
    });
    assert.equal((await harness().provider.queryPayment(newId.attempt())).state, 'NOT_FOUND');
  });

  test('queryPayment: a paid trade refunded in full (TRADE_CLOSED with send_pay_date) is PAID, not CLOSED', async () => {
    const i = input({ amountFen: 500 });
    await harness().provider.createAttempt(i);
    await harness().sim.pay(i.attemptId);
    harness().sim.programFault('alipay.trade.refund', { kind: 'paid' });
    await harness().provider.refund({
      refundId: newId.refund(),
      paidAttemptId: i.attemptId,
      amountFen: 500,
      paymentAmountFen: 500,
      reason: null,
    });
    assert.equal(harness().sim.trade(i.attemptId)!.status, 'TRADE_CLOSED');
    assert.equal((await harness().provider.queryPayment(i.attemptId)).state, 'PAID');
  });

  test('closePayment: closed, unknown (ACQ.TRADE_NOT_EXIST) and already closed are CLOSED; paid is PAID', async () => {
    const i = input();
    await harness().provider.createAttempt(i);
    assert.deepEqual(await harness().provider.closePayment(i.attemptId), { outcome: 'CLOSED' });
    assert.deepEqual(
      await harness().provider.closePayment(i.attemptId),
      { outcome: 'CLOSED' },
      'ACQ.TRADE_STATUS_ERROR, and the query says closed',
    );
    assert.deepEqual(await harness().provider.closePayment(newId.attempt()), { outcome: 'CLOSED' });
    const p = input();
    await harness().provider.createAttempt(p);
    await harness().sim.pay(p.attemptId);
    assert.deepEqual(
      await harness().provider.closePayment(p.attemptId),
      { outcome: 'PAID' },
      'ACQ.TRADE_STATUS_ERROR, and the query says paid',
    );
  });

  test('closePayment: refused for the trade state while the trade is still open is a refusal', async () => {
    const i = input();
    await harness().provider.createAttempt(i);
    harness().sim.programFault('alipay.trade.close', { kind: 'business', code: '40004', subCode: 'ACQ.TRADE_STATUS_ERROR' });
    await assert.rejects(() => harness().provider.closePayment(i.attemptId), rejectedAs('ACQ.TRADE_STATUS_ERROR'));
  });

  test('refund: of an open, a closed or an unknown trade is a refusal naming the sub_code', async () => {
    const o = input();
    await harness().provider.createAttempt(o);
    const c = input();
    await harness().provider.createAttempt(c);
    await harness().provider.closePayment(c.attemptId);
    const r = (attemptId: string) =>
      harness().provider.refund({ refundId: newId.refund(), paidAttemptId: attemptId, amountFen: 1, paymentAmountFen: 1000, reason: 'r' });
    await assert.rejects(() => r(o.attemptId), rejectedAs('ACQ.TRADE_STATUS_ERROR'));
    await assert.rejects(() => r(c.attemptId), rejectedAs('ACQ.TRADE_HAS_CLOSE'));
    await assert.rejects(() => r(newId.attempt()), rejectedAs('ACQ.TRADE_NOT_EXIST'));
  });

  test('refund: fund_change Y is SUCCEEDED; N is PENDING until the refund query says REFUND_SUCCESS; a repeat is the same refund', async () => {
    const i = input();
    await harness().provider.createAttempt(i);
    const { tradeNo } = await harness().sim.pay(i.attemptId);
    const refundId = newId.refund();
    const r = { refundId, paidAttemptId: i.attemptId, amountFen: 300, paymentAmountFen: 1000, reason: 'size' };
    assert.deepEqual(await harness().provider.refund(r), { outcome: 'PENDING', providerRef: tradeNo });
    assert.deepEqual(await harness().provider.queryRefund(r), { state: 'PENDING', amountFen: 300 });
    await new Promise((res) => setTimeout(res, 400));
    assert.deepEqual(await harness().provider.queryRefund(r), { state: 'SUCCEEDED', amountFen: 300 });
    assert.deepEqual(await harness().provider.refund(r), { outcome: 'SUCCEEDED', providerRef: tradeNo }, 'fund_change N, then the query');
    assert.equal(harness().sim.trade(i.attemptId)!.refunds.length, 1);
    harness().sim.programFault('alipay.trade.refund', { kind: 'paid' });
    assert.deepEqual(await harness().provider.refund({ ...r, refundId: newId.refund() }), { outcome: 'SUCCEEDED', providerRef: tradeNo });
  });

  test('refund: over the amount paid (ACQ.REFUND_AMT_NOT_EQUAL_TOTAL) and a repeat with another amount are refusals', async () => {
    const i = input();
    await harness().provider.createAttempt(i);
    await harness().sim.pay(i.attemptId);
    const refundId = newId.refund();
    await assert.rejects(
      () => harness().provider.refund({ refundId, paidAttemptId: i.attemptId, amountFen: 1001, paymentAmountFen: 1000, reason: null }),
      rejectedAs('ACQ.REFUND_AMT_NOT_EQUAL_TOTAL'),
    );
    await harness().provider.refund({ refundId, paidAttemptId: i.attemptId, amountFen: 10, paymentAmountFen: 1000, reason: null });
    await assert.rejects(
      () => harness().provider.refund({ refundId, paidAttemptId: i.attemptId, amountFen: 11, paymentAmountFen: 1000, reason: null }),
      rejectedAs('ACQ.DISCORDANT_REPEAT_REQUEST'),
    );
  });

  test('queryRefund: an unknown refund of a known trade, and any refund of an unknown trade, are NOT_FOUND', async () => {
    const i = input();
    await harness().provider.createAttempt(i);
    await harness().sim.pay(i.attemptId);
    assert.deepEqual(await harness().provider.queryRefund({ refundId: newId.refund(), paidAttemptId: i.attemptId }), {
      state: 'NOT_FOUND',
      amountFen: null,
    });
    assert.deepEqual(await harness().provider.queryRefund({ refundId: newId.refund(), paidAttemptId: newId.attempt() }), {
      state: 'NOT_FOUND',
      amountFen: null,
    });
  });
});

describe('answers no gateway should give (a scripted gateway)', () => {
  const alipay = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const merchant = generateKeyPairSync('rsa', { modulusLength: 2048 });
  let next: (method: string, biz: Record<string, string>) => { status?: number; headers?: Record<string, string>; body: string };
  let server: http.Server;
  let provider: AlipayProvider;

  const sign = (text: string) => createSign('RSA-SHA256').update(text, 'utf8').sign(alipay.privateKey, 'base64');
  const key = (method: string) => `${method.replaceAll('.', '_')}_response`;
  const signed = (method: string, inner: object, extra = '') => {
    const text = JSON.stringify(inner);
    return `{"${key(method)}":${text}${extra},"sign":"${sign(text)}"}`;
  };

  before(async () => {
    server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const p = new URLSearchParams(Buffer.concat(chunks).toString());
        const a = next(p.get('method')!, JSON.parse(p.get('biz_content')!) as Record<string, string>);
        res.writeHead(a.status ?? 200, { 'content-type': 'application/json', ...a.headers });
        res.end(a.body);
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    provider = new AlipayProvider(
      {
        appId: '2021000000000009',
        privateKey: merchant.privateKey,
        mode: { kind: 'PUBLIC_KEY', alipayPublicKey: alipay.publicKey },
        gatewayUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}/gateway.do`,
        timeoutMs: 1000,
      },
      { notifyUrl: 'https://merchant.example/n' },
    );
  });
  after(() => new Promise<void>((r) => server.close(() => r())));

  const cases: { what: string; answer: typeof next }[] = [
    { what: 'a redirect (not followed)', answer: () => ({ status: 302, headers: { location: '/elsewhere' }, body: '' }) },
    { what: 'not JSON', answer: () => ({ body: '<html>busy</html>' }) },
    {
      what: 'a response member given twice (the signed one says open, the other paid)',
      answer: (m, b) => {
        const genuine = signed(m, {
          code: '10000',
          msg: 'Success',
          out_trade_no: b.out_trade_no,
          trade_status: 'WAIT_BUYER_PAY',
          total_amount: '10.00',
        });
        return {
          body: `${genuine.slice(0, -1)},"${key(m)}":{"code":"10000","out_trade_no":"${b.out_trade_no}","trade_status":"TRADE_SUCCESS","total_amount":"999.00"}}`,
        };
      },
    },
    { what: 'no response member', answer: () => ({ body: `{"other_response":{"code":"10000"},"sign":"${sign('{"code":"10000"}')}"}` }) },
    {
      what: 'an answer about another trade',
      answer: (m) => ({
        body: signed(m, { code: '10000', msg: 'Success', out_trade_no: 'att_other', trade_status: 'TRADE_SUCCESS', total_amount: '10.00' }),
      }),
    },
    { what: 'no code', answer: (m, b) => ({ body: signed(m, { msg: 'Success', out_trade_no: b.out_trade_no }) }) },
    {
      what: 'an amount not in Alipay form',
      answer: (m, b) => ({
        body: signed(m, { code: '10000', out_trade_no: b.out_trade_no, trade_status: 'TRADE_SUCCESS', total_amount: '10.5' }),
      }),
    },
    {
      what: 'a trade_status the adapter does not know',
      answer: (m, b) => ({
        body: signed(m, { code: '10000', out_trade_no: b.out_trade_no, trade_status: 'TRADE_PENDING', total_amount: '10.00' }),
      }),
    },
    { what: `a body over ${MAX_ANSWER_BYTES} bytes`, answer: () => ({ body: `{"x":"${'a'.repeat(MAX_ANSWER_BYTES)}"}` }) },
  ];
  for (const c of cases) {
    test(`queryPayment, ${c.what}: UNCERTAIN`, async () => {
      next = c.answer;
      await assert.rejects(() => provider.queryPayment(newId.attempt()), uncertain);
    });
  }

  test('an error_response signed by Alipay is read like any answer (40002 isv.invalid-app-id: a refusal)', async () => {
    next = () => {
      const inner = JSON.stringify({ code: '40002', msg: 'Invalid Arguments', sub_code: 'isv.invalid-app-id', sub_msg: '无效的AppID参数' });
      return { body: `{"error_response":${inner},"sign":"${sign(inner)}"}` };
    };
    await assert.rejects(() => provider.queryPayment(newId.attempt()), rejectedAs('isv.invalid-app-id'));
  });

  test('a precreate answer without qr_code: UNCERTAIN', async () => {
    next = (m, b) => ({ body: signed(m, { code: '10000', msg: 'Success', out_trade_no: b.out_trade_no }) });
    await assert.rejects(() => provider.createAttempt(input()), uncertain);
  });
});
