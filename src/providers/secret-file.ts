/**
 * Provider credentials (private keys, WeChat Pay's APIv3 key) are read from files, never from the
 * environment itself: a file must exist, be readable, and be private to its owner (no group or
 * world permission bits), or the start is refused with a line naming the variable. The content is
 * never logged nor put into an error message.
 */
import fs from 'node:fs';
import { ConfigError } from '../config/config.ts';

/** Reads the secret file named by the variable `name`; throws ConfigError naming the variable. */
export function readSecretFile(name: string, file: string): Buffer {
  let st: fs.Stats;
  try {
    st = fs.statSync(file);
  } catch {
    throw new ConfigError(`${name}: the file '${file}' cannot be read`);
  }
  if (!st.isFile()) throw new ConfigError(`${name}: '${file}' is not a file`);
  if ((st.mode & 0o077) !== 0) {
    throw new ConfigError(
      `${name}: '${file}' is readable by group or others (mode ${(st.mode & 0o777).toString(8)}); make it private (chmod 600)`,
    );
  }
  try {
    return fs.readFileSync(file);
  } catch {
    throw new ConfigError(`${name}: the file '${file}' cannot be read`);
  }
}

/** Reads a public file (a public key or certificate) named by the variable `name`. */
export function readPublicFile(name: string, file: string): Buffer {
  try {
    return fs.readFileSync(file);
  } catch {
    throw new ConfigError(`${name}: the file '${file}' cannot be read`);
  }
}
