/**
 * Which provider serves each channel (docs/providers.md):
 *  - PROVIDER=sandbox (the default): the sandbox serves both channels.
 *  - PROVIDER=live: ALIPAY_H5 by Alipay, WECHAT_H5 by WeChat Pay. A channel whose provider is not
 *    configured is refused at start with a configuration error naming what is missing, unless the
 *    operator disables it explicitly (CHANNELS_DISABLED): its creates then answer 422
 *    OPEN_API_CHANNEL_UNAVAILABLE.
 * The sandbox is kept in every mode for the payments it already holds (attempts and refunds record
 * their provider); its test levers exist only with PROVIDER=sandbox.
 */
import { ConfigError } from '../config/config.ts';
import type { Clock } from '../domain/clock.ts';
import type { Channel } from '../domain/open-schemas.ts';
import type { Db } from '../store/db.ts';
import { AlipayProvider } from './alipay/alipay.ts';
import { alipayConfigFromEnv } from './alipay/config.ts';
import type { PaymentProvider } from './provider.ts';
import { ProviderRouter } from './router.ts';
import { SandboxProvider } from './sandbox/sandbox.ts';
import { wechatPayConfigFromEnv } from './wechatpay/config.ts';
import { WechatPayProvider } from './wechatpay/wechatpay.ts';

export interface ProviderSetup {
  router: ProviderRouter;
  /** The sandbox when it serves the channels (its helpers and cashier buttons exist only then). */
  sandbox: SandboxProvider | null;
}

export interface ProviderSetupInput {
  provider: 'sandbox' | 'live';
  channelsDisabled: readonly Channel[];
  providerEnv: Record<string, string>;
  publicBaseUrl: string;
  db: Db;
  clock: Clock;
  log: (msg: string, err?: unknown) => void;
  /** A provider for both channels (tests): replaces the configured ones. */
  override?: PaymentProvider;
}

/** The provider's notification address, as it is given to the provider with every payment. */
function notifyUrlOf(publicBaseUrl: string, name: string): string {
  return `${publicBaseUrl}/api/provider/v1/notifications/${name}`;
}

export function setUpProviders(o: ProviderSetupInput): ProviderSetup {
  const enabled = (c: Channel) => !o.channelsDisabled.includes(c);
  const sandbox = new SandboxProvider(o.db, { log: o.log, clock: o.clock });
  if (o.override) {
    const routes: Partial<Record<Channel, PaymentProvider>> = {};
    for (const c of ['ALIPAY_H5', 'WECHAT_H5'] as const) if (enabled(c)) routes[c] = o.override;
    return { router: new ProviderRouter(routes, [sandbox]), sandbox: null };
  }
  if (o.provider === 'sandbox') {
    const routes: Partial<Record<Channel, PaymentProvider>> = {};
    for (const c of ['ALIPAY_H5', 'WECHAT_H5'] as const) if (enabled(c)) routes[c] = sandbox;
    return { router: new ProviderRouter(routes, [sandbox]), sandbox };
  }
  const routes: Partial<Record<Channel, PaymentProvider>> = {};
  const others: PaymentProvider[] = [sandbox];
  const alipay = alipayConfigFromEnv(o.providerEnv);
  const wechat = wechatPayConfigFromEnv(o.providerEnv);
  if (alipay) {
    const p = new AlipayProvider(alipay, { notifyUrl: notifyUrlOf(o.publicBaseUrl, 'alipay'), now: () => new Date(o.clock.now()) });
    if (enabled('ALIPAY_H5')) routes.ALIPAY_H5 = p;
    else others.push(p);
  } else if (enabled('ALIPAY_H5')) {
    throw new ConfigError(
      'PROVIDER=live: ALIPAY_H5 is served by Alipay, which is not configured: set ALIPAY_APP_ID and its key files, or list ALIPAY_H5 in CHANNELS_DISABLED',
    );
  }
  if (wechat) {
    const p = new WechatPayProvider(wechat, { notifyUrl: notifyUrlOf(o.publicBaseUrl, 'wechatpay'), clock: o.clock, log: o.log });
    if (enabled('WECHAT_H5')) routes.WECHAT_H5 = p;
    else others.push(p);
  } else if (enabled('WECHAT_H5')) {
    throw new ConfigError(
      'PROVIDER=live: WECHAT_H5 is served by WeChat Pay, which is not configured: set WECHATPAY_MCH_ID and its key files, or list WECHAT_H5 in CHANNELS_DISABLED',
    );
  }
  return { router: new ProviderRouter(routes, others), sandbox: null };
}
