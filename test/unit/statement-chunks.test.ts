/**
 * A kept statement file is cut into chunks of a fixed size at the same places whatever the
 * encoder's chunking (src/usecases/statements.ts, fixedChunks): two makings of the same file write
 * the same chunk rows. A chunk is read back in a binary COPY, whose one field is taken out of
 * PostgreSQL's framing (src/store/statements.ts, fieldOfBinaryCopy).
 */
import assert from 'node:assert/strict';
import { randomBytes, randomInt } from 'node:crypto';
import { test } from 'node:test';
import { fieldOfBinaryCopy } from '../../src/store/statements.ts';
import { fixedChunks } from '../../src/usecases/statements.ts';

async function* pieces(b: Buffer, cut: () => number): AsyncGenerator<Buffer> {
  for (let at = 0; at < b.length;) {
    const n = Math.min(cut(), b.length - at);
    yield b.subarray(at, at + n);
    at += n;
  }
}

async function chunksOf(source: AsyncIterable<Buffer>, size: number): Promise<Buffer[]> {
  const out: Buffer[] = [];
  for await (const c of fixedChunks(source, size)) out.push(Buffer.from(c));
  return out;
}

test('the same pieces whatever the chunking: every one of the size, the last shorter, together the bytes', async () => {
  const size = 1000;
  for (const length of [1, 999, 1000, 1001, 5000, 12_345]) {
    const bytes = randomBytes(length);
    const want = Array.from({ length: Math.ceil(length / size) }, (_, i) => bytes.subarray(i * size, (i + 1) * size));
    for (const cut of [() => 1, () => 7, () => size, () => size + 1, () => 3 * size + 17, () => randomInt(1, 2500)]) {
      assert.deepEqual(await chunksOf(pieces(bytes, cut), size), want, `${length} bytes`);
    }
  }
});

test('nothing in, nothing out; empty pieces change nothing', async () => {
  assert.deepEqual(
    await chunksOf(
      pieces(Buffer.alloc(0), () => 1),
      10,
    ),
    [],
  );
  async function* withEmpty(): AsyncGenerator<Buffer> {
    yield Buffer.alloc(0);
    yield Buffer.from('abcdefghij');
    yield Buffer.alloc(0);
    yield Buffer.from('k');
  }
  assert.deepEqual((await chunksOf(withEmpty(), 4)).map(String), ['abcd', 'efgh', 'ijk']);
});

/** A binary COPY's output as PostgreSQL's docs describe it (COPY, "Binary Format"). */
function binaryCopy(rows: (Buffer | null)[][], extension = Buffer.alloc(0)): Buffer {
  const int16 = (n: number) => {
    const b = Buffer.alloc(2);
    b.writeInt16BE(n);
    return b;
  };
  const int32 = (n: number) => {
    const b = Buffer.alloc(4);
    b.writeInt32BE(n);
    return b;
  };
  const parts: Buffer[] = [Buffer.from('PGCOPY\n\xff\r\n\0', 'latin1'), int32(0), int32(extension.length), extension];
  for (const row of rows) {
    parts.push(int16(row.length));
    for (const f of row) parts.push(...(f === null ? [int32(-1)] : [int32(f.length), f]));
  }
  parts.push(int16(-1));
  return Buffer.concat(parts);
}

test('a binary COPY of one row gives its field, every byte value as it is; of no row, null', () => {
  const bytes = Buffer.from(Array.from({ length: 512 }, (_, i) => i % 256));
  assert.deepEqual(fieldOfBinaryCopy(binaryCopy([[bytes]])), bytes);
  assert.deepEqual(fieldOfBinaryCopy(binaryCopy([[Buffer.alloc(0)]])), Buffer.alloc(0));
  assert.deepEqual(fieldOfBinaryCopy(binaryCopy([[bytes]], Buffer.from('ext'))), bytes, 'a header extension is skipped');
  assert.equal(fieldOfBinaryCopy(binaryCopy([])), null);
});

test('anything but one row of one non-null field, or a cut output, is refused', () => {
  const one = Buffer.from('kept bytes');
  const cases: [string, Buffer][] = [
    ['no signature', Buffer.concat([Buffer.from('PGCOPY\n'), binaryCopy([[one]]).subarray(7)]).subarray(1)],
    ['two rows', binaryCopy([[one], [one]])],
    ['two fields', binaryCopy([[one, one]])],
    ['a null field', binaryCopy([[null]])],
    ['no trailer', binaryCopy([[one]]).subarray(0, -2)],
    ['cut in the field', binaryCopy([[one]]).subarray(0, 30)],
    ['cut in the header', binaryCopy([[one]]).subarray(0, 12)],
    ['bytes after the trailer', Buffer.concat([binaryCopy([[one]]), Buffer.from([0])])],
    ['bytes after the trailer of no row', Buffer.concat([binaryCopy([]), Buffer.from([0])])],
  ];
  for (const [why, out] of cases) assert.throws(() => fieldOfBinaryCopy(out), /binary COPY/, why);
});
