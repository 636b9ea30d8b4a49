/** The benchmark's notification receiver (bench/lib/receiver.ts): verifies signatures as a merchant does. */
import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { test } from 'node:test';
import { generateTestNotificationHeaders } from '@mps/sdk';
import { Receiver } from '../lib/receiver.ts';

test('the receiver acknowledges a validly signed notification once per eventId and refuses a tampered one', async () => {
  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const keyId = 'platform-test-1';
  const receiver = await Receiver.start({
    platformKeys: { [keyId]: publicKey.export({ type: 'spki', format: 'pem' }).toString() },
    delayMs: 1,
  });
  try {
    const payload = {
      appId: 'svcop_0123456789abcdef',
      attach: null,
      eventAmountFen: 1200,
      eventId: 'evt_bench_1',
      eventType: 'PAYMENT_SUCCEEDED',
      feeProjection: null,
      grossAmountFen: 1200,
      occurredAt: new Date(Date.now() - 20).toISOString(),
      outRefundNo: null,
      outTradeNo: 'T_000001',
      reason: null,
      stateVersion: 2,
      status: 'SUCCEEDED',
    };
    const signed = generateTestNotificationHeaders({
      payload,
      keyId,
      privateKeyPem: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
    });
    const post = (body: string | Uint8Array, headers = signed.headers) => fetch(receiver.url, { method: 'POST', headers, body });
    const t0 = Date.now();
    assert.equal((await post(signed.rawBody)).status, 200);
    assert.equal((await post(signed.rawBody)).status, 200, 'a redelivery is acknowledged too');
    const tampered = String(signed.rawBody).replace('1200', '1201');
    assert.equal((await post(tampered)).status, 401);
    assert.equal((await post(signed.rawBody, { ...signed.headers, 'X-SVC-Notify-Key-Id': 'unknown' })).status, 401);
    const d = await receiver.dump();
    assert.equal(d.requests, 4);
    assert.deepEqual(d.rejected, { BAD_SIGNATURE: 1, UNKNOWN_KEY_ID: 1 });
    assert.equal(d.arrivals.length, 1);
    const a = d.arrivals[0]!;
    assert.deepEqual([a.eventId, a.key, a.count, a.stateVersion, a.outOfOrder], ['evt_bench_1', 'PAYMENT_SUCCEEDED T_000001', 2, 2, false]);
    assert.ok(a.firstAckMs >= t0 && a.firstAckMs - a.occurredAtMs >= 20, JSON.stringify(a));
  } finally {
    await receiver.stop();
  }
});
