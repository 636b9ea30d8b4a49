import assert from 'node:assert/strict';
import { isIP } from 'node:net';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { CidrList, ipToString, isPublicIp, normalizeIp, parseIpStrict } from '../../src/net/ip.ts';
import { resolveSource } from '../../src/net/source-ip.ts';
import type { ForwardingHeaders, SourceIpPolicy, SourceRejectReason } from '../../src/net/source-ip.ts';

describe('parseIpStrict', () => {
  const valid: Array<[string, string, 'ipv4' | 'ipv6']> = [
    ['1.2.3.4', '1.2.3.4', 'ipv4'],
    ['0.0.0.0', '0.0.0.0', 'ipv4'],
    ['255.255.255.255', '255.255.255.255', 'ipv4'],
    ['10.0.0.1', '10.0.0.1', 'ipv4'],
    ['::', '::', 'ipv6'],
    ['::1', '::1', 'ipv6'],
    ['2001:db8::1', '2001:db8::1', 'ipv6'],
    ['2001:DB8::1', '2001:db8::1', 'ipv6'],
    ['2001:0db8:0000:0000:0000:0000:0000:0001', '2001:db8::1', 'ipv6'],
    ['2606:4700:4700::1111', '2606:4700:4700::1111', 'ipv6'],
    ['1:2:3:4:5:6:7:8', '1:2:3:4:5:6:7:8', 'ipv6'],
    ['1:2:3:4:5:6:7::', '1:2:3:4:5:6:7:0', 'ipv6'],
    ['::2:3:4:5:6:7:8', '0:2:3:4:5:6:7:8', 'ipv6'],
    ['fe80::1', 'fe80::1', 'ipv6'],
    ['::ffff:1.2.3.4', '::ffff:102:304', 'ipv6'],
    ['::ffff:10.0.0.1', '::ffff:a00:1', 'ipv6'],
    ['::1.2.3.4', '::102:304', 'ipv6'],
    ['1:2:3:4:5:6:1.2.3.4', '1:2:3:4:5:6:102:304', 'ipv6'],
    ['64:ff9b::8.8.8.8', '64:ff9b::808:808', 'ipv6'],
  ];
  for (const [text, canonical, kind] of valid) {
    it(`accepts ${JSON.stringify(text)}`, () => {
      const a = parseIpStrict(text);
      assert.ok(a, text);
      assert.equal(a.kind(), kind);
      assert.equal(ipToString(a), canonical);
    });
  }

  const invalid = [
    '',
    ' ',
    ' 1.2.3.4',
    '1.2.3.4 ',
    '1.2.3.4\n',
    '\t::1',
    '01.2.3.4',
    '1.2.3.04',
    '00.0.0.0',
    '1.2.3',
    '1.2',
    '1',
    '16909060',
    '0x7f.0.0.1',
    '0x7f000001',
    '0x7f.1',
    '0177.0.0.1',
    '017700000001',
    '1.2.3.256',
    '256.1.1.1',
    '1.2.3.4.5',
    '1.2.3.',
    '.1.2.3',
    '1..2.3',
    '-1.2.3.4',
    '+1.2.3.4',
    '1.2.3.4/32',
    '1.2.3.4:80',
    '１.２.３.４',
    'fe80::1%eth0',
    'fe80::1%1',
    '[::1]',
    '[2001:db8::1]:443',
    ':::',
    '1::2::3',
    ':1::',
    '::1:',
    '1:2:3:4:5:6:7:8:9',
    '1:2:3:4:5:6:7',
    '1:2:3:4:5:6:7:8::',
    '::1:2:3:4:5:6:7:8',
    '12345::',
    '00001::',
    'g::1',
    '::ffff:1.2.3',
    '::ffff:01.2.3.4',
    '::ffff:0x7f.0.0.1',
    '::ffff:1.2.3.4.5',
    '1:2:3:4:5:6:7:1.2.3.4',
    ':1.2.3.4',
    '1.2.3.4::',
    '::1.2.3.4:1',
    'localhost',
    'unknown',
  ];
  for (const text of invalid) {
    it(`rejects ${JSON.stringify(text)}`, () => {
      assert.equal(parseIpStrict(text), null);
    });
  }

  it('keeps IPv4-mapped as IPv6, normalizeIp unwraps it', () => {
    const a = parseIpStrict('::ffff:8.8.8.8');
    assert.ok(a);
    assert.equal(a.kind(), 'ipv6');
    const n = normalizeIp(a);
    assert.equal(n.kind(), 'ipv4');
    assert.equal(ipToString(n), '8.8.8.8');
    const b = parseIpStrict('2001:db8::1');
    assert.ok(b);
    assert.equal(normalizeIp(b), b);
  });

  it('property: every canonical IPv4/IPv6 text round-trips', () => {
    fc.assert(
      fc.property(fc.ipV4(), (t) => {
        const a = parseIpStrict(t);
        return a !== null && ipToString(a) === t;
      }),
    );
    fc.assert(
      fc.property(fc.ipV6(), (t) => {
        const a = parseIpStrict(t);
        return a !== null && a.kind() === 'ipv6';
      }),
    );
  });

  it('property: agrees with node:net isIP (no zone ids) and with WHATWG URL IPv6 canonical text', () => {
    const alphabet = fc.string({ unit: fc.constantFrom(...'0123456789abcdefF:.'.split('')), maxLength: 45 });
    const fragments = fc
      .array(fc.constantFrom('::', ':', '0', '1', 'ffff', '12', '1.2.3.4', '255.0.0.1', '01', 'abcd', '.', '00000', '256'), {
        maxLength: 10,
      })
      .map((a) => a.join(''));
    fc.assert(
      fc.property(fc.oneof(alphabet, fragments, fc.ipV6(), fc.ipV4(), fc.ipV4Extended()), (t) => {
        const a = parseIpStrict(t);
        assert.equal(a !== null, isIP(t) !== 0, t);
        if (a !== null && a.kind() === 'ipv6') assert.equal(`[${ipToString(a)}]`, new URL(`http://[${t}]/`).hostname, t);
      }),
      { numRuns: 5000 },
    );
  });

  it('property: never throws on arbitrary input', () => {
    fc.assert(
      fc.property(fc.string({ unit: fc.constantFrom(...'0123456789abcdefABCDEFx:.%[] /'.split('')) }), (t) => {
        parseIpStrict(t);
        return true;
      }),
      { numRuns: 2000 },
    );
  });
});

describe('isPublicIp', () => {
  const publicAddresses = [
    '8.8.8.8',
    '1.1.1.1',
    '93.184.216.34',
    '100.63.255.255', // just below CGNAT
    '100.128.0.0', // just above CGNAT
    '172.15.255.255', // just below 172.16/12
    '172.32.0.0', // just above 172.16/12
    '198.17.255.255', // just below benchmarking
    '198.20.0.0', // just above benchmarking
    '223.255.255.255',
    '::ffff:8.8.8.8',
    '2606:4700:4700::1111',
    '2a00:1450:4001::200e',
    '2001:4860:4860::8888',
    '2c0f:fb50::1',
  ];
  for (const text of publicAddresses) {
    it(`public: ${text}`, () => assert.equal(isPublicIp(text), true));
  }

  const nonPublic: Array<[string, string]> = [
    ['10.0.0.1', 'private 10/8'],
    ['10.255.255.255', 'private 10/8'],
    ['172.16.0.1', 'private 172.16/12'],
    ['172.31.255.255', 'private 172.16/12'],
    ['192.168.1.1', 'private 192.168/16'],
    ['127.0.0.1', 'loopback'],
    ['127.255.255.254', 'loopback'],
    ['169.254.1.1', 'link-local'],
    ['224.0.0.1', 'multicast'],
    ['239.255.255.255', 'multicast'],
    ['255.255.255.255', 'broadcast'],
    ['0.0.0.0', 'unspecified'],
    ['0.1.2.3', 'this network 0/8'],
    ['240.0.0.1', 'reserved 240/4'],
    ['192.0.0.8', 'IETF protocol assignments'],
    ['192.0.2.1', 'TEST-NET-1'],
    ['198.51.100.7', 'TEST-NET-2'],
    ['203.0.113.9', 'TEST-NET-3'],
    ['100.64.0.1', 'CGNAT'],
    ['100.127.255.255', 'CGNAT'],
    ['198.18.0.1', 'benchmarking'],
    ['198.19.255.255', 'benchmarking'],
    ['192.88.99.1', '6to4 relay anycast'],
    ['::', 'unspecified'],
    ['::1', 'loopback'],
    ['fe80::1', 'link-local'],
    ['febf:ffff::1', 'link-local'],
    ['fec0::1', 'site-local (deprecated)'],
    ['ff02::1', 'multicast'],
    ['ff0e::1', 'multicast global scope'],
    ['fc00::1', 'unique-local'],
    ['fd12:3456:789a::1', 'unique-local'],
    ['2001:db8::1', 'documentation'],
    ['2001:db8:ffff::1', 'documentation'],
    ['3fff::1', 'documentation (RFC 9637)'],
    ['2002:c000:0201::1', '6to4'],
    ['2001:0:4136:e378:8000:63bf:3fff:fdd2', 'teredo'],
    ['2001:2::1', 'benchmarking'],
    ['2001:10::1', 'orchid'],
    ['2001:20::1', 'orchidv2'],
    ['64:ff9b::808:808', 'NAT64'],
    ['64:ff9b:1::1', 'local NAT64'],
    ['100::1', 'discard'],
    ['::1.2.3.4', 'IPv4-compatible (deprecated)'],
    ['::2', 'not in 2000::/3'],
    ['4000::1', 'not in 2000::/3'],
    ['5f00::1', 'segment routing'],
    ['::ffff:10.0.0.1', 'mapped private'],
    ['::ffff:127.0.0.1', 'mapped loopback'],
    ['::ffff:100.64.0.1', 'mapped CGNAT'],
    ['::ffff:192.0.2.1', 'mapped documentation'],
    ['::ffff:0:8.8.8.8', 'SIIT (rfc6145)'],
    ['', 'empty'],
    [' 8.8.8.8', 'leading whitespace'],
    ['8.8.8.8 ', 'trailing whitespace'],
    ['08.8.8.8', 'leading zero'],
    ['8.8.8', 'three parts'],
    ['0x8.8.8.8', 'hex'],
    ['010.8.8.8', 'octal-looking'],
    ['134744072', 'single integer'],
    ['2001:4860:4860::8888%eth0', 'zone id'],
    ['[2001:4860:4860::8888]', 'brackets'],
    ['8.8.8.8/32', 'cidr'],
    ['8.8.8.8:80', 'port'],
    ['dns.google', 'hostname'],
  ];
  for (const [text, why] of nonPublic) {
    it(`not public: ${JSON.stringify(text)} (${why})`, () => assert.equal(isPublicIp(text), false));
  }
});

describe('CidrList', () => {
  const ip = (t: string) => {
    const a = parseIpStrict(t);
    assert.ok(a, t);
    return a;
  };

  it('matches IPv4 and IPv6 CIDRs and single addresses', () => {
    const list = CidrList.parse(['10.0.0.0/8', '2001:db8::/32', '1.2.3.4', '::1', '192.168.0.0/16']);
    assert.equal(list.size, 5);
    assert.equal(list.contains(ip('10.1.2.3')), true);
    assert.equal(list.contains(ip('11.0.0.0')), false);
    assert.equal(list.contains(ip('1.2.3.4')), true);
    assert.equal(list.contains(ip('1.2.3.5')), false);
    assert.equal(list.contains(ip('2001:db8:1::5')), true);
    assert.equal(list.contains(ip('2001:db9::1')), false);
    assert.equal(list.contains(ip('::1')), true);
    assert.equal(list.contains(ip('::2')), false);
    assert.equal(list.contains(ip('192.168.255.255')), true);
  });

  it('matches IPv4-mapped IPv6 addresses as IPv4', () => {
    const list = CidrList.parse(['10.0.0.0/8']);
    assert.equal(list.contains(ip('::ffff:10.9.8.7')), true);
    assert.equal(list.contains(ip('::ffff:11.0.0.1')), false);
  });

  it('never matches a non-mapped IPv6 address with an IPv4 entry, nor IPv4 with a plain IPv6 entry', () => {
    const v4all = CidrList.parse(['0.0.0.0/0']);
    assert.equal(v4all.contains(ip('8.8.8.8')), true);
    assert.equal(v4all.contains(ip('::ffff:8.8.8.8')), true);
    assert.equal(v4all.contains(ip('2001:db8::1')), false);
    assert.equal(v4all.contains(ip('::1.2.3.4')), false); // IPv4-compatible is not mapped
    assert.equal(v4all.contains(ip('::')), false);
    const v6all = CidrList.parse(['::/0']);
    assert.equal(v6all.contains(ip('2001:db8::1')), true);
    assert.equal(v6all.contains(ip('8.8.8.8')), false);
    assert.equal(v6all.contains(ip('::ffff:8.8.8.8')), false);
  });

  it('converts IPv4-mapped entries to IPv4 entries', () => {
    const list = CidrList.parse(['::ffff:10.0.0.0/104', '::ffff:1.2.3.4', '::ffff:0:0/96']);
    assert.deepEqual(list.toJSON(), ['10.0.0.0/8', '1.2.3.4/32', '0.0.0.0/0']);
    assert.equal(CidrList.parse(['::ffff:10.0.0.0/104']).contains(ip('10.2.3.4')), true);
  });

  it('normalizes, trims and de-duplicates in toJSON', () => {
    const list = CidrList.parse([' 10.0.0.0/8', '2001:DB8:0:0::/32', '::1', '10.0.0.0/8']);
    assert.deepEqual(list.toJSON(), ['10.0.0.0/8', '2001:db8::/32', '::1/128']);
    assert.equal(list.size, 3);
    assert.equal(JSON.stringify({ list }), '{"list":["10.0.0.0/8","2001:db8::/32","::1/128"]}');
  });

  it('EMPTY contains nothing', () => {
    assert.equal(CidrList.EMPTY.size, 0);
    assert.equal(CidrList.EMPTY.contains(ip('1.2.3.4')), false);
    assert.deepEqual(CidrList.EMPTY.toJSON(), []);
    assert.equal(CidrList.parse([]).size, 0);
  });

  const bad = [
    '',
    '   ',
    '10.0.0.0/33',
    '2001:db8::/129',
    '10.0.0.0/',
    '10.0.0.0/08',
    '10.0.0.0/-1',
    '10.0.0.0/8/8',
    '10.0.0.0/ 8',
    '10.0.0.1/8', // host bits set
    '2001:db8::1/32', // host bits set
    '10/8',
    '010.0.0.0/8',
    '0x0a.0.0.0/8',
    'fe80::%eth0/64',
    '[::1]',
    'localhost',
    '1.2.3.4-1.2.3.5',
  ];
  for (const entry of bad) {
    it(`throws naming bad entry ${JSON.stringify(entry)}`, () => {
      assert.throws(
        () => CidrList.parse(['1.2.3.4', entry]),
        (err: unknown) => err instanceof Error && err.message.includes(JSON.stringify(entry)),
      );
    });
  }
});

describe('resolveSource', () => {
  const NO_HEADERS: ForwardingHeaders = { xForwardedFor: [], forwarded: [], xRealIp: [] };
  const headers = (h: Partial<ForwardingHeaders>): ForwardingHeaders => ({ ...NO_HEADERS, ...h });
  const policy = (p: Partial<SourceIpPolicy> = {}): SourceIpPolicy => ({
    trustedProxies: CidrList.parse(['10.0.0.0/8', '127.0.0.1', 'fd00::/8']),
    allowlist: null,
    denylist: CidrList.EMPTY,
    allowIpv4: true,
    allowIpv6: true,
    ...p,
  });

  type Row = {
    name: string;
    peer: string | undefined;
    h?: Partial<ForwardingHeaders>;
    p?: Partial<SourceIpPolicy>;
    blocked?: string[];
    expect: string | SourceRejectReason; // key, or reason
  };

  const REASONS = new Set<string>([
    'SOURCE_ADDRESS_MISSING',
    'SOURCE_ADDRESS_MALFORMED',
    'FORWARDER_UNTRUSTED',
    'ADDRESS_FAMILY_DISABLED',
    'PLATFORM_DENYLISTED',
    'NOT_IN_PLATFORM_ALLOWLIST',
    'TEMPORARILY_BLOCKED',
  ]);

  const rows: Row[] = [
    // 1. peer
    { name: 'peer undefined', peer: undefined, expect: 'SOURCE_ADDRESS_MISSING' },
    { name: 'peer empty', peer: '', expect: 'SOURCE_ADDRESS_MISSING' },
    { name: 'peer garbage', peer: 'not-an-ip', expect: 'SOURCE_ADDRESS_MISSING' },
    { name: 'peer with zone id', peer: 'fe80::1%eth0', expect: 'SOURCE_ADDRESS_MISSING' },
    { name: 'peer hex', peer: '0x7f.0.0.1', expect: 'SOURCE_ADDRESS_MISSING' },
    {
      name: 'missing peer wins over headers and other rules',
      peer: undefined,
      h: { xForwardedFor: ['garbage'] },
      p: { allowIpv4: false },
      expect: 'SOURCE_ADDRESS_MISSING',
    },
    { name: 'direct IPv4 peer', peer: '8.8.8.8', expect: '8.8.8.8' },
    { name: 'direct IPv6 peer', peer: '2001:DB8:0::1', expect: '2001:db8::1' },
    { name: 'direct IPv4-mapped peer is normalized', peer: '::ffff:8.8.8.8', expect: '8.8.8.8' },
    { name: 'trusted peer without headers is the client', peer: '::ffff:127.0.0.1', expect: '127.0.0.1' },

    // 2. never trust an untrusted peer's headers
    { name: 'untrusted peer with XFF', peer: '8.8.8.8', h: { xForwardedFor: ['1.1.1.1'] }, expect: 'FORWARDER_UNTRUSTED' },
    { name: 'untrusted peer with Forwarded', peer: '8.8.8.8', h: { forwarded: ['for=1.1.1.1'] }, expect: 'FORWARDER_UNTRUSTED' },
    { name: 'untrusted peer with X-Real-IP', peer: '8.8.8.8', h: { xRealIp: ['1.1.1.1'] }, expect: 'FORWARDER_UNTRUSTED' },
    { name: 'untrusted peer with empty header line', peer: '8.8.8.8', h: { xForwardedFor: [''] }, expect: 'FORWARDER_UNTRUSTED' },
    {
      name: 'untrusted peer with garbage headers: untrusted before malformed',
      peer: '8.8.8.8',
      h: { xForwardedFor: ['garbage'] },
      expect: 'FORWARDER_UNTRUSTED',
    },
    {
      name: 'untrusted peer claiming a trusted proxy in XFF',
      peer: '8.8.8.8',
      h: { xForwardedFor: ['10.0.0.1'] },
      expect: 'FORWARDER_UNTRUSTED',
    },
    {
      name: 'untrusted peer before family check',
      peer: '2001:db8::1',
      h: { xForwardedFor: ['1.1.1.1'] },
      p: { allowIpv6: false },
      expect: 'FORWARDER_UNTRUSTED',
    },
    {
      name: 'mapped trusted peer is recognised as trusted',
      peer: '::ffff:10.1.1.1',
      h: { xForwardedFor: ['1.1.1.1'] },
      expect: '1.1.1.1',
    },

    // 3. chains
    { name: 'XFF single', peer: '10.0.0.1', h: { xForwardedFor: ['1.1.1.1'] }, expect: '1.1.1.1' },
    {
      name: 'XFF several trusted proxies: rightmost untrusted wins',
      peer: '10.0.0.1',
      h: { xForwardedFor: ['6.6.6.6, 1.1.1.1, 10.2.2.2, 127.0.0.1', '10.3.3.3'] },
      expect: '1.1.1.1',
    },
    {
      name: 'XFF spoofed left part is ignored',
      peer: '10.0.0.1',
      h: { xForwardedFor: ['10.9.9.9, 1.1.1.1'] },
      expect: '1.1.1.1',
    },
    {
      name: 'XFF all trusted: leftmost',
      peer: '10.0.0.1',
      h: { xForwardedFor: ['10.0.0.5, 10.0.0.6'] },
      expect: '10.0.0.5',
    },
    {
      name: 'XFF lines joined in order',
      peer: '10.0.0.1',
      h: { xForwardedFor: ['1.1.1.1', '2.2.2.2', '10.4.4.4'] },
      expect: '2.2.2.2',
    },
    {
      name: 'XFF with IPv6 and mapped',
      peer: 'fd00::1',
      h: { xForwardedFor: ['2001:db8::1, ::ffff:9.9.9.9'] },
      expect: '9.9.9.9',
    },
    { name: 'XFF tabs and spaces trimmed', peer: '10.0.0.1', h: { xForwardedFor: ['\t1.1.1.1 ,  2.2.2.2\t'] }, expect: '2.2.2.2' },
    { name: 'XFF IPv4 with port accepted', peer: '10.0.0.1', h: { xForwardedFor: ['1.1.1.1:4711'] }, expect: '1.1.1.1' },
    {
      name: 'XFF bracketed IPv6 with port accepted',
      peer: '10.0.0.1',
      h: { xForwardedFor: ['[2001:db8::7]:4711'] },
      expect: '2001:db8::7',
    },
    { name: 'XFF bracketed IPv6 accepted', peer: '10.0.0.1', h: { xForwardedFor: ['[2001:db8::7]'] }, expect: '2001:db8::7' },
    { name: 'XFF garbage', peer: '10.0.0.1', h: { xForwardedFor: ['hello'] }, expect: 'SOURCE_ADDRESS_MALFORMED' },
    { name: 'XFF empty line', peer: '10.0.0.1', h: { xForwardedFor: [''] }, expect: 'SOURCE_ADDRESS_MALFORMED' },
    { name: 'XFF empty element', peer: '10.0.0.1', h: { xForwardedFor: ['1.1.1.1,,2.2.2.2'] }, expect: 'SOURCE_ADDRESS_MALFORMED' },
    { name: 'XFF trailing comma', peer: '10.0.0.1', h: { xForwardedFor: ['1.1.1.1,'] }, expect: 'SOURCE_ADDRESS_MALFORMED' },
    {
      name: 'XFF malformed element left of the client still rejects',
      peer: '10.0.0.1',
      h: { xForwardedFor: ['unknown, 1.1.1.1'] },
      expect: 'SOURCE_ADDRESS_MALFORMED',
    },
    { name: 'XFF leading zero', peer: '10.0.0.1', h: { xForwardedFor: ['01.1.1.1'] }, expect: 'SOURCE_ADDRESS_MALFORMED' },
    { name: 'XFF hex', peer: '10.0.0.1', h: { xForwardedFor: ['0x7f.1'] }, expect: 'SOURCE_ADDRESS_MALFORMED' },
    { name: 'XFF zone id', peer: '10.0.0.1', h: { xForwardedFor: ['fe80::1%eth0'] }, expect: 'SOURCE_ADDRESS_MALFORMED' },
    { name: 'XFF bare IPv6 with port', peer: '10.0.0.1', h: { xForwardedFor: ['2001:db8::1:443x'] }, expect: 'SOURCE_ADDRESS_MALFORMED' },
    { name: 'XFF port too large', peer: '10.0.0.1', h: { xForwardedFor: ['1.1.1.1:65536'] }, expect: 'SOURCE_ADDRESS_MALFORMED' },
    { name: 'XFF bracketed IPv4', peer: '10.0.0.1', h: { xForwardedFor: ['[1.1.1.1]'] }, expect: 'SOURCE_ADDRESS_MALFORMED' },
    {
      name: 'XFF takes precedence over Forwarded and X-Real-IP',
      peer: '10.0.0.1',
      h: { xForwardedFor: ['1.1.1.1'], forwarded: ['for=2.2.2.2'], xRealIp: ['3.3.3.3'] },
      expect: '1.1.1.1',
    },
    {
      name: 'XFF precedence: malformed Forwarded is not read',
      peer: '10.0.0.1',
      h: { xForwardedFor: ['1.1.1.1'], forwarded: ['garbage'] },
      expect: '1.1.1.1',
    },

    { name: 'Forwarded simple', peer: '10.0.0.1', h: { forwarded: ['for=1.1.1.1'] }, expect: '1.1.1.1' },
    {
      name: 'Forwarded quoted bracketed IPv6 with port',
      peer: '10.0.0.1',
      h: { forwarded: ['for="[2001:db8:cafe::17]:4711"'] },
      expect: '2001:db8:cafe::17',
    },
    {
      name: 'Forwarded quoted bracketed IPv6',
      peer: '10.0.0.1',
      h: { forwarded: ['For="[2001:DB8::1]";proto=https;by=10.0.0.1'] },
      expect: '2001:db8::1',
    },
    {
      name: 'Forwarded several elements and trusted proxies',
      peer: '10.0.0.1',
      h: {
        forwarded: ['for=6.6.6.6, for=1.1.1.1;proto=https;host="shop.example;x=1,y"', 'for="10.0.0.2:8080";by=_hidden, for="[fd00::5]"'],
      },
      expect: '1.1.1.1',
    },
    {
      name: 'Forwarded with OWS and empty pairs',
      peer: '10.0.0.1',
      h: { forwarded: ['  for=1.1.1.1 ; ;proto=http ,for="2.2.2.2:_abc"  '] },
      expect: '2.2.2.2',
    },
    { name: 'Forwarded quoted IPv4 with escape', peer: '10.0.0.1', h: { forwarded: ['for="1.1.1\\.1"'] }, expect: '1.1.1.1' },
    { name: 'Forwarded for=unknown', peer: '10.0.0.1', h: { forwarded: ['for=unknown'] }, expect: 'SOURCE_ADDRESS_MALFORMED' },
    { name: 'Forwarded obfuscated node', peer: '10.0.0.1', h: { forwarded: ['for=_hidden'] }, expect: 'SOURCE_ADDRESS_MALFORMED' },
    {
      name: 'Forwarded obfuscated left element',
      peer: '10.0.0.1',
      h: { forwarded: ['for=_gazonk, for=1.1.1.1'] },
      expect: 'SOURCE_ADDRESS_MALFORMED',
    },
    {
      name: 'Forwarded unbracketed IPv6',
      peer: '10.0.0.1',
      h: { forwarded: ['for="2001:db8::1"'] },
      expect: 'SOURCE_ADDRESS_MALFORMED',
    },
    {
      name: 'Forwarded unquoted bracketed IPv6',
      peer: '10.0.0.1',
      h: { forwarded: ['for=[2001:db8::1]'] },
      expect: 'SOURCE_ADDRESS_MALFORMED',
    },
    { name: 'Forwarded without for', peer: '10.0.0.1', h: { forwarded: ['proto=https'] }, expect: 'SOURCE_ADDRESS_MALFORMED' },
    {
      name: 'Forwarded duplicate for in element',
      peer: '10.0.0.1',
      h: { forwarded: ['for=1.1.1.1;for=2.2.2.2'] },
      expect: 'SOURCE_ADDRESS_MALFORMED',
    },
    { name: 'Forwarded unterminated quote', peer: '10.0.0.1', h: { forwarded: ['for="1.1.1.1'] }, expect: 'SOURCE_ADDRESS_MALFORMED' },
    { name: 'Forwarded empty value', peer: '10.0.0.1', h: { forwarded: ['for='] }, expect: 'SOURCE_ADDRESS_MALFORMED' },
    {
      name: 'Forwarded empty element',
      peer: '10.0.0.1',
      h: { forwarded: ['for=1.1.1.1,,for=2.2.2.2'] },
      expect: 'SOURCE_ADDRESS_MALFORMED',
    },
    { name: 'Forwarded garbage', peer: '10.0.0.1', h: { forwarded: ['1.1.1.1'] }, expect: 'SOURCE_ADDRESS_MALFORMED' },
    {
      name: 'Forwarded bad port',
      peer: '10.0.0.1',
      h: { forwarded: ['for="1.1.1.1:99999"'] },
      expect: 'SOURCE_ADDRESS_MALFORMED',
    },
    {
      name: 'Forwarded precedence over X-Real-IP',
      peer: '10.0.0.1',
      h: { forwarded: ['for=2.2.2.2'], xRealIp: ['3.3.3.3'] },
      expect: '2.2.2.2',
    },

    { name: 'X-Real-IP', peer: '10.0.0.1', h: { xRealIp: ['3.3.3.3'] }, expect: '3.3.3.3' },
    { name: 'X-Real-IP IPv6', peer: '10.0.0.1', h: { xRealIp: [' 2001:db8::3 '] }, expect: '2001:db8::3' },
    { name: 'X-Real-IP trusted is still the client', peer: '10.0.0.1', h: { xRealIp: ['10.0.0.9'] }, expect: '10.0.0.9' },
    { name: 'X-Real-IP two lines', peer: '10.0.0.1', h: { xRealIp: ['3.3.3.3', '4.4.4.4'] }, expect: 'SOURCE_ADDRESS_MALFORMED' },
    { name: 'X-Real-IP list', peer: '10.0.0.1', h: { xRealIp: ['3.3.3.3, 4.4.4.4'] }, expect: 'SOURCE_ADDRESS_MALFORMED' },
    { name: 'X-Real-IP garbage', peer: '10.0.0.1', h: { xRealIp: ['x'] }, expect: 'SOURCE_ADDRESS_MALFORMED' },

    // 4. address family
    { name: 'IPv4 disabled', peer: '8.8.8.8', p: { allowIpv4: false }, expect: 'ADDRESS_FAMILY_DISABLED' },
    { name: 'IPv4-mapped counts as IPv4', peer: '::ffff:8.8.8.8', p: { allowIpv4: false }, expect: 'ADDRESS_FAMILY_DISABLED' },
    { name: 'IPv4-mapped allowed when only IPv4', peer: '::ffff:8.8.8.8', p: { allowIpv6: false }, expect: '8.8.8.8' },
    { name: 'IPv6 disabled', peer: '2001:db8::1', p: { allowIpv6: false }, expect: 'ADDRESS_FAMILY_DISABLED' },
    {
      name: 'family judged on the forwarded client, not the proxy',
      peer: 'fd00::1',
      h: { xForwardedFor: ['1.1.1.1'] },
      p: { allowIpv6: false },
      expect: '1.1.1.1',
    },
    {
      name: 'malformed before family',
      peer: '10.0.0.1',
      h: { xForwardedFor: ['x'] },
      p: { allowIpv4: false, allowIpv6: false },
      expect: 'SOURCE_ADDRESS_MALFORMED',
    },
    {
      name: 'family before denylist',
      peer: '8.8.8.8',
      p: { allowIpv4: false, denylist: CidrList.parse(['8.8.8.8']) },
      expect: 'ADDRESS_FAMILY_DISABLED',
    },

    // 5. denylist
    { name: 'denylisted', peer: '8.8.8.8', p: { denylist: CidrList.parse(['8.8.0.0/16']) }, expect: 'PLATFORM_DENYLISTED' },
    {
      name: 'denylisted forwarded client',
      peer: '10.0.0.1',
      h: { xForwardedFor: ['6.6.6.6'] },
      p: { denylist: CidrList.parse(['6.6.6.6']) },
      expect: 'PLATFORM_DENYLISTED',
    },
    {
      name: 'denylisted mapped',
      peer: '::ffff:8.8.8.8',
      p: { denylist: CidrList.parse(['8.8.8.8']) },
      expect: 'PLATFORM_DENYLISTED',
    },
    {
      name: 'denylist before allowlist',
      peer: '8.8.8.8',
      p: { denylist: CidrList.parse(['8.8.8.8']), allowlist: CidrList.parse(['8.8.8.8']) },
      expect: 'PLATFORM_DENYLISTED',
    },

    // 6. allowlist
    { name: 'not in allowlist', peer: '8.8.8.8', p: { allowlist: CidrList.parse(['1.0.0.0/8']) }, expect: 'NOT_IN_PLATFORM_ALLOWLIST' },
    { name: 'empty allowlist admits nobody', peer: '8.8.8.8', p: { allowlist: CidrList.EMPTY }, expect: 'NOT_IN_PLATFORM_ALLOWLIST' },
    { name: 'in allowlist', peer: '8.8.8.8', p: { allowlist: CidrList.parse(['8.0.0.0/8']) }, expect: '8.8.8.8' },
    {
      name: 'allowlist judged on client, not proxy',
      peer: '10.0.0.1',
      h: { xForwardedFor: ['9.9.9.9'] },
      p: { allowlist: CidrList.parse(['10.0.0.0/8']) },
      expect: 'NOT_IN_PLATFORM_ALLOWLIST',
    },
    {
      name: 'allowlist before temporary block',
      peer: '8.8.8.8',
      p: { allowlist: CidrList.parse(['1.1.1.1']) },
      blocked: ['8.8.8.8'],
      expect: 'NOT_IN_PLATFORM_ALLOWLIST',
    },

    // 7. temporary block
    { name: 'temporarily blocked', peer: '8.8.8.8', blocked: ['8.8.8.8'], expect: 'TEMPORARILY_BLOCKED' },
    { name: 'blocked by normalized key (mapped)', peer: '::ffff:8.8.8.8', blocked: ['8.8.8.8'], expect: 'TEMPORARILY_BLOCKED' },
    {
      name: 'blocked by normalized key (IPv6)',
      peer: '2001:0DB8:0000::0001',
      blocked: ['2001:db8::1'],
      expect: 'TEMPORARILY_BLOCKED',
    },
    {
      name: 'blocked forwarded client',
      peer: '10.0.0.1',
      h: { xForwardedFor: ['5.5.5.5'] },
      blocked: ['5.5.5.5'],
      expect: 'TEMPORARILY_BLOCKED',
    },
    {
      name: 'block of the proxy does not block the client',
      peer: '10.0.0.1',
      h: { xForwardedFor: ['5.5.5.5'] },
      blocked: ['10.0.0.1'],
      expect: '5.5.5.5',
    },
  ];

  for (const row of rows) {
    it(row.name, () => {
      const blocked = new Set(row.blocked ?? []);
      const result = resolveSource(row.peer, headers(row.h ?? {}), policy(row.p), (k) => blocked.has(k));
      if (REASONS.has(row.expect)) {
        assert.deepEqual(result, { ok: false, reason: row.expect });
      } else {
        assert.equal(result.ok, true, JSON.stringify(result));
        if (result.ok) {
          assert.equal(result.key, row.expect);
          assert.equal(ipToString(result.address), row.expect);
        }
      }
    });
  }

  it('isBlocked is optional and called with the key only when the other checks pass', () => {
    assert.deepEqual(resolveSource('8.8.8.8', NO_HEADERS, policy()).ok, true);
    const calls: string[] = [];
    resolveSource('8.8.8.8', NO_HEADERS, policy({ denylist: CidrList.parse(['8.8.8.8']) }), (k) => {
      calls.push(k);
      return false;
    });
    assert.equal(calls.length, 0);
    resolveSource('::ffff:8.8.8.8', NO_HEADERS, policy(), (k) => {
      calls.push(k);
      return false;
    });
    assert.deepEqual(calls, ['8.8.8.8']);
  });

  it('property: never throws for arbitrary header strings, and always returns a known shape', () => {
    const fragments = fc.constantFrom(
      'for=',
      'For=',
      '"',
      '\\',
      '[',
      ']',
      ':',
      ';',
      ',',
      ' ',
      '\t',
      '=',
      '_',
      'unknown',
      '1.1.1.1',
      '10.0.0.1',
      '2001:db8::1',
      '::ffff:',
      '%eth0',
      '443',
      'proto=https',
    );
    const headerValue = fc.oneof(
      fc.string(),
      fc.string({ unit: 'binary' }),
      fc.array(fragments, { maxLength: 12 }).map((a) => a.join('')),
    );
    const lines = fc.array(headerValue, { maxLength: 3 });
    const peer = fc.oneof(fc.constant(undefined), fc.string(), fc.constantFrom('10.0.0.1', '::ffff:10.0.0.1', '8.8.8.8', 'fd00::1'));
    fc.assert(
      fc.property(peer, lines, lines, lines, fc.boolean(), (p, xff, fwd, xri, ipv6) => {
        const r = resolveSource(p, { xForwardedFor: xff, forwarded: fwd, xRealIp: xri }, policy({ allowIpv6: ipv6 }), () => false);
        if (r.ok) return typeof r.key === 'string' && parseIpStrict(r.key) !== null;
        return REASONS.has(r.reason);
      }),
      { numRuns: 3000 },
    );
  });

  it('property: an untrusted peer never gets a forwarded address accepted', () => {
    fc.assert(
      fc.property(fc.ipV4(), fc.ipV4(), (peerText, claimed) => {
        fc.pre(!policy().trustedProxies.contains(parseIpStrict(peerText) as NonNullable<ReturnType<typeof parseIpStrict>>));
        const r = resolveSource(peerText, { xForwardedFor: [claimed], forwarded: [], xRealIp: [] }, policy());
        return !r.ok && r.reason === 'FORWARDER_UNTRUSTED';
      }),
    );
  });
});
