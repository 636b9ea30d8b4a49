/**
 * A node:test reporter that writes one JSON line per skipped suite or test (name, file, reason),
 * for the totals `npm test` prints at its end (scripts/test.ts). Node's own "skipped" counts tests
 * only: a suite skipped as a whole (`describe(name, { skip: reason }, ...)`) never registers its
 * tests, so the files that skip themselves (Redis without TEST_REDIS_URL, the browser without
 * chromium, ...) would otherwise leave "skipped 0".
 */
import path from 'node:path';
import type { TestEvent } from 'node:test/reporters';

export interface Skipped {
  kind: 'suite' | 'test';
  name: string;
  file: string | undefined;
  reason: string;
}

export default async function* skipsReporter(source: AsyncIterable<TestEvent>): AsyncGenerator<string> {
  for await (const event of source) {
    if (event.type !== 'test:pass' && event.type !== 'test:fail') continue;
    const { skip, name, file, details } = event.data;
    if (skip === undefined || skip === false) continue;
    const skipped: Skipped = {
      kind: details.type === 'suite' ? 'suite' : 'test',
      name,
      file,
      reason: typeof skip === 'string' && skip !== '' ? skip : '(no reason given)',
    };
    yield `${JSON.stringify(skipped)}\n`;
  }
}

/** The closing lines: how many suites and tests were skipped, grouped by reason, with where. */
export function skipSummary(jsonLines: string): string[] {
  const skipped = jsonLines
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => JSON.parse(l) as Skipped)
    .sort((a, b) => `${a.file}\0${a.name}`.localeCompare(`${b.file}\0${b.name}`));
  if (skipped.length === 0) return ['# skipped: none, every suite and test ran'];
  const count = (kind: Skipped['kind'], list: Skipped[]): string => {
    const n = list.filter((s) => s.kind === kind).length;
    return n === 0 ? '' : `${n} ${kind}${n === 1 ? '' : 's'}`;
  };
  const both = (list: Skipped[]): string => [count('suite', list), count('test', list)].filter((c) => c !== '').join(' and ');
  const lines = [
    `# skipped: ${both(skipped)} (node's "skipped" above counts tests only; the tests of a skipped suite neither run nor count)`,
  ];
  const byReason = Map.groupBy(skipped, (s) => s.reason);
  for (const [reason, list] of byReason) {
    const where = list.map((s) => `${s.file ? path.relative(process.cwd(), s.file) : '?'}: ${s.name}`).join('; ');
    lines.push(`#   ${both(list)}: ${reason} [${where}]`);
  }
  return lines;
}
