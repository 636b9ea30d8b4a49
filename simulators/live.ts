/**
 * Both gateway simulators at once, with the key files and the environment a service needs to run
 * in live mode against them (PROVIDER=live): used by the live-mode tests and by
 * `npm run demo:live` (scripts/live-demo.ts). Key files are written private (mode 600), as the
 * service requires.
 */
import fs from 'node:fs';
import path from 'node:path';
import { type AlipaySimulator, type AlipaySimulatorOptions, startAlipaySimulator } from './alipay/simulator.ts';
import { type WechatPaySimulator, type WechatPaySimulatorOptions, startWechatPaySimulator } from './wechatpay/simulator.ts';

export interface LiveSimulators {
  alipay: AlipaySimulator;
  wechatpay: WechatPaySimulator;
  /** PROVIDER=live and every ALIPAY_* and WECHATPAY_* variable pointing the service at the two simulators. */
  env: Record<string, string>;
  close(): Promise<void>;
}

export interface LiveSimulatorOptions {
  /** Where the key files go (created, mode 700). */
  dir: string;
  host?: string;
  alipay?: Omit<AlipaySimulatorOptions, 'host'>;
  wechatpay?: Omit<WechatPaySimulatorOptions, 'host'>;
  /** Each provider call's deadline in the service (ALIPAY_TIMEOUT_MS, WECHATPAY_TIMEOUT_MS). */
  timeoutMs?: number;
}

export async function startLiveSimulators(o: LiveSimulatorOptions): Promise<LiveSimulators> {
  const host = o.host ?? '127.0.0.1';
  fs.mkdirSync(o.dir, { recursive: true, mode: 0o700 });
  const write = (name: string, content: string, mode = 0o600): string => {
    const file = path.join(o.dir, name);
    fs.writeFileSync(file, content, { mode });
    fs.chmodSync(file, mode);
    return file;
  };
  const alipay = await startAlipaySimulator({ host, ...o.alipay });
  const wechatpay = await startWechatPaySimulator({ host, ...o.wechatpay }).catch(async (err: unknown) => {
    await alipay.close();
    throw err;
  });
  const a = alipay.keys;
  const w = wechatpay.keys;
  if (!a.merchantPrivateKeyPem || !w.merchantPrivateKeyPem)
    throw new Error('the simulators were given merchant public keys: no private key to configure');
  const timeout = String(o.timeoutMs ?? 2000);
  const env: Record<string, string> = {
    PROVIDER: 'live',
    ALIPAY_APP_ID: alipay.appId,
    ALIPAY_GATEWAY_URL: alipay.gatewayUrl,
    ALIPAY_PRIVATE_KEY_FILE: write('alipay-app-private-key.pem', a.merchantPrivateKeyPem),
    ALIPAY_TIMEOUT_MS: timeout,
    WECHATPAY_MCH_ID: w.mchId,
    WECHATPAY_APP_ID: w.appId,
    WECHATPAY_CERT_SERIAL: w.merchantCertSerial,
    WECHATPAY_PRIVATE_KEY_FILE: write('wechatpay-merchant-private-key.pem', w.merchantPrivateKeyPem),
    WECHATPAY_APIV3_KEY_FILE: write('wechatpay-apiv3.key', w.apiV3Key),
    WECHATPAY_PLATFORM_PUBLIC_KEY_ID: w.publicKeyId,
    WECHATPAY_PLATFORM_PUBLIC_KEY_FILE: write('wechatpay-platform-public-key.pem', w.platformPublicKeyPem, 0o644),
    WECHATPAY_BASE_URL: wechatpay.url,
    // The official account's web authorization (JSAPI inside WeChat), at the simulator too.
    WECHATPAY_APP_SECRET_FILE: write('wechatpay-app-secret', w.appSecret),
    WECHATPAY_OAUTH_URL: wechatpay.url,
    WECHATPAY_SNS_URL: wechatpay.url,
    WECHATPAY_TIMEOUT_MS: timeout,
  };
  if (a.certs) {
    env.ALIPAY_APP_CERT_FILE = write('alipay-app-cert.crt', a.certs.appCertPem, 0o644);
    env.ALIPAY_PUBLIC_CERT_FILE = write('alipay-public-cert.crt', a.certs.alipayPublicCertPem, 0o644);
    env.ALIPAY_ROOT_CERT_FILE = write('alipay-root-cert.crt', a.certs.alipayRootCertPem, 0o644);
  } else {
    env.ALIPAY_PUBLIC_KEY_FILE = write('alipay-public-key.pem', a.alipayPublicKeyPem, 0o644);
  }
  return {
    alipay,
    wechatpay,
    env,
    async close() {
      await Promise.all([alipay.close(), wechatpay.close()]);
    },
  };
}
