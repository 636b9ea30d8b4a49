/**
 * The simulator's certificates for Alipay's certificate mode: a root CA, Alipay's public
 * certificate (the key that signs answers and notifications) and the app certificate of the
 * merchant's key, all issued by the root, as Alipay issues them. node:crypto parses certificates
 * but cannot make them, so the few DER structures an X.509 v3 certificate needs are written here.
 *
 * A certificate's SN, as Alipay computes it (AntCertificationUtil.getCertSN in
 * alipay/alipay-sdk-java-all): MD5 hex of the issuer's distinguished name in RFC 2253 order (last
 * attribute first, `SHORT=value` joined by `,`) followed by the serial number in decimal. The
 * simulator computes it from the values it wrote, not by parsing, so the adapter's SDK-computed SN
 * is checked against an independent computation.
 */
import { type KeyObject, createHash, createPublicKey, generateKeyPairSync, randomBytes, sign } from 'node:crypto';

export interface NameAttribute {
  short: 'C' | 'O' | 'OU' | 'CN';
  value: string;
}

export interface IssuedCert {
  pem: string;
  /** Alipay's SN of this certificate (MD5 of issuer DN + decimal serial). */
  sn: string;
}

const OIDS = { C: '2.5.4.6', O: '2.5.4.10', OU: '2.5.4.11', CN: '2.5.4.3' } as const;
const SHA256_WITH_RSA = '1.2.840.113549.1.1.11';
const BASIC_CONSTRAINTS = '2.5.29.19';

function tlv(tag: number, content: Buffer): Buffer {
  const n = content.length;
  let len: Buffer;
  if (n < 0x80) len = Buffer.from([n]);
  else {
    const bytes: number[] = [];
    for (let v = n; v > 0; v = Math.floor(v / 256)) bytes.unshift(v % 256);
    len = Buffer.from([0x80 | bytes.length, ...bytes]);
  }
  return Buffer.concat([Buffer.from([tag]), len, content]);
}

const seq = (...parts: Buffer[]) => tlv(0x30, Buffer.concat(parts));
const set = (...parts: Buffer[]) => tlv(0x31, Buffer.concat(parts));
const explicit = (n: number, inner: Buffer) => tlv(0xa0 + n, inner);

function integer(bytes: Buffer): Buffer {
  let b = bytes;
  while (b.length > 1 && b[0] === 0 && b[1]! < 0x80) b = b.subarray(1);
  return tlv(0x02, b[0]! >= 0x80 ? Buffer.concat([Buffer.from([0]), b]) : b);
}

function oid(dotted: string): Buffer {
  const [a, b, ...rest] = dotted.split('.').map(Number);
  const out = [a! * 40 + b!];
  for (const v of rest) {
    const chunk = [v & 0x7f];
    for (let x = v >>> 7; x > 0; x >>>= 7) chunk.unshift(0x80 | (x & 0x7f));
    out.push(...chunk);
  }
  return tlv(0x06, Buffer.from(out));
}

function name(attrs: readonly NameAttribute[]): Buffer {
  // Country as PrintableString, the others as UTF8String.
  return seq(...attrs.map((a) => set(seq(oid(OIDS[a.short]), tlv(a.short === 'C' ? 0x13 : 0x0c, Buffer.from(a.value, 'utf8'))))));
}

function utcTime(d: Date): Buffer {
  const s = d.toISOString();
  return tlv(0x17, Buffer.from(`${s.slice(2, 4)}${s.slice(5, 7)}${s.slice(8, 10)}${s.slice(11, 13)}${s.slice(14, 16)}${s.slice(17, 19)}Z`));
}

/** Alipay's SN: MD5 hex of the issuer DN in RFC 2253 order and the decimal serial. */
export function alipayCertSn(issuer: readonly NameAttribute[], serial: Buffer): string {
  const dn = [...issuer]
    .reverse()
    .map((a) => `${a.short}=${a.value}`)
    .join(',');
  return createHash('md5')
    .update(dn + BigInt(`0x${serial.toString('hex')}`).toString(10), 'utf8')
    .digest('hex');
}

/** An X.509 v3 certificate of `subjectKey`, signed SHA256withRSA by `issuerKey`. */
export function issueCert(opts: {
  subject: readonly NameAttribute[];
  subjectKey: KeyObject;
  issuer: readonly NameAttribute[];
  issuerKey: KeyObject;
  ca: boolean;
  now?: Date;
}): IssuedCert {
  const now = opts.now ?? new Date();
  const serial = Buffer.concat([Buffer.from([0x10]), randomBytes(15)]);
  const algorithm = seq(oid(SHA256_WITH_RSA), tlv(0x05, Buffer.alloc(0)));
  const subjectPublic = opts.subjectKey.type === 'public' ? opts.subjectKey : createPublicKey(opts.subjectKey);
  const spki = subjectPublic.export({ type: 'spki', format: 'der' });
  const extensions = opts.ca
    ? [explicit(3, seq(seq(oid(BASIC_CONSTRAINTS), tlv(0x01, Buffer.from([0xff])), tlv(0x04, seq(tlv(0x01, Buffer.from([0xff])))))))]
    : [];
  const tbs = seq(
    explicit(0, integer(Buffer.from([2]))),
    integer(serial),
    algorithm,
    name(opts.issuer),
    seq(utcTime(new Date(now.getTime() - 86_400_000)), utcTime(new Date(now.getTime() + 10 * 365 * 86_400_000))),
    name(opts.subject),
    spki,
    ...extensions,
  );
  const signature = sign('sha256', tbs, opts.issuerKey);
  const der = seq(tbs, algorithm, tlv(0x03, Buffer.concat([Buffer.from([0]), signature])));
  const b64 = der.toString('base64').replace(/.{1,64}/g, '$&\n');
  return { pem: `-----BEGIN CERTIFICATE-----\n${b64}-----END CERTIFICATE-----\n`, sn: alipayCertSn(opts.issuer, serial) };
}

export interface CertSet {
  root: IssuedCert;
  alipay: IssuedCert;
  app: IssuedCert;
}

const ROOT_NAME: NameAttribute[] = [
  { short: 'C', value: 'CN' },
  { short: 'O', value: 'Alipay Simulator' },
  { short: 'OU', value: 'Certification Authority' },
  { short: 'CN', value: 'Alipay Simulator Root CA' },
];

/** The root, Alipay's certificate of `alipayKey` and the app certificate of `appKey` for `appId`. */
export function makeCertSet(appId: string, appKey: KeyObject, alipayKey: KeyObject): CertSet {
  const rootKey = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey;
  const root = issueCert({ subject: ROOT_NAME, subjectKey: rootKey, issuer: ROOT_NAME, issuerKey: rootKey, ca: true });
  const alipay = issueCert({
    subject: [
      { short: 'C', value: 'CN' },
      { short: 'O', value: 'Alipay Simulator' },
      { short: 'OU', value: 'Alipay' },
      { short: 'CN', value: 'Alipay public key certificate' },
    ],
    subjectKey: alipayKey,
    issuer: ROOT_NAME,
    issuerKey: rootKey,
    ca: false,
  });
  const app = issueCert({
    subject: [
      { short: 'C', value: 'CN' },
      { short: 'O', value: 'Merchant' },
      { short: 'OU', value: 'Alipay' },
      { short: 'CN', value: appId },
    ],
    subjectKey: appKey,
    issuer: ROOT_NAME,
    issuerKey: rootKey,
    ca: false,
  });
  return { root, alipay, app };
}
