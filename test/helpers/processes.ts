/** Child processes of the tests that drive command-line programs (CLIs, other languages' recipes). */
import { spawn } from 'node:child_process';

export interface Finished {
  code: number;
  stdout: string;
  stderr: string;
}

/**
 * Runs a program to its end and collects its output. Never rejects: a non-zero exit is in `code`,
 * a program that cannot be started gives 127 with the reason on stderr.
 */
export function runProcess(cmd: string, args: string[], opts: { cwd?: string; env?: NodeJS.ProcessEnv } = {}): Promise<Finished> {
  return new Promise((resolve) => {
    const child = spawn(cmd, args, { cwd: opts.cwd, env: opts.env ?? process.env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.once('error', (err) => resolve({ code: 127, stdout, stderr: `${stderr}${cmd}: ${err.message}` }));
    child.once('close', (code, signal) => resolve({ code: code ?? (signal ? 128 : 1), stdout, stderr }));
  });
}
