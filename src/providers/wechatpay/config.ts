/**
 * WeChat Pay's configuration from the environment. Unset WECHATPAY_MCH_ID: no WeChat Pay (null).
 * Otherwise every variable is checked at start and a wrong one stops the process with a
 * ConfigError naming it; key material is read from files (src/providers/secret-file.ts) and never
 * appears in a message. Keys are held as KeyObjects, whose printed form shows no key material.
 */
import { type KeyObject, createPrivateKey, createPublicKey, createSecretKey } from 'node:crypto';
import { ConfigError } from '../../config/config.ts';
import { readPublicFile, readSecretFile } from '../secret-file.ts';

export const DEFAULT_BASE_URL = 'https://api.mch.weixin.qq.com';
/** WeChat's web authorization page (the buyer's browser is sent there). */
export const DEFAULT_OAUTH_URL = 'https://open.weixin.qq.com';
/** WeChat's official-account API (the code is exchanged for the openid there). */
export const DEFAULT_SNS_URL = 'https://api.weixin.qq.com';
export const DEFAULT_TIMEOUT_MS = 10_000;

/** How the answers and notifications of WeChat Pay are verified. */
export type PlatformVerification =
  /** WeChat Pay's public key, downloaded by hand from the merchant platform, with its id (`PUB_KEY_ID_...`). */
  | { mode: 'publicKey'; publicKey: KeyObject; publicKeyId: string }
  /** WeChat Pay's platform certificates, downloaded from `GET /v3/certificates` and refreshed. */
  | { mode: 'certificate' };

export interface WechatPayConfig {
  mchId: string;
  appId: string;
  /** The merchant API private key (apiclient_key.pem): signs every request. */
  privateKey: KeyObject;
  /** The serial number of the merchant API certificate that goes with privateKey. */
  certSerial: string;
  /** The APIv3 key (32 bytes): decrypts notification resources and platform certificates. */
  apiV3Key: KeyObject;
  platform: PlatformVerification;
  /** Origin of the API: WeChat Pay's, or a simulator's. */
  baseUrl: string;
  /** Upper bound on one HTTP call, answer included. */
  timeoutMs: number;
  /**
   * The official account's AppSecret (of WECHATPAY_APP_ID), for WeChat's web authorization: with
   * it, the cashier pays inside WeChat by JSAPI; without it (null), inside WeChat it shows the
   * Native code. Held as a KeyObject (its printed form shows nothing).
   */
  appSecret: KeyObject | null;
  /** Origins of WeChat's authorization page and of its official-account API (or a simulator's). */
  oauthUrl: string;
  snsUrl: string;
}

type Env = Record<string, string | undefined>;

function get(env: Env, name: string): string | undefined {
  const v = env[name];
  return v === undefined || v.trim() === '' ? undefined : v.trim();
}

function required(env: Env, name: string): string {
  const v = get(env, name);
  if (v === undefined) throw new ConfigError(`${name} is required when WECHATPAY_MCH_ID is set`);
  return v;
}

function rsaKey(name: string, parse: () => KeyObject): KeyObject {
  let key: KeyObject;
  try {
    key = parse();
  } catch {
    throw new ConfigError(`${name}: the file does not hold a PEM ${name.includes('PRIVATE') ? 'private' : 'public'} key`);
  }
  if (key.asymmetricKeyType !== 'rsa') throw new ConfigError(`${name}: the key is not an RSA key`);
  if ((key.asymmetricKeyDetails?.modulusLength ?? 0) < 2048) throw new ConfigError(`${name}: the RSA key is shorter than 2048 bits`);
  return key;
}

function isLoopback(host: string): boolean {
  return host === 'localhost' || host === '[::1]' || /^127(\.\d{1,3}){3}$/.test(host);
}

export function wechatPayConfigFromEnv(env: Env = process.env): WechatPayConfig | null {
  const mchId = get(env, 'WECHATPAY_MCH_ID');
  if (mchId === undefined) return null;
  if (!/^\d{1,32}$/.test(mchId)) throw new ConfigError(`WECHATPAY_MCH_ID must be the merchant number, digits (got '${mchId}')`);

  const appId = required(env, 'WECHATPAY_APP_ID');
  if (!/^[A-Za-z0-9_]{1,32}$/.test(appId))
    throw new ConfigError(`WECHATPAY_APP_ID must be an APPID of letters and digits (got '${appId}')`);

  const certSerial = required(env, 'WECHATPAY_CERT_SERIAL');
  if (!/^[0-9A-Za-z]{8,40}$/.test(certSerial)) {
    throw new ConfigError(`WECHATPAY_CERT_SERIAL must be the merchant certificate's serial number, 8 to 40 letters and digits`);
  }

  const privateKeyFile = required(env, 'WECHATPAY_PRIVATE_KEY_FILE');
  const privateKey = rsaKey('WECHATPAY_PRIVATE_KEY_FILE', () =>
    createPrivateKey(readSecretFile('WECHATPAY_PRIVATE_KEY_FILE', privateKeyFile)),
  );

  const apiV3KeyFile = required(env, 'WECHATPAY_APIV3_KEY_FILE');
  // A key written with `echo` ends in a newline that is not part of it.
  const raw = readSecretFile('WECHATPAY_APIV3_KEY_FILE', apiV3KeyFile);
  const apiV3Bytes = raw.subarray(
    0,
    raw.length - (raw.subarray(-2).equals(Buffer.from('\r\n')) ? 2 : raw.subarray(-1)[0] === 0x0a ? 1 : 0),
  );
  if (apiV3Bytes.length !== 32) {
    throw new ConfigError(`WECHATPAY_APIV3_KEY_FILE: the APIv3 key must be 32 bytes (the file holds ${apiV3Bytes.length})`);
  }
  const apiV3Key = createSecretKey(Buffer.from(apiV3Bytes));
  raw.fill(0);

  const pkFile = get(env, 'WECHATPAY_PLATFORM_PUBLIC_KEY_FILE');
  const pkId = get(env, 'WECHATPAY_PLATFORM_PUBLIC_KEY_ID');
  let platform: PlatformVerification;
  if (pkFile === undefined && pkId === undefined) platform = { mode: 'certificate' };
  else if (pkFile === undefined)
    throw new ConfigError('WECHATPAY_PLATFORM_PUBLIC_KEY_FILE is required with WECHATPAY_PLATFORM_PUBLIC_KEY_ID');
  else if (pkId === undefined)
    throw new ConfigError('WECHATPAY_PLATFORM_PUBLIC_KEY_ID is required with WECHATPAY_PLATFORM_PUBLIC_KEY_FILE');
  else {
    if (!/^PUB_KEY_ID_[0-9A-Za-z_]{1,64}$/.test(pkId)) {
      throw new ConfigError(`WECHATPAY_PLATFORM_PUBLIC_KEY_ID must be WeChat Pay's public key id, PUB_KEY_ID_... (got '${pkId}')`);
    }
    const publicKey = rsaKey('WECHATPAY_PLATFORM_PUBLIC_KEY_FILE', () =>
      createPublicKey(readPublicFile('WECHATPAY_PLATFORM_PUBLIC_KEY_FILE', pkFile)),
    );
    platform = { mode: 'publicKey', publicKey, publicKeyId: pkId };
  }

  const baseUrl = origin(env, 'WECHATPAY_BASE_URL', DEFAULT_BASE_URL);
  const oauthUrl = origin(env, 'WECHATPAY_OAUTH_URL', DEFAULT_OAUTH_URL);
  const snsUrl = origin(env, 'WECHATPAY_SNS_URL', DEFAULT_SNS_URL);

  let appSecret: KeyObject | null = null;
  const secretFile = get(env, 'WECHATPAY_APP_SECRET_FILE');
  if (secretFile !== undefined) {
    const raw = readSecretFile('WECHATPAY_APP_SECRET_FILE', secretFile);
    const text = raw.toString('latin1').replace(/\r?\n$/, '');
    raw.fill(0);
    if (!/^[0-9A-Za-z]{16,64}$/.test(text)) {
      throw new ConfigError("WECHATPAY_APP_SECRET_FILE: the AppSecret must be letters and digits (32 in an official account's)");
    }
    appSecret = createSecretKey(Buffer.from(text, 'latin1'));
  }

  const t = get(env, 'WECHATPAY_TIMEOUT_MS');
  let timeoutMs = DEFAULT_TIMEOUT_MS;
  if (t !== undefined) {
    if (!/^\d+$/.test(t) || Number(t) < 100 || Number(t) > 60_000) {
      throw new ConfigError(`WECHATPAY_TIMEOUT_MS must be an integer from 100 to 60000 (got '${t}')`);
    }
    timeoutMs = Number(t);
  }

  return { mchId, appId, privateKey, certSerial, apiV3Key, platform, baseUrl, timeoutMs, appSecret, oauthUrl, snsUrl };
}

/** An origin variable: https (plain http only to a loopback address, for a simulator), no path. */
function origin(env: Env, name: string, fallback: string): string {
  const value = get(env, name) ?? fallback;
  let u: URL;
  try {
    u = new URL(value);
  } catch {
    throw new ConfigError(`${name} must be a URL (got '${value}')`);
  }
  if (u.protocol !== 'https:' && !(u.protocol === 'http:' && isLoopback(u.hostname))) {
    throw new ConfigError(`${name} must use https (plain http only to a loopback address, for the simulator) (got '${value}')`);
  }
  if (u.pathname !== '/' || u.search !== '' || u.hash !== '' || u.username !== '' || u.password !== '') {
    throw new ConfigError(`${name} must be an origin only, scheme://host[:port] (got '${value}')`);
  }
  return u.origin;
}
