/**
 * Temporary blocking of source addresses after repeated failed authentications.
 *
 * - Failures are counted in a true sliding window: each key keeps the
 *   timestamps of at most `maxFailures` recent failures; when `maxFailures`
 *   of them fall within `windowMs`, the key is blocked for `blockMs` and its
 *   failure history is cleared.
 * - Failures recorded while a key is blocked are ignored (they neither extend
 *   the block nor count towards the next one); callers normally reject blocked
 *   sources before authenticating anyway.
 * - A success clears the failure history but not an active block.
 * - Memory is bounded by `maxTrackedAddresses`: entries live in a Map kept in
 *   order of last update; when full, up to a few expired entries at the old end
 *   are pruned, and otherwise the least recently updated entry is evicted
 *   (even if blocked). Expired entries are also dropped lazily on lookup.
 *   Every call is O(1) amortised (O(maxFailures) worst case).
 */

export interface AuthFailureOptions {
  maxFailures: number;
  windowMs: number;
  blockMs: number;
  maxTrackedAddresses: number;
}

interface Entry {
  /** Timestamps of recent failures, oldest first; length <= maxFailures. */
  failures: number[];
  /** Block end time; 0 when not blocked. */
  blockedUntil: number;
}

/** How many old entries to inspect for expiry before evicting one when full. */
const PRUNE_SCAN = 8;

export class AuthFailureTracker {
  readonly #maxFailures: number;
  readonly #windowMs: number;
  readonly #blockMs: number;
  readonly #maxTracked: number;
  readonly #now: () => number;
  readonly #entries = new Map<string, Entry>();

  /** `now`: the service's clock (milliseconds). */
  constructor(options: AuthFailureOptions, now: () => number) {
    const { maxFailures, windowMs, blockMs, maxTrackedAddresses } = options;
    if (!Number.isSafeInteger(maxFailures) || maxFailures < 1) {
      throw new RangeError('maxFailures must be an integer >= 1');
    }
    if (!Number.isFinite(windowMs) || windowMs <= 0) throw new RangeError('windowMs must be a positive number');
    if (!Number.isFinite(blockMs) || blockMs < 0) throw new RangeError('blockMs must be a number >= 0');
    if (!Number.isSafeInteger(maxTrackedAddresses) || maxTrackedAddresses < 1) {
      throw new RangeError('maxTrackedAddresses must be an integer >= 1');
    }
    this.#maxFailures = maxFailures;
    this.#windowMs = windowMs;
    this.#blockMs = blockMs;
    this.#maxTracked = maxTrackedAddresses;
    this.#now = now;
  }

  /** Number of keys currently held (for metrics and tests). */
  get size(): number {
    return this.#entries.size;
  }

  recordFailure(key: string): void {
    const now = this.#now();
    let entry = this.#live(key, now);
    if (entry !== undefined && entry.blockedUntil > now) return;
    if (entry === undefined) {
      entry = { failures: [], blockedUntil: 0 };
      this.#makeRoom(now);
    } else {
      this.#entries.delete(key); // re-inserted below: move to the "recent" end
    }
    entry.blockedUntil = 0;
    const failures = entry.failures;
    failures.push(now);
    while (failures.length > this.#maxFailures) failures.shift();
    const cutoff = now - this.#windowMs;
    while (failures.length > 0 && (failures[0] as number) <= cutoff) failures.shift();
    if (failures.length >= this.#maxFailures) {
      failures.length = 0;
      entry.blockedUntil = now + this.#blockMs;
      if (this.#blockMs === 0) {
        return; // a zero-length block: nothing to remember
      }
    }
    this.#entries.set(key, entry);
  }

  recordSuccess(key: string): void {
    const now = this.#now();
    const entry = this.#live(key, now);
    if (entry === undefined) return;
    if (entry.blockedUntil > now) entry.failures.length = 0;
    else this.#entries.delete(key);
  }

  isBlocked(key: string): boolean {
    const now = this.#now();
    const entry = this.#live(key, now);
    return entry !== undefined && entry.blockedUntil > now;
  }

  /** The key's entry, or undefined after dropping it if it no longer carries any state. */
  #live(key: string, now: number): Entry | undefined {
    const entry = this.#entries.get(key);
    if (entry === undefined) return undefined;
    if (this.#expired(entry, now)) {
      this.#entries.delete(key);
      return undefined;
    }
    return entry;
  }

  #expired(entry: Entry, now: number): boolean {
    if (entry.blockedUntil > now) return false;
    const last = entry.failures[entry.failures.length - 1];
    return last === undefined || last <= now - this.#windowMs;
  }

  /** Ensure there is room for one more entry. */
  #makeRoom(now: number): void {
    if (this.#entries.size < this.#maxTracked) return;
    let scanned = 0;
    for (const [key, entry] of this.#entries) {
      if (scanned++ >= PRUNE_SCAN) break;
      if (this.#expired(entry, now)) this.#entries.delete(key);
    }
    while (this.#entries.size >= this.#maxTracked) {
      const oldest = this.#entries.keys().next();
      if (oldest.done === true) break;
      this.#entries.delete(oldest.value);
    }
  }
}
