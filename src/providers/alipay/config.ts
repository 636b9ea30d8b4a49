/**
 * Alipay's configuration from the environment (docs/providers-alipay.md, "Configuration"). Nothing is
 * configured while ALIPAY_APP_ID is unset. Otherwise everything is read and checked here, at
 * start, and a partial or unusable configuration is refused with a ConfigError naming the
 * variable. Key material never appears in a message: a key that does not parse is named by its
 * variable only, and the private key is kept as a KeyObject (which prints no material).
 */
import { type KeyObject, X509Certificate, createPrivateKey, createPublicKey } from 'node:crypto';
import { ConfigError, withoutPassword } from '../../config/config.ts';
import { readPublicFile, readSecretFile } from '../secret-file.ts';

export const ALIPAY_PRODUCTION_GATEWAY = 'https://openapi.alipay.com/gateway.do';
/** Alipay's own sandbox environment (a developer account's test app). */
export const ALIPAY_SANDBOX_GATEWAY = 'https://openapi-sandbox.dl.alipaydev.com/gateway.do';
export const ALIPAY_DEFAULT_TIMEOUT_MS = 5000;

/** Public-key mode: Alipay's answers and notifications are verified with Alipay's public key. */
export interface AlipayPublicKeyMode {
  kind: 'PUBLIC_KEY';
  alipayPublicKey: KeyObject;
}

/**
 * Certificate mode: requests carry the SNs of our app certificate and of Alipay's root
 * certificate; answers and notifications are verified with the key of Alipay's public certificate.
 * The PEM texts are kept as read (certificates are public).
 */
export interface AlipayCertMode {
  kind: 'CERT';
  appCertPem: string;
  alipayPublicCertPem: string;
  alipayRootCertPem: string;
}

export interface AlipayConfig {
  /** The app id Alipay gave the merchant's application (digits). */
  appId: string;
  /** The app's RSA private key (2048 bits or more); requests are signed RSA2 (SHA256withRSA). */
  privateKey: KeyObject;
  mode: AlipayPublicKeyMode | AlipayCertMode;
  /** Alipay's gateway.do: production by default; Alipay's sandbox or a local simulator are other URLs. */
  gatewayUrl: string;
  /** One deadline for a whole gateway call (connect, request, answer). */
  timeoutMs: number;
}

type Env = Record<string, string | undefined>;

/** A variable's value; unset and empty are the same. */
const str = (env: Env, name: string): string | undefined => env[name] || undefined;

const CERT_VARS = ['ALIPAY_APP_CERT_FILE', 'ALIPAY_PUBLIC_CERT_FILE', 'ALIPAY_ROOT_CERT_FILE'] as const;

/** The configuration, null when ALIPAY_APP_ID is unset; throws ConfigError naming the variable. */
export function alipayConfigFromEnv(env: Env): AlipayConfig | null {
  const appId = str(env, 'ALIPAY_APP_ID');
  if (appId === undefined) return null;
  if (!/^[0-9]{1,32}$/.test(appId)) throw new ConfigError(`ALIPAY_APP_ID must be the app id Alipay gave the application (digits)`);

  const privateFile = str(env, 'ALIPAY_PRIVATE_KEY_FILE');
  if (privateFile === undefined) throw new ConfigError('ALIPAY_PRIVATE_KEY_FILE must name the file of the app private key');
  const privateKey = parsePrivateKey(readSecretFile('ALIPAY_PRIVATE_KEY_FILE', privateFile));

  const publicFile = str(env, 'ALIPAY_PUBLIC_KEY_FILE');
  const certFiles = CERT_VARS.map((name) => [name, str(env, name)] as const);
  const certGiven = certFiles.filter(([, v]) => v !== undefined);
  let mode: AlipayConfig['mode'];
  if (publicFile !== undefined) {
    if (certGiven.length > 0) {
      throw new ConfigError(
        `ALIPAY_PUBLIC_KEY_FILE (public-key mode) and ${certGiven.map(([n]) => n).join(', ')} (certificate mode) are both set; set one mode`,
      );
    }
    mode = { kind: 'PUBLIC_KEY', alipayPublicKey: parsePublicKey(readPublicFile('ALIPAY_PUBLIC_KEY_FILE', publicFile)) };
  } else if (certGiven.length > 0) {
    const missing = certFiles.find(([, v]) => v === undefined);
    if (missing) throw new ConfigError(`${missing[0]} must be set too: certificate mode needs ${CERT_VARS.join(', ')}`);
    const [appCertPem, alipayPublicCertPem, alipayRootCertPem] = certFiles.map(([name, file]) =>
      readPublicFile(name, file!).toString('utf8'),
    );
    mode = certMode(privateKey, appCertPem!, alipayPublicCertPem!, alipayRootCertPem!);
  } else {
    throw new ConfigError(`ALIPAY_PUBLIC_KEY_FILE (public-key mode) or ${CERT_VARS.join(' + ')} (certificate mode) must be set`);
  }

  return { appId, privateKey, mode, gatewayUrl: gatewayUrl(env), timeoutMs: timeoutMs(env) };
}

/** PEM (PKCS#1 or PKCS#8), or the bare Base64 of Alipay's key tool; RSA, at least 2048 bits, not encrypted. */
function parsePrivateKey(content: Buffer): KeyObject {
  const name = 'ALIPAY_PRIVATE_KEY_FILE';
  const key = parseKey(content, 'private');
  if (!key) throw new ConfigError(`${name}: the file does not hold an unencrypted private key (PEM, or the Base64 of Alipay's key tool)`);
  checkRsa(name, key);
  return key;
}

/** PEM (SPKI or PKCS#1), or bare Base64 as Alipay's open platform shows it; RSA, at least 2048 bits. */
function parsePublicKey(content: Buffer): KeyObject {
  const name = 'ALIPAY_PUBLIC_KEY_FILE';
  const key = parseKey(content, 'public');
  if (!key) throw new ConfigError(`${name}: the file does not hold a public key (PEM, or the Base64 Alipay's open platform shows)`);
  checkRsa(name, key);
  return key;
}

function parseKey(content: Buffer, kind: 'private' | 'public'): KeyObject | null {
  const text = content.toString('utf8').trim();
  const create = (key: string | Buffer, format: 'pem' | 'der', type?: 'pkcs8' | 'pkcs1' | 'spki'): KeyObject =>
    kind === 'private'
      ? createPrivateKey({ key, format, type: type as 'pkcs8' | 'pkcs1' | undefined })
      : createPublicKey({ key, format, type: type as 'spki' | 'pkcs1' | undefined });
  if (text.startsWith('-----BEGIN')) {
    // createPublicKey would take a private key too (and derive its public half): not Alipay's key.
    if (kind === 'public' && text.includes('PRIVATE KEY')) return null;
    try {
      return create(text, 'pem');
    } catch {
      return null;
    }
  }
  if (!/^[A-Za-z0-9+/\s]+={0,2}$/.test(text)) return null;
  const der = Buffer.from(text.replace(/\s+/g, ''), 'base64');
  for (const type of kind === 'private' ? (['pkcs8', 'pkcs1'] as const) : (['spki', 'pkcs1'] as const)) {
    try {
      return create(der, 'der', type);
    } catch {
      // the next encoding
    }
  }
  return null;
}

function checkRsa(name: string, key: KeyObject): void {
  if (key.asymmetricKeyType !== 'rsa') throw new ConfigError(`${name}: the key is not an RSA key (Alipay's RSA2 needs one)`);
  const bits = key.asymmetricKeyDetails?.modulusLength ?? 0;
  if (bits < 2048) throw new ConfigError(`${name}: the RSA key has ${bits} bits; Alipay's RSA2 needs 2048 or more`);
}

function certMode(privateKey: KeyObject, appCertPem: string, alipayPublicCertPem: string, alipayRootCertPem: string): AlipayCertMode {
  const appCert = parseCerts('ALIPAY_APP_CERT_FILE', appCertPem)[0]!;
  const ours = createPublicKey(privateKey).export({ type: 'spki', format: 'der' });
  if (!appCert.publicKey.export({ type: 'spki', format: 'der' }).equals(ours)) {
    throw new ConfigError('ALIPAY_APP_CERT_FILE: the certificate is not the one of the key in ALIPAY_PRIVATE_KEY_FILE');
  }
  const alipayCert = parseCerts('ALIPAY_PUBLIC_CERT_FILE', alipayPublicCertPem)[0]!;
  checkRsa('ALIPAY_PUBLIC_CERT_FILE', alipayCert.publicKey);
  const roots = parseCerts('ALIPAY_ROOT_CERT_FILE', alipayRootCertPem);
  if (!roots.some((c) => c.publicKey.asymmetricKeyType === 'rsa')) {
    throw new ConfigError('ALIPAY_ROOT_CERT_FILE: no RSA certificate in the file (its SN is made of the RSA ones)');
  }
  return { kind: 'CERT', appCertPem, alipayPublicCertPem, alipayRootCertPem };
}

/** Every certificate of a PEM file (Alipay's root certificate file holds several). */
function parseCerts(name: string, pem: string): X509Certificate[] {
  const blocks = pem.match(/-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g) ?? [];
  if (blocks.length === 0) throw new ConfigError(`${name}: the file holds no PEM certificate`);
  return blocks.map((b) => {
    try {
      return new X509Certificate(b);
    } catch {
      throw new ConfigError(`${name}: a certificate in the file does not parse`);
    }
  });
}

function gatewayUrl(env: Env): string {
  const name = 'ALIPAY_GATEWAY_URL';
  const v = str(env, name);
  if (v === undefined) return ALIPAY_PRODUCTION_GATEWAY;
  let u: URL;
  try {
    u = new URL(v);
  } catch {
    throw new ConfigError(`${name} must be a URL (got '${withoutPassword(v)}')`);
  }
  if (u.username !== '' || u.password !== '' || u.hash !== '' || u.search !== '') {
    throw new ConfigError(`${name} must have no user info, query or fragment (got '${u.origin}${u.pathname}')`);
  }
  // Requests and answers are signed, but they carry payment details: plain http only to this machine (a local simulator).
  const loopback = u.hostname === 'localhost' || u.hostname === '[::1]' || /^127\.\d+\.\d+\.\d+$/.test(u.hostname);
  if (u.protocol !== 'https:' && !(u.protocol === 'http:' && loopback)) {
    throw new ConfigError(`${name} must use https (plain http only to a loopback host) (got '${u.origin}${u.pathname}')`);
  }
  return v;
}

function timeoutMs(env: Env): number {
  const name = 'ALIPAY_TIMEOUT_MS';
  const v = str(env, name);
  if (v === undefined) return ALIPAY_DEFAULT_TIMEOUT_MS;
  if (!/^\d+$/.test(v) || Number(v) < 100 || Number(v) > 60_000)
    throw new ConfigError(`${name} must be an integer from 100 to 60000 (got '${v}')`);
  return Number(v);
}
