/**
 * The provider contract (test/providers/contract.ts) on the SandboxProvider, on a fresh database
 * with the migrations applied. The sandbox's own levers (buyer pays, programmed faults) and the
 * notifications it sends are handed to the suite as its controls; its time is a clock the suite
 * moves (refunds settle when it passes their settlement time).
 */
import { runProviderContract, type SentNotification } from './contract.ts';
import { REFUND_SETTLE_MS, SandboxProvider } from '../../src/providers/sandbox/sandbox.ts';
import { createPool, migrate } from '../../src/store/db.ts';
import { createTestDatabase } from '../helpers/db.ts';
import { FakeClock } from '../helpers/events.ts';

runProviderContract('sandbox', async () => {
  const database = await createTestDatabase();
  const pool = createPool(database.url, 10);
  await migrate(pool);
  const clock = new FakeClock();
  const provider = new SandboxProvider(pool, { clock });
  const sent: SentNotification[] = [];
  provider.setNotificationSink(async (rawBody, headers) => {
    sent.push({ rawBody, headers });
  });
  return {
    provider,
    controls: {
      async pay(attemptId) {
        const r = await provider.buyerAction(attemptId, 'PAY');
        if (r !== 'OK') throw new Error(`sandbox: the buyer cannot pay ${attemptId}: ${r}`);
      },
      programFault: (operation, outcome, times, delayMs) => provider.programFault(operation, outcome, times, delayMs ?? null),
      clearFaults: () => provider.clearFaults(),
      sentNotifications: () => sent,
      refundSettleMs: REFUND_SETTLE_MS,
      now: () => clock.now(),
      async settleRefunds() {
        clock.advance(REFUND_SETTLE_MS);
        await provider.sendDueRefundNotices();
      },
    },
    async close() {
      await pool.end();
      await database.drop();
    },
  };
});
