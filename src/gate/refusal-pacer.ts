/**
 * The pace of refusals to one source address (docs/configuration.md, "Fairness"): the requests the
 * service refuses before knowing who sent them (the gate's steps 1 to 4, and what Node's HTTP parser
 * refuses), and those past their app's rate limit, are answered at once up to a budget per address (`REFUSALS_PER_ADDRESS_PER_SECOND`,
 * with a burst of twice that), and past it each answer is held until the address's budget has
 * room again, its connection paused meanwhile. The answer itself is the one the contract gives, only
 * later: a client that keeps sending what is refused, on any number of connections, gets that many
 * answers a second, so a closed loop of hostile requests cannot take more than that share of the
 * event loop, while the same address's valid requests are never held.
 *
 * A generic cell rate algorithm per address: each refusal is due one interval after the previous
 * one's (the theoretical arrival time, `tat`), less the burst's tolerance. Bounded: at most
 * `maxHeld` answers held at once on an instance (past it, answered at once), none longer than
 * `maxHoldMs`, and at most `maxTracked` addresses remembered (the least recently refused dropped).
 * Per instance: a pace, never a decision about the request.
 */
import { ipToString, normalizeIp, parseIpStrict } from '../net/ip.ts';

export interface RefusalPacerOptions {
  perSecond: number;
  burst: number;
  maxHoldMs: number;
  maxHeld: number;
  maxTracked: number;
}

export class RefusalPacer {
  readonly #intervalMs: number;
  readonly #toleranceMs: number;
  readonly #o: RefusalPacerOptions;
  readonly #now: () => number;
  /** the theoretical arrival time of each address's next refusal, in order of last refusal */
  readonly #tat = new Map<string, number>();
  readonly #timers = new Set<{ timer: NodeJS.Timeout; release: () => void }>();
  /** refusals held since the start (for metrics) */
  heldTotal = 0;

  constructor(o: RefusalPacerOptions, now: () => number) {
    if (!(o.perSecond > 0) || !(o.burst >= 1)) throw new RangeError('the refusal pace needs a positive rate and a burst of at least 1');
    this.#o = o;
    this.#intervalMs = 1000 / o.perSecond;
    this.#toleranceMs = (o.burst - 1) * this.#intervalMs;
    this.#now = now;
  }

  /** Answers held at this moment. */
  get held(): number {
    return this.#timers.size;
  }

  /**
   * How long this refusal to `key` waits (0: at once), its place in the address's budget taken.
   * 0 when the instance already holds `maxHeld` answers.
   */
  delayFor(key: string): number {
    const now = this.#now();
    const tat = Math.max(this.#tat.get(key) ?? now, now);
    const due = tat - this.#toleranceMs;
    if (due > now && this.#timers.size >= this.#o.maxHeld) return 0;
    this.#tat.delete(key); // re-inserted at the recent end
    if (this.#tat.size >= this.#o.maxTracked) this.#dropOldest(now);
    // The budget is not owed beyond the longest hold: a client far over it is held that long, no longer.
    this.#tat.set(key, Math.min(tat + this.#intervalMs, now + this.#toleranceMs + this.#o.maxHoldMs));
    return due > now ? Math.min(due - now, this.#o.maxHoldMs) : 0;
  }

  /**
   * Runs `answer` after `delayMs` (at once when 0). Held answers are released at once by
   * `releaseAll` (the service stopping).
   */
  hold(delayMs: number, answer: () => void): void {
    if (delayMs <= 0) return answer();
    this.heldTotal++;
    const entry = {
      timer: setTimeout(() => entry.release(), delayMs),
      release: () => {
        clearTimeout(entry.timer);
        if (!this.#timers.delete(entry)) return;
        answer();
      },
    };
    this.#timers.add(entry);
  }

  /** Every held answer, at once. */
  releaseAll(): void {
    for (const e of [...this.#timers]) e.release();
  }

  #dropOldest(now: number): void {
    for (const [k, tat] of this.#tat) {
      if (this.#tat.size < this.#o.maxTracked && tat > now) return;
      this.#tat.delete(k);
    }
  }
}

/** The key an address is paced by: an IPv4 address, or an IPv6 address's /64 (one host's usual share); the text itself when it is no address. */
export function paceKey(address: string): string {
  const parsed = parseIpStrict(address);
  if (parsed === null) return address;
  const a = normalizeIp(parsed);
  if (a.kind() === 'ipv4') return ipToString(a);
  return `${(a as unknown as { parts: number[] }).parts
    .slice(0, 4)
    .map((x) => x.toString(16))
    .join(':')}::/64`;
}
