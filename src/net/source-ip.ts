/**
 * Platform source-IP policy (step 2 of the API gate): works out which address
 * the request really comes from, honouring forwarding headers only when the
 * TCP peer is a trusted proxy, and applies the platform-wide address rules.
 */
import { CidrList, ipToString, normalizeIp, parseIpStrict } from './ip.ts';
import type { IpAddress } from './ip.ts';

export type SourceRejectReason =
  | 'SOURCE_ADDRESS_MISSING'
  | 'SOURCE_ADDRESS_MALFORMED'
  | 'FORWARDER_UNTRUSTED'
  | 'ADDRESS_FAMILY_DISABLED'
  | 'PLATFORM_DENYLISTED'
  | 'NOT_IN_PLATFORM_ALLOWLIST'
  | 'TEMPORARILY_BLOCKED';

export interface SourceIpPolicy {
  /** Peers whose forwarding headers are honoured. */
  trustedProxies: CidrList;
  /** null = no platform allowlist. */
  allowlist: CidrList | null;
  denylist: CidrList;
  allowIpv4: boolean;
  allowIpv6: boolean;
}

/** Raw values, one entry per header line received. */
export interface ForwardingHeaders {
  xForwardedFor: string[];
  forwarded: string[];
  xRealIp: string[];
}

export type SourceResult =
  | { ok: true; address: IpAddress; /** normalized text, e.g. '1.2.3.4' or '2001:db8::1', used as a map key */ key: string }
  | { ok: false; reason: SourceRejectReason };

type Chain = { ok: true; addresses: IpAddress[] } | { ok: false };

const MALFORMED: Chain = { ok: false };

/**
 * Resolve the client address of a request.
 *
 * Order of checks: missing/unparseable peer; forwarding headers from an
 * untrusted peer; malformed forwarding chain; address family; denylist;
 * allowlist; temporary block.
 *
 * Header syntax accepted (after trimming spaces/tabs around each element):
 * - X-Forwarded-For: all lines joined with "," in order; each element is a
 *   strict IPv4 or IPv6 address, and additionally "a.b.c.d:port", "[v6]" and
 *   "[v6]:port" are accepted (port = 1-5 decimal digits, at most 65535; the
 *   port is discarded). A bare IPv6 with a port is not recognisable and is
 *   malformed. Empty elements ("a,,b", trailing comma) are malformed.
 * - Forwarded (RFC 7239): lines joined with ","; every element must carry
 *   exactly one `for=` parameter (name case-insensitive) whose value is a
 *   token or quoted-string holding IPv4, "[IPv6]", optionally ":port" (digits
 *   or an obfuscated "_port"). `for=unknown`, obfuscated nodes ("_hidden"),
 *   unbracketed IPv6, elements without `for`, and any syntax error in any
 *   parameter are malformed.
 * - X-Real-IP: exactly one header line holding exactly one address (same
 *   element syntax as X-Forwarded-For).
 * Only the first present header in the order X-Forwarded-For, Forwarded,
 * X-Real-IP is read; the others are ignored. Every element of the chosen
 * header must parse, even those left of the client.
 */
export function resolveSource(
  peer: string | undefined,
  headers: ForwardingHeaders,
  policy: SourceIpPolicy,
  isBlocked?: (key: string) => boolean,
): SourceResult {
  // 1. The TCP peer.
  if (typeof peer !== 'string' || peer === '') return reject('SOURCE_ADDRESS_MISSING');
  const parsedPeer = parseIpStrict(peer);
  if (parsedPeer === null) return reject('SOURCE_ADDRESS_MISSING');
  const peerAddr = normalizeIp(parsedPeer);

  const xff = lines(headers?.xForwardedFor);
  const fwd = lines(headers?.forwarded);
  const xri = lines(headers?.xRealIp);
  const forwarded = xff.length > 0 || fwd.length > 0 || xri.length > 0;

  // 2. Never read forwarding headers from an untrusted peer.
  const trusted = policy.trustedProxies;
  if (forwarded && !trusted.contains(peerAddr)) return reject('FORWARDER_UNTRUSTED');

  // 3. The client.
  let client = peerAddr;
  if (forwarded) {
    let chain: Chain;
    if (xff.length > 0) chain = parseXForwardedFor(xff);
    else if (fwd.length > 0) chain = parseForwarded(fwd);
    else chain = parseXRealIp(xri);
    if (!chain.ok || chain.addresses.length === 0) return reject('SOURCE_ADDRESS_MALFORMED');
    client = pickClient(chain.addresses, trusted);
  }

  // 4. Address family (IPv4-mapped was unwrapped, so it counts as IPv4).
  const isV4 = client.kind() === 'ipv4';
  if (isV4 ? !policy.allowIpv4 : !policy.allowIpv6) return reject('ADDRESS_FAMILY_DISABLED');

  // 5-6. Platform deny/allow lists.
  if (policy.denylist.contains(client)) return reject('PLATFORM_DENYLISTED');
  if (policy.allowlist !== null && !policy.allowlist.contains(client)) return reject('NOT_IN_PLATFORM_ALLOWLIST');

  // 7. Temporary block (e.g. repeated failed authentications).
  const key = ipToString(client);
  if (isBlocked?.(key) === true) return reject('TEMPORARILY_BLOCKED');

  return { ok: true, address: client, key };
}

function reject(reason: SourceRejectReason): SourceResult {
  return { ok: false, reason };
}

/** Defensive copy: tolerate undefined / non-array input from loosely typed callers. */
function lines(value: unknown): string[] {
  if (!Array.isArray(value)) return [];
  return value.map((v) => (typeof v === 'string' ? v : String(v)));
}

/** Walk from the right, skipping trusted proxies; if every hop is trusted, the leftmost is the client. */
function pickClient(addresses: readonly IpAddress[], trusted: CidrList): IpAddress {
  for (let i = addresses.length - 1; i >= 0; i--) {
    const a = addresses[i];
    if (a !== undefined && !trusted.contains(a)) return a;
  }
  // Non-empty, checked by the caller.
  return addresses[0] as IpAddress;
}

const OWS = /^[ \t]+|[ \t]+$/g;

function trimOws(s: string): string {
  return s.replace(OWS, '');
}

const PORT = /^[0-9]{1,5}$/;

function isPort(text: string): boolean {
  return PORT.test(text) && Number(text) <= 65535;
}

/**
 * One address element of X-Forwarded-For / X-Real-IP: "1.2.3.4", "2001:db8::1",
 * "1.2.3.4:443", "[2001:db8::1]", "[2001:db8::1]:443". Returns the normalized address or null.
 */
function parseAddressElement(raw: string): IpAddress | null {
  const text = trimOws(raw);
  if (text === '') return null;
  if (text.startsWith('[')) {
    const close = text.indexOf(']');
    if (close < 0) return null;
    const inner = parseIpStrict(text.slice(1, close));
    if (inner === null || inner.kind() !== 'ipv6') return null;
    const rest = text.slice(close + 1);
    if (rest !== '' && !(rest.startsWith(':') && isPort(rest.slice(1)))) return null;
    return normalizeIp(inner);
  }
  const direct = parseIpStrict(text);
  if (direct !== null) return normalizeIp(direct);
  // "a.b.c.d:port" (exactly one colon, so it cannot be an IPv6 address).
  const colon = text.indexOf(':');
  if (colon > 0 && colon === text.lastIndexOf(':') && isPort(text.slice(colon + 1))) {
    const v4 = parseIpStrict(text.slice(0, colon));
    if (v4 !== null && v4.kind() === 'ipv4') return v4;
  }
  return null;
}

function parseXForwardedFor(values: readonly string[]): Chain {
  const addresses: IpAddress[] = [];
  for (const element of values.join(',').split(',')) {
    const addr = parseAddressElement(element);
    if (addr === null) return MALFORMED;
    addresses.push(addr);
  }
  return { ok: true, addresses };
}

function parseXRealIp(values: readonly string[]): Chain {
  if (values.length !== 1) return MALFORMED;
  const addr = parseAddressElement(values[0] ?? '');
  return addr === null ? MALFORMED : { ok: true, addresses: [addr] };
}

// RFC 7230 tchar.
const TCHAR = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]$/;
// RFC 7230 qdtext / quoted-pair octets: HTAB, SP, VCHAR, obs-text.
function isQuotedTextChar(code: number): boolean {
  return code === 0x09 || (code >= 0x20 && code !== 0x7f && code <= 0xff);
}

/**
 * RFC 7239 Forwarded: `1#forwarded-element`, element = pair *(";" pair),
 * pair = token "=" (token / quoted-string). Whitespace around "," and ";" is
 * tolerated. Linear single pass; quoted strings may contain "," and ";".
 */
function parseForwarded(values: readonly string[]): Chain {
  const s = values.join(',');
  const addresses: IpAddress[] = [];
  let i = 0;
  const n = s.length;
  const skipOws = (): void => {
    while (i < n && (s[i] === ' ' || s[i] === '\t')) i++;
  };

  for (;;) {
    // One element.
    let forValue: string | null = null;
    let sawFor = false;
    for (;;) {
      skipOws();
      // Empty pair (";;" or ";" at element end) is allowed by the grammar.
      if (i < n && s[i] !== ';' && s[i] !== ',') {
        const nameStart = i;
        while (i < n && TCHAR.test(s[i] as string)) i++;
        if (i === nameStart || s[i] !== '=') return MALFORMED;
        const name = s.slice(nameStart, i).toLowerCase();
        i++; // '='
        let value: string;
        if (s[i] === '"') {
          i++;
          let out = '';
          let closed = false;
          while (i < n) {
            const ch = s[i] as string;
            if (ch === '"') {
              closed = true;
              i++;
              break;
            }
            if (ch === '\\') {
              const next = s.charCodeAt(i + 1);
              if (i + 1 >= n || !isQuotedTextChar(next)) return MALFORMED;
              out += s[i + 1];
              i += 2;
              continue;
            }
            if (!isQuotedTextChar(s.charCodeAt(i))) return MALFORMED;
            out += ch;
            i++;
          }
          if (!closed) return MALFORMED;
          value = out;
        } else {
          const valueStart = i;
          while (i < n && TCHAR.test(s[i] as string)) i++;
          if (i === valueStart) return MALFORMED;
          value = s.slice(valueStart, i);
        }
        if (name === 'for') {
          if (sawFor) return MALFORMED; // a parameter must not repeat within an element
          sawFor = true;
          forValue = value;
        }
        skipOws();
      }
      if (i >= n || s[i] === ',') break;
      if (s[i] !== ';') return MALFORMED;
      i++; // ';'
    }
    if (forValue === null) return MALFORMED; // element without for=
    const addr = parseForwardedNode(forValue);
    if (addr === null) return MALFORMED;
    addresses.push(addr);
    if (i >= n) break;
    i++; // ','
  }
  return { ok: true, addresses };
}

const OBF_PORT = /^_[A-Za-z0-9._-]+$/;

/** node = nodename [ ":" node-port ]; nodename = IPv4 / "[" IPv6 "]" (unknown / obfnode rejected). */
function parseForwardedNode(value: string): IpAddress | null {
  let host = value;
  let port: string | null = null;
  if (value.startsWith('[')) {
    const close = value.indexOf(']');
    if (close < 0) return null;
    host = value.slice(1, close);
    const rest = value.slice(close + 1);
    if (rest !== '') {
      if (!rest.startsWith(':')) return null;
      port = rest.slice(1);
    }
    const v6 = parseIpStrict(host);
    if (v6 === null || v6.kind() !== 'ipv6') return null;
    if (port !== null && !isForwardedPort(port)) return null;
    return normalizeIp(v6);
  }
  const colon = value.indexOf(':');
  if (colon >= 0) {
    host = value.slice(0, colon);
    port = value.slice(colon + 1);
    if (!isForwardedPort(port)) return null;
  }
  const v4 = parseIpStrict(host);
  if (v4 === null || v4.kind() !== 'ipv4') return null;
  return v4;
}

function isForwardedPort(port: string): boolean {
  return isPort(port) || OBF_PORT.test(port);
}
