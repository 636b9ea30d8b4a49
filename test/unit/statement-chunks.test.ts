/**
 * A kept statement file is cut into chunks of a fixed size at the same places whatever the
 * encoder's chunking (src/usecases/statements.ts, fixedChunks): two makings of the same file write
 * the same chunk rows.
 */
import assert from 'node:assert/strict';
import { randomBytes, randomInt } from 'node:crypto';
import { test } from 'node:test';
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
