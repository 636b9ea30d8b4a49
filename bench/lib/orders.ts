/**
 * The orders of one app that a run created, by what the scenarios may still do with them: query any;
 * close an open one; pay an open one whose openOrderId is known (from a create's answer body: the
 * closed-loop tool wrk reports none); refund a paid one. Fed by every answer (`onAnswer`); the
 * orders a corpus acts on are taken out when it is built, so no two requests act on one order.
 */
import type { Item, RealisticPools } from './corpus.ts';

export class OrderBook implements RealisticPools {
  readonly orders: string[] = [];
  readonly #known = new Set<string>();
  readonly #amounts = new Map<string, number>();
  /** open, not taken, openOrderId unknown */
  readonly #openNoId: string[] = [];
  /** open, not taken, openOrderId known */
  readonly #openWithId: { tradeNo: string; openOrderId: string }[] = [];
  /** paid, not taken for a refund */
  readonly #paid: { tradeNo: string; amountFen: number }[] = [];

  onAnswer(it: Item, status: number, body: string): void {
    if ((it.kind === 'create' || it.kind === 'replay') && status === 201 && it.tradeNo && !this.#known.has(it.tradeNo)) {
      this.#known.add(it.tradeNo);
      this.orders.push(it.tradeNo);
      if (it.amountFen !== undefined) this.#amounts.set(it.tradeNo, it.amountFen);
      const openOrderId = openOrderIdOf(body);
      if (openOrderId) this.#openWithId.push({ tradeNo: it.tradeNo, openOrderId });
      else this.#openNoId.push(it.tradeNo);
    } else if (it.kind === 'pay' && status === 200 && it.tradeNo) {
      this.#paid.push({ tradeNo: it.tradeNo, amountFen: this.#amounts.get(it.tradeNo) ?? 1 });
    }
  }

  get openCount(): number {
    return this.#openNoId.length + this.#openWithId.length;
  }

  get payableCount(): number {
    return this.#openWithId.length;
  }

  get paidCount(): number {
    return this.#paid.length;
  }

  /** Open orders to close: those whose openOrderId is unknown first (they cannot be paid). */
  takeClosable(n: number): string[] {
    const out = this.#openNoId.splice(0, n);
    if (out.length < n) out.push(...this.#openWithId.splice(0, n - out.length).map((o) => o.tradeNo));
    return out;
  }

  takePayable(n: number): { tradeNo: string; openOrderId: string }[] {
    return this.#openWithId.splice(0, n);
  }

  takePaid(n: number): { tradeNo: string; amountFen: number }[] {
    return this.#paid.splice(0, n);
  }
}

/** The openOrderId of a create's answer body, or null (no body, or not JSON). */
export function openOrderIdOf(body: string): string | null {
  if (!body.startsWith('{')) return null;
  try {
    const id = (JSON.parse(body) as { openOrderId?: unknown }).openOrderId;
    return typeof id === 'string' ? id : null;
  } catch {
    return null;
  }
}
