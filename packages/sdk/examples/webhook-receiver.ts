#!/usr/bin/env node
/**
 * A minimal merchant webhook receiver: verifies each notification with the platform keys and
 * acknowledges with 204. Run: npx node packages/sdk/examples/webhook-receiver.ts [port] (Node >= 22.18)
 * Uses MPS_PLATFORM_KEYS_FILE (the JSON written by `npm run ops -- provision`).
 */
import fs from 'node:fs';
import http from 'node:http';
import { parsePlatformKeysJson, verifyNotification } from '@mps/sdk';

const port = Number(process.argv[2] ?? 9000);
const keysFile = process.env.MPS_PLATFORM_KEYS_FILE;
if (!keysFile) {
  process.stderr.write('set MPS_PLATFORM_KEYS_FILE (see merchant.env)\n');
  process.exit(2);
}
const platformPublicKeys = parsePlatformKeysJson(fs.readFileSync(keysFile, 'utf8'));
const seen = new Set<string>();

http
  .createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      try {
        const event = verifyNotification({ headers: req.headers, rawBody: Buffer.concat(chunks), platformPublicKeys });
        // Delivery is at least once: de-duplicate by eventId, order by stateVersion.
        if (!seen.has(event.eventId)) {
          seen.add(event.eventId);
          process.stdout.write(
            `verified ${event.eventType} ${event.outTradeNo} stateVersion=${event.stateVersion} ${JSON.stringify(event)}\n`,
          );
        }
        res.writeHead(204).end();
      } catch (err) {
        process.stdout.write(`rejected notification: ${(err as Error).message}\n`);
        res.writeHead(400).end();
      }
    });
  })
  .listen(port, '127.0.0.1', () => process.stdout.write(`receiver listening on http://127.0.0.1:${port}/hook\n`));
