/**
 * A node:test reporter that writes, at the end, one JSON line per test file with how long the file
 * took: from its first event to its last as they reached the runner (the file's own wall time,
 * imports aside). `npm test` (scripts/test.ts) prints the slowest files and starts the longest
 * first on its next run.
 */
import type { TestEvent } from 'node:test/reporters';

export interface FileDuration {
  file: string;
  ms: number;
}

export default async function* durationsReporter(source: AsyncIterable<TestEvent>): AsyncGenerator<string> {
  const spans = new Map<string, { first: number; last: number }>();
  for await (const event of source) {
    const file = (event.data as { file?: string } | undefined)?.file;
    if (file === undefined) continue;
    const now = Date.now();
    const span = spans.get(file);
    if (span === undefined) spans.set(file, { first: now, last: now });
    else span.last = now;
  }
  for (const [file, { first, last }] of spans) yield `${JSON.stringify({ file, ms: last - first } satisfies FileDuration)}\n`;
}
