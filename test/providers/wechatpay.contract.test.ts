/**
 * The provider contract (test/providers/contract.ts) on the WechatPayProvider against the WeChat
 * Pay simulator, in public-key mode and in platform-certificate mode. The contract's faults are
 * the simulator's, in WeChat Pay's terms:
 *
 * | contract fault | simulator |
 * | --- | --- |
 * | CREATE_ATTEMPT REJECT | 400 PARAM_ERROR, nothing created |
 * | CLOSE REJECT | 400 INVALID_REQUEST, the order stays open |
 * | REFUND REJECT | 403 NOT_ENOUGH, nothing refunded |
 * | TIMEOUT | the work is done, the answer never comes (the provider's timeout ends the call) |
 * | CREATE_ATTEMPT PAID | the order is paid at once; the create answers ORDERPAID |
 * | CLOSE PAID | the buyer pays just before the close; the close answers ORDERPAID |
 * | REFUND PAID | the refund is SUCCESS in the answer |
 * | DELAY_MS | the answer waits, then comes |
 *
 * The notifications handed to the contract carry the headers WeChat Pay signs (Content-Type and
 * the Wechatpay-* ones): Request-ID is a log identifier that no signature covers.
 */
import { runProviderContract, type FaultOperation, type FaultOutcome, type SentNotification } from './contract.ts';
import type { Endpoint, Fault } from '../../simulators/wechatpay/simulator.ts';
import { startHarness } from './wechatpay-harness.ts';

const ENDPOINT: Record<FaultOperation, Endpoint> = { CREATE_ATTEMPT: 'create', CLOSE: 'close', REFUND: 'refund' };
const REJECT: Record<FaultOperation, Fault> = {
  CREATE_ATTEMPT: { kind: 'error', status: 400, code: 'PARAM_ERROR', message: '参数错误' },
  CLOSE: { kind: 'error', status: 400, code: 'INVALID_REQUEST', message: '无效请求' },
  REFUND: { kind: 'error', status: 403, code: 'NOT_ENOUGH', message: '余额不足' },
};

function fault(operation: FaultOperation, outcome: FaultOutcome, delayMs?: number): Fault {
  if (outcome === 'REJECT') return REJECT[operation];
  if (outcome === 'TIMEOUT') return { kind: 'noAnswer' };
  if (outcome === 'PAID') return { kind: 'paid' };
  return { kind: 'delay', ms: delayMs ?? 0 };
}

for (const mode of ['publicKey', 'certificate'] as const) {
  runProviderContract(`wechatpay (simulator, ${mode} mode)`, async () => {
    // One clock for the adapter and the simulator, moved together (a bill is given once its day is over).
    let shift = 0;
    const now = () => Date.now() + shift;
    const h = await startHarness({ mode, sim: { now }, provider: { clock: { now } } });
    const signed = (n: SentNotification) => ({
      rawBody: n.rawBody,
      headers: Object.fromEntries(Object.entries(n.headers).filter(([k]) => /^(content-type|wechatpay-)/i.test(k))),
    });
    return {
      provider: h.provider,
      controls: {
        pay: (attemptId) => h.sim.controls.pay(attemptId),
        programFault: async (operation, outcome, times, delayMs) =>
          h.sim.controls.programFault(ENDPOINT[operation], fault(operation, outcome, delayMs), times),
        clearFaults: async () => h.sim.controls.clearFaults(),
        sentNotifications: () => h.delivered.map(signed),
        refundSettleMs: 300,
        answerTimeoutMs: h.config.timeoutMs,
        shiftClock: (ms) => (shift += ms),
      },
      close: () => h.close(),
    };
  });
}
