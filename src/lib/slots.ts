/**
 * A fixed number of slots taken without waiting: a caller gets one, or is told at once that all are
 * taken (no queue). For work whose cost must stay bounded in one process (sign-ins: each holds a
 * password hash of 32 MiB and ~0.2 s of CPU).
 */
export class Slots {
  readonly size: number;
  #taken = 0;

  constructor(size: number) {
    if (!Number.isInteger(size) || size < 1) throw new Error('slots: the size must be a positive integer');
    this.size = size;
  }

  /** A slot and the function that gives it back (once), or null when all are taken. */
  tryTake(): (() => void) | null {
    if (this.#taken >= this.size) return null;
    this.#taken++;
    let given = false;
    return () => {
      if (given) return;
      given = true;
      this.#taken--;
    };
  }

  get taken(): number {
    return this.#taken;
  }
}
