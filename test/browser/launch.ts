/**
 * Browser tests use Debian's chromium (`apt-get install chromium fonts-noto-cjk`) through playwright-core;
 * no browser is ever downloaded. Without /usr/bin/chromium the browser suites report themselves
 * skipped, and without a CJK font the cashier's test of its Chinese text does (test/helpers/prerequisites.ts;
 * in CI both are failures).
 */
import net from 'node:net';
import { type Browser, chromium } from 'playwright-core';
import { CHROMIUM, CHROMIUM_PATH, skipUnless } from '../helpers/prerequisites.ts';

export { CHROMIUM_PATH };

const ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

/** A skip message when the browser is missing, else false (for `describe(name, { skip }, ...)`). */
export function browserSkipReason(): string | false {
  return skipUnless(CHROMIUM);
}

/** launch() gives every run a fresh temporary profile, removed on close. */
export function launchChromium(): Promise<Browser> {
  return chromium.launch({ executablePath: CHROMIUM_PATH, args: ARGS, timeout: 30_000 });
}

/** A port that was free a moment ago on 127.0.0.1 (PUBLIC_BASE_URL must be known before listening). */
export async function freePort(): Promise<number> {
  const srv = net.createServer();
  await new Promise<void>((resolve, reject) => srv.once('error', reject).listen(0, '127.0.0.1', resolve));
  const { port } = srv.address() as net.AddressInfo;
  await new Promise<void>((resolve) => srv.close(() => resolve()));
  return port;
}
