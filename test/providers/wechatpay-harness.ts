/**
 * A WechatPayProvider wired to a fresh simulator (simulators/wechatpay), in public-key or
 * platform-certificate mode, with the notifications the simulator sends kept in memory (and
 * answered 204, as the service would).
 */
import { createPrivateKey, createPublicKey, createSecretKey } from 'node:crypto';
import type { WechatPayConfig } from '../../src/providers/wechatpay/config.ts';
import { WechatPayProvider, type WechatPayProviderOptions } from '../../src/providers/wechatpay/wechatpay.ts';
import {
  type SentNotification,
  type WechatPaySimulator,
  type WechatPaySimulatorOptions,
  startWechatPaySimulator,
} from '../../simulators/wechatpay/simulator.ts';

export const NOTIFY_URL = 'https://shop.example/api/provider/v1/notifications/wechatpay';

export interface WechatPayHarness {
  sim: WechatPaySimulator;
  config: WechatPayConfig;
  provider: WechatPayProvider;
  /** Notifications delivered (answered 2xx by the in-memory receiver), oldest first. */
  delivered: SentNotification[];
  close(): Promise<void>;
}

export async function startHarness(
  o: {
    mode?: 'publicKey' | 'certificate';
    timeoutMs?: number;
    sim?: WechatPaySimulatorOptions;
    provider?: Partial<WechatPayProviderOptions>;
    /** The receiver's HTTP status (default 204). */
    answer?: () => number;
  } = {},
): Promise<WechatPayHarness> {
  const mode = o.mode ?? 'publicKey';
  const delivered: SentNotification[] = [];
  const sim = await startWechatPaySimulator({
    refundSettleMs: 300,
    notifyRetryScheduleMs: [200, 400, 800],
    signWith: mode,
    ...o.sim,
    deliver: async (url, rawBody, headers) => {
      const status = o.answer?.() ?? 204;
      if (status < 300) delivered.push({ id: '', eventType: '', url, rawBody, headers, status });
      return status;
    },
  });
  const config: WechatPayConfig = {
    mchId: sim.keys.mchId,
    appId: sim.keys.appId,
    privateKey: createPrivateKey(sim.keys.merchantPrivateKeyPem!),
    certSerial: sim.keys.merchantCertSerial,
    apiV3Key: createSecretKey(Buffer.from(sim.keys.apiV3Key)),
    platform:
      mode === 'publicKey'
        ? { mode, publicKey: createPublicKey(sim.keys.platformPublicKeyPem), publicKeyId: sim.keys.publicKeyId }
        : { mode: 'certificate' },
    baseUrl: sim.url,
    appSecret: createSecretKey(Buffer.from(sim.keys.appSecret)),
    oauthUrl: sim.url,
    snsUrl: sim.url,
    timeoutMs: o.timeoutMs ?? 1500,
  };
  const provider = new WechatPayProvider(config, { notifyUrl: NOTIFY_URL, ...o.provider });
  return { sim, config, provider, delivered, close: () => sim.close() };
}
