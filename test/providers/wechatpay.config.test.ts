/** wechatPayConfigFromEnv: every variable, every refusal naming its variable, no secret in any message. */
import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { inspect } from 'node:util';
import { after, describe, test } from 'node:test';
import { ConfigError } from '../../src/config/config.ts';
import { wechatPayConfigFromEnv } from '../../src/providers/wechatpay/config.ts';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'wxcfg-'));
after(() => fs.rmSync(dir, { recursive: true, force: true }));
function write(name: string, content: string | Buffer, mode = 0o600): string {
  const f = path.join(dir, name);
  fs.writeFileSync(f, content, { mode });
  fs.chmodSync(f, mode);
  return f;
}

const merchant = generateKeyPairSync('rsa', { modulusLength: 2048 });
const platform = generateKeyPairSync('rsa', { modulusLength: 2048 });
const PRIVATE_PEM = merchant.privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
const APIV3 = 'K'.repeat(16) + 'e'.repeat(15) + 'Y';
const files = {
  privateKey: write('apiclient_key.pem', PRIVATE_PEM),
  apiV3: write('apiv3.key', `${APIV3}\n`),
  publicKey: write('pub_key.pem', platform.publicKey.export({ type: 'spki', format: 'pem' }).toString(), 0o644),
};

const base = {
  WECHATPAY_MCH_ID: '1230000109',
  WECHATPAY_APP_ID: 'wxd678efh567hg6787',
  WECHATPAY_PRIVATE_KEY_FILE: files.privateKey,
  WECHATPAY_CERT_SERIAL: '5157F09EFDC096DE15EBE81A47057A7232F1B8E1',
  WECHATPAY_APIV3_KEY_FILE: files.apiV3,
  WECHATPAY_PLATFORM_PUBLIC_KEY_FILE: files.publicKey,
  WECHATPAY_PLATFORM_PUBLIC_KEY_ID: 'PUB_KEY_ID_0112300001092025000000000001',
};

/** Refused with a ConfigError that names `variable` and shows no key material. */
function refuses(env: Record<string, string | undefined>, variable: string): void {
  assert.throws(
    () => wechatPayConfigFromEnv(env),
    (e: unknown) => {
      assert.ok(e instanceof ConfigError, String(e));
      assert.ok(e.message.includes(variable), `${e.message} names ${variable}`);
      for (const secret of [APIV3, PRIVATE_PEM.split('\n')[1]!]) assert.ok(!e.message.includes(secret), 'no secret in the message');
      return true;
    },
  );
}

describe('wechatPayConfigFromEnv', () => {
  test('null when WECHATPAY_MCH_ID is unset or empty', () => {
    assert.equal(wechatPayConfigFromEnv({}), null);
    assert.equal(wechatPayConfigFromEnv({ ...base, WECHATPAY_MCH_ID: '' }), null);
  });

  test('public-key mode: keys held as KeyObjects, the APIv3 key without its trailing newline, defaults', () => {
    const c = wechatPayConfigFromEnv(base)!;
    assert.equal(c.mchId, '1230000109');
    assert.equal(c.appId, 'wxd678efh567hg6787');
    assert.equal(c.certSerial, '5157F09EFDC096DE15EBE81A47057A7232F1B8E1');
    assert.equal(c.privateKey.type, 'private');
    assert.equal(c.apiV3Key.symmetricKeySize, 32);
    assert.equal(c.apiV3Key.export().toString(), APIV3);
    assert.equal(c.platform.mode, 'publicKey');
    assert.equal(c.platform.mode === 'publicKey' && c.platform.publicKeyId, 'PUB_KEY_ID_0112300001092025000000000001');
    assert.equal(c.baseUrl, 'https://api.mch.weixin.qq.com');
    assert.equal(c.timeoutMs, 10_000);
  });

  test('its printed form shows no key material', () => {
    const text = inspect(wechatPayConfigFromEnv(base), { depth: 10 }) + JSON.stringify(wechatPayConfigFromEnv(base));
    assert.ok(!text.includes(APIV3));
    assert.ok(!text.includes(PRIVATE_PEM.split('\n')[1]!));
  });

  test('platform-certificate mode when neither public-key variable is set', () => {
    const c = wechatPayConfigFromEnv({
      ...base,
      WECHATPAY_PLATFORM_PUBLIC_KEY_FILE: undefined,
      WECHATPAY_PLATFORM_PUBLIC_KEY_ID: undefined,
    })!;
    assert.deepEqual(c.platform, { mode: 'certificate' });
  });

  test('a simulator URL and a timeout', () => {
    const c = wechatPayConfigFromEnv({ ...base, WECHATPAY_BASE_URL: 'http://127.0.0.1:8090', WECHATPAY_TIMEOUT_MS: '2500' })!;
    assert.equal(c.baseUrl, 'http://127.0.0.1:8090');
    assert.equal(c.timeoutMs, 2500);
  });

  test("the official account's AppSecret (a private file) and WeChat's authorization origins, for JSAPI inside WeChat", () => {
    const none = wechatPayConfigFromEnv(base)!;
    assert.equal(none.appSecret, null, 'without it: no JSAPI (the Native code inside WeChat)');
    assert.equal(none.oauthUrl, 'https://open.weixin.qq.com');
    assert.equal(none.snsUrl, 'https://api.weixin.qq.com');
    const secret = '0123456789abcdef0123456789abcdef';
    const c = wechatPayConfigFromEnv({
      ...base,
      WECHATPAY_APP_SECRET_FILE: write('app-secret', `${secret}\n`),
      WECHATPAY_OAUTH_URL: 'http://127.0.0.1:8091',
      WECHATPAY_SNS_URL: 'http://127.0.0.1:8091',
    })!;
    assert.equal(c.appSecret!.export().toString(), secret);
    assert.ok(!inspect(c).includes(secret), 'the secret is not in the printed configuration');
    assert.equal(c.oauthUrl, 'http://127.0.0.1:8091');
    refuses({ ...base, WECHATPAY_APP_SECRET_FILE: write('app-secret-open', secret, 0o644) }, 'WECHATPAY_APP_SECRET_FILE');
    refuses({ ...base, WECHATPAY_APP_SECRET_FILE: write('app-secret-bad', 'not a secret!') }, 'WECHATPAY_APP_SECRET_FILE');
    refuses({ ...base, WECHATPAY_OAUTH_URL: 'http://open.weixin.qq.com' }, 'WECHATPAY_OAUTH_URL');
    refuses({ ...base, WECHATPAY_SNS_URL: 'https://api.weixin.qq.com/sns' }, 'WECHATPAY_SNS_URL');
  });

  test('a missing required variable is named', () => {
    for (const v of ['WECHATPAY_APP_ID', 'WECHATPAY_PRIVATE_KEY_FILE', 'WECHATPAY_CERT_SERIAL', 'WECHATPAY_APIV3_KEY_FILE']) {
      refuses({ ...base, [v]: undefined }, v);
    }
  });

  test('one public-key variable without the other names the missing one', () => {
    refuses({ ...base, WECHATPAY_PLATFORM_PUBLIC_KEY_ID: undefined }, 'WECHATPAY_PLATFORM_PUBLIC_KEY_ID');
    refuses({ ...base, WECHATPAY_PLATFORM_PUBLIC_KEY_FILE: undefined }, 'WECHATPAY_PLATFORM_PUBLIC_KEY_FILE');
  });

  test('key files: unreadable, readable by others, not a key, not RSA, too short', () => {
    refuses({ ...base, WECHATPAY_PRIVATE_KEY_FILE: path.join(dir, 'absent.pem') }, 'WECHATPAY_PRIVATE_KEY_FILE');
    refuses({ ...base, WECHATPAY_PRIVATE_KEY_FILE: write('open.pem', PRIVATE_PEM, 0o644) }, 'WECHATPAY_PRIVATE_KEY_FILE');
    refuses({ ...base, WECHATPAY_PRIVATE_KEY_FILE: write('junk.pem', `${APIV3}\n`) }, 'WECHATPAY_PRIVATE_KEY_FILE');
    const ec = generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
    refuses({ ...base, WECHATPAY_PRIVATE_KEY_FILE: write('ec.pem', ec) }, 'WECHATPAY_PRIVATE_KEY_FILE');
    const short = generateKeyPairSync('rsa', { modulusLength: 1024 }).privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
    refuses({ ...base, WECHATPAY_PRIVATE_KEY_FILE: write('short.pem', short) }, 'WECHATPAY_PRIVATE_KEY_FILE');
    refuses({ ...base, WECHATPAY_PLATFORM_PUBLIC_KEY_FILE: write('notpub.pem', 'hello', 0o644) }, 'WECHATPAY_PLATFORM_PUBLIC_KEY_FILE');
  });

  test('the APIv3 key: a private file of exactly 32 bytes', () => {
    refuses({ ...base, WECHATPAY_APIV3_KEY_FILE: write('k31', APIV3.slice(1)) }, 'WECHATPAY_APIV3_KEY_FILE');
    refuses({ ...base, WECHATPAY_APIV3_KEY_FILE: write('k33', `${APIV3}x`) }, 'WECHATPAY_APIV3_KEY_FILE');
    refuses({ ...base, WECHATPAY_APIV3_KEY_FILE: write('kopen', APIV3, 0o640) }, 'WECHATPAY_APIV3_KEY_FILE');
    assert.equal(
      wechatPayConfigFromEnv({ ...base, WECHATPAY_APIV3_KEY_FILE: write('kcrlf', `${APIV3}\r\n`) })!.apiV3Key.symmetricKeySize,
      32,
    );
  });

  test('malformed values are named', () => {
    refuses({ ...base, WECHATPAY_MCH_ID: 'abc' }, 'WECHATPAY_MCH_ID');
    refuses({ ...base, WECHATPAY_APP_ID: 'wx 1' }, 'WECHATPAY_APP_ID');
    refuses({ ...base, WECHATPAY_CERT_SERIAL: 'short' }, 'WECHATPAY_CERT_SERIAL');
    refuses({ ...base, WECHATPAY_PLATFORM_PUBLIC_KEY_ID: '5157F09EFDC096DE' }, 'WECHATPAY_PLATFORM_PUBLIC_KEY_ID');
    refuses({ ...base, WECHATPAY_BASE_URL: 'not a url' }, 'WECHATPAY_BASE_URL');
    refuses({ ...base, WECHATPAY_BASE_URL: 'http://api.mch.weixin.qq.com' }, 'WECHATPAY_BASE_URL');
    refuses({ ...base, WECHATPAY_BASE_URL: 'https://api.mch.weixin.qq.com/v3' }, 'WECHATPAY_BASE_URL');
    refuses({ ...base, WECHATPAY_TIMEOUT_MS: '50' }, 'WECHATPAY_TIMEOUT_MS');
    refuses({ ...base, WECHATPAY_TIMEOUT_MS: '1.5' }, 'WECHATPAY_TIMEOUT_MS');
  });
});
