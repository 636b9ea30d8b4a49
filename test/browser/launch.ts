/**
 * Browser tests use Debian's chromium (`apt-get install chromium fonts-noto-cjk`) through playwright-core;
 * no browser is ever downloaded. Without /usr/bin/chromium the browser suites report themselves skipped;
 * without a CJK font the cashier suite fails where it checks that the Chinese text is drawn.
 */
import fs from 'node:fs';
import net from 'node:net';
import { type Browser, chromium } from 'playwright-core';

export const CHROMIUM_PATH = '/usr/bin/chromium';

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
  return fs.existsSync(CHROMIUM_PATH)
    ? false
    : `no browser at ${CHROMIUM_PATH}: install Debian's packages (apt-get install chromium fonts-noto-cjk) to run the browser tests`;
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
