/**
 * The signed HTTP exchange with WeChat Pay API v3 over Node's built-in fetch: every request
 * carries the `Authorization` of WECHATPAY2-SHA256-RSA2048, every answer's `Wechatpay-Signature`
 * is verified before anything is read from it. A call is bounded by one timeout (answer included)
 * and one answer size. Whatever cannot be read as a verified answer (no answer, a timeout, an
 * answer too large, an answer whose signature does not verify) throws ProviderUncertainError:
 * the call may or may not have been carried out.
 */
import type { KeyObject } from 'node:crypto';
import type { Clock } from '../../domain/clock.ts';
import { readCapped } from '../http-read.ts';
import { ProviderUncertainError } from '../provider.ts';
import { answerMessage, authorizationHeader, newNonce, requestMessage, signMessage, verifyMessage } from './protocol.ts';

/** The platform's verification keys: public-key mode (platform-keys.ts: PublicKeyPlatform) or certificate mode (CertificatePlatform). */
export interface PlatformKeys {
  /** The serial to name in a request's `Wechatpay-Serial` (the key we would like answers signed with). */
  acceptSerial(): string | null;
  /** The key of this serial, or null when we hold none (after a refresh, in certificate mode). */
  keyFor(serial: string): Promise<KeyObject | null>;
}

/** An answer or a notification may be at most this far from our clock (the official SDKs' 5 minutes). */
const MAX_CLOCK_SKEW_SECONDS = 300;
/** The largest answer read; the API's answers are a few kilobytes. */
export const MAX_ANSWER_BYTES = 1024 * 1024;
const USER_AGENT = 'merchant-payment-service (node)';

export interface RawAnswer {
  status: number;
  /** Header names in lower case. */
  headers: Record<string, string>;
  body: Buffer;
}

/** A verified answer, its body parsed when it is JSON (`code` and `message` of an error answer). */
export interface Answer {
  status: number;
  json: Record<string, unknown> | null;
  code: string | null;
  message: string | null;
}

export interface HttpOptions {
  mchId: string;
  certSerial: string;
  privateKey: KeyObject;
  baseUrl: string;
  timeoutMs: number;
  clock: Clock;
  fetch: typeof fetch;
}

/** The headers of a signed request: its `Authorization` over method, path, time, nonce and body. */
function signedHeaders(o: HttpOptions, method: 'GET' | 'POST', pathAndQuery: string, text: string): Record<string, string> {
  const timestamp = Math.floor(o.clock.now() / 1000);
  const nonce = newNonce();
  const signature = signMessage(requestMessage(method, pathAndQuery, timestamp, nonce, text), o.privateKey);
  return {
    authorization: authorizationHeader({ mchId: o.mchId, nonce, timestamp, serialNo: o.certSerial, signature }),
    accept: 'application/json',
    'user-agent': USER_AGENT,
  };
}

/**
 * A signed GET whose answer is a file (a bill): the response itself, its body not read, within
 * `timeoutMs` for the whole transfer. The file's answer carries no signature; its digest, given by
 * the signed answer that named it, is what proves it.
 */
export async function openSignedFile(o: HttpOptions, pathAndQuery: string, timeoutMs: number): Promise<Response> {
  try {
    return await o.fetch(o.baseUrl + pathAndQuery, {
      method: 'GET',
      headers: signedHeaders(o, 'GET', pathAndQuery, ''),
      signal: AbortSignal.timeout(timeoutMs),
      redirect: 'manual',
    });
  } catch (err) {
    throw new ProviderUncertainError(`wechatpay: GET ${pathAndQuery.split('?')[0]}: transport failure (${(err as Error).name})`);
  }
}

/** Sends one signed request; the answer is returned unverified (see verifyAnswer). */
export async function sendSigned(
  o: HttpOptions,
  method: 'GET' | 'POST',
  pathAndQuery: string,
  body: unknown,
  acceptSerial: string | null,
): Promise<RawAnswer> {
  const text = body === undefined ? '' : JSON.stringify(body);
  const headers = signedHeaders(o, method, pathAndQuery, text);
  if (body !== undefined) headers['content-type'] = 'application/json';
  // Names the key we verify with, so that WeChat Pay signs its answer with it.
  if (acceptSerial !== null) headers['wechatpay-serial'] = acceptSerial;
  const signal = AbortSignal.timeout(o.timeoutMs);
  try {
    const res = await o.fetch(o.baseUrl + pathAndQuery, {
      method,
      headers,
      body: body === undefined ? undefined : text,
      signal,
      redirect: 'manual',
    });
    const out: Record<string, string> = {};
    res.headers.forEach((v, k) => (out[k.toLowerCase()] = v));
    const tooLarge = () => new ProviderUncertainError(`wechatpay: answer larger than ${MAX_ANSWER_BYTES} bytes`);
    return { status: res.status, headers: out, body: await readCapped(res, MAX_ANSWER_BYTES, tooLarge) };
  } catch (err) {
    if (err instanceof ProviderUncertainError) throw err;
    const what = signal.aborted ? `no answer within ${o.timeoutMs} ms` : `transport failure (${(err as Error).name})`;
    throw new ProviderUncertainError(`wechatpay: ${method} ${pathAndQuery.split('?')[0]}: ${what}`);
  }
}

/**
 * Why an answer or notification is not verified, or null when it is: its four `Wechatpay-*`
 * headers present and well formed, its timestamp within MAX_CLOCK_SKEW_SECONDS of our clock, its
 * serial a key we hold, its signature over `TIMESTAMP\nNONCE\nBODY\n` valid under that key.
 */
export async function whyUnverified(
  headers: Record<string, string | string[] | undefined>,
  body: Buffer,
  keys: PlatformKeys,
  nowMs: number,
): Promise<string | null> {
  const h = (name: string): string | null => {
    const v = headers[name] ?? Object.entries(headers).find(([k]) => k.toLowerCase() === name)?.[1];
    return typeof v === 'string' && v !== '' ? v : null;
  };
  const timestamp = h('wechatpay-timestamp');
  const nonce = h('wechatpay-nonce');
  const signature = h('wechatpay-signature');
  const serial = h('wechatpay-serial');
  if (timestamp === null || nonce === null || signature === null || serial === null) return 'Wechatpay-* signature headers missing';
  if (!/^\d{1,12}$/.test(timestamp) || nonce.length > 64 || serial.length > 64) return 'Wechatpay-* signature headers malformed';
  const type = h('wechatpay-signature-type');
  if (type !== null && type !== 'WECHATPAY2-SHA256-RSA2048') return 'unknown Wechatpay-Signature-Type';
  if (Math.abs(Math.floor(nowMs / 1000) - Number(timestamp)) > MAX_CLOCK_SKEW_SECONDS) return 'timestamp more than 5 minutes from now';
  const key = await keys.keyFor(serial);
  if (key === null) return 'signed with a key we do not hold';
  return verifyMessage(answerMessage(timestamp, nonce, body), signature, key) ? null : 'bad signature';
}

/** The verified answer, its JSON body parsed; throws ProviderUncertainError when it cannot be verified or read. */
export async function verifiedAnswer(raw: RawAnswer, keys: PlatformKeys, nowMs: number, what: string): Promise<Answer> {
  const why = await whyUnverified(raw.headers, raw.body, keys, nowMs);
  if (why !== null) throw new ProviderUncertainError(`wechatpay: ${what}: HTTP ${raw.status} answer not verified: ${why}`);
  let json: Record<string, unknown> | null = null;
  if (raw.body.length > 0) {
    try {
      const v: unknown = JSON.parse(raw.body.toString('utf8'));
      if (typeof v === 'object' && v !== null && !Array.isArray(v)) json = v as Record<string, unknown>;
    } catch {
      json = null;
    }
    if (json === null) throw new ProviderUncertainError(`wechatpay: ${what}: HTTP ${raw.status} answer is not a JSON object`);
  }
  const str = (v: unknown) => (typeof v === 'string' ? v : null);
  return { status: raw.status, json, code: str(json?.code), message: str(json?.message) };
}
