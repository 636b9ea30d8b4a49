/**
 * The Alipay adapter wired to a local Alipay simulator, with a notification receiver standing in
 * for the service's endpoint: each notice is parsed by the adapter and answered with its
 * acknowledgement, as the service does.
 */
import { createPrivateKey, createPublicKey } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { AlipayProvider } from '../../src/providers/alipay/alipay.ts';
import type { AlipayConfig } from '../../src/providers/alipay/config.ts';
import { after, before } from 'node:test';
import { newId } from '../../src/domain/ids.ts';
import type { CreateAttemptInput, ProviderNotification } from '../../src/providers/provider.ts';
import { type AlipaySimulator, type AlipaySimulatorOptions, startAlipaySimulator } from '../../simulators/alipay/simulator.ts';

export interface Received {
  rawBody: Buffer;
  parsed: ProviderNotification | null;
  error: string | null;
}

export interface AlipayHarness {
  sim: AlipaySimulator;
  provider: AlipayProvider;
  config: AlipayConfig;
  notifyUrl: string;
  /** Notices that reached the receiver, in order, with what the adapter made of them. */
  received: Received[];
  /** Makes the receiver answer as a failing service would (`fail`), or normally again. */
  failAcks(on: boolean): void;
  close(): Promise<void>;
}

/** The adapter's configuration for a simulator: public-key mode, or certificate mode when the simulator runs it. */
export function configFor(sim: AlipaySimulator, timeoutMs: number): AlipayConfig {
  const k = sim.keys;
  return {
    appId: sim.appId,
    privateKey: createPrivateKey(k.merchantPrivateKeyPem!),
    mode: k.certs
      ? {
          kind: 'CERT',
          appCertPem: k.certs.appCertPem,
          alipayPublicCertPem: k.certs.alipayPublicCertPem,
          alipayRootCertPem: k.certs.alipayRootCertPem,
        }
      : { kind: 'PUBLIC_KEY', alipayPublicKey: createPublicKey(k.alipayPublicKeyPem) },
    gatewayUrl: sim.gatewayUrl,
    timeoutMs,
  };
}

export async function startAlipayHarness(simOpts: AlipaySimulatorOptions = {}, timeoutMs = 800): Promise<AlipayHarness> {
  const received: Received[] = [];
  let failing = false;
  let provider: AlipayProvider | null = null;
  const receiver = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const rawBody = Buffer.concat(chunks);
      provider!
        .parseNotification(rawBody, req.headers)
        .then(
          (parsed) => ({ parsed, error: null }),
          (err: Error) => ({ parsed: null, error: err.message }),
        )
        .then(({ parsed, error }) => {
          received.push({ rawBody, parsed, error });
          const ack = provider!.notificationAck(error === null && !failing);
          res.writeHead(ack.status, { 'content-type': ack.contentType });
          res.end(ack.body);
        });
    });
  });
  await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
  const notifyUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/api/provider/v1/notifications/alipay`;
  const closeReceiver = () =>
    new Promise<void>((r) => {
      receiver.close(() => r());
      receiver.closeAllConnections();
    });
  let sim: AlipaySimulator;
  try {
    sim = await startAlipaySimulator({
      refundSettleMs: 300,
      notifyRetryDelaysMs: [100, 200, 400],
      notifyTimeoutMs: 2000,
      holdMs: 10_000,
      ...simOpts,
    });
  } catch (err) {
    // Nothing left running when the simulator cannot start.
    await closeReceiver();
    throw err;
  }
  const config = configFor(sim, timeoutMs);
  provider = new AlipayProvider(config, { notifyUrl });
  return {
    sim,
    provider,
    config,
    notifyUrl,
    received,
    failAcks(on) {
      failing = on;
    },
    async close() {
      await sim.close();
      await closeReceiver();
    },
  };
}

/** Starts a harness before the tests of the enclosing describe and closes it after them; call the getter inside a test. */
export function useAlipayHarness(simOpts: AlipaySimulatorOptions = {}, timeoutMs?: number): () => AlipayHarness {
  let h: AlipayHarness | undefined;
  before(async () => {
    h = await startAlipayHarness(simOpts, timeoutMs);
  });
  after(() => h?.close());
  return () => h!;
}

/** An ALIPAY_H5 attempt of 10.00 yuan, 15 minutes to pay, with a return URL. */
export function attemptInput(o: Partial<CreateAttemptInput> = {}): CreateAttemptInput {
  return {
    attemptId: newId.attempt(),
    openOrderId: newId.order(),
    channel: 'ALIPAY_H5',
    amountFen: 1000,
    currency: 'CNY',
    subject: 'Alipay test',
    expireAt: new Date(Date.now() + 15 * 60_000),
    payerClientIp: '8.8.8.8',
    returnUrl: 'https://merchant.example/return',
    ...o,
  };
}
