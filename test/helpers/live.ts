/**
 * The service in live mode (PROVIDER=live) against both gateway simulators, listening (the
 * simulators post their notifications to it), with a merchant whose notify URL is a real receiver
 * and a clock the tests move: the setup of the live-mode end-to-end suites.
 */
import fs from 'node:fs';
import net, { type AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { type LiveSimulatorOptions, type LiveSimulators, startLiveSimulators } from '../../simulators/live.ts';
import { type Merchant, type TestApp, provision, startTestApp } from './app.ts';
import { type FakeClock, Receiver } from './events.ts';

export interface LiveService {
  sims: LiveSimulators;
  t: TestApp;
  m: Merchant;
  rx: Receiver;
  stop(): Promise<void>;
}

async function freePort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as AddressInfo).port;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

export async function startLiveService(
  clock: FakeClock,
  hook: string,
  simulators: Pick<LiveSimulatorOptions, 'alipay' | 'wechatpay'> = {},
): Promise<LiveService> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mps-live-'));
  const sims = await startLiveSimulators({
    dir,
    alipay: { refundSettleMs: 300, ...simulators.alipay },
    wechatpay: { refundSettleMs: 300, ...simulators.wechatpay },
    timeoutMs: 1500,
  });
  const rx = await Receiver.start();
  const port = await freePort();
  const t = await startTestApp(
    { ...sims.env, PORT: String(port), PUBLIC_BASE_URL: `http://127.0.0.1:${port}`, WEBHOOK_ALLOW_LOOPBACK: 'true' },
    { clock },
  );
  await t.server.listen({ port, host: '127.0.0.1' });
  const m = await provision(t, { app: { notifyUrl: rx.url(hook) } });
  return {
    sims,
    t,
    m,
    rx,
    async stop() {
      await t.stop();
      await rx.close();
      await sims.close();
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}
