/**
 * The keys WeChat Pay signs its answers and notifications with, by the serial in `Wechatpay-Serial`.
 *
 * - Public-key mode: one key, downloaded by hand from the merchant platform, named by its id
 *   (`PUB_KEY_ID_...`). Nothing to fetch.
 * - Platform-certificate mode: the certificates listed by `GET /v3/certificates`, each encrypted
 *   (`encrypt_certificate`) under the APIv3 key. Decrypting them authenticates them (AES-GCM with
 *   a key only the merchant and WeChat Pay hold); the list's own answer is then verified with one
 *   of them. Fetched on first use, again when the list is older than refreshMs (in the background,
 *   the current list staying in use), and at once when a serial we do not hold appears, at most
 *   once per minRefreshGapMs, so that forged serials cannot make us fetch in a loop.
 */
import { type KeyObject, X509Certificate } from 'node:crypto';
import type { Clock } from '../../domain/clock.ts';
import { ProviderUncertainError } from '../provider.ts';
import { type PlatformKeys, type RawAnswer, whyUnverified } from './client.ts';
import { decryptAesGcm } from './protocol.ts';

export type { PlatformKeys };

export class PublicKeyPlatform implements PlatformKeys {
  readonly #id: string;
  readonly #key: KeyObject;
  constructor(publicKeyId: string, publicKey: KeyObject) {
    this.#id = publicKeyId;
    this.#key = publicKey;
  }
  acceptSerial(): string {
    return this.#id;
  }
  async keyFor(serial: string): Promise<KeyObject | null> {
    return serial === this.#id ? this.#key : null;
  }
}

export interface PlatformCertificate {
  serial: string;
  certificate: X509Certificate;
}

/**
 * The certificates of a `GET /v3/certificates` answer body, decrypted with the APIv3 key; only
 * those whose serial matches their listing and that are valid at `nowMs`. Throws on a malformed
 * list or a certificate that does not decrypt (a wrong APIv3 key, or not WeChat Pay's).
 */
export function decryptCertificateList(body: Buffer | string, apiV3Key: KeyObject, nowMs: number): PlatformCertificate[] {
  const list = JSON.parse(typeof body === 'string' ? body : body.toString('utf8')) as { data?: unknown };
  if (!Array.isArray(list?.data)) throw new Error('the certificate list has no data array');
  const out: PlatformCertificate[] = [];
  for (const item of list.data as Record<string, unknown>[]) {
    const enc = item?.encrypt_certificate as Record<string, unknown> | undefined;
    const serial = item?.serial_no;
    if (typeof serial !== 'string' || typeof enc !== 'object' || enc === null) throw new Error('a certificate entry is malformed');
    if (enc.algorithm !== 'AEAD_AES_256_GCM' || typeof enc.nonce !== 'string' || typeof enc.ciphertext !== 'string') {
      throw new Error('a certificate entry is not AEAD_AES_256_GCM');
    }
    const ad = typeof enc.associated_data === 'string' ? enc.associated_data : '';
    const pem = decryptAesGcm(apiV3Key, enc.nonce, ad, enc.ciphertext);
    const certificate = new X509Certificate(pem);
    if (certificate.serialNumber.toUpperCase() !== serial.toUpperCase()) throw new Error('a certificate does not have its listed serial');
    if (Date.parse(certificate.validFrom) > nowMs || Date.parse(certificate.validTo) < nowMs) continue;
    out.push({ serial: serial.toUpperCase(), certificate });
  }
  return out;
}

export interface CertificatePlatformOptions {
  apiV3Key: KeyObject;
  /** Sends the signed `GET /v3/certificates`. */
  download: () => Promise<RawAnswer>;
  clock: Clock;
  refreshMs?: number;
  minRefreshGapMs?: number;
  log?: (msg: string, err?: unknown) => void;
}

export class CertificatePlatform implements PlatformKeys {
  readonly #o: CertificatePlatformOptions;
  readonly #refreshMs: number;
  readonly #gapMs: number;
  #keys = new Map<string, { key: KeyObject; notBefore: number }>();
  #fetchedAt = -Infinity;
  #triedAt = -Infinity;
  #inFlight: Promise<void> | null = null;

  constructor(o: CertificatePlatformOptions) {
    this.#o = o;
    this.#refreshMs = o.refreshMs ?? 12 * 3600_000;
    this.#gapMs = o.minRefreshGapMs ?? 60_000;
  }

  /** The newest certificate we hold (the one WeChat Pay signs with after a rotation). */
  acceptSerial(): string | null {
    let best: string | null = null;
    let at = -Infinity;
    for (const [serial, k] of this.#keys) if (k.notBefore > at) [best, at] = [serial, k.notBefore];
    return best;
  }

  async keyFor(serial: string): Promise<KeyObject | null> {
    const s = serial.toUpperCase();
    const now = this.#o.clock.now();
    if (this.#keys.size === 0) await this.#refreshQuietly();
    else if (now - this.#fetchedAt > this.#refreshMs) void this.#refreshQuietly();
    const k = this.#keys.get(s);
    if (k) return k.key;
    await this.#refreshQuietly();
    return this.#keys.get(s)?.key ?? null;
  }

  /** Fetches the list now (one fetch at a time); throws ProviderUncertainError when it cannot be used. */
  refresh(): Promise<void> {
    this.#inFlight ??= this.#fetch().finally(() => (this.#inFlight = null));
    return this.#inFlight;
  }

  /** Joins a fetch under way, or starts one unless the last began less than minRefreshGapMs ago. */
  async #refreshQuietly(): Promise<void> {
    if (this.#inFlight === null && this.#o.clock.now() - this.#triedAt < this.#gapMs) return;
    try {
      await this.refresh();
    } catch (err) {
      this.#o.log?.('wechatpay: platform certificates not refreshed; the ones held stay in use', err);
    }
  }

  async #fetch(): Promise<void> {
    this.#triedAt = this.#o.clock.now();
    const raw = await this.#o.download();
    if (raw.status !== 200) throw new ProviderUncertainError(`wechatpay: GET /v3/certificates answered HTTP ${raw.status}`);
    let certs: PlatformCertificate[];
    try {
      certs = decryptCertificateList(raw.body, this.#o.apiV3Key, this.#o.clock.now());
    } catch (err) {
      throw new ProviderUncertainError(`wechatpay: GET /v3/certificates: ${(err as Error).message}`);
    }
    const next = new Map(certs.map((c) => [c.serial, { key: c.certificate.publicKey, notBefore: Date.parse(c.certificate.validFrom) }]));
    // The list's own answer is signed with one of the certificates it lists (or one we hold).
    const lookup: PlatformKeys = {
      acceptSerial: () => null,
      keyFor: async (s) => (next.get(s.toUpperCase()) ?? this.#keys.get(s.toUpperCase()))?.key ?? null,
    };
    const why = await whyUnverified(raw.headers, raw.body, lookup, this.#o.clock.now());
    if (why !== null) throw new ProviderUncertainError(`wechatpay: GET /v3/certificates answer not verified: ${why}`);
    if (next.size === 0) throw new ProviderUncertainError('wechatpay: GET /v3/certificates lists no certificate valid now');
    this.#keys = next;
    this.#fetchedAt = this.#o.clock.now();
  }
}
