/**
 * Strict IP address parsing, public-address classification and CIDR lists.
 *
 * ipaddr.js supplies the address classes, CIDR matching and its range table,
 * but its text parser is never used: it accepts legacy IPv4 forms ("0x7f.1",
 * "1.2.3", octal), IPv6 zone ids, and reads "::a.b.c.d" as IPv4-mapped. Text
 * is parsed here, strictly, and the address objects are built from the
 * resulting octets/groups.
 */
import ipaddr from 'ipaddr.js';

export type IpAddress = ipaddr.IPv4 | ipaddr.IPv6;

const HEX_GROUP = /^[0-9A-Fa-f]{1,4}$/;
const IPV6_CHARS = /^[0-9A-Fa-f:.]+$/;
/** Longest valid IPv6 text: 8 groups of 4 hex digits + 7 colons (45 with a dotted tail). */
const MAX_IPV6_TEXT = 45;

/** Strict IPv4: exactly four decimal octets 0-255, no leading zeros, nothing else. Returns the octets or null. */
function parseIpv4Octets(text: string): number[] | null {
  if (text.length > 15 || !ipaddr.IPv4.isValidFourPartDecimal(text)) return null;
  const octets = text.split('.').map(Number);
  return octets.length === 4 && octets.every((o) => Number.isInteger(o) && o >= 0 && o <= 255) ? octets : null;
}

function parseHexGroups(text: string): number[] | null {
  if (text === '') return [];
  const groups = text.split(':');
  const out: number[] = [];
  for (const g of groups) {
    if (!HEX_GROUP.test(g)) return null;
    out.push(Number.parseInt(g, 16));
  }
  return out;
}

/**
 * Strict IPv6 text (RFC 4291 section 2.2, which includes the RFC 5952 forms):
 * hex groups of 1-4 digits, at most one "::" standing for one or more zero
 * groups, an optional strict dotted-decimal IPv4 tail (two groups), no zone
 * id, no brackets, no whitespace. Returns the eight 16-bit groups or null.
 *
 * The groups are computed here rather than by ipaddr.js, whose parser reads
 * "::a.b.c.d" (IPv4-compatible, ::/96) as "::ffff:a.b.c.d" (IPv4-mapped).
 */
function parseIpv6Groups(text: string): number[] | null {
  if (text.length < 2 || text.length > MAX_IPV6_TEXT || !IPV6_CHARS.test(text)) return null;
  let head = text;
  const tail: number[] = [];
  if (text.includes('.')) {
    const lastColon = text.lastIndexOf(':');
    if (lastColon < 0) return null;
    const octets = parseIpv4Octets(text.slice(lastColon + 1));
    if (octets === null) return null;
    const [a = 0, b = 0, c = 0, d = 0] = octets;
    tail.push((a << 8) | b, (c << 8) | d);
    // "1:2:3:4:5:6:1.2.3.4" -> "1:2:3:4:5:6"; "::1.2.3.4" -> "::"; "1::1.2.3.4" -> "1::".
    head = text.slice(0, lastColon + 1);
    if (!head.endsWith('::')) {
      head = head.slice(0, -1);
      if (head === '') return null; // ":1.2.3.4"
    }
  }

  const doubleColon = head.indexOf('::');
  if (doubleColon < 0) {
    const groups = parseHexGroups(head);
    if (groups === null || groups.length + tail.length !== 8) return null;
    return [...groups, ...tail];
  }
  if (doubleColon !== head.lastIndexOf('::') || head.includes(':::')) return null;
  const left = parseHexGroups(head.slice(0, doubleColon));
  const right = parseHexGroups(head.slice(doubleColon + 2));
  if (left === null || right === null) return null;
  const zeros = 8 - left.length - right.length - tail.length;
  if (zeros < 1) return null; // "::" stands for at least one zero group
  return [...left, ...new Array<number>(zeros).fill(0), ...right, ...tail];
}

/**
 * Strict textual parse: IPv4 only as four-part decimal without leading zeros
 * ("1.2.3.4"; "01.2.3.4", "1.2.3", "0x7f.0.0.1" are rejected); IPv6 in
 * standard RFC 4291/5952 text forms (embedded dotted IPv4 tail allowed), no
 * zone id ("fe80::1%eth0" rejected), no brackets, no surrounding whitespace.
 * Returns null when invalid. IPv4-mapped IPv6 stays IPv6 here.
 */
export function parseIpStrict(text: string): IpAddress | null {
  if (typeof text !== 'string') return null;
  const octets = parseIpv4Octets(text);
  if (octets !== null) return new ipaddr.IPv4(octets);
  const groups = parseIpv6Groups(text);
  if (groups !== null) return new ipaddr.IPv6(groups);
  return null;
}

function isV4(addr: IpAddress): addr is ipaddr.IPv4 {
  return addr.kind() === 'ipv4';
}

/** Unwrap ::ffff:a.b.c.d to the IPv4 address; others unchanged. */
export function normalizeIp(addr: IpAddress): IpAddress {
  if (!isV4(addr) && addr.isIPv4MappedAddress()) return addr.toIPv4Address();
  return addr;
}

/** Canonical text of an address: dotted decimal for IPv4, RFC 5952 for IPv6. Does not normalize. */
export function ipToString(addr: IpAddress): string {
  return isV4(addr) ? addr.toString() : addr.toRFC5952String();
}

/**
 * The merchant-supplied buyer IP rule: a valid, public (globally routable
 * unicast) IPv4 or IPv6 address. IPv4-mapped IPv6 is judged by its IPv4.
 *
 * After normalizing, ipaddr.js must classify the address as 'unicast' (this
 * excludes private, loopback, link-local, multicast, broadcast, unspecified,
 * reserved/documentation, CGNAT, benchmarking, unique-local, 6to4, Teredo,
 * NAT64, ORCHID, AS112, AMT, discard, site-local, ...). IPv6 must in addition
 * lie in 2000::/3, the only block IANA allocates as global unicast: this
 * rejects IPv4-compatible "::a.b.c.d", "::2", "4000::1" and similar, which
 * ipaddr.js reports as plain 'unicast'.
 */
export function isPublicIp(text: string): boolean {
  const parsed = parseIpStrict(text);
  if (parsed === null) return false;
  const addr = normalizeIp(parsed);
  if (isV4(addr)) return addr.range() === 'unicast';
  const first = addr.parts[0] ?? 0;
  return (first & 0xe000) === 0x2000 && addr.range() === 'unicast';
}

interface V4Entry {
  readonly network: ipaddr.IPv4;
  readonly prefix: number;
}
interface V6Entry {
  readonly network: ipaddr.IPv6;
  readonly prefix: number;
}

const PREFIX_TEXT = /^(0|[1-9][0-9]{0,2})$/;

/**
 * A parsed list of CIDR entries ("10.0.0.0/8", "2001:db8::/32") or single
 * addresses ("1.2.3.4" = /32, "::1" = /128).
 *
 * - Addresses in entries are parsed with parseIpStrict; surrounding whitespace of an entry is trimmed.
 * - An entry with host bits set ("10.0.0.1/8") is rejected as a likely typo.
 * - An IPv4-mapped entry ("::ffff:10.0.0.0/104", "::ffff:1.2.3.4") is stored as the IPv4 entry (10.0.0.0/8, 1.2.3.4/32).
 * - Families are disjoint: IPv4 entries match IPv4 (and IPv4-mapped) addresses only; IPv6 entries match
 *   non-mapped IPv6 addresses only. In particular "::/0" does not match IPv4 clients.
 */
export class CidrList {
  static readonly EMPTY: CidrList = new CidrList([], []);

  readonly #v4: readonly V4Entry[];
  readonly #v6: readonly V6Entry[];

  private constructor(v4: readonly V4Entry[], v6: readonly V6Entry[]) {
    this.#v4 = v4;
    this.#v6 = v6;
  }

  /** Throws an Error naming the first bad entry. */
  static parse(entries: readonly string[]): CidrList {
    const v4: V4Entry[] = [];
    const v6: V6Entry[] = [];
    const seen = new Set<string>();
    for (const raw of entries) {
      const entry = parseCidrEntry(raw);
      const text = `${ipToString(entry.network)}/${entry.prefix}`;
      if (seen.has(text)) continue;
      seen.add(text);
      if (isV4(entry.network)) v4.push({ network: entry.network, prefix: entry.prefix });
      else v6.push({ network: entry.network, prefix: entry.prefix });
    }
    if (v4.length === 0 && v6.length === 0) return CidrList.EMPTY;
    return new CidrList(v4, v6);
  }

  get size(): number {
    return this.#v4.length + this.#v6.length;
  }

  /** IPv4-mapped IPv6 addresses are matched as IPv4; an IPv4 entry never matches a (non-mapped) IPv6 address. */
  contains(addr: IpAddress): boolean {
    const a = normalizeIp(addr);
    if (isV4(a)) {
      for (const e of this.#v4) if (a.match(e.network, e.prefix)) return true;
      return false;
    }
    for (const e of this.#v6) if (a.match(e.network, e.prefix)) return true;
    return false;
  }

  /** Normalized entries, always in "address/prefix" form (IPv6 in RFC 5952 text). */
  toJSON(): string[] {
    return [...this.#v4.map((e) => `${ipToString(e.network)}/${e.prefix}`), ...this.#v6.map((e) => `${ipToString(e.network)}/${e.prefix}`)];
  }
}

function parseCidrEntry(raw: unknown): { network: IpAddress; prefix: number } {
  const bad = (why: string): Error => new Error(`invalid CIDR list entry ${JSON.stringify(raw)}: ${why}`);
  if (typeof raw !== 'string') throw bad('not a string');
  const text = raw.trim();
  if (text === '') throw bad('empty');
  const slash = text.indexOf('/');
  const addrText = slash < 0 ? text : text.slice(0, slash);
  const parsed = parseIpStrict(addrText);
  if (parsed === null) throw bad('not a valid IP address');
  const maxPrefix = isV4(parsed) ? 32 : 128;
  let prefix = maxPrefix;
  if (slash >= 0) {
    const prefixText = text.slice(slash + 1);
    if (!PREFIX_TEXT.test(prefixText)) throw bad('prefix length must be a decimal number');
    prefix = Number(prefixText);
    if (prefix > maxPrefix) throw bad(`prefix length must be at most ${maxPrefix}`);
  }
  let network: IpAddress = parsed;
  if (!isV4(parsed) && parsed.isIPv4MappedAddress() && prefix >= 96) {
    network = parsed.toIPv4Address();
    prefix -= 96;
  }
  const networkOf = networkAddress(network, prefix);
  if (!bytesEqual(networkOf.toByteArray(), network.toByteArray())) {
    throw bad(`host bits set (did you mean ${ipToString(networkOf)}/${prefix}?)`);
  }
  return { network, prefix };
}

function networkAddress(addr: IpAddress, prefix: number): IpAddress {
  const bytes = addr.toByteArray();
  for (let i = 0; i < bytes.length; i++) {
    const bitsHere = Math.max(0, Math.min(8, prefix - i * 8));
    const mask = bitsHere === 0 ? 0 : (0xff << (8 - bitsHere)) & 0xff;
    bytes[i] = (bytes[i] ?? 0) & mask;
  }
  return ipaddr.fromByteArray(bytes);
}

function bytesEqual(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && a.every((v, i) => v === b[i]);
}
