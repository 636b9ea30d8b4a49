/**
 * The Alipay simulator as a process: `node simulators/alipay/main.ts [flags]`. It writes the key
 * files the service needs into its directory (kept across restarts, the private ones mode 600),
 * prints the ALIPAY_* variables that point the service at it, then serves until stopped.
 *
 *   --port N                  (ALIPAY_SIM_PORT, default 8090; 0: any free port)
 *   --host H                  (ALIPAY_SIM_HOST, default 127.0.0.1)
 *   --dir D                   (ALIPAY_SIM_DIR, default .tmp/alipay-simulator): key and certificate files
 *   --app-id ID               (ALIPAY_SIM_APP_ID, default 2021000000000001)
 *   --public-base-url URL     (ALIPAY_SIM_PUBLIC_BASE_URL): how buyers' browsers reach it, if not --host:--port
 *   --merchant-public-key-file F   the merchant's own public key (then no merchant private key is written)
 *   --cert-mode               certificate mode (certificates are made afresh at each start)
 *   --scan-creates-trade      a precreated trade exists only once scanned, as at Alipay
 *   --refund-settle-ms N      how long a refund takes to succeed (default 1000; 0: at once)
 */
import { generateKeyPairSync } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { startAlipaySimulator } from './simulator.ts';

const { values } = parseArgs({
  options: {
    port: { type: 'string' },
    host: { type: 'string' },
    dir: { type: 'string' },
    'app-id': { type: 'string' },
    'public-base-url': { type: 'string' },
    'merchant-public-key-file': { type: 'string' },
    'cert-mode': { type: 'boolean' },
    'scan-creates-trade': { type: 'boolean' },
    'refund-settle-ms': { type: 'string' },
    help: { type: 'boolean' },
  },
});

if (values.help) {
  const doc = fs.readFileSync(import.meta.filename, 'utf8').split('*/')[0]!;
  console.log(doc.replace(/^\/\*\*\n|^ \* ?/gm, ''));
  process.exit(0);
}

function int(v: string | undefined, name: string, def: number): number {
  if (v === undefined || v === '') return def;
  if (!/^\d+$/.test(v)) {
    console.error(`${name} must be a whole number (got '${v}')`);
    process.exit(2);
  }
  return Number(v);
}

const env = process.env;
const dir = path.resolve(values.dir ?? env.ALIPAY_SIM_DIR ?? '.tmp/alipay-simulator');
fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
const file = (name: string) => path.join(dir, name);
const read = (name: string) => (fs.existsSync(file(name)) ? fs.readFileSync(file(name), 'utf8') : undefined);
function write(name: string, content: string, mode: number): string {
  fs.writeFileSync(file(name), content, { mode });
  fs.chmodSync(file(name), mode);
  return file(name);
}

/** A key pair of the directory: read if it is there, made and written (mode 600) if not. */
function keyPair(name: string): string {
  const pem = read(name);
  if (pem) return pem;
  const made = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
  write(name, made, 0o600);
  return made;
}

const merchantPublicKeyPem = values['merchant-public-key-file'] ? fs.readFileSync(values['merchant-public-key-file'], 'utf8') : undefined;
const sim = await startAlipaySimulator({
  port: int(values.port ?? env.ALIPAY_SIM_PORT, 'port', 8090),
  host: values.host ?? env.ALIPAY_SIM_HOST ?? '127.0.0.1',
  appId: values['app-id'] ?? env.ALIPAY_SIM_APP_ID ?? '2021000000000001',
  publicBaseUrl: values['public-base-url'] ?? env.ALIPAY_SIM_PUBLIC_BASE_URL,
  // Keys kept across restarts, so that a service configured once keeps working.
  merchantPublicKeyPem,
  merchantPrivateKeyPem: merchantPublicKeyPem ? undefined : keyPair('app-private-key.pem'),
  alipayPrivateKeyPem: keyPair('alipay-private-key.pem'),
  certMode: values['cert-mode'] ?? false,
  tradeVisibleOnPrecreate: !values['scan-creates-trade'],
  refundSettleMs: int(values['refund-settle-ms'], 'refund-settle-ms', 1000),
  log: (line) => console.log(`${new Date().toISOString()} ${line}`),
});

const k = sim.keys;
const vars: [string, string][] = [
  ['ALIPAY_APP_ID', sim.appId],
  ['ALIPAY_GATEWAY_URL', sim.gatewayUrl],
];
if (k.merchantPrivateKeyPem) vars.push(['ALIPAY_PRIVATE_KEY_FILE', file('app-private-key.pem')]);
if (k.certs) {
  vars.push(['ALIPAY_APP_CERT_FILE', write('appCertPublicKey.crt', k.certs.appCertPem, 0o644)]);
  vars.push(['ALIPAY_PUBLIC_CERT_FILE', write('alipayCertPublicKey_RSA2.crt', k.certs.alipayPublicCertPem, 0o644)]);
  vars.push(['ALIPAY_ROOT_CERT_FILE', write('alipayRootCert.crt', k.certs.alipayRootCertPem, 0o644)]);
} else {
  vars.push(['ALIPAY_PUBLIC_KEY_FILE', write('alipay-public-key.pem', k.alipayPublicKeyPem, 0o644)]);
}

console.log(`Alipay simulator on ${sim.url}
  gateway      ${sim.gatewayUrl}
  control API  ${sim.url}/__sim/   (POST /__sim/trades/<out_trade_no>/pay, POST /__sim/faults, GET /__sim/notifications, ...)
  files        ${dir}

The service, in live mode against it:
${vars.map(([n, v]) => `  ${n}=${v}`).join('\n')}
${k.merchantPrivateKeyPem ? '' : '  ALIPAY_PRIVATE_KEY_FILE=<the private key of --merchant-public-key-file>\n'}${k.certs ? '  (certificate mode: the certificates are made afresh at each start; restart the service after the simulator)\n' : ''}
A buyer pays on the page the cashier sends them to (alipay.trade.wap.pay) or at the QR code's URL.`);

function stop(): void {
  void sim.close().then(() => process.exit(0));
}
process.on('SIGINT', stop);
process.on('SIGTERM', stop);
