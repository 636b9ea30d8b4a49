/**
 * Worker thread of the notification receiver (bench/lib/receiver.ts): a plain node:http server that
 * verifies every notification with the platform's public keys exactly as a merchant does (the SDK's
 * verifyNotification: headers, signature over timestamp, nonce, event id and the body's SHA-256,
 * timestamp tolerance, body eventId), answers 200 after `delayMs` (401 when verification fails, as the SDK advises a non-2xx), and
 * records each event's first acknowledgement and count (notifications.ts). Its own thread: its
 * CPU and pauses never mix with the load generator's.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { parentPort, workerData } from 'node:worker_threads';
import { NotificationVerificationError, loadPublicKeys, verifyNotification } from '@mps/sdk';
import { ArrivalLog, type EventFields } from './notifications.ts';
import type { ReceiverDump, ReceiverOptions } from './receiver.ts';

const opts = workerData as ReceiverOptions;
const keys = loadPublicKeys(opts.platformKeys);
const log = new ArrivalLog();
const rejected: Record<string, number> = {};
let requests = 0;

const server = http.createServer({ keepAliveTimeout: 75_000 }, (req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    requests++;
    let e: EventFields;
    try {
      e = verifyNotification({ headers: req.headers, rawBody: Buffer.concat(chunks), platformPublicKeys: keys }) as EventFields;
    } catch (err) {
      const code = err instanceof NotificationVerificationError ? err.reason : 'ERROR';
      rejected[code] = (rejected[code] ?? 0) + 1;
      res.writeHead(401, { 'content-type': 'text/plain' }).end(code);
      return;
    }
    const a = log.arrived(e);
    const ack = () => {
      res.writeHead(200, { 'content-length': '0' }).end();
      if (a.firstAckMs === 0) a.firstAckMs = Date.now();
    };
    if (opts.delayMs > 0) setTimeout(ack, opts.delayMs);
    else ack();
  });
});
server.listen(0, '127.0.0.1', () => {
  parentPort!.postMessage({ type: 'listening', port: (server.address() as AddressInfo).port });
});
parentPort!.on('message', (m: { type: 'dump' }) => {
  if (m.type === 'dump') parentPort!.postMessage({ type: 'dump', arrivals: log.all(), rejected, requests } satisfies ReceiverDump);
});
