/**
 * What the acquirers' adapters share when they read an HTTP answer (src/providers/alipay/alipay.ts,
 * src/providers/wechatpay/client.ts and wechatpay.ts): a body read up to a bound, and how long a
 * bill file may take to arrive.
 */

/** How long fetching a bill file may take. */
export const BILL_TIMEOUT_MS = 10 * 60_000;

/**
 * An answer's body, read up to `max` bytes (an answer without a body: none). A larger one is not
 * read further: its stream is cancelled and `tooLarge()` thrown, each adapter saying it its way.
 */
export async function readCapped(res: Response, max: number, tooLarge: () => Error): Promise<Buffer> {
  if (res.body === null) return Buffer.alloc(0);
  const chunks: Uint8Array[] = [];
  let size = 0;
  const reader = res.body.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.length;
    if (size > max) {
      await reader.cancel().catch(() => {});
      throw tooLarge();
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks);
}
