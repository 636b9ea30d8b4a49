/**
 * A ZIP archive read from a buffer, just enough for a provider's bill (Alipay's `.csv.zip`): the
 * central directory's entries (stored or deflated, no encryption, no ZIP64, no multi-disk) and
 * each entry's data as a stream, inflated as it is read. Names are returned as raw bytes: bill
 * archives name their files in GBK without the UTF-8 flag.
 */
import { Readable } from 'node:stream';
import { createInflateRaw } from 'node:zlib';

export interface ZipEntry {
  /** The name's bytes, as stored. */
  name: Buffer;
  /** Bit 11 of the flags: the name is UTF-8. */
  utf8Name: boolean;
  method: number;
  compressedSize: number;
  uncompressedSize: number;
  crc32: number;
  localHeaderOffset: number;
}

export class ZipError extends Error {
  override name = 'ZipError';
}

const EOCD = 0x06054b50;
const CENTRAL = 0x02014b50;
const LOCAL = 0x04034b50;

/** The archive's entries, from its central directory. */
export function zipEntries(zip: Buffer): ZipEntry[] {
  // The end-of-central-directory record: 22 bytes, followed by a comment of up to 65,535 bytes.
  let eocd = -1;
  for (let i = zip.length - 22; i >= Math.max(0, zip.length - 22 - 65_535); i--) {
    if (zip.readUInt32LE(i) === EOCD) {
      eocd = i;
      break;
    }
  }
  if (eocd < 0) throw new ZipError('not a ZIP archive (no end of central directory)');
  const count = zip.readUInt16LE(eocd + 10);
  let at = zip.readUInt32LE(eocd + 16);
  if (count === 0xffff || at === 0xffffffff) throw new ZipError('ZIP64 archives are not read');
  const entries: ZipEntry[] = [];
  for (let n = 0; n < count; n++) {
    if (at + 46 > zip.length || zip.readUInt32LE(at) !== CENTRAL) throw new ZipError('a malformed central directory');
    const flags = zip.readUInt16LE(at + 8);
    if (flags & 0x1) throw new ZipError('encrypted entries are not read');
    const nameLength = zip.readUInt16LE(at + 28);
    const extraLength = zip.readUInt16LE(at + 30);
    const commentLength = zip.readUInt16LE(at + 32);
    entries.push({
      name: zip.subarray(at + 46, at + 46 + nameLength),
      utf8Name: (flags & 0x800) !== 0,
      method: zip.readUInt16LE(at + 10),
      crc32: zip.readUInt32LE(at + 16),
      compressedSize: zip.readUInt32LE(at + 20),
      uncompressedSize: zip.readUInt32LE(at + 24),
      localHeaderOffset: zip.readUInt32LE(at + 42),
    });
    at += 46 + nameLength + extraLength + commentLength;
  }
  return entries;
}

/** An entry's data, inflated as it is read (stored entries as they are). */
export function zipEntryData(zip: Buffer, e: ZipEntry): Readable {
  const at = e.localHeaderOffset;
  if (at + 30 > zip.length || zip.readUInt32LE(at) !== LOCAL) throw new ZipError('a malformed local header');
  const start = at + 30 + zip.readUInt16LE(at + 26) + zip.readUInt16LE(at + 28);
  if (start + e.compressedSize > zip.length) throw new ZipError('an entry runs past the end of the archive');
  const data = zip.subarray(start, start + e.compressedSize);
  if (e.method === 0) return Readable.from([data]);
  if (e.method !== 8) throw new ZipError(`compression method ${e.method} is not read`);
  const inflate = createInflateRaw();
  inflate.end(data);
  return inflate;
}
