/**
 * Summarizes a saved .cpuprofile of the service (as written by `npm run bench -- --profile`):
 *   node bench/profile-summary.ts <file.cpuprofile> <requests in the profiled phase> [top]
 */
import { summarizeProfile } from './lib/profile.ts';
import { profileTable } from './lib/report.ts';

const [file, requests, top] = process.argv.slice(2);
if (!file || !requests) {
  process.stderr.write('usage: node bench/profile-summary.ts <file.cpuprofile> <requests> [top]\n');
  process.exit(2);
}
const s = summarizeProfile(file, Number(requests), Number(top ?? 25));
process.stdout.write(
  `${file}: ${s.requests} requests, ${(s.wallMs / 1000).toFixed(1)} s sampled, main thread busy ${(s.busyMs / 1000).toFixed(1)} s\n\n`,
);
process.stdout.write(`${profileTable(s, Number(top ?? 25))}\n`);
