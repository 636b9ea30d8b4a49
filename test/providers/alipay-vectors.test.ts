/**
 * The Alipay adapter against fixed vectors from Alipay's own documentation and official SDK test
 * data (test/providers/vectors/alipay/README.md names each source), so that its wire format is not
 * checked only against the simulator written by the same hands.
 */
import assert from 'node:assert/strict';
import { X509Certificate, createPrivateKey, createPublicKey, createVerify } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import { AlipaySdk } from 'alipay-sdk';
import { AlipayProvider } from '../../src/providers/alipay/alipay.ts';
import { fenToYuan, yuanToFen } from '../../src/providers/alipay/amount.ts';
import type { AlipayConfig } from '../../src/providers/alipay/config.ts';
import { notificationSignContent, readGatewayAnswer } from '../../src/providers/alipay/wire.ts';
import { ProviderNotificationError } from '../../src/providers/provider.ts';

const dir = path.join(import.meta.dirname, 'vectors', 'alipay');
const file = (name: string) => fs.readFileSync(path.join(dir, name), 'utf8');
const V = JSON.parse(file('vectors.json')) as {
  requestSigningString: { params: Record<string, string>; signingString: string };
  answer: { publicKeyFile: string; method: string; raw: string; signedText: string };
  notification: { publicKeyFile: string; appId: string; params: [string, string][]; parsed: object };
  foreignNotification: { appId: string; params: [string, string][] };
  certSns: { appCertFile: string; appCertSn: string; alipayPublicCertFile: string; alipayCertSn: string; alipayPublicKey: string };
  amounts: { pairs: [string, number][] };
};

const appPrivateKeyPem = file('app-private-key.pem');
const appPublicKeyPem = file('app-public-key.pem');

/** The public key Alipay's open platform shows (bare Base64 SPKI) as a KeyObject. */
function bareKey(b64: string) {
  return createPublicKey({ key: Buffer.from(b64.trim(), 'base64'), format: 'der', type: 'spki' });
}

function provider(appId: string, alipayPublicKey: ReturnType<typeof bareKey>): AlipayProvider {
  const config: AlipayConfig = {
    appId,
    privateKey: createPrivateKey(appPrivateKeyPem),
    mode: { kind: 'PUBLIC_KEY', alipayPublicKey },
    gatewayUrl: 'http://127.0.0.1:9/gateway.do',
    timeoutMs: 1000,
  };
  return new AlipayProvider(config, { notifyUrl: 'https://merchant.example/api/provider/v1/notifications/alipay' });
}

function form(params: [string, string][]): Buffer {
  return Buffer.from(new URLSearchParams(params).toString());
}

describe('Alipay vectors: request signing (Alipay open platform, 自行实现签名)', () => {
  const { params, signingString } = V.requestSigningString;

  test("the SDK's signature of the documented request covers the documented signing string", () => {
    // The SDK signs what the adapter sends: its signature must verify over the documented string
    // (sorted names, sign left out, sign_type kept, biz_content as sent) with the published key pair.
    const sdk = new AlipaySdk({ appId: params.app_id!, privateKey: appPrivateKeyPem, signType: 'RSA2', camelcase: false });
    const signed = new URLSearchParams(
      sdk.sdkExecute(
        params.method!,
        { bizContent: JSON.parse(params.biz_content!) as Record<string, unknown>, timestamp: params.timestamp, charset: params.charset },
        { bizContentAutoSnakeCase: false },
      ),
    );
    for (const [k, v] of Object.entries(params)) assert.equal(signed.get(k), v, k);
    const ok = createVerify('RSA-SHA256').update(signingString, 'utf8').verify(appPublicKeyPem, signed.get('sign')!, 'base64');
    assert.ok(ok, 'the signature verifies over the documented signing string');
  });

  test("the simulator's rule (and a notification's, less sign_type) builds the documented string", () => {
    const withoutSignType = signingString.replace('&sign_type=RSA2', '');
    assert.equal(notificationSignContent(new Map(Object.entries({ ...params, sign: 'x', empty: '' }))), withoutSignType);
  });
});

describe("Alipay vectors: a gateway answer (Alipay's sandbox, from the official Node.js SDK's tests)", () => {
  const key = createPublicKey(file(V.answer.publicKeyFile));
  const verify = (text: string, sign: string) => createVerify('RSA-SHA256').update(text, 'utf8').verify(key, sign, 'base64');

  test('the signed text is the response member as sent, and the signature verifies', () => {
    const seen: string[] = [];
    const a = readGatewayAnswer(
      Buffer.from(V.answer.raw),
      V.answer.method,
      (text, sign) => {
        seen.push(text);
        return verify(text, sign);
      },
      null,
    );
    assert.deepEqual(seen, [V.answer.signedText]);
    assert.ok(a.ok);
    assert.equal(a.code, '10000');
    assert.equal(a.body.file_id, 'CAxAToWB1JsAAAAAAAAAAAAADgSLAQBr');
  });

  test('the same answer with one character of its content changed does not verify', () => {
    const a = readGatewayAnswer(Buffer.from(V.answer.raw.replace('"Success"', '"success"')), V.answer.method, verify, null);
    assert.deepEqual(a, { ok: false, reason: "the answer's signature does not verify" });
  });
});

describe('Alipay vectors: a notification Alipay sent (from the official Node.js SDK tests)', () => {
  const p = provider(V.notification.appId, bareKey(file(V.notification.publicKeyFile)));

  test('verified and read: a PAYMENT PAID of 10 fen, trade_no as the provider reference', async () => {
    assert.deepEqual(await p.parseNotification(form(V.notification.params), {}), V.notification.parsed);
  });

  test('the same notice with its amount changed is refused', async () => {
    const tampered = V.notification.params.map(([k, v]): [string, string] => [k, k === 'total_amount' ? '100.00' : v]);
    await assert.rejects(() => p.parseNotification(form(tampered), {}), /bad signature/);
  });

  test("a notice of another app, signed with another key, does not verify with this app's key", async () => {
    const other = provider(V.foreignNotification.appId, bareKey(file(V.notification.publicKeyFile)));
    await assert.rejects(() => other.parseNotification(form(V.foreignNotification.params), {}), ProviderNotificationError);
  });
});

describe('Alipay vectors: certificate SNs (official Node.js SDK tests)', () => {
  const c = V.certSns;
  const appCertPem = file(c.appCertFile);
  const alipayPublicCertPem = file(c.alipayPublicCertFile);

  test('app certificate SN and Alipay public certificate SN as the SDK computes them for requests and answers', () => {
    // The root SN vector's certificate file is not among the committed vectors (see the README):
    // the two certificates above stand in for a two-certificate root file, whose SN is the RSA
    // certificates' SNs joined by `_` (the official SDKs' rule).
    const p = new AlipayProvider(
      {
        appId: '2021001161683774',
        privateKey: createPrivateKey(appPrivateKeyPem),
        mode: { kind: 'CERT', appCertPem, alipayPublicCertPem, alipayRootCertPem: `${appCertPem}\n${alipayPublicCertPem}` },
        gatewayUrl: 'http://127.0.0.1:9/gateway.do',
        timeoutMs: 1000,
      },
      { notifyUrl: 'https://merchant.example/n' },
    );
    assert.deepEqual(p.certSns, {
      appCertSn: c.appCertSn,
      alipayCertSn: c.alipayCertSn,
      alipayRootCertSn: `${c.appCertSn}_${c.alipayCertSn}`,
    });
  });

  test("Alipay's public key is the one the certificate holds", () => {
    const der = new X509Certificate(alipayPublicCertPem).publicKey.export({ type: 'spki', format: 'der' });
    assert.equal(der.toString('base64'), c.alipayPublicKey);
  });
});

describe("Alipay vectors: amounts (Alipay's documented range and examples)", () => {
  for (const [yuan, fen] of V.amounts.pairs) {
    test(`"${yuan}" <-> ${fen}`, () => {
      assert.equal(yuanToFen(yuan), fen);
      assert.equal(fenToYuan(fen), yuan);
    });
  }
});
