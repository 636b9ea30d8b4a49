/** DATA_DIR made ready before anything is put in it, with errors that name the variable. */
import { constants } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';

/**
 * Creates DATA_DIR (and its missing parents) one level at a time, then checks that it can be
 * written. Not `mkdir -p` (`fs.mkdir` with `recursive`): under /proc or /sys a parent exists but
 * cannot take a child, and Node's recursive mkdir then retries forever instead of failing.
 */
export async function ensureDataDir(dir: string): Promise<void> {
  const abs = path.resolve(dir);
  const fail = (why: string): never => {
    throw new Error(`cannot use DATA_DIR ${abs}: ${why}`);
  };
  const parts = abs.split(path.sep).filter((p) => p !== '');
  let at = path.parse(abs).root;
  for (const part of parts) {
    at = path.join(at, part);
    let st;
    try {
      st = await fs.stat(at);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') fail((err as Error).message);
      try {
        await fs.mkdir(at);
        continue;
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code === 'EEXIST') {
          st = await fs.stat(at).catch((e2: Error) => fail(e2.message));
        } else {
          fail((e as Error).message);
        }
      }
    }
    if (!st!.isDirectory()) fail(`${at} is not a directory`);
  }
  await fs.access(abs, constants.W_OK | constants.X_OK).catch((err: Error) => fail(err.message));
}
