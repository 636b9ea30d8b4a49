/**
 * Which provider serves each channel, and the providers by name. A new attempt goes to its
 * channel's provider; everything after that (query, close, refund) goes to the provider recorded
 * with the attempt or refund, so a change of configuration never sends a call to another provider
 * than the one that holds the payment (docs/providers.md).
 */
import type { Channel } from '../domain/open-schemas.ts';
import { type PaymentProvider, ProviderUncertainError } from './provider.ts';

export class ProviderRouter {
  readonly #byChannel: ReadonlyMap<Channel, PaymentProvider>;
  readonly #byName: ReadonlyMap<string, PaymentProvider>;

  /** `routes`: the provider of each enabled channel; `others`: providers kept for the payments they hold. */
  constructor(routes: Partial<Record<Channel, PaymentProvider>>, others: PaymentProvider[] = []) {
    this.#byChannel = new Map(Object.entries(routes) as [Channel, PaymentProvider][]);
    this.#byName = new Map([...this.#byChannel.values(), ...others].map((p) => [p.name, p]));
  }

  /** The provider of a channel, or null when the channel is disabled. */
  forChannel(channel: Channel): PaymentProvider | null {
    return this.#byChannel.get(channel) ?? null;
  }

  /**
   * The provider that holds a payment. One that is not configured any more cannot be asked: the
   * call's outcome is uncertain, and the provider check asks again once it is configured.
   */
  byName(name: string): PaymentProvider {
    const p = this.#byName.get(name);
    if (!p) throw new ProviderUncertainError(`the provider '${name}' that holds this payment is not configured`);
    return p;
  }

  all(): PaymentProvider[] {
    return [...this.#byName.values()];
  }
}
