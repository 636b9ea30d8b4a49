/**
 * `npm run demo:live`: the service in live mode (PROVIDER=live) against local simulators of the
 * Alipay and WeChat Pay gateways, on one machine: the simulators start first (their key files go
 * to DIR, default .tmp/live-demo), then the service with every ALIPAY_* and WECHATPAY_* variable
 * pointing at them, on PORT (default 8080) with its embedded PostgreSQL in DIR/data. Ctrl-C stops
 * all three. A payment made through the open API is paid by the buyer on the simulator's own
 * page, which the cashier sends the buyer to (docs/providers.md, "Trying live mode locally").
 */
import { spawn } from 'node:child_process';
import path from 'node:path';
import { startLiveSimulators } from '../simulators/live.ts';

const root = path.resolve(import.meta.dirname, '..');
const dir = path.resolve(process.env.DIR ?? path.join(root, '.tmp/live-demo'));
const port = process.env.PORT ?? '8080';
const sims = await startLiveSimulators({ dir, alipay: { log: (l) => console.log(`[alipay-sim] ${l}`) } });

console.log(`Alipay simulator     ${sims.alipay.url}   (control API: ${sims.alipay.url}/__sim/)
WeChat Pay simulator ${sims.wechatpay.url}   (control API: ${sims.wechatpay.url}/__sim/)
The service, PROVIDER=live, on http://127.0.0.1:${port} (data in ${path.join(dir, 'data')})
`);

const service = spawn(process.execPath, [path.join(root, 'src/main.ts')], {
  stdio: 'inherit',
  env: {
    ...process.env,
    ...sims.env,
    PORT: port,
    DATA_DIR: process.env.DATA_DIR ?? path.join(dir, 'data'),
    // A merchant's notify URL on this machine (the quickstart's receiver) is allowed in the demo.
    WEBHOOK_ALLOW_LOOPBACK: process.env.WEBHOOK_ALLOW_LOOPBACK ?? 'true',
  },
});

let stopping = false;
async function stop(code: number): Promise<void> {
  if (stopping) return;
  stopping = true;
  if (service.exitCode === null) {
    service.kill('SIGTERM');
    await new Promise((r) => service.once('exit', r));
  }
  await sims.close();
  process.exit(code);
}
service.on('exit', (code) => void stop(code ?? 1));
process.on('SIGINT', () => void stop(0));
process.on('SIGTERM', () => void stop(0));
