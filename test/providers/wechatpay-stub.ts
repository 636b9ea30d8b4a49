/**
 * A WechatPayProvider whose HTTP goes to an in-memory WeChat Pay: each request is answered by a
 * test function, signed with a platform key of public-key mode (or left unsigned, or signed
 * wrongly, on demand). For testing what the adapter makes of each answer, row by row.
 */
import { createSecretKey, generateKeyPairSync, sign } from 'node:crypto';
import type { WechatPayConfig } from '../../src/providers/wechatpay/config.ts';
import { answerMessage } from '../../src/providers/wechatpay/protocol.ts';
import { WechatPayProvider } from '../../src/providers/wechatpay/wechatpay.ts';

export interface StubRequest {
  method: string;
  path: string;
  headers: Record<string, string>;
  body: Record<string, unknown> | null;
}

export interface StubAnswer {
  status: number;
  body?: unknown;
  /** 'none': no Wechatpay-* headers; 'bad': a signature of something else; 'stale': signed 6 minutes ago. */
  signature?: 'ok' | 'none' | 'bad' | 'stale';
}

export const MCH_ID = '1230000109';
export const APP_ID = 'wxd678efh567hg6787';
export const KEY_ID = 'PUB_KEY_ID_0112300001092025000000000001';

const merchant = generateKeyPairSync('rsa', { modulusLength: 2048 });
const platform = generateKeyPairSync('rsa', { modulusLength: 2048 });
export const APIV3_KEY = 'abcdefghijklmnopqrstuvwxyz012345';

export function stubConfig(): WechatPayConfig {
  return {
    mchId: MCH_ID,
    appId: APP_ID,
    privateKey: merchant.privateKey,
    certSerial: '5157F09EFDC096DE15EBE81A47057A7232F1B8E1',
    apiV3Key: createSecretKey(Buffer.from(APIV3_KEY)),
    platform: { mode: 'publicKey', publicKey: platform.publicKey, publicKeyId: KEY_ID },
    baseUrl: 'https://api.mch.weixin.qq.com',
    timeoutMs: 1000,
    appSecret: null,
    oauthUrl: 'https://open.weixin.qq.com',
    snsUrl: 'https://api.weixin.qq.com',
  };
}

/** Headers of a body signed by the platform key, at `nowMs`. */
export function signedHeaders(body: Buffer, nowMs = Date.now(), serial = KEY_ID): Record<string, string> {
  const ts = String(Math.floor(nowMs / 1000));
  const nonce = 'stubnonce0123456789';
  return {
    'Wechatpay-Timestamp': ts,
    'Wechatpay-Nonce': nonce,
    'Wechatpay-Serial': serial,
    'Wechatpay-Signature': sign('sha256', answerMessage(ts, nonce, body), platform.privateKey).toString('base64'),
  };
}

/** `timeoutMs`: the adapter's WECHATPAY_TIMEOUT_MS (stubConfig's 1000 ms when absent). */
export function stubProvider(
  answer: (r: StubRequest) => StubAnswer | Promise<StubAnswer>,
  opts: { timeoutMs?: number } = {},
): {
  provider: WechatPayProvider;
  requests: StubRequest[];
} {
  const requests: StubRequest[] = [];
  const stubFetch = (async (input: string | URL | Request, init?: RequestInit) => {
    const u = new URL(String(input));
    const headers = Object.fromEntries(
      Object.entries((init?.headers ?? {}) as Record<string, string>).map(([k, v]) => [k.toLowerCase(), v]),
    );
    const r: StubRequest = {
      method: init?.method ?? 'GET',
      path: u.pathname + u.search,
      headers,
      body: typeof init?.body === 'string' ? (JSON.parse(init.body) as Record<string, unknown>) : null,
    };
    requests.push(r);
    // As fetch does: the call's AbortSignal (its timeout) ends a call that has no answer yet.
    const signal = init?.signal;
    const a = await new Promise<StubAnswer>((resolve, reject) => {
      signal?.addEventListener('abort', () => reject(signal.reason), { once: true });
      Promise.resolve()
        .then(() => answer(r))
        .then(resolve, reject);
    });
    const body = a.body === undefined ? Buffer.alloc(0) : Buffer.from(typeof a.body === 'string' ? a.body : JSON.stringify(a.body));
    let h: Record<string, string> = {};
    if ((a.signature ?? 'ok') === 'ok') h = signedHeaders(body);
    if (a.signature === 'stale') h = signedHeaders(body, Date.now() - 360_000);
    if (a.signature === 'bad') h = { ...signedHeaders(Buffer.from('something else')) };
    if (body.length > 0) h['Content-Type'] = 'application/json';
    return new Response(a.status === 204 ? null : body, { status: a.status, headers: h });
  }) as typeof fetch;
  const config = stubConfig();
  if (opts.timeoutMs !== undefined) config.timeoutMs = opts.timeoutMs;
  const provider = new WechatPayProvider(config, {
    notifyUrl: 'https://shop.example/api/provider/v1/notifications/wechatpay',
    fetch: stubFetch,
  });
  return { provider, requests };
}
