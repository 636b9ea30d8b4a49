/**
 * Worker thread of the signing pool: signs batches of requests (decisions.md section 1) with the
 * key of each request's app, each with its own timestamp, nonce and signature.
 */
import { createPrivateKey, randomBytes, sign } from 'node:crypto';
import { parentPort, workerData } from 'node:worker_threads';
import { requestSigningString } from '@mps/sdk/signing';
import type { Credentials, SignBatch, SignedBatch } from './corpus.ts';

const creds = (workerData as Credentials[]).map((c) => ({ ...c, key: createPrivateKey(c.privateKeyPem) }));
const byApp = new Map(creds.map((c) => [c.appId, c]));

parentPort!.on('message', (batch: SignBatch) => {
  const headers: Record<string, string>[] = [];
  let minTs = Infinity;
  for (const s of batch.specs) {
    const { appId, keyId, key } = (s.appId === undefined ? undefined : byApp.get(s.appId)) ?? creds[0]!;
    const timestamp = Math.floor(Date.now() / 1000);
    if (timestamp < minTs) minTs = timestamp;
    const nonce = randomBytes(16).toString('hex');
    const contentType = s.method === 'POST' ? 'application/json' : undefined;
    const str = requestSigningString({
      method: s.method,
      target: s.path,
      appId,
      keyId,
      timestamp: String(timestamp),
      nonce,
      requestId: s.requestId,
      contentType,
      body: s.body,
    });
    const h: Record<string, string> = {
      'X-SVC-App-Id': appId,
      'X-SVC-Key-Id': keyId,
      'X-SVC-Timestamp': String(timestamp),
      'X-SVC-Nonce': nonce,
      'X-SVC-Request-Id': s.requestId,
      'X-SVC-Sign': sign('sha256', Buffer.from(str, 'utf8'), key).toString('base64'),
    };
    if (contentType !== undefined) h['Content-Type'] = contentType;
    if (s.method === 'POST' && s.body === '') h['Content-Length'] = '0';
    headers.push(h);
  }
  const out: SignedBatch = { id: batch.id, headers, minTs };
  parentPort!.postMessage(out);
});
