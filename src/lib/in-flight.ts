/**
 * A count of requests in progress, kept by the surface that serves them (incremented when one
 * starts, decremented once when its answer ends, sent or cut), read by work that must give way to
 * them (statement slices: src/usecases/statement-downloads.ts).
 */
export class InFlight {
  #n = 0;

  /** One more in progress; answers the function that ends it (once, however often it is called). */
  start(): () => void {
    this.#n++;
    let ended = false;
    return () => {
      if (ended) return;
      ended = true;
      this.#n--;
    };
  }

  get count(): number {
    return this.#n;
  }
}
