/**
 * Runs the WeChat Pay simulator on its own, for running the service in live mode against it on one
 * machine:
 *
 *   node simulators/wechatpay/main.ts [--port 8091] [--host 127.0.0.1] [--dir ./data/wechatpay-sim]
 *                                     [--mode publicKey|certificate] [--refund-settle-ms 3000]
 *
 * (or WECHATPAY_SIM_PORT, WECHATPAY_SIM_HOST, WECHATPAY_SIM_DIR, WECHATPAY_SIM_MODE,
 * WECHATPAY_SIM_REFUND_SETTLE_MS). On first start it writes into the directory the merchant's API
 * private key (mode 600), the APIv3 key (600), WeChat Pay's public key and the simulator's own keys,
 * and reuses them on later starts, so the service's configuration stays valid. It prints the
 * service's WECHATPAY_* variables. State (orders, refunds) lives in memory only.
 */
import fs from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { createPrivateKey, createPublicKey, generateKeyPairSync, randomBytes } from 'node:crypto';
import { startWechatPaySimulator } from './simulator.ts';

const { values } = parseArgs({
  options: {
    port: { type: 'string' },
    host: { type: 'string' },
    dir: { type: 'string' },
    mode: { type: 'string' },
    'refund-settle-ms': { type: 'string' },
    help: { type: 'boolean' },
  },
});
if (values.help) {
  console.log(
    'usage: node simulators/wechatpay/main.ts [--port N] [--host H] [--dir D] [--mode publicKey|certificate] [--refund-settle-ms N]',
  );
  process.exit(0);
}
const env = process.env;
const port = Number(values.port ?? env.WECHATPAY_SIM_PORT ?? 8091);
const host = values.host ?? env.WECHATPAY_SIM_HOST ?? '127.0.0.1';
const dir = path.resolve(values.dir ?? env.WECHATPAY_SIM_DIR ?? './data/wechatpay-sim');
const mode = (values.mode ?? env.WECHATPAY_SIM_MODE ?? 'publicKey') === 'certificate' ? 'certificate' : 'publicKey';
const refundSettleMs = Number(values['refund-settle-ms'] ?? env.WECHATPAY_SIM_REFUND_SETTLE_MS ?? 3000);
if (!Number.isInteger(port) || port < 0 || port > 65535) throw new Error(`--port must be a port number (got ${port})`);

fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
const file = (name: string) => path.join(dir, name);
function keep(name: string, make: () => string, mode: number): string {
  if (!fs.existsSync(file(name))) fs.writeFileSync(file(name), make(), { mode });
  return fs.readFileSync(file(name), 'utf8');
}
const merchantKey = keep(
  'merchant-private-key.pem',
  () => generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
  0o600,
);
const apiV3Key = keep('apiv3.key', () => randomBytes(24).toString('base64url').slice(0, 32), 0o600).trim();
const appSecret = keep('app-secret', () => randomBytes(16).toString('hex'), 0o600).trim();
const platformKey = keep(
  'sim-platform-private-key.pem',
  () => generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
  0o600,
);
const settings = JSON.parse(
  keep(
    'sim.json',
    () =>
      JSON.stringify(
        {
          mchId: '1900000001',
          appId: 'wxd678efh567hg6787',
          certSerial: randomBytes(20).toString('hex').toUpperCase(),
          publicKeyId: `PUB_KEY_ID_0119000000012026${randomBytes(6).readUIntBE(0, 6).toString().padStart(12, '0').slice(0, 12)}`,
        },
        null,
        2,
      ),
    0o644,
  ),
) as { mchId: string; appId: string; certSerial: string; publicKeyId: string };
fs.writeFileSync(file('platform-public-key.pem'), createPublicKey(createPrivateKey(platformKey)).export({ type: 'spki', format: 'pem' }));

const sim = await startWechatPaySimulator({
  port,
  host,
  mchId: settings.mchId,
  appId: settings.appId,
  merchantPublicKey: createPublicKey(createPrivateKey(merchantKey)),
  merchantCertSerial: settings.certSerial,
  apiV3Key,
  appSecret,
  platformPrivateKey: platformKey,
  publicKeyId: settings.publicKeyId,
  signWith: mode,
  refundSettleMs,
  log: (m) => console.log(`[wechatpay-sim] ${m}`),
});

console.log(`WeChat Pay simulator (${mode} mode) listening at ${sim.url}`);
console.log(
  `Controls: ${sim.url}/__sim/state, POST ${sim.url}/__sim/orders/{out_trade_no}/pay|fail|expire, ... (docs/providers-wechatpay.md)`,
);
console.log('\nThe service needs:\n');
console.log(`WECHATPAY_MCH_ID=${settings.mchId}`);
console.log(`WECHATPAY_APP_ID=${settings.appId}`);
console.log(`WECHATPAY_CERT_SERIAL=${settings.certSerial}`);
console.log(`WECHATPAY_PRIVATE_KEY_FILE=${file('merchant-private-key.pem')}`);
console.log(`WECHATPAY_APIV3_KEY_FILE=${file('apiv3.key')}`);
if (mode === 'publicKey') {
  console.log(`WECHATPAY_PLATFORM_PUBLIC_KEY_FILE=${file('platform-public-key.pem')}`);
  console.log(`WECHATPAY_PLATFORM_PUBLIC_KEY_ID=${settings.publicKeyId}`);
}
console.log(`WECHATPAY_BASE_URL=${sim.url}`);
console.log(`WECHATPAY_APP_SECRET_FILE=${file('app-secret')}`);
console.log(`WECHATPAY_OAUTH_URL=${sim.url}`);
console.log(`WECHATPAY_SNS_URL=${sim.url}`);

for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => void sim.close().then(() => process.exit(0)));
}
