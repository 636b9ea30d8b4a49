/**
 * Reconciliation in live mode (PROVIDER=live) against the two gateway simulators, whose clocks
 * follow the service's: a payment at each acquirer whose notification is lost leaves its order
 * PAYING; the next day, the day's reconciliation downloads each acquirer's real bill format
 * (Alipay's GBK ZIP, WeChat Pay's gzip CSV with its SHA-1), converges both payments through the
 * notice path, and the merchant gets PAYMENT_SUCCEEDED for each.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { LiveSimulators } from '../../simulators/live.ts';
import { getRun } from '../../src/store/reconciliation.ts';
import { reconcileStatement } from '../../src/usecases/reconciliation.ts';
import { type Merchant, type TestApp, call, orderBody } from '../helpers/app.ts';
import { FakeClock, type Receiver, waitFor } from '../helpers/events.ts';
import { type LiveService, startLiveService } from '../helpers/live.ts';

let live: LiveService;
let sims: LiveSimulators;
let t: TestApp;
let m: Merchant;
let rx: Receiver;
const clock = new FakeClock();
const HOOK = '/hooks/live-recon';

before(async () => {
  // The simulators' clocks follow the service's: the bill of a day is given once the day is over.
  live = await startLiveService(clock, HOOK, { alipay: { now: () => new Date(clock.now()) }, wechatpay: { now: () => clock.now() } });
  ({ sims, t, m, rx } = live);
});
after(() => live.stop());

const api = (method: string, url: string, body?: unknown) =>
  call(t, m, method, url, body, { timestamp: String(Math.floor(clock.now() / 1000)) });

test('paid at each acquirer, never told: the next day the bills converge both orders and the merchant is notified', async () => {
  const orders: { no: string; channel: 'ALIPAY_H5' | 'WECHAT_H5' }[] = [];
  for (const channel of ['ALIPAY_H5', 'WECHAT_H5'] as const) {
    const body = orderBody({ channel, amountFen: 4321 });
    const c = await api('POST', '/api/open/v1/payments', body);
    assert.equal(c.statusCode, 201, c.body);
    const attemptId = (await t.admin('GET', `/orders/${c.json().openOrderId}`)).json().attempts.at(-1).attemptId as string;
    if (channel === 'ALIPAY_H5') {
      sims.alipay.loseNotifications(1);
      await sims.alipay.pay(attemptId);
    } else {
      sims.wechatpay.controls.programNotifications({ lose: 1 });
      await sims.wechatpay.controls.pay(attemptId);
    }
    orders.push({ no: String(body.outTradeNo), channel });
  }
  for (const o of orders) assert.equal((await api('GET', `/api/open/v1/payments/${o.no}`)).json().status, 'PAYING', 'never told');

  const day = new Date(clock.now() + 8 * 3600_000).toISOString().slice(0, 10);
  clock.advance(24 * 3600_000);
  // The runs are executed here (their jobs' handler), not by the worker loop, so that expiry (the
  // orders' windows are long over) does not find the payments first by closing the orders.
  const asked = await t.admin('POST', '/reconciliation/runs', { day });
  assert.equal(asked.statusCode, 202, asked.body);
  assert.deepEqual(
    asked
      .json()
      .runs.map((r: { provider: string }) => r.provider)
      .sort(),
    ['alipay', 'sandbox', 'wechatpay'],
  );
  const done = [];
  for (const { runId } of asked.json().runs as { runId: string }[]) {
    const job = { id: '0', kind: 'RECONCILE_STATEMENT' as const, subjectId: runId, runs: 1, renew: async () => true };
    assert.equal(await reconcileStatement(t.svc, job), 'done');
    done.push((await getRun(t.svc.db, runId))!);
  }
  for (const r of done) assert.equal(r.status, 'COMPLETED', `${r.provider}: ${r.error}`);
  const by = Object.fromEntries(done.map((r) => [r.provider, r]));
  assert.equal(by.alipay!.providerLines, 1);
  assert.equal(by.alipay!.converged, 1);
  assert.equal(by.wechatpay!.providerLines, 1);
  assert.equal(by.wechatpay!.converged, 1);
  assert.equal(by.sandbox!.providerLines, 0);

  for (const o of orders) assert.equal((await api('GET', `/api/open/v1/payments/${o.no}`)).json().status, 'SUCCEEDED', o.channel);
  await waitFor('the PAYMENT_SUCCEEDED events', async () => {
    await t.workers.tick();
    const got = rx.at(HOOK).map((r) => JSON.parse(r.body) as { outTradeNo: string; eventType: string });
    return orders.every((o) => got.some((e) => e.outTradeNo === o.no && e.eventType === 'PAYMENT_SUCCEEDED'));
  });
  const found = (await t.admin('GET', '/provider-discrepancies?source=STATEMENT')).json().discrepancies as {
    kind: string;
    provider: string;
    status: string;
  }[];
  assert.deepEqual(found.map((d) => [d.provider, d.kind, d.status]).sort(), [
    ['alipay', 'PAID_NOT_NOTIFIED', 'RESOLVED'],
    ['wechatpay', 'PAID_NOT_NOTIFIED', 'RESOLVED'],
  ]);
});
