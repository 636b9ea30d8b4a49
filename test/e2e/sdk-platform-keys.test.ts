/**
 * A merchant using the SDK survives platform key rotations without doing anything
 * (docs/authentication.md, "Platform keys"): the client is given only the first platform key (as
 * the portal shows it), the platform rotates its key at once, several times, and the client keeps
 * verifying answers and notifications, having learnt each new key from the signed platform-keys
 * read through the chain of endorsements. A listing that is unsigned, or whose new key is endorsed
 * by no trusted key, or that swaps a trusted key's PEM, teaches it nothing. The read itself is an
 * open-API operation like the others: signed, in the gate's order.
 */
import assert from 'node:assert/strict';
import { generateKeyPairSync, sign } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import {
  PaymentClient,
  ResponseSignatureError,
  type Transport,
  generateTestNotificationHeaders,
  keyEndorsementSigningString,
  verifyResponseSignature,
} from '@mps/sdk';
import { type Merchant, type TestApp, call, orderBody, provision, startTestApp } from '../helpers/app.ts';

let t: TestApp;
let shop: Merchant;
let first: Record<string, string>;

/** The SDK's transport through the service's inject (no socket needed), optionally rewriting answers. */
function transport(rewrite?: (url: string, r: { status: number; headers: Record<string, string>; body: Buffer }) => void): Transport {
  return async (req) => {
    const u = new URL(req.url);
    const r = await t.server.inject({
      method: req.method as 'GET',
      url: u.pathname + u.search,
      headers: req.headers,
      payload: req.body,
    });
    const out = {
      status: r.statusCode,
      headers: Object.fromEntries(Object.entries(r.headers).map(([k, v]) => [k, String(v)])),
      body: r.rawPayload,
    };
    rewrite?.(u.pathname, out);
    return out;
  };
}

function client(o: { rewrite?: Parameters<typeof transport>[0]; onChange?: (k: Record<string, string>) => void } = {}) {
  return new PaymentClient({
    baseUrl: 'https://pay.example.test',
    appId: shop.appId,
    keyId: shop.keyId,
    privateKeyPem: shop.privateKeyPem,
    platformPublicKeys: first,
    requireSignedSuccess: true,
    transport: transport(o.rewrite),
    onPlatformKeysChange: o.onChange,
    // The rotations of this test are a moment apart, not the minute the client waits by default between two reads.
    minKeyRefreshIntervalMs: 0,
  });
}

const rotateNow = async () => {
  const r = await t.admin('POST', '/platform-keys/rotate', { activateAfterSeconds: 0 });
  assert.equal(r.statusCode, 201, r.body);
  return r.json().keyId as string;
};

before(async () => {
  t = await startTestApp();
  shop = await provision(t, { name: 'SDK Shop' });
  const k = (await t.admin('GET', '/platform-keys')).json();
  first = Object.fromEntries((k.keys as { keyId: string; publicKeyPem: string }[]).map((x) => [x.keyId, x.publicKeyPem]));
  assert.equal(Object.keys(first).length, 1);
});
after(async () => {
  await t?.stop();
});

describe('the platform-keys read', () => {
  test('is signed like every open answer, lists current and next with their validity, each key endorsed by the one before', async () => {
    const staged = await t.admin('POST', '/platform-keys/rotate', { activateAfterSeconds: 3600 });
    assert.equal(staged.statusCode, 201);
    const r = await call(t, shop, 'GET', '/api/open/v1/platform-keys');
    assert.equal(r.statusCode, 200, r.body);
    const b = r.json();
    const v = verifyResponseSignature({
      status: 200,
      headers: r.headers as Record<string, string>,
      body: r.rawPayload,
      platformPublicKeys: first,
      expectedRequestId: b.requestId,
    });
    assert.equal(v.signed, true);
    assert.equal(b.currentKeyId, Object.keys(first)[0]);
    assert.equal(b.nextKeyId, staged.json().keyId);
    const [cur, next] = b.keys;
    assert.equal(cur.state, 'CURRENT');
    assert.equal(cur.endorsement, null);
    assert.equal(next.state, 'NEXT');
    assert.equal(next.signsFrom, staged.json().activatesAt);
    assert.equal(cur.signsUntil, staged.json().activatesAt);
    const ok = (await import('node:crypto')).verify(
      'sha256',
      Buffer.from(keyEndorsementSigningString({ keyId: next.keyId, publicKeyPem: next.publicKeyPem })),
      first[cur.keyId]!,
      Buffer.from(next.endorsement.signature, 'base64'),
    );
    assert.equal(ok, true);
    // Without a signature, the gate answers it as any other operation.
    const unsigned = await t.server.inject({ method: 'GET', url: '/api/open/v1/platform-keys' });
    assert.equal(unsigned.statusCode, 400);
    assert.equal(unsigned.json().code, 'OPEN_API_HEADER_INVALID');
    // A method it does not take: the platform envelope.
    assert.equal((await call(t, shop, 'POST', '/api/open/v1/platform-keys', {})).statusCode, 405);
  });
});

describe('the SDK across rotations', () => {
  test('learns each new key by itself and keeps verifying answers and notifications', async () => {
    const learnt: Record<string, string>[] = [];
    const c = client({ onChange: (k) => learnt.push(k) });
    const created = await c.createOrder(orderBody() as never);
    assert.equal(created.signatureVerified, true);
    const second = await rotateNow();
    const q1 = await c.queryOrder(created.body.outTradeNo);
    assert.equal(q1.signatureVerified, true);
    assert.ok(second in c.platformPublicKeys);
    // Away across two rotations: caught up link by link.
    const third = await rotateNow();
    const fourth = await rotateNow();
    const q2 = await c.queryOrder(created.body.outTradeNo);
    assert.equal(q2.signatureVerified, true);
    assert.ok(third in c.platformPublicKeys && fourth in c.platformPublicKeys);
    assert.ok(learnt.length >= 2);
    assert.ok(fourth in learnt.at(-1)!);

    // A notification signed with a key the client does not know yet: learnt, then verified.
    const fifth = await rotateNow();
    const ring = (t.svc.keys as unknown as { current: { keyId: string; privateKey: import('node:crypto').KeyObject } }).current;
    assert.equal(ring.keyId, fifth);
    const n = generateTestNotificationHeaders({ payload: { eventId: 'evt_0123456789' }, keyId: fifth, privateKeyPem: ring.privateKey });
    const c2 = client();
    const payload = await c2.verifyNotification({ headers: n.headers, rawBody: n.rawBody });
    assert.equal(payload.eventId, 'evt_0123456789');
    assert.ok(fifth in c2.platformPublicKeys);
  });

  test('an unsigned listing, a key endorsed by no trusted key, a swapped PEM: nothing learnt', async () => {
    await rotateNow();
    // Unsigned: the four signature headers removed from the listing's answer.
    const unsigned = client({
      rewrite: (p, r) => {
        if (!p.endsWith('/platform-keys')) return;
        for (const h of Object.keys(r.headers)) if (h.startsWith('x-svc-response-')) delete r.headers[h];
      },
    });
    await assert.rejects(unsigned.refreshPlatformKeys(), ResponseSignatureError);
    assert.deepEqual(Object.keys(unsigned.platformPublicKeys), Object.keys(first));

    // A planted key, endorsed by an attacker's key, and a trusted id given another PEM.
    const attacker = generateKeyPairSync('rsa', { modulusLength: 2048 });
    const planted = generateKeyPairSync('rsa', { modulusLength: 2048 }).publicKey.export({ type: 'spki', format: 'pem' }).toString();
    const forged = client({
      rewrite: (p, r) => {
        if (!p.endsWith('/platform-keys')) return;
        const b = JSON.parse(r.body.toString());
        b.keys.push({
          keyId: 'pk_planted',
          publicKeyPem: planted,
          state: 'NEXT',
          signsFrom: null,
          signsUntil: null,
          endorsement: {
            keyId: 'pk_attacker',
            signature: sign(
              'sha256',
              Buffer.from(keyEndorsementSigningString({ keyId: 'pk_planted', publicKeyPem: planted })),
              attacker.privateKey,
            ).toString('base64'),
          },
        });
        b.keys[0].publicKeyPem = planted;
        r.body = Buffer.from(JSON.stringify(b));
      },
    });
    // The body no longer matches its signature: refused whole.
    await assert.rejects(forged.refreshPlatformKeys(), ResponseSignatureError);
    assert.deepEqual(Object.keys(forged.platformPublicKeys), Object.keys(first));
  });
});
