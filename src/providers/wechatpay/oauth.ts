/**
 * WeChat's official-account web authorization (网页授权, OAuth 2.0), silent `snsapi_base`: the
 * buyer's browser, inside WeChat, is sent to WeChat's authorize page, which sends it straight back
 * to the cashier with a `code` (and our `state`); the server exchanges the code for the buyer's
 * openid at `sns/oauth2/access_token` with the official account's AppSecret. The code is single-use
 * and valid 5 minutes; the access token that comes with the openid is not kept (snsapi_base needs
 * none). developers.weixin.qq.com/doc/offiaccount/OA_Web_Apps/Wechat_webpage_authorization.html
 */
import type { KeyObject } from 'node:crypto';
import { readCapped } from '../http-read.ts';
import { type BuyerIdentity, ProviderRejectedError, ProviderUncertainError } from '../provider.ts';

/** errcode values that say the code will never give an openid (or that the configuration is wrong). */
const REFUSED_CODES = new Set([
  40029, // invalid code
  40163, // code been used
  42003, // code timed out
  40013, // invalid appid
  40125, // invalid appsecret
  40030, // invalid refresh_token
]);

/** An openid is an opaque string of letters, digits, `-` and `_` (28 characters for an official account). */
const OPENID_RE = /^[A-Za-z0-9_-]{6,128}$/;

export interface WechatOAuthOptions {
  appId: string;
  appSecret: KeyObject;
  oauthUrl: string;
  snsUrl: string;
  timeoutMs: number;
  fetch: typeof fetch;
}

export class WechatOAuth implements BuyerIdentity {
  readonly #o: WechatOAuthOptions;

  constructor(o: WechatOAuthOptions) {
    this.#o = o;
  }

  /** The authorize address, its parameters in the documented order (WeChat refuses others), `#wechat_redirect` last. */
  authorizeUrl(redirectUri: string, state: string): string {
    const q = `appid=${this.#o.appId}&redirect_uri=${encodeURIComponent(redirectUri)}&response_type=code&scope=snsapi_base&state=${state}`;
    return `${this.#o.oauthUrl}/connect/oauth2/authorize?${q}#wechat_redirect`;
  }

  async openIdOf(code: string): Promise<string> {
    const secret = this.#o.appSecret.export().toString('latin1');
    // The URL carries the AppSecret: it is never logged, and never put into an error.
    const url =
      `${this.#o.snsUrl}/sns/oauth2/access_token?appid=${this.#o.appId}&secret=${secret}` +
      `&code=${encodeURIComponent(code)}&grant_type=authorization_code`;
    const signal = AbortSignal.timeout(this.#o.timeoutMs);
    let body: Uint8Array;
    let status: number;
    try {
      const res = await this.#o.fetch(url, { method: 'GET', redirect: 'manual', signal, headers: { accept: 'application/json' } });
      status = res.status;
      body = await readCapped(res, 64 * 1024, () => new ProviderUncertainError('wechat oauth: answer too large'));
    } catch (err) {
      if (err instanceof ProviderUncertainError) throw err;
      throw new ProviderUncertainError(
        `wechat oauth: ${signal.aborted ? `no answer within ${this.#o.timeoutMs} ms` : 'transport failure'}`,
      );
    }
    if (status !== 200) throw new ProviderUncertainError(`wechat oauth: HTTP ${status}`);
    let j: Record<string, unknown>;
    try {
      const v: unknown = JSON.parse(Buffer.from(body).toString('utf8'));
      if (typeof v !== 'object' || v === null || Array.isArray(v)) throw new Error('not an object');
      j = v as Record<string, unknown>;
    } catch {
      throw new ProviderUncertainError('wechat oauth: the answer is not a JSON object');
    }
    if (typeof j.errcode === 'number' && j.errcode !== 0) {
      if (REFUSED_CODES.has(j.errcode)) throw new ProviderRejectedError(`OAUTH_${j.errcode}`);
      throw new ProviderUncertainError(`wechat oauth: errcode ${j.errcode}`);
    }
    if (typeof j.openid !== 'string' || !OPENID_RE.test(j.openid))
      throw new ProviderUncertainError('wechat oauth: the answer has no openid');
    return j.openid;
  }
}

/** An openid as it may appear in a log line: its first 4 and last 2 characters. */
export function maskOpenId(openid: string): string {
  return openid.length <= 8 ? '***' : `${openid.slice(0, 4)}…${openid.slice(-2)}`;
}
