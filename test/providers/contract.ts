/**
 * The PaymentProvider contract (src/providers/provider.ts), written against the interface only so
 * that any adapter (the sandbox today, a real provider later) runs it unchanged:
 *
 *   runProviderContract('my adapter', async () => ({ provider, close }));
 *
 * What a provider cannot do by itself in a test (have a buyer pay, program a fault, hand over the
 * notifications it sent) goes through the optional `controls` of the harness. Tests that need a
 * control the harness does not offer are skipped, so an adapter against a real provider's test
 * environment runs the part it can. Ids are fresh per call (the service's own id format), so one
 * harness may serve the whole suite. A test about a channel the provider does not serve
 * (`provider.channels`) is skipped; the others create payments in the provider's first channel.
 *
 * The contract holds a provider to what the interface promises, no more: a payment page URL may be
 * signed afresh by each call (Alipay's carries the signing time), a query may give no material
 * back (Alipay's trade.query returns neither QR code nor page), and a notification may carry the
 * optional amount, currency and provider reference, which must then match the payment.
 */
import assert from 'node:assert/strict';
import { after, afterEach, before, describe, test } from 'node:test';
import { newId } from '../../src/domain/ids.ts';
import {
  type CallOptions,
  type CreateAttemptInput,
  type CreateAttemptResult,
  type PaymentProvider,
  type ProviderNotification,
  ProviderNotificationError,
  type ProviderRefundState,
  ProviderRejectedError,
  ProviderUncertainError,
} from '../../src/providers/provider.ts';

export type FaultOperation = 'CREATE_ATTEMPT' | 'CLOSE' | 'REFUND';
export type FaultOutcome = 'REJECT' | 'TIMEOUT' | 'PAID' | 'DELAY_MS';

export interface SentNotification {
  rawBody: Buffer;
  headers: Record<string, string>;
}

/** Test-only levers of a provider; every member is optional. */
export interface ProviderControls {
  /** The buyer pays the payment of this attempt (the provider then notifies). */
  pay?(attemptId: string): Promise<void>;
  /** Programs `outcome` for the next `times` calls of `operation` (DELAY_MS: wait, then proceed). */
  programFault?(operation: FaultOperation, outcome: FaultOutcome, times: number, delayMs?: number): Promise<void>;
  /** Removes every programmed fault (run after each test). */
  clearFaults?(): Promise<void>;
  /** Notifications the provider has sent so far, oldest first. */
  sentNotifications?(): readonly SentNotification[];
  /** Upper bound on the time an accepted refund takes to settle (default 10 s). */
  refundSettleMs?: number;
  /** How long the adapter waits for an answer (its configured timeout), when it has one: a DELAY_MS must stay below it. */
  answerTimeoutMs?: number;
  /**
   * Moves the provider's time past the settlement of the refunds accepted so far and lets it send
   * their notices (a provider driven by the service's clock); without it, the suite waits.
   */
  settleRefunds?(): Promise<void>;
  /**
   * Moves the provider's clock (and its gateway's) by `ms`: a provider that gives the statement of
   * a day only once it is over (the acquirers) is asked the next day. Without it, the statement of
   * today is asked for today.
   */
  shiftClock?(ms: number): void;
  /** The provider's time, when it runs on a clock of its own (default: Date.now()). */
  now?(): number;
}

export interface ProviderHarness {
  provider: PaymentProvider;
  controls?: ProviderControls;
  close(): Promise<void>;
}

type Ctx = { skip(message?: string): void };

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

export function runProviderContract(name: string, makeProvider: () => Promise<ProviderHarness>): void {
  describe(`PaymentProvider contract: ${name}`, () => {
    let h: ProviderHarness;
    let p: PaymentProvider;
    let c: ProviderControls;

    before(async () => {
      h = await makeProvider();
      p = h.provider;
      c = h.controls ?? {};
    });
    after(async () => {
      await c.clearFaults?.();
      await h.close();
    });
    afterEach(async () => {
      await c.clearFaults?.();
    });

    function input(o: Partial<CreateAttemptInput> = {}): CreateAttemptInput {
      return {
        attemptId: newId.attempt(),
        openOrderId: newId.order(),
        // The first channel the provider serves (a provider may serve one only).
        channel: p.channels[0]!,
        amountFen: 1000,
        currency: 'CNY',
        subject: 'Contract test',
        expireAt: new Date(Date.now() + 15 * 60_000),
        payerClientIp: '8.8.8.8',
        returnUrl: null,
        ...o,
      };
    }

    /** Amounts of the payments created, and the payment of each refund asked for (the adapters' refund query names both). */
    const paymentAmounts = new Map<string, number>();
    const refundPayments = new Map<string, string>();
    function refund(r: { refundId: string; paidAttemptId: string; amountFen: number }, opts?: CallOptions) {
      refundPayments.set(r.refundId, r.paidAttemptId);
      return p.refund({ ...r, paymentAmountFen: paymentAmounts.get(r.paidAttemptId) ?? r.amountFen, reason: null }, opts);
    }
    async function queryRefund(refundId: string): Promise<ProviderRefundState> {
      return (await p.queryRefund({ refundId, paidAttemptId: refundPayments.get(refundId) ?? newId.attempt() })).state;
    }

    /**
     * A notification's required fields; the optional ones (amount, currency, provider reference),
     * when present, must be those of the payment.
     */
    function notificationCore(n: ProviderNotification, expected: { amountFen?: number; providerRef?: string }): object {
      const { amountFen, currency, providerRef, ...core } = n as ProviderNotification & { currency?: string | null };
      if (amountFen != null && expected.amountFen !== undefined)
        assert.equal(amountFen, expected.amountFen, 'the notice carries the amount paid');
      if (currency != null) assert.equal(currency, 'CNY');
      if (providerRef != null) assert.ok(typeof providerRef === 'string' && providerRef.length > 0);
      if (providerRef != null && expected.providerRef !== undefined) assert.equal(providerRef, expected.providerRef);
      return core;
    }

    /** Skips the test unless the harness offers every named control. */
    function needs(t: Ctx, ...keys: (keyof ProviderControls)[]): boolean {
      const missing = keys.filter((k) => c[k] === undefined);
      if (missing.length > 0) t.skip(`the harness offers no ${missing.join(', ')}`);
      return missing.length === 0;
    }

    async function openPayment(o: Partial<CreateAttemptInput> = {}): Promise<CreateAttemptInput & { providerRef: string }> {
      const i = input(o);
      paymentAmounts.set(i.attemptId, i.amountFen);
      const r = await p.createAttempt(i);
      assert.equal(r.outcome, 'ACCEPTED');
      return { ...i, providerRef: r.providerRef };
    }

    async function paidPayment(amountFen = 1000): Promise<CreateAttemptInput> {
      const i = await openPayment({ amountFen });
      await c.pay!(i.attemptId);
      assert.equal((await p.queryPayment(i.attemptId)).state, 'PAID');
      return i;
    }

    async function settled(refundId: string): Promise<ProviderRefundState> {
      await c.settleRefunds?.();
      const end = Date.now() + (c.refundSettleMs ?? 10_000) + 2000;
      let s = await queryRefund(refundId);
      while (s === 'PENDING' && Date.now() < end) {
        await sleep(100);
        s = await queryRefund(refundId);
      }
      return s;
    }

    /** What makes two creation results the same payment: a payment page URL signed afresh by each call is compared as present or not. */
    function samePayment(r: CreateAttemptResult): object {
      return r.outcome === 'ACCEPTED' ? { ...r, material: { ...r.material, redirectUrl: r.material.redirectUrl !== null } } : r;
    }

    async function rejects(fn: () => Promise<unknown>, what: string): Promise<void> {
      await assert.rejects(fn, (e: unknown) => e instanceof ProviderRejectedError && typeof e.reason === 'string' && e.reason !== '', what);
    }

    async function uncertain(fn: () => Promise<unknown>, what: string): Promise<void> {
      await assert.rejects(fn, (e: unknown) => e instanceof ProviderUncertainError, what);
    }

    test('has a name', () => {
      assert.equal(typeof p.name, 'string');
      assert.ok(p.name.length > 0);
    });

    describe('createAttempt', () => {
      test("each channel it serves: ACCEPTED with a provider reference and that channel's material", async () => {
        for (const channel of p.channels) {
          const r = await p.createAttempt(input({ channel }));
          assert.equal(r.outcome, 'ACCEPTED', channel);
          if (r.outcome !== 'ACCEPTED') return;
          assert.equal(typeof r.providerRef, 'string');
          assert.ok(r.providerRef.length > 0);
          if (channel === 'ALIPAY_H5') {
            // ALIPAY_H5: the official collection code.
            assert.equal(typeof r.material.qrCode, 'string');
            assert.ok(r.material.qrCode!.length > 0);
          } else {
            assert.equal(r.material.qrCode, null, 'qrCode is for ALIPAY_H5 only');
          }
          assert.ok(r.material.redirectUrl === null || /^https?:\/\//.test(r.material.redirectUrl), 'a payment page, if any, is a URL');
        }
      });

      test('idempotent on the attempt id: the same payment, not a second one', async () => {
        for (const channel of p.channels) {
          const i = input({ channel });
          const a = await p.createAttempt(i);
          const b = await p.createAttempt(i);
          assert.deepEqual(samePayment(b), samePayment(a));
          const q = await p.queryPayment(i.attemptId);
          assert.equal(q.state, 'OPEN');
          assert.equal(q.providerRef, a.providerRef);
        }
      });

      test('distinct attempts get distinct payments', async () => {
        const a = await openPayment();
        const b = await openPayment({ openOrderId: a.openOrderId });
        assert.notEqual(a.providerRef, b.providerRef);
      });
    });

    describe('queryPayment', () => {
      test('NOT_FOUND for an attempt the provider never saw', async () => {
        const q = await p.queryPayment(newId.attempt());
        assert.deepEqual(q, { state: 'NOT_FOUND', providerRef: null, material: null, amountFen: null });
      });

      test('OPEN with the same reference and material as the creation', async () => {
        const i = input();
        const r = await p.createAttempt(i);
        assert.equal(r.outcome, 'ACCEPTED');
        if (r.outcome !== 'ACCEPTED') return;
        const q = await p.queryPayment(i.attemptId);
        assert.equal(q.state, 'OPEN');
        assert.equal(q.providerRef, r.providerRef);
        // null: the provider's query does not give the material again (WeChat Pay's h5_url); the creation's stands.
        if (q.material !== null) assert.deepEqual(q.material, r.material);
      });

      test('PAID after the buyer paid, with no material', async (t) => {
        if (!needs(t, 'pay')) return;
        const i = await openPayment();
        await c.pay!(i.attemptId);
        const q = await p.queryPayment(i.attemptId);
        assert.equal(q.state, 'PAID');
        assert.equal(q.material, null);
        assert.ok(q.providerRef);
      });

      test('CLOSED after a close, with no material', async () => {
        const i = await openPayment();
        assert.deepEqual(await p.closePayment(i.attemptId), { outcome: 'CLOSED' });
        const q = await p.queryPayment(i.attemptId);
        assert.equal(q.state, 'CLOSED');
        assert.equal(q.material, null);
        assert.equal(q.providerRef, i.providerRef);
      });
    });

    describe('closePayment', () => {
      test('an open payment: CLOSED, and closing again stays CLOSED', async () => {
        const i = await openPayment();
        assert.deepEqual(await p.closePayment(i.attemptId), { outcome: 'CLOSED' });
        assert.deepEqual(await p.closePayment(i.attemptId), { outcome: 'CLOSED' });
      });

      test('an unknown payment counts as closed', async () => {
        assert.deepEqual(await p.closePayment(newId.attempt()), { outcome: 'CLOSED' });
      });

      test('a paid payment is never closed: PAID, and it stays paid', async (t) => {
        if (!needs(t, 'pay')) return;
        const i = await paidPayment();
        assert.deepEqual(await p.closePayment(i.attemptId), { outcome: 'PAID' });
        assert.equal((await p.queryPayment(i.attemptId)).state, 'PAID');
      });

      test('a closed payment cannot be paid any more', async (t) => {
        if (!needs(t, 'pay')) return;
        const i = await openPayment();
        await p.closePayment(i.attemptId);
        await c.pay!(i.attemptId).catch(() => {});
        assert.equal((await p.queryPayment(i.attemptId)).state, 'CLOSED');
      });
    });

    describe('refund and queryRefund', () => {
      test('queryRefund: NOT_FOUND for a refund the provider never saw', async () => {
        assert.equal(await queryRefund(newId.refund()), 'NOT_FOUND');
      });

      test('only a paid payment can be refunded (open, closed and unknown are rejected, nothing recorded)', async () => {
        const open = await openPayment();
        const closed = await openPayment();
        await p.closePayment(closed.attemptId);
        for (const attemptId of [open.attemptId, closed.attemptId, newId.attempt()]) {
          const refundId = newId.refund();
          await rejects(() => refund({ refundId, paidAttemptId: attemptId, amountFen: 1 }), 'refund of an unpaid payment');
          assert.equal(await queryRefund(refundId), 'NOT_FOUND');
        }
      });

      test('a refund of a paid payment is accepted (PENDING or SUCCEEDED) and settles to SUCCEEDED', async (t) => {
        if (!needs(t, 'pay')) return;
        const i = await paidPayment(1000);
        const refundId = newId.refund();
        const r = await refund({ refundId, paidAttemptId: i.attemptId, amountFen: 400 });
        assert.ok(r.outcome === 'PENDING' || r.outcome === 'SUCCEEDED', r.outcome);
        assert.ok(r.providerRef.length > 0);
        assert.ok(['PENDING', 'SUCCEEDED'].includes(await queryRefund(refundId)));
        assert.equal(await settled(refundId), 'SUCCEEDED');
      });

      test('not above the amount paid: cumulative refunds beyond it are rejected; exactly the amount is fine', async (t) => {
        if (!needs(t, 'pay')) return;
        const i = await paidPayment(1000);
        const over = newId.refund();
        await rejects(() => refund({ refundId: over, paidAttemptId: i.attemptId, amountFen: 1001 }), 'a refund above the payment');
        assert.equal(await queryRefund(over), 'NOT_FOUND');
        await refund({ refundId: newId.refund(), paidAttemptId: i.attemptId, amountFen: 600 });
        const tooMuch = newId.refund();
        await rejects(
          () => refund({ refundId: tooMuch, paidAttemptId: i.attemptId, amountFen: 401 }),
          'cumulative refunds above the payment',
        );
        assert.equal(await queryRefund(tooMuch), 'NOT_FOUND');
        const rest = await refund({ refundId: newId.refund(), paidAttemptId: i.attemptId, amountFen: 400 });
        assert.ok(rest.outcome === 'PENDING' || rest.outcome === 'SUCCEEDED');
      });

      test('idempotent per refund id: a repeat returns the same refund and moves no money twice', async (t) => {
        if (!needs(t, 'pay')) return;
        const i = await paidPayment(1000);
        const refundId = newId.refund();
        const a = await refund({ refundId, paidAttemptId: i.attemptId, amountFen: 1000 });
        const b = await refund({ refundId, paidAttemptId: i.attemptId, amountFen: 1000 });
        assert.equal(b.providerRef, a.providerRef);
        assert.equal(await settled(refundId), 'SUCCEEDED');
        const c2 = await refund({ refundId, paidAttemptId: i.attemptId, amountFen: 1000 });
        assert.equal(c2.providerRef, a.providerRef);
        assert.equal(c2.outcome, 'SUCCEEDED', 'a repeat after settlement reports the settled refund');
        // The whole amount is used once, not three times: nothing more fits.
        await rejects(() => refund({ refundId: newId.refund(), paidAttemptId: i.attemptId, amountFen: 1 }), 'nothing left to refund');
      });
    });

    describe('downloadStatement', () => {
      test("the day's payments and settled refunds, each with our id, the amount in fen and the state; an empty day has none", async (t) => {
        if (typeof p.downloadStatement !== 'function') return t.skip('the provider gives no statement');
        if (!needs(t, 'pay')) return;
        const i = await paidPayment(1234);
        const refundId = newId.refund();
        await refund({ refundId, paidAttemptId: i.attemptId, amountFen: 234 });
        assert.equal(await settled(refundId), 'SUCCEEDED');
        const day = new Date((c.now?.() ?? Date.now()) + 8 * 3600_000).toISOString().slice(0, 10);
        c.shiftClock?.(86_400_000);
        try {
          const lines = [];
          for await (const l of await p.downloadStatement(day)) lines.push(l);
          const payment = lines.find((l) => l.kind === 'PAYMENT' && l.subjectId === i.attemptId);
          assert.ok(payment, 'the payment is in the statement');
          assert.equal(payment.amountFen, 1234);
          assert.equal(payment.state, 'PAID');
          assert.ok(payment.providerRef);
          assert.ok(payment.at !== null && new Date(payment.at.getTime() + 8 * 3600_000).toISOString().startsWith(day));
          const r = lines.find((l) => l.kind === 'REFUND' && l.subjectId === refundId);
          assert.ok(r, 'the refund is in the statement');
          assert.equal(r.amountFen, 234);
          assert.equal(r.state, 'SUCCEEDED');
          const empty = [];
          for await (const l of await p.downloadStatement('2021-01-04')) empty.push(l);
          assert.deepEqual(empty, []);
        } finally {
          c.shiftClock?.(-86_400_000);
        }
      });
    });

    describe('parseNotification', () => {
      test('rejects missing, malformed and wrong signatures and an unsigned body', async () => {
        const body = Buffer.from(JSON.stringify({ kind: 'PAYMENT', attemptId: newId.attempt(), state: 'PAID', reason: null }));
        const junk = (v: string) => ({ 'content-type': 'application/json', 'x-signature': v, 'x-sandbox-signature': v, authorization: v });
        for (const headers of [
          {},
          { 'content-type': 'application/json' },
          junk('not-a-signature'),
          junk('0'.repeat(64)),
          junk('A'.repeat(344)),
        ]) {
          await assert.rejects(() => p.parseNotification(body, headers), ProviderNotificationError);
        }
        // A notification the provider really sent, re-signed by nobody: its signature no longer matches.
        if (c.sentNotifications && c.sentNotifications().length > 0) {
          const n = c.sentNotifications()[0]!;
          await assert.rejects(
            () => p.parseNotification(Buffer.concat([n.rawBody, Buffer.from(' ')]), n.headers),
            ProviderNotificationError,
          );
        }
      });

      test('accepts what it sent; rejects it with the body, or the signature, changed', async (t) => {
        if (!needs(t, 'pay', 'sentNotifications')) return;
        const i = await openPayment();
        const before = c.sentNotifications!().length;
        await c.pay!(i.attemptId);
        // Its own notice: another test's refund may settle (and be notified) meanwhile. Found by
        // what it says once parsed: a provider may encrypt the body (WeChat Pay's resource).
        const sent = [];
        for (const x of c.sentNotifications!().slice(before)) {
          const parsed = await p.parseNotification(x.rawBody, x.headers).catch(() => null);
          if (parsed?.kind === 'PAYMENT' && parsed.attemptId === i.attemptId) sent.push(x);
        }
        assert.ok(sent.length >= 1, 'paying sends a notification');
        const n = sent[sent.length - 1]!;
        const parsed = await p.parseNotification(n.rawBody, n.headers);
        assert.deepEqual(notificationCore(parsed, { amountFen: i.amountFen }), {
          kind: 'PAYMENT',
          attemptId: i.attemptId,
          state: 'PAID',
          reason: null,
        });
        const text = n.rawBody.toString('utf8');
        // The attempt id changed, or (an encrypted body) one character in its middle.
        const mid = text.slice(text.length >> 1).search(/[A-Za-z0-9]/) + (text.length >> 1);
        const tampered = Buffer.from(
          text.includes(i.attemptId)
            ? text.replace(i.attemptId, newId.attempt())
            : text.slice(0, mid) + (text[mid] === 'A' ? 'B' : 'A') + text.slice(mid + 1),
        );
        await assert.rejects(() => p.parseNotification(tampered, n.headers), ProviderNotificationError);
        for (const [k, v] of Object.entries(n.headers)) {
          if (k.toLowerCase() === 'content-type') continue;
          const flipped = v.slice(0, -1) + (v.endsWith('0') ? '1' : '0');
          await assert.rejects(() => p.parseNotification(n.rawBody, { ...n.headers, [k]: flipped }), ProviderNotificationError, k);
        }
      });

      test('a settled refund is notified as REFUND SUCCEEDED', async (t) => {
        if (!needs(t, 'pay', 'sentNotifications')) return;
        const i = await paidPayment(500);
        const refundId = newId.refund();
        await refund({ refundId, paidAttemptId: i.attemptId, amountFen: 500 });
        await c.settleRefunds?.();
        const end = Date.now() + (c.refundSettleMs ?? 10_000) + 3000;
        let found: object | null = null;
        while (!found && Date.now() < end) {
          for (const n of c.sentNotifications!()) {
            const parsed = await p.parseNotification(n.rawBody, n.headers);
            if (parsed.kind === 'REFUND' && parsed.refundId === refundId) found = notificationCore(parsed, { amountFen: 500 });
          }
          if (!found) await sleep(100);
        }
        assert.ok(found, 'the refund was notified');
        assert.deepEqual(found, { kind: 'REFUND', refundId, state: 'SUCCEEDED', reason: null });
      });
    });

    describe('programmed faults: each applies to exactly `times` calls of its operation', () => {
      const TIMES = 2;
      /**
       * The delay of the DELAY_MS tests (once the harness is up): long beside an undelayed call, so that the order of the
       * answers shows which calls waited (no test measures a duration), and half the adapter's
       * timeout at most, so that a delayed answer still comes in time.
       */
      const delayMs = () => Math.min(750, (c.answerTimeoutMs ?? Infinity) / 2);

      /**
       * DELAY_MS programmed for TIMES calls: TIMES + 1 calls started together; the first answered
       * is the one the fault did not reach, while the TIMES others still wait; then they all
       * answer, normally. Returns the answers, in the order the calls were made.
       */
      async function delayedTimes<T>(call: (k: number) => Promise<T>): Promise<T[]> {
        const answered: boolean[] = [];
        const calls = Array.from({ length: TIMES + 1 }, (_, k) => {
          answered[k] = false;
          const pending = call(k);
          pending.then(
            () => (answered[k] = true),
            () => (answered[k] = true),
          );
          return pending;
        });
        await Promise.race(calls);
        assert.equal(answered.filter((a) => !a).length, TIMES, `${TIMES} calls still wait when the first is answered`);
        return Promise.all(calls);
      }

      describe('CREATE_ATTEMPT', () => {
        test('REJECT: the provider refuses and records nothing', async (t) => {
          if (!needs(t, 'programFault')) return;
          await c.programFault!('CREATE_ATTEMPT', 'REJECT', TIMES);
          for (let k = 0; k < TIMES; k++) {
            const i = input();
            await rejects(() => p.createAttempt(i), `call ${k + 1}`);
            assert.equal((await p.queryPayment(i.attemptId)).state, 'NOT_FOUND');
          }
          await openPayment();
        });

        test('TIMEOUT: the answer is lost but the payment exists; a retry of the same attempt returns it', async (t) => {
          if (!needs(t, 'programFault')) return;
          await c.programFault!('CREATE_ATTEMPT', 'TIMEOUT', TIMES);
          const lost: CreateAttemptInput[] = [];
          for (let k = 0; k < TIMES; k++) {
            const i = input();
            await uncertain(() => p.createAttempt(i), `call ${k + 1}`);
            const q = await p.queryPayment(i.attemptId);
            assert.equal(q.state, 'OPEN', 'the provider did the work');
            lost.push(i);
          }
          await openPayment();
          const again = await p.createAttempt(lost[0]!);
          assert.equal(again.outcome, 'ACCEPTED');
          assert.equal(again.providerRef, (await p.queryPayment(lost[0]!.attemptId)).providerRef);
        });

        test('PAID: the provider reports the payment paid at once', async (t) => {
          if (!needs(t, 'programFault')) return;
          await c.programFault!('CREATE_ATTEMPT', 'PAID', TIMES);
          for (let k = 0; k < TIMES; k++) {
            const i = input();
            const r = await p.createAttempt(i);
            assert.equal(r.outcome, 'PAID', `call ${k + 1}`);
            assert.ok(r.providerRef);
            assert.equal((await p.queryPayment(i.attemptId)).state, 'PAID');
          }
          await openPayment();
        });

        test('DELAY_MS: the call waits, then proceeds normally', async (t) => {
          if (!needs(t, 'programFault')) return;
          await c.programFault!('CREATE_ATTEMPT', 'DELAY_MS', TIMES, delayMs());
          await delayedTimes(() => openPayment());
        });

        test('a fault of another operation does not touch CREATE_ATTEMPT', async (t) => {
          if (!needs(t, 'programFault')) return;
          await c.programFault!('CLOSE', 'REJECT', 1);
          await c.programFault!('REFUND', 'REJECT', 1);
          await openPayment();
        });
      });

      describe('CLOSE', () => {
        async function opens(n: number): Promise<CreateAttemptInput[]> {
          const out = [];
          for (let k = 0; k < n; k++) out.push(await openPayment());
          return out;
        }

        test('REJECT: the provider refuses and the payment stays open', async (t) => {
          if (!needs(t, 'programFault')) return;
          const ps = await opens(TIMES + 1);
          await c.programFault!('CLOSE', 'REJECT', TIMES);
          for (let k = 0; k < TIMES; k++) {
            await rejects(() => p.closePayment(ps[k]!.attemptId), `call ${k + 1}`);
            assert.equal((await p.queryPayment(ps[k]!.attemptId)).state, 'OPEN');
          }
          assert.deepEqual(await p.closePayment(ps[TIMES]!.attemptId), { outcome: 'CLOSED' });
          assert.deepEqual(await p.closePayment(ps[0]!.attemptId), { outcome: 'CLOSED' }, 'a later close succeeds');
        });

        test('TIMEOUT: the answer is lost but the payment is closed', async (t) => {
          if (!needs(t, 'programFault')) return;
          const ps = await opens(TIMES + 1);
          await c.programFault!('CLOSE', 'TIMEOUT', TIMES);
          for (let k = 0; k < TIMES; k++) {
            await uncertain(() => p.closePayment(ps[k]!.attemptId), `call ${k + 1}`);
            assert.equal((await p.queryPayment(ps[k]!.attemptId)).state, 'CLOSED', 'the provider did the work');
          }
          assert.deepEqual(await p.closePayment(ps[TIMES]!.attemptId), { outcome: 'CLOSED' });
        });

        test('PAID: the provider reports the payment paid instead of closing it', async (t) => {
          if (!needs(t, 'programFault')) return;
          const ps = await opens(TIMES + 1);
          await c.programFault!('CLOSE', 'PAID', TIMES);
          for (let k = 0; k < TIMES; k++) {
            assert.deepEqual(await p.closePayment(ps[k]!.attemptId), { outcome: 'PAID' }, `call ${k + 1}`);
            assert.equal((await p.queryPayment(ps[k]!.attemptId)).state, 'PAID');
          }
          assert.deepEqual(await p.closePayment(ps[TIMES]!.attemptId), { outcome: 'CLOSED' });
        });

        test('DELAY_MS: the call waits, then closes normally', async (t) => {
          if (!needs(t, 'programFault')) return;
          const ps = await opens(TIMES + 1);
          await c.programFault!('CLOSE', 'DELAY_MS', TIMES, delayMs());
          for (const r of await delayedTimes((k) => p.closePayment(ps[k]!.attemptId))) assert.deepEqual(r, { outcome: 'CLOSED' });
        });
      });

      describe('REFUND', () => {
        async function paids(n: number): Promise<CreateAttemptInput[]> {
          const out = [];
          for (let k = 0; k < n; k++) out.push(await paidPayment(1000));
          return out;
        }

        test('REJECT: the provider refuses and records nothing; the amount stays refundable', async (t) => {
          if (!needs(t, 'programFault', 'pay')) return;
          const ps = await paids(TIMES + 1);
          await c.programFault!('REFUND', 'REJECT', TIMES);
          const ids = [];
          for (let k = 0; k < TIMES; k++) {
            const refundId = newId.refund();
            ids.push(refundId);
            await rejects(() => refund({ refundId, paidAttemptId: ps[k]!.attemptId, amountFen: 1000 }), `call ${k + 1}`);
            assert.equal(await queryRefund(refundId), 'NOT_FOUND');
          }
          const r = await refund({ refundId: newId.refund(), paidAttemptId: ps[TIMES]!.attemptId, amountFen: 1000 });
          assert.ok(r.outcome === 'PENDING' || r.outcome === 'SUCCEEDED');
          const full = await refund({ refundId: newId.refund(), paidAttemptId: ps[0]!.attemptId, amountFen: 1000 });
          assert.ok(full.outcome === 'PENDING' || full.outcome === 'SUCCEEDED', 'the rejected amount was not used up');
        });

        test('TIMEOUT: the answer is lost but the refund exists and settles; a retry does not refund twice', async (t) => {
          if (!needs(t, 'programFault', 'pay')) return;
          const ps = await paids(TIMES + 1);
          await c.programFault!('REFUND', 'TIMEOUT', TIMES);
          const ids: string[] = [];
          for (let k = 0; k < TIMES; k++) {
            const refundId = newId.refund();
            ids.push(refundId);
            await uncertain(() => refund({ refundId, paidAttemptId: ps[k]!.attemptId, amountFen: 600 }), `call ${k + 1}`);
            assert.notEqual(await queryRefund(refundId), 'NOT_FOUND', 'the provider did the work');
          }
          const r = await refund({ refundId: newId.refund(), paidAttemptId: ps[TIMES]!.attemptId, amountFen: 600 });
          assert.ok(r.outcome === 'PENDING' || r.outcome === 'SUCCEEDED');
          const retry = await refund({ refundId: ids[0]!, paidAttemptId: ps[0]!.attemptId, amountFen: 600 });
          assert.ok(retry.outcome === 'PENDING' || retry.outcome === 'SUCCEEDED');
          await rejects(() => refund({ refundId: newId.refund(), paidAttemptId: ps[0]!.attemptId, amountFen: 401 }), '600 + 401 > 1000');
          const rest = await refund({ refundId: newId.refund(), paidAttemptId: ps[0]!.attemptId, amountFen: 400 });
          assert.ok(rest.outcome === 'PENDING' || rest.outcome === 'SUCCEEDED', 'the retry did not count twice');
          for (const id of ids) assert.equal(await settled(id), 'SUCCEEDED');
        });

        test('PAID: the provider settles the refund at once', async (t) => {
          if (!needs(t, 'programFault', 'pay')) return;
          const ps = await paids(TIMES + 1);
          await c.programFault!('REFUND', 'PAID', TIMES);
          for (let k = 0; k < TIMES; k++) {
            const refundId = newId.refund();
            const r = await refund({ refundId, paidAttemptId: ps[k]!.attemptId, amountFen: 300 });
            assert.equal(r.outcome, 'SUCCEEDED', `call ${k + 1}`);
            assert.equal(await queryRefund(refundId), 'SUCCEEDED');
          }
          const r = await refund({ refundId: newId.refund(), paidAttemptId: ps[TIMES]!.attemptId, amountFen: 300 });
          assert.equal(r.outcome, 'PENDING', 'the third refund is accepted normally, not settled at once');
        });

        test('DELAY_MS: the call waits, then proceeds normally', async (t) => {
          if (!needs(t, 'programFault', 'pay')) return;
          const ps = await paids(TIMES + 1);
          await c.programFault!('REFUND', 'DELAY_MS', TIMES, delayMs());
          const rs = await delayedTimes((k) => refund({ refundId: newId.refund(), paidAttemptId: ps[k]!.attemptId, amountFen: 300 }));
          for (const r of rs) assert.ok(r.outcome === 'PENDING' || r.outcome === 'SUCCEEDED', r.outcome);
        });
      });

      test('faults are consumed in the order they were programmed', async (t) => {
        if (!needs(t, 'programFault')) return;
        await c.programFault!('CREATE_ATTEMPT', 'REJECT', 1);
        await c.programFault!('CREATE_ATTEMPT', 'PAID', 1);
        await rejects(() => p.createAttempt(input()), 'first: REJECT');
        assert.equal((await p.createAttempt(input())).outcome, 'PAID');
        assert.equal((await p.createAttempt(input())).outcome, 'ACCEPTED');
      });
    });
  });
}
