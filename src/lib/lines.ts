/**
 * Text lines of a byte stream, decoded as they come (any encoding TextDecoder knows, GBK
 * included): CRLF, LF or CR ends a line; a UTF-8 byte order mark at the start is dropped. A line
 * longer than `maxLineChars` is an error: a statement's lines are short, and a stream without line
 * ends would otherwise be held whole.
 */
export async function* textLines(chunks: AsyncIterable<Uint8Array>, encoding: string, maxLineChars = 64 * 1024): AsyncGenerator<string> {
  const decoder = new TextDecoder(encoding, { fatal: true });
  const end = /\r\n|\n|\r/g;
  let rest = '';
  function* take(final: boolean): Generator<string> {
    let start = 0;
    end.lastIndex = 0;
    for (let m = end.exec(rest); m !== null; m = end.exec(rest)) {
      // A CR at the very end may be the first half of a CRLF still to come.
      if (!final && m[0] === '\r' && m.index === rest.length - 1) break;
      yield rest.slice(start, m.index);
      start = m.index + m[0].length;
    }
    rest = rest.slice(start);
    if (rest.length > maxLineChars) throw new Error(`a line longer than ${maxLineChars} characters`);
  }
  for await (const chunk of chunks) {
    rest += decoder.decode(chunk, { stream: true });
    yield* take(false);
  }
  rest += decoder.decode();
  yield* take(true);
  if (rest !== '') yield rest;
}
