/** The simulator's buyer pages: what the Alipay app or mobile cashier shows, reduced to the buyer's choices. */

export function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);
}

function page(title: string, body: string): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>${escapeHtml(title)}</title>
<style>body{font-family:system-ui,sans-serif;max-width:28rem;margin:2rem auto;padding:0 1rem;color:#222}
h1{font-size:1.2rem;color:#1677ff}.amount{font-size:2rem;margin:1rem 0}button{font-size:1rem;padding:.6rem 1.2rem;margin:.3rem .3rem 0 0}
.pay{background:#1677ff;color:#fff;border:0;border-radius:4px}.muted{color:#666;font-size:.85rem}code{word-break:break-all}</style>
</head><body>${body}</body></html>`;
}

export interface BuyerView {
  session: string;
  subject: string;
  totalAmount: string;
  outTradeNo: string;
  tradeNo: string | null;
  status: string;
  quitUrl: string | null;
}

/** The payment page: pay, or have the payment fail (the trade stays open, as at Alipay). */
export function buyerPage(v: BuyerView): string {
  const open = v.status === 'WAIT_BUYER_PAY';
  const actions = open
    ? `<form method="post" action="/buyer/${v.session}/pay"><button class="pay" type="submit" id="pay">Pay</button></form>
<form method="post" action="/buyer/${v.session}/fail"><button type="submit" id="fail">Payment fails</button></form>
${v.quitUrl ? `<p><a id="quit" href="/buyer/${v.session}/quit">Back to the merchant</a></p>` : ''}`
    : `<p id="state">${v.status === 'TRADE_CLOSED' ? 'This trade is closed (交易已关闭).' : 'This trade has been paid (交易已支付).'}</p>`;
  return page(
    'Alipay simulator: pay',
    `<h1>Alipay simulator</h1>
<p>${escapeHtml(v.subject)}</p>
<p class="amount">¥${escapeHtml(v.totalAmount)}</p>
${actions}
<p class="muted">out_trade_no <code>${escapeHtml(v.outTradeNo)}</code>${v.tradeNo ? `<br>trade_no <code>${escapeHtml(v.tradeNo)}</code>` : ''}</p>`,
  );
}

export function messagePage(title: string, message: string): string {
  return page(title, `<h1>${escapeHtml(title)}</h1><p id="message">${escapeHtml(message)}</p>`);
}

/** Alipay's error page for a page request the gateway refuses (a bad signature, a bad parameter). */
export function errorPage(code: string, subCode: string, subMsg: string): string {
  return page(
    'Alipay simulator: error',
    `<h1>支付宝 · error</h1><p id="error"><code>${escapeHtml(code)}</code> <code>${escapeHtml(subCode)}</code></p><p>${escapeHtml(subMsg)}</p>`,
  );
}
