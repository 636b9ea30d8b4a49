/**
 * The parts of Alipay's OpenAPI 2.0 wire format that the adapter reads itself (docs/providers-alipay.md,
 * "Why the SDK, and which parts"): gateway answers (which text the signature covers), form bodies
 * of notifications and the content their signature covers, and times in Asia/Shanghai.
 */
import { guardJson } from '../../lib/json-guard.ts';

/** Bounds on a form body (a notification): parameters, name length, value length in characters. */
export interface FormLimits {
  maxParams: number;
  maxNameChars: number;
  maxValueChars: number;
}

export type FormParse = { ok: true; params: Map<string, string> } | { ok: false; reason: string };

const strictUtf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/**
 * An `application/x-www-form-urlencoded` body, strictly: UTF-8, every part `name=value`, `+` a
 * space, percent escapes well formed and UTF-8; a name given twice, a name outside
 * `[A-Za-z0-9_]`, or anything over the limits is refused (a duplicate could make the value we act
 * on differ from the value that was signed).
 */
export function parseForm(raw: Uint8Array, limits: FormLimits): FormParse {
  let text: string;
  try {
    text = strictUtf8.decode(raw);
  } catch {
    return { ok: false, reason: 'the body is not UTF-8' };
  }
  if (text === '') return { ok: false, reason: 'the body is empty' };
  const parts = text.split('&');
  if (parts.length > limits.maxParams) return { ok: false, reason: `more than ${limits.maxParams} parameters` };
  const params = new Map<string, string>();
  for (const part of parts) {
    const eq = part.indexOf('=');
    if (eq <= 0) return { ok: false, reason: 'a part is not name=value' };
    let name: string;
    let value: string;
    try {
      name = decodeURIComponent(part.slice(0, eq).replaceAll('+', ' '));
      value = decodeURIComponent(part.slice(eq + 1).replaceAll('+', ' '));
    } catch {
      return { ok: false, reason: 'a malformed percent escape' };
    }
    if (name.length > limits.maxNameChars || !/^[A-Za-z0-9_]+$/.test(name)) return { ok: false, reason: 'a malformed parameter name' };
    if (value.length > limits.maxValueChars)
      return { ok: false, reason: `the value of ${name} is over ${limits.maxValueChars} characters` };
    if (params.has(name)) return { ok: false, reason: `the parameter ${name} is given twice` };
    params.set(name, value);
  }
  return { ok: true, params };
}

/**
 * What the signature of an asynchronous notification covers: every parameter but `sign` and
 * `sign_type`, those with an empty value left out, sorted by name, as `name=value` joined by `&`
 * (Alipay's "自行实现验签" rules for notifications; AlipaySignature.getSignCheckContentV1 in
 * alipay/alipay-sdk-java-all).
 */
export function notificationSignContent(params: ReadonlyMap<string, string>): string {
  return [...params]
    .filter(([name, value]) => name !== 'sign' && name !== 'sign_type' && value !== '')
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([name, value]) => `${name}=${value}`)
    .join('&');
}

/**
 * The raw text of each member of the top-level object of a JSON document, by decoded name. A
 * gateway answer's signature covers the exact text of its `<method>_response` member, so that
 * text is taken from the document as received, not re-serialised. The document must already be
 * valid JSON without duplicate names (guardJson), which is what makes this short scan sound.
 */
export function topLevelMembers(json: string): Map<string, string> {
  const members = new Map<string, string>();
  let i = skipBlank(json, 0);
  if (json[i] !== '{') return members;
  i = skipBlank(json, i + 1);
  while (i < json.length && json[i] !== '}') {
    const keyEnd = skipValue(json, i);
    const name = JSON.parse(json.slice(i, keyEnd)) as string;
    i = skipBlank(json, skipBlank(json, keyEnd) + 1);
    const valueEnd = skipValue(json, i);
    members.set(name, json.slice(i, valueEnd));
    i = skipBlank(json, valueEnd);
    if (json[i] === ',') i = skipBlank(json, i + 1);
  }
  return members;
}

function skipBlank(s: string, i: number): number {
  while (i < s.length && (s[i] === ' ' || s[i] === '\t' || s[i] === '\n' || s[i] === '\r')) i++;
  return i;
}

/** The index just past the JSON value that starts at `i`. */
function skipValue(s: string, i: number): number {
  let depth = 0;
  let inString = false;
  for (let j = i; j < s.length; j++) {
    const c = s[j];
    if (inString) {
      if (c === '\\') j++;
      else if (c === '"') {
        inString = false;
        if (depth === 0) return j + 1;
      }
    } else if (c === '"') inString = true;
    else if (c === '{' || c === '[') depth++;
    else if (c === '}' || c === ']') {
      if (depth === 0) return j;
      if (--depth === 0) return j + 1;
    } else if (depth === 0 && (c === ',' || c === ' ' || c === '\t' || c === '\n' || c === '\r')) return j;
  }
  return s.length;
}

export type GatewayAnswer =
  { ok: true; code: string; subCode: string | null; body: Record<string, unknown> } | { ok: false; reason: string };

/**
 * A gateway answer, read: JSON without duplicate names, the `<method>_response` member (or
 * `error_response`) signed by Alipay, a `code`. `verify(text, sign)` checks a signature with
 * Alipay's key. In certificate mode (`alipayCertSn`), an answer naming another Alipay certificate
 * is refused: Alipay has changed its certificate and the configured one no longer verifies.
 * Anything short of this is not an answer (the call's outcome is unknown).
 */
export function readGatewayAnswer(
  raw: Uint8Array,
  method: string,
  verify: (text: string, sign: string) => boolean,
  alipayCertSn: string | null,
): GatewayAnswer {
  const guarded = guardJson(raw);
  if (!guarded.ok || guarded.empty) return { ok: false, reason: 'the answer is not JSON (or has a name twice)' };
  const members = topLevelMembers(Buffer.from(raw).toString('utf8'));
  const responseText = members.get(`${method.replaceAll('.', '_')}_response`) ?? members.get('error_response');
  if (responseText === undefined) return { ok: false, reason: 'the answer has no response member' };
  const sign = jsonString(members.get('sign'));
  if (sign === null || sign === '') return { ok: false, reason: 'the answer is not signed' };
  if (alipayCertSn !== null) {
    const certSn = jsonString(members.get('alipay_cert_sn'));
    if (certSn !== null && certSn !== alipayCertSn) {
      return {
        ok: false,
        reason: `the answer is signed with an Alipay certificate (SN ${certSn}) other than ALIPAY_PUBLIC_CERT_FILE's; install Alipay's current public certificate`,
      };
    }
  }
  // The signature covers the member's text as sent. Alipay's Java SDK tries it once more with
  // `\/` read as `/` (AbstractAlipayClient.checkResponseSign), as Alipay's documentation advises.
  if (!verify(responseText, sign) && !(responseText.includes('\\/') && verify(responseText.replaceAll('\\/', '/'), sign))) {
    return { ok: false, reason: "the answer's signature does not verify" };
  }
  const response = JSON.parse(responseText) as unknown;
  if (typeof response !== 'object' || response === null || Array.isArray(response))
    return { ok: false, reason: 'the response member is not an object' };
  const r = response as Record<string, unknown>;
  if (typeof r.code !== 'string') return { ok: false, reason: 'the answer has no code' };
  return { ok: true, code: r.code, subCode: typeof r.sub_code === 'string' && r.sub_code !== '' ? r.sub_code : null, body: r };
}

function jsonString(text: string | undefined): string | null {
  if (text === undefined) return null;
  const v = JSON.parse(text) as unknown;
  return typeof v === 'string' ? v : null;
}

const SHANGHAI_OFFSET_MS = 8 * 3600_000;

/** An instant as Alipay writes times: Asia/Shanghai (UTC+8, no daylight saving), `yyyy-MM-dd HH:mm:ss`, seconds floored. */
export function shanghaiDateTime(at: Date): string {
  return new Date(at.getTime() + SHANGHAI_OFFSET_MS).toISOString().slice(0, 19).replace('T', ' ');
}

/** `yyyy-MM-dd HH:mm:ss` in Asia/Shanghai as an instant, or null when it is not exactly that form or not a real time. */
export function parseShanghaiDateTime(s: string): Date | null {
  if (!/^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}$/.test(s)) return null;
  const t = Date.parse(`${s.replace(' ', 'T')}+08:00`);
  if (Number.isNaN(t) || shanghaiDateTime(new Date(t)) !== s) return null;
  return new Date(t);
}
