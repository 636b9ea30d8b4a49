/**
 * A node:test reporter that writes, at the end, one JSON line per test file with how long the file
 * took, as its own process measured it (the `test:summary` of each file). `npm test`
 * (scripts/test.ts) prints the slowest files and starts the longest first on its next run.
 */
import type { TestEvent } from 'node:test/reporters';

export interface FileDuration {
  file: string;
  ms: number;
}

export default async function* durationsReporter(source: AsyncIterable<TestEvent>): AsyncGenerator<string> {
  for await (const event of source) {
    if (event.type !== 'test:summary') continue;
    const { file, duration_ms: ms } = event.data as { file?: string; duration_ms: number };
    // The last summary, of the whole run, names no file.
    if (file !== undefined) yield `${JSON.stringify({ file, ms: Math.round(ms) } satisfies FileDuration)}\n`;
  }
}
