/**
 * A self-signed X.509 v3 certificate for the simulator's platform key (certificate mode), DER
 * written by hand: node:crypto reads certificates but does not make them, and the simulator needs
 * no more than a subject, a validity period, a serial number and a public key.
 */
import { type KeyObject, randomBytes, sign } from 'node:crypto';

function len(n: number): Buffer {
  if (n < 0x80) return Buffer.from([n]);
  const bytes: number[] = [];
  for (let v = n; v > 0; v >>= 8) bytes.unshift(v & 0xff);
  return Buffer.from([0x80 | bytes.length, ...bytes]);
}
const tlv = (tag: number, ...content: Buffer[]) => {
  const body = Buffer.concat(content);
  return Buffer.concat([Buffer.from([tag]), len(body.length), body]);
};
const seq = (...c: Buffer[]) => tlv(0x30, ...c);
const oid = (dotted: string) => {
  const [a, b, ...rest] = dotted.split('.').map(Number);
  const out = [a! * 40 + b!];
  for (const n of rest) {
    const parts = [n & 0x7f];
    for (let v = n >> 7; v > 0; v >>= 7) parts.unshift(0x80 | (v & 0x7f));
    out.push(...parts);
  }
  return tlv(0x06, Buffer.from(out));
};
const utcTime = (d: Date) => tlv(0x17, Buffer.from(d.toISOString().replace(/[-:T]/g, '').slice(2, 14) + 'Z'));
const rdn = (type: string, value: string) => tlv(0x31, seq(oid(type), tlv(0x0c, Buffer.from(value, 'utf8'))));
const name = (cn: string) => seq(rdn('2.5.4.10', 'Simulated Tenpay.com'), rdn('2.5.4.3', cn));

export interface SimCertificate {
  pem: string;
  /** Upper-case hex, as WeChat Pay writes a serial (40 digits). */
  serial: string;
  notBefore: Date;
  notAfter: Date;
}

export function selfSignedCertificate(privateKey: KeyObject, publicKey: KeyObject, notBefore: Date, notAfter: Date): SimCertificate {
  const serialBytes = randomBytes(20);
  serialBytes[0] = (serialBytes[0]! & 0x7f) | 0x40; // positive, and 20 bytes long
  const sha256WithRsa = seq(oid('1.2.840.113549.1.1.11'), Buffer.from([0x05, 0x00]));
  const tbs = seq(
    tlv(0xa0, tlv(0x02, Buffer.from([2]))),
    tlv(0x02, serialBytes),
    sha256WithRsa,
    name('Simulated Tenpay.com Root CA'),
    seq(utcTime(notBefore), utcTime(notAfter)),
    name('Simulated Tenpay.com sign'),
    publicKey.export({ type: 'spki', format: 'der' }),
  );
  const signature = sign('sha256', tbs, privateKey);
  const der = seq(tbs, sha256WithRsa, tlv(0x03, Buffer.from([0]), signature));
  const b64 = der.toString('base64').replace(/(.{64})/g, '$1\n');
  return {
    pem: `-----BEGIN CERTIFICATE-----\n${b64}${b64.endsWith('\n') ? '' : '\n'}-----END CERTIFICATE-----\n`,
    serial: serialBytes.toString('hex').toUpperCase(),
    notBefore,
    notAfter,
  };
}
