/**
 * alipayConfigFromEnv: nothing while ALIPAY_APP_ID is unset; otherwise a complete, usable
 * configuration or a ConfigError naming the variable, never quoting key material.
 */
import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import { ConfigError } from '../../src/config/config.ts';
import { ALIPAY_DEFAULT_TIMEOUT_MS, ALIPAY_PRODUCTION_GATEWAY, alipayConfigFromEnv } from '../../src/providers/alipay/config.ts';
import { makeCertSet } from '../../simulators/alipay/certs.ts';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'alipay-config-'));
after(() => fs.rmSync(dir, { recursive: true, force: true }));

function write(name: string, content: string | Buffer, mode = 0o600): string {
  const f = path.join(dir, name);
  fs.writeFileSync(f, content, { mode });
  fs.chmodSync(f, mode);
  return f;
}

const app = generateKeyPairSync('rsa', { modulusLength: 2048 });
const alipay = generateKeyPairSync('rsa', { modulusLength: 2048 });
const appPkcs1 = app.privateKey.export({ type: 'pkcs1', format: 'pem' }).toString();
const appPkcs8 = app.privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
const alipaySpki = alipay.publicKey.export({ type: 'spki', format: 'pem' }).toString();
const files = {
  private: write('app-private.pem', appPkcs1),
  privatePkcs8: write('app-private-pkcs8.pem', appPkcs8),
  // Alipay's key tool writes the Base64 of the DER, without a PEM wrapper.
  privateBare: write('app-private.txt', app.privateKey.export({ type: 'pkcs8', format: 'der' }).toString('base64')),
  public: write('alipay-public.pem', alipaySpki, 0o644),
  publicBare: write('alipay-public.txt', alipay.publicKey.export({ type: 'spki', format: 'der' }).toString('base64'), 0o644),
};
const certs = makeCertSet('2021000000000001', app.privateKey, alipay.privateKey);
const certFiles = {
  ALIPAY_APP_CERT_FILE: write('appCertPublicKey.crt', certs.app.pem, 0o644),
  ALIPAY_PUBLIC_CERT_FILE: write('alipayCertPublicKey_RSA2.crt', certs.alipay.pem, 0o644),
  ALIPAY_ROOT_CERT_FILE: write('alipayRootCert.crt', certs.root.pem, 0o644),
};

const base = { ALIPAY_APP_ID: '2021000000000001', ALIPAY_PRIVATE_KEY_FILE: files.private, ALIPAY_PUBLIC_KEY_FILE: files.public };

function refused(env: Record<string, string | undefined>, pattern: RegExp): void {
  assert.throws(
    () => alipayConfigFromEnv(env),
    (e: unknown) => {
      assert.ok(e instanceof ConfigError, String(e));
      assert.match(e.message, pattern);
      // No key material in a message: no PEM armour, no long Base64 run.
      assert.doesNotMatch(e.message, /-----BEGIN|[A-Za-z0-9+/]{40,}/);
      return true;
    },
  );
}

describe('alipayConfigFromEnv', () => {
  test('null while ALIPAY_APP_ID is unset (or empty), whatever else is set', () => {
    assert.equal(alipayConfigFromEnv({}), null);
    assert.equal(alipayConfigFromEnv({ ALIPAY_APP_ID: '', ALIPAY_PRIVATE_KEY_FILE: '/nope' }), null);
  });

  test('public-key mode with the defaults: production gateway, 5 s', () => {
    const c = alipayConfigFromEnv(base)!;
    assert.equal(c.appId, '2021000000000001');
    assert.equal(c.mode.kind, 'PUBLIC_KEY');
    assert.equal(c.gatewayUrl, ALIPAY_PRODUCTION_GATEWAY);
    assert.equal(c.timeoutMs, ALIPAY_DEFAULT_TIMEOUT_MS);
    assert.equal(c.privateKey.type, 'private');
    assert.doesNotMatch(JSON.stringify(c) + String(c.privateKey), /PRIVATE KEY|MII/, 'the private key does not print');
  });

  test('keys as PKCS#1 or PKCS#8 PEM, or the bare Base64 of Alipay’s key tool', () => {
    for (const f of [files.private, files.privatePkcs8, files.privateBare]) {
      assert.equal(alipayConfigFromEnv({ ...base, ALIPAY_PRIVATE_KEY_FILE: f })!.privateKey.asymmetricKeyType, 'rsa');
    }
    assert.equal(alipayConfigFromEnv({ ...base, ALIPAY_PUBLIC_KEY_FILE: files.publicBare })!.mode.kind, 'PUBLIC_KEY');
  });

  test('certificate mode: all three certificates', () => {
    const c = alipayConfigFromEnv({ ALIPAY_APP_ID: '2021000000000001', ALIPAY_PRIVATE_KEY_FILE: files.private, ...certFiles })!;
    assert.equal(c.mode.kind, 'CERT');
  });

  test('gateway, sandbox or simulator URLs, and the timeout', () => {
    const c = alipayConfigFromEnv({
      ...base,
      ALIPAY_GATEWAY_URL: 'https://openapi-sandbox.dl.alipaydev.com/gateway.do',
      ALIPAY_TIMEOUT_MS: '2500',
    })!;
    assert.equal(c.gatewayUrl, 'https://openapi-sandbox.dl.alipaydev.com/gateway.do');
    assert.equal(c.timeoutMs, 2500);
    assert.equal(
      alipayConfigFromEnv({ ...base, ALIPAY_GATEWAY_URL: 'http://127.0.0.1:8090/gateway.do' })!.gatewayUrl,
      'http://127.0.0.1:8090/gateway.do',
    );
    assert.equal(
      alipayConfigFromEnv({ ...base, ALIPAY_GATEWAY_URL: 'http://localhost:8090/gateway.do' })!.gatewayUrl,
      'http://localhost:8090/gateway.do',
    );
  });

  test('refused, naming the variable', () => {
    refused({ ...base, ALIPAY_APP_ID: 'app-1' }, /^ALIPAY_APP_ID/);
    refused({ ...base, ALIPAY_PRIVATE_KEY_FILE: undefined }, /^ALIPAY_PRIVATE_KEY_FILE must name/);
    refused({ ...base, ALIPAY_PRIVATE_KEY_FILE: path.join(dir, 'missing.pem') }, /^ALIPAY_PRIVATE_KEY_FILE: the file .* cannot be read/);
    refused(
      { ...base, ALIPAY_PRIVATE_KEY_FILE: write('world-readable.pem', appPkcs1, 0o644) },
      /^ALIPAY_PRIVATE_KEY_FILE: .* readable by group or others/,
    );
    refused(
      {
        ...base,
        ALIPAY_PRIVATE_KEY_FILE: write('garbage.pem', '-----BEGIN RSA PRIVATE KEY-----\nMIIBroken\n-----END RSA PRIVATE KEY-----\n'),
      },
      /^ALIPAY_PRIVATE_KEY_FILE: the file does not hold/,
    );
    refused(
      { ...base, ALIPAY_PRIVATE_KEY_FILE: write('public-as-private.pem', alipaySpki) },
      /^ALIPAY_PRIVATE_KEY_FILE: the file does not hold/,
    );
    const encrypted = app.privateKey.export({ type: 'pkcs8', format: 'pem', cipher: 'aes-256-cbc', passphrase: 'p' }).toString();
    refused(
      { ...base, ALIPAY_PRIVATE_KEY_FILE: write('encrypted.pem', encrypted) },
      /^ALIPAY_PRIVATE_KEY_FILE: the file does not hold an unencrypted/,
    );
    const small = generateKeyPairSync('rsa', { modulusLength: 1024 }).privateKey.export({ type: 'pkcs1', format: 'pem' }).toString();
    refused({ ...base, ALIPAY_PRIVATE_KEY_FILE: write('small.pem', small) }, /^ALIPAY_PRIVATE_KEY_FILE: the RSA key has 1024 bits/);
    const ec = generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
    refused({ ...base, ALIPAY_PRIVATE_KEY_FILE: write('ec.pem', ec) }, /^ALIPAY_PRIVATE_KEY_FILE: the key is not an RSA key/);
    refused(
      { ...base, ALIPAY_PUBLIC_KEY_FILE: write('private-as-public.pem', appPkcs1, 0o644) },
      /^ALIPAY_PUBLIC_KEY_FILE: the file does not hold a public key/,
    );
  });

  test('a mode half given, or both modes, is refused naming the variables', () => {
    refused({ ...base, ALIPAY_PUBLIC_KEY_FILE: undefined }, /ALIPAY_PUBLIC_KEY_FILE \(public-key mode\) or ALIPAY_APP_CERT_FILE/);
    refused({ ...base, ALIPAY_APP_CERT_FILE: certFiles.ALIPAY_APP_CERT_FILE }, /both set/);
    const half = {
      ALIPAY_APP_ID: '2021000000000001',
      ALIPAY_PRIVATE_KEY_FILE: files.private,
      ALIPAY_APP_CERT_FILE: certFiles.ALIPAY_APP_CERT_FILE,
    };
    refused(half, /^ALIPAY_PUBLIC_CERT_FILE must be set too/);
    refused({ ...half, ALIPAY_PUBLIC_CERT_FILE: certFiles.ALIPAY_PUBLIC_CERT_FILE }, /^ALIPAY_ROOT_CERT_FILE must be set too/);
  });

  test('certificate mode: unusable certificates are refused naming the variable', () => {
    const env = { ALIPAY_APP_ID: '2021000000000001', ALIPAY_PRIVATE_KEY_FILE: files.private, ...certFiles };
    const other = makeCertSet('2021000000000001', alipay.privateKey, alipay.privateKey);
    refused(
      { ...env, ALIPAY_APP_CERT_FILE: write('other-app.crt', other.app.pem, 0o644) },
      /^ALIPAY_APP_CERT_FILE: the certificate is not the one of the key/,
    );
    refused(
      { ...env, ALIPAY_PUBLIC_CERT_FILE: write('not-a-cert.crt', alipaySpki, 0o644) },
      /^ALIPAY_PUBLIC_CERT_FILE: the file holds no PEM certificate/,
    );
    refused(
      { ...env, ALIPAY_ROOT_CERT_FILE: write('broken.crt', '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n', 0o644) },
      /^ALIPAY_ROOT_CERT_FILE: a certificate in the file does not parse/,
    );
  });

  test('gateway URL and timeout out of form', () => {
    refused({ ...base, ALIPAY_GATEWAY_URL: 'not a url' }, /^ALIPAY_GATEWAY_URL must be a URL/);
    refused({ ...base, ALIPAY_GATEWAY_URL: 'http://gateway.example/gateway.do' }, /^ALIPAY_GATEWAY_URL must use https/);
    refused({ ...base, ALIPAY_GATEWAY_URL: 'ftp://127.0.0.1/gateway.do' }, /^ALIPAY_GATEWAY_URL must use https/);
    refused(
      { ...base, ALIPAY_GATEWAY_URL: 'https://user:secret@openapi.alipay.com/gateway.do' },
      /^ALIPAY_GATEWAY_URL must have no user info/,
    );
    refused({ ...base, ALIPAY_TIMEOUT_MS: '50' }, /^ALIPAY_TIMEOUT_MS must be an integer from 100 to 60000/);
    refused({ ...base, ALIPAY_TIMEOUT_MS: '5s' }, /^ALIPAY_TIMEOUT_MS/);
  });
});
