/**
 * The one clock of an instance: every time the service decides by (expiry, leases, retries,
 * timestamps it writes) comes from it, also into SQL as a parameter, so tests move time instead
 * of sleeping. In production it is the system clock.
 */
export interface Clock {
  /** Milliseconds since the epoch. */
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };
