/**
 * The provider contract (test/providers/contract.ts) on the AlipayProvider against the local
 * Alipay simulator (simulators/alipay): the buyer pays through the simulator, the contract's
 * programmed faults become the simulator's gateway faults, and the notifications are the
 * simulator's signed form POSTs.
 */
import { type FaultOperation, type FaultOutcome, runProviderContract } from './contract.ts';
import type { SimFault, SimulatedMethod } from '../../simulators/alipay/simulator.ts';
import { startAlipayHarness } from './alipay-harness.ts';

const METHOD: Record<FaultOperation, SimulatedMethod> = {
  CREATE_ATTEMPT: 'alipay.trade.precreate',
  CLOSE: 'alipay.trade.close',
  REFUND: 'alipay.trade.refund',
};

/** A clear refusal for each call, from the error codes Alipay documents for it. */
const REFUSAL: Record<FaultOperation, SimFault> = {
  CREATE_ATTEMPT: { kind: 'business', code: '40004', subCode: 'ACQ.ACCESS_FORBIDDEN', subMsg: '无权限使用接口' },
  CLOSE: { kind: 'business', code: '40004', subCode: 'ACQ.INVALID_PARAMETER', subMsg: '参数无效' },
  REFUND: { kind: 'business', code: '40004', subCode: 'ACQ.SELLER_BALANCE_NOT_ENOUGH', subMsg: '卖家余额不足' },
};

function simFault(operation: FaultOperation, outcome: FaultOutcome, delayMs: number | undefined): SimFault {
  switch (outcome) {
    case 'REJECT':
      return REFUSAL[operation];
    case 'TIMEOUT':
      return { kind: 'timeout' };
    case 'PAID':
      return { kind: 'paid' };
    case 'DELAY_MS':
      return { kind: 'delay', ms: delayMs ?? 0 };
  }
}

runProviderContract('alipay (simulator)', async () => {
  // The simulator's clock, moved on by a day for the bill of a day that is over.
  let shift = 0;
  const h = await startAlipayHarness({ now: () => new Date(Date.now() + shift) });
  return {
    provider: h.provider,
    controls: {
      async pay(attemptId) {
        await h.sim.pay(attemptId);
      },
      async programFault(operation, outcome, times, delayMs) {
        h.sim.programFault(METHOD[operation], simFault(operation, outcome, delayMs), times);
      },
      async clearFaults() {
        h.sim.clearFaults();
      },
      sentNotifications: () => h.sim.notifications(),
      refundSettleMs: 300,
      answerTimeoutMs: h.config.timeoutMs,
      shiftClock: (ms) => (shift += ms),
    },
    close: () => h.close(),
  };
});
