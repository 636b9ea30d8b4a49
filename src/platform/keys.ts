/**
 * Platform signing keys (decisions.md sections 3 and 8). Read from PLATFORM_KEY_FILE, or generated
 * into DATA_DIR/platform-keys at first start (mode 0600) and reused after. Each key has an id
 * derived from its public key; several can be published at once (rotation). A generated key may be
 * published before it signs (a staged rotation: merchants fetch it first); the key that signs is
 * the latest one whose activation time has come.
 */
import { type KeyObject, createHash, createPrivateKey, createPublicKey, generateKeyPair, sign } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { keyEndorsementSigningString } from '@mps/sdk/signing';
import type { PublishedPlatformKey } from '../domain/platform-keys.ts';
import { type Clock, systemClock } from '../domain/clock.ts';

const generateKeyPairAsync = promisify(generateKeyPair);

export interface PlatformKey {
  keyId: string;
  publicKeyPem: string;
  privateKey: KeyObject;
  createdAt: Date;
  /** From when it signs (published from createdAt). */
  activatesAt: Date;
}

export function keyIdOf(publicKey: KeyObject): string {
  const der = publicKey.export({ type: 'spki', format: 'der' });
  return `pk_${createHash('sha256').update(der).digest('hex').slice(0, 16)}`;
}

function fromPem(pem: string, source: string, createdAt: Date, activatesAt: Date = createdAt): PlatformKey {
  let privateKey: KeyObject;
  try {
    privateKey = createPrivateKey(pem);
  } catch {
    throw new Error(`${source} does not hold a PEM private key`);
  }
  if (privateKey.asymmetricKeyType !== 'rsa') throw new Error(`${source} must hold an RSA private key`);
  const bits = privateKey.asymmetricKeyDetails?.modulusLength ?? 0;
  if (bits < 2048 || bits > 4096) throw new Error(`${source} must hold an RSA key of 2048 to 4096 bits (got ${bits})`);
  const publicKey = createPublicKey(privateKey);
  return {
    keyId: keyIdOf(publicKey),
    publicKeyPem: publicKey.export({ type: 'spki', format: 'pem' }).toString(),
    privateKey,
    createdAt,
    activatesAt,
  };
}

/** Generated key files are named `<activation time, ms, 15 digits>-<keyId>.pem`: lexical order is activation order. */
const GENERATED_NAME = /^(\d{15})-pk_[0-9a-f]{16}\.pem$/;
const generatedName = (k: PlatformKey) => `${k.activatesAt.getTime().toString().padStart(15, '0')}-${k.keyId}.pem`;

/** How often PLATFORM_KEY_FILE is looked at for a change. */
export const KEY_FILE_CHECK_MS = 1000;

export class PlatformKeyRing {
  #keys: PlatformKey[];
  readonly #dir: string | null;
  /** Test and operations hook: when set, signing fails as if the key were unavailable. */
  unavailable = false;
  /** PLATFORM_KEY_FILE: why it cannot sign now (null while it holds a good key). */
  #fileProblem: string | null = null;
  #fileStamp = '';
  #watch: NodeJS.Timeout | null = null;

  readonly #clock: Clock;

  private constructor(keys: PlatformKey[], dir: string | null, clock: Clock) {
    this.#keys = keys;
    this.#dir = dir;
    this.#clock = clock;
  }

  /**
   * With PLATFORM_KEY_FILE the file is the key: it is read at start and again whenever it changes
   * (checked every KEY_FILE_CHECK_MS). While it is missing, unreadable or holds no usable key, the
   * platform signing key is unavailable (decisions.md section 3: 503, unsigned) and the service
   * says so in its log; once it holds a good key again, that key signs. Keys read before stay
   * published for verification.
   */
  static async load(opts: {
    keyFile: string | null;
    dataDir: string;
    log: (msg: string) => void;
    error?: (msg: string) => void;
    /** The service's clock: a staged key signs from its activation time on it. */
    clock?: Clock;
  }): Promise<PlatformKeyRing> {
    const clock = opts.clock ?? systemClock;
    if (opts.keyFile !== null) {
      const ring = new PlatformKeyRing([], null, clock);
      const log = { info: opts.log, error: opts.error ?? opts.log };
      ring.#check = () => ring.#readKeyFile(opts.keyFile!, log);
      await ring.#check();
      ring.#watch = setInterval(() => void ring.recheck(), KEY_FILE_CHECK_MS);
      ring.#watch.unref();
      return ring;
    }
    const dir = path.join(opts.dataDir, 'platform-keys');
    await fs.mkdir(dir, { recursive: true, mode: 0o700 });
    const ring = new PlatformKeyRing([], dir, clock);
    await ring.#scanDir(true);
    if (ring.#keys.length === 0) {
      const k = await ring.rotate();
      opts.log(`generated platform signing key ${k.keyId} in ${dir}`);
    }
    // Several instances may share the directory (one DATA_DIR on shared storage, with
    // DATABASE_URL): a rotation made through any of them, or a key another one generated, is
    // published and signs here too within KEY_FILE_CHECK_MS.
    const error = opts.error ?? opts.log;
    ring.#check = () => {
      const before = ring.current?.keyId ?? null;
      return ring
        .#exclusive(() => ring.#scanDir())
        .then(
          () => {
            const now = ring.current?.keyId ?? null;
            if (now !== null && now !== before) opts.log(`platform signing key ${now} read from ${dir}`);
          },
          (err: unknown) => error(`platform keys in ${dir} cannot be read: ${(err as Error).message}`),
        );
    };
    ring.#watch = setInterval(() => void ring.recheck(), KEY_FILE_CHECK_MS);
    ring.#watch.unref();
    return ring;
  }

  /** What the watch does every KEY_FILE_CHECK_MS: PLATFORM_KEY_FILE, or the key directory, read again if it changed. */
  #check: (() => Promise<void>) | null = null;

  /**
   * Looks at the key file or directory now, as the watch does every KEY_FILE_CHECK_MS (tests call
   * it instead of waiting for the watch). Never throws: a problem is logged and leaves the ring as it was.
   */
  async recheck(): Promise<void> {
    await this.#check?.();
  }

  /** Key files by name, as last read from the key directory. */
  #files = new Map<string, PlatformKey>();
  #dirStamp = '';
  /** Scans and rotations one at a time: a scan that read the directory before a rotation wrote its file cannot drop the new key. */
  #queue: Promise<unknown> = Promise.resolve();

  #exclusive<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.#queue.then(fn, fn);
    this.#queue = run.catch(() => {});
    return run;
  }

  /**
   * The key directory is the ring: each `.pem` file a published key (a file another instance
   * removed, a staged key withdrawn by an immediate rotation, is withdrawn here too). Files already
   * read are not read again; one that cannot be parsed yet is retried at the next scan, except at
   * start (`strict`), where a bad key file stops the service.
   */
  async #scanDir(strict = false): Promise<void> {
    const dir = this.#dir!;
    const names = (await fs.readdir(dir)).filter((n) => n.endsWith('.pem')).sort();
    const stamp = names.join('\n');
    if (stamp === this.#dirStamp) return;
    const files = new Map<string, PlatformKey>();
    let complete = true;
    for (const f of names) {
      const known = this.#files.get(f);
      if (known) {
        files.set(f, known);
        continue;
      }
      const file = path.join(dir, f);
      try {
        const st = await fs.stat(file);
        const named = GENERATED_NAME.exec(f);
        files.set(f, fromPem(await fs.readFile(file, 'utf8'), file, st.mtime, named ? new Date(Number(named[1])) : st.mtime));
      } catch (err) {
        if (strict) throw err;
        complete = false; // removed meanwhile, or unreadable: looked at again next time
      }
    }
    this.#files = files;
    this.#publishFiles();
    if (complete) this.#dirStamp = stamp;
  }

  /** The ring is the key files, in activation order. */
  #publishFiles(): void {
    this.#keys = [...this.#files.values()].sort((a, b) => a.activatesAt.getTime() - b.activatesAt.getTime());
  }

  async #readKeyFile(file: string, log: { info: (msg: string) => void; error: (msg: string) => void }): Promise<void> {
    const before = this.current?.keyId ?? null;
    let problem: string | null = null;
    try {
      const st = await fs.stat(file);
      const stamp = `${st.ino}:${st.size}:${st.mtimeMs}`;
      if (stamp === this.#fileStamp) return;
      this.#fileStamp = stamp;
      // The file's key signs as soon as it is read (whatever the file's time says).
      const k = fromPem(await fs.readFile(file, 'utf8'), 'PLATFORM_KEY_FILE', st.mtime, new Date(0));
      this.#keys = [...this.#keys.filter((x) => x.keyId !== k.keyId), k];
    } catch (err) {
      problem = (err as NodeJS.ErrnoException).code ? `PLATFORM_KEY_FILE cannot be read: ${file}` : (err as Error).message;
      this.#fileStamp = '';
    }
    if (problem !== null && problem !== this.#fileProblem) {
      log.error(`${problem}; the platform signing key is unavailable (signed answers get 503) until it can be read`);
    }
    this.#fileProblem = problem;
    const now = this.current?.keyId ?? null;
    if (now !== null && now !== before) log.info(`platform signing key ${now} read from PLATFORM_KEY_FILE`);
  }

  /** Stops watching PLATFORM_KEY_FILE. */
  close(): void {
    if (this.#watch) clearInterval(this.#watch);
    this.#watch = null;
  }

  /**
   * Generates a new key, published at once, that signs `activateAfterMs` from now (0: at once,
   * which also withdraws any key staged for later). Older keys stay published for verification.
   */
  rotate(activateAfterMs = 0): Promise<PlatformKey> {
    if (this.#dir === null) return Promise.reject(new Error('the platform key comes from PLATFORM_KEY_FILE; rotate it there'));
    return this.#exclusive(() => this.#rotate(this.#dir!, activateAfterMs));
  }

  async #rotate(dir: string, activateAfterMs: number): Promise<PlatformKey> {
    const { privateKey } = await generateKeyPairAsync('rsa', { modulusLength: 2048 });
    const pem = privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
    const now = this.#clock.now();
    const k = fromPem(pem, 'generated key', new Date(now), new Date(now + activateAfterMs));
    const name = generatedName(k);
    const file = path.join(dir, name);
    // Written under a temporary name and renamed: another instance scanning the directory never
    // reads a half-written key.
    const tmp = path.join(dir, `.${name}.${process.pid}.tmp`);
    await fs.writeFile(tmp, pem, { mode: 0o600, flag: 'wx' });
    await fs.rename(tmp, file);
    // An immediate rotation (a compromised key) also withdraws keys staged to sign later: the leak
    // may include them, and they would otherwise take over at their time (and after a restart).
    const staged = activateAfterMs === 0 ? this.#keys.filter((x) => x.activatesAt.getTime() > now).map(generatedName) : [];
    for (const n of staged) this.#files.delete(n);
    this.#files.set(name, k);
    this.#publishFiles();
    for (const n of staged) await fs.rm(path.join(dir, n), { force: true });
    return k;
  }

  /** The key that signs now: the latest whose activation time has come (null while unavailable). */
  get current(): PlatformKey | null {
    if (this.unavailable || this.#fileProblem !== null) return null;
    const now = this.#clock.now();
    for (let i = this.#keys.length - 1; i >= 0; i--) {
      if (this.#keys[i]!.activatesAt.getTime() <= now) return this.#keys[i]!;
    }
    return null;
  }

  /** A published key that signs later (the next one due), if any. */
  get next(): PlatformKey | null {
    const now = this.#clock.now();
    return this.#keys.find((k) => k.activatesAt.getTime() > now) ?? null;
  }

  list(): { keyId: string; publicKeyPem: string; current: boolean }[] {
    const cur = this.current?.keyId;
    return this.#keys.map((k) => ({ keyId: k.keyId, publicKeyPem: k.publicKeyPem, current: k.keyId === cur }));
  }

  /** RSASSA-PKCS1-v1_5 / SHA-256 on libuv's thread pool (does not block the event loop). */
  sign(data: string): Promise<{ keyId: string; signature: string }> {
    const k = this.current;
    if (k === null) return Promise.reject(new SigningKeyUnavailableError());
    return signWith(k, data);
  }

  /**
   * The published keys in the order they sign, with their validity (docs/authentication.md,
   * "Platform keys"): CURRENT signs now, NEXT signs from `signsFrom` (published ahead, a staged
   * rotation), PREVIOUS signed until `signsUntil`; and each one's endorsement by the key published
   * before it, so that whoever trusts an earlier key can verify a later one. An endorsement is
   * computed once per pair (deterministic signatures) and kept.
   */
  async published(): Promise<PublishedPlatformKey[]> {
    const keys = this.#keys;
    const now = this.#clock.now();
    const cur = this.current?.keyId;
    const at = (d: Date) => (d.getTime() === 0 ? null : d);
    return Promise.all(
      keys.map(async (k, i) => {
        const following = keys[i + 1];
        const state = k.keyId === cur ? 'CURRENT' : k.activatesAt.getTime() > now ? 'NEXT' : 'PREVIOUS';
        const previous = keys[i - 1];
        return {
          keyId: k.keyId,
          publicKeyPem: k.publicKeyPem,
          state,
          signsFrom: at(k.activatesAt),
          signsUntil: following ? at(following.activatesAt) : null,
          endorsement: previous ? await this.#endorse(previous, k) : null,
        } as const;
      }),
    );
  }

  readonly #endorsements = new Map<string, Promise<string>>();

  #endorse(by: PlatformKey, k: PlatformKey): Promise<{ keyId: string; signature: string }> {
    const id = `${by.keyId}>${k.keyId}`;
    let sig = this.#endorsements.get(id);
    if (sig === undefined) {
      sig = signWith(by, keyEndorsementSigningString({ keyId: k.keyId, publicKeyPem: k.publicKeyPem })).then((s) => s.signature);
      sig.catch(() => this.#endorsements.delete(id));
      this.#endorsements.set(id, sig);
    }
    return sig.then((signature) => ({ keyId: by.keyId, signature }));
  }
}

function signWith(k: PlatformKey, data: string): Promise<{ keyId: string; signature: string }> {
  return new Promise((resolve, reject) => {
    sign('sha256', Buffer.from(data, 'utf8'), k.privateKey, (err, sig) => {
      if (err) reject(new SigningKeyUnavailableError(err.message));
      else resolve({ keyId: k.keyId, signature: sig.toString('base64') });
    });
  });
}

export class SigningKeyUnavailableError extends Error {
  override name = 'SigningKeyUnavailableError';
}
